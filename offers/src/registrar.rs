//! The registrar: writes registry snapshots on one dedicated thread, in the
//! order the master made them, so no fsync (or, with replicas, no write to
//! the API server) ever runs on a tokio worker or under the master's lock. The master hands over a snapshot and gets a
//! [`Ticket`]; whoever must answer a client for that change (SUBSCRIBE,
//! TEARDOWN, UPDATE_FRAMEWORK, an agent's SUBSCRIBE) awaits the ticket after
//! the lock is released, and fails the call if the write failed. Every
//! outcome is also kept in [`Progress`] for `/health` and the metrics, so a
//! failed write is never only a log line. Owns no registry content.
//!
//! Snapshots are whole states, so when several wait the thread writes only
//! the newest: it contains every older change, and each older ticket is
//! settled by that write.

use crate::registry::{RegistryError, RegistryState, write_atomically};
use std::path::PathBuf;
use std::sync::mpsc;
use tokio::sync::watch;

/// What the writer thread has done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Progress {
    /// Sequence number of the newest snapshot whose write was attempted.
    pub attempted: u64,
    /// Sequence number of the newest snapshot known to be on disk.
    pub durable: u64,
    /// Writes attempted, and how many of them failed.
    pub writes: u64,
    pub failures: u64,
    /// Why the newest attempt failed; `None` once a write succeeds again.
    pub last_error: Option<String>,
}

impl Progress {
    /// The registry is behind: the newest attempt failed.
    pub fn failing(&self) -> Option<&str> {
        self.last_error.as_deref()
    }
}

/// A registry write that did not reach the disk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteFailed {
    #[error("{0}")]
    Write(String),
    #[error("the registry writer thread is gone; the offer layer is stopping")]
    WriterGone,
}

/// Hands snapshots to the writer thread.
#[derive(Debug)]
pub struct Registrar {
    snapshots: mpsc::Sender<(u64, RegistryState)>,
    progress: watch::Receiver<Progress>,
    submitted: u64,
}

impl Registrar {
    /// Starts the writer thread for the registry file `path`. The thread ends
    /// when the registrar is dropped, after the snapshots already handed over.
    pub fn spawn(path: PathBuf) -> Result<Self, RegistryError> {
        Self::spawn_writing(move |state| write_atomically(&path, state).map_err(|e| e.to_string()))
    }

    /// Starts the writer thread with `write` as the way a snapshot is made
    /// durable (the file of [`Registrar::spawn`], or the API server's
    /// object of [`crate::registry_api`]); it runs on that thread only.
    pub fn spawn_writing(
        mut write: impl FnMut(&RegistryState) -> Result<(), String> + Send + 'static,
    ) -> Result<Self, RegistryError> {
        let (snapshots, rx) = mpsc::channel::<(u64, RegistryState)>();
        let (progress_tx, progress) = watch::channel(Progress::default());
        std::thread::Builder::new()
            .name("registry-writer".into())
            .spawn(move || {
                while let Ok(mut job) = rx.recv() {
                    while let Ok(newer) = rx.try_recv() {
                        job = newer;
                    }
                    let (seq, state) = job;
                    let result = write(&state);
                    if let Err(e) = &result {
                        tracing::error!(error = %e, "registry write failed");
                    }
                    progress_tx.send_modify(|p| {
                        p.attempted = seq;
                        p.writes += 1;
                        match result {
                            Ok(()) => {
                                p.durable = seq;
                                p.last_error = None;
                            }
                            Err(e) => {
                                p.failures += 1;
                                p.last_error = Some(e);
                            }
                        }
                    });
                }
            })
            .map_err(RegistryError::Writer)?;
        Ok(Self { snapshots, progress, submitted: 0 })
    }

    /// Queues `state` to be written after everything queued before it.
    pub fn submit(&mut self, state: &RegistryState) -> Ticket {
        self.submitted += 1;
        let seq = self.submitted;
        if self.snapshots.send((seq, state.clone())).is_err() {
            tracing::error!("the registry writer thread is gone; the change is not written");
        }
        self.ticket(seq)
    }

    /// How many snapshots were submitted so far (the newest one's number).
    pub fn submitted(&self) -> u64 {
        self.submitted
    }

    /// The ticket of snapshot `seq` (an older ticket is settled by any newer write).
    pub fn ticket(&self, seq: u64) -> Ticket {
        Ticket { seq, progress: self.progress.clone() }
    }

    pub fn progress(&self) -> Progress {
        self.progress.borrow().clone()
    }
}

/// Settles once snapshot `seq` (or a newer one) was written or failed.
#[derive(Debug, Clone)]
pub struct Ticket {
    seq: u64,
    progress: watch::Receiver<Progress>,
}

impl Ticket {
    /// Waits for the write of this ticket's snapshot and says how it went.
    pub async fn durable(mut self) -> Result<(), WriteFailed> {
        let seq = self.seq;
        let progress = self.progress.wait_for(|p| p.attempted >= seq).await.map_err(|_| WriteFailed::WriterGone)?;
        if progress.durable >= seq {
            Ok(())
        } else {
            Err(WriteFailed::Write(progress.last_error.clone().unwrap_or_else(|| "unknown error".into())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{RegisteredAgent, Registry};

    fn state_with_agent(id: &str) -> RegistryState {
        let mut s = RegistryState::default();
        s.agents.insert(id.into(), RegisteredAgent { hostname: "node1".into(), principal: None });
        s
    }

    #[tokio::test]
    async fn snapshots_are_written_in_order_and_the_newest_wins() {
        let dir = tempfile::tempdir().unwrap();
        let mut r = Registrar::spawn(dir.path().join("registry.json")).unwrap();
        let tickets: Vec<Ticket> = (1..=5).map(|i| r.submit(&state_with_agent(&format!("A-{i}")))).collect();
        for t in tickets {
            t.durable().await.unwrap();
        }
        assert_eq!(Registry::open(dir.path()).unwrap().state, state_with_agent("A-5"));
        let p = r.progress();
        assert_eq!((p.attempted, p.durable, p.failures, p.last_error), (5, 5, 0, None));
    }

    #[tokio::test]
    async fn a_failed_write_settles_its_ticket_with_the_error_and_shows_in_progress() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("registry.json");
        let mut r = Registrar::spawn(path.clone()).unwrap();
        // A directory where the file must go: the rename fails, even for root.
        std::fs::create_dir(&path).unwrap();
        let err = r.submit(&state_with_agent("A-1")).durable().await.unwrap_err();
        assert!(err.to_string().contains("registry.json"), "{err}");
        let p = r.progress();
        assert_eq!((p.attempted, p.durable, p.failures), (1, 0, 1));
        assert!(p.failing().is_some());
        // Once the path is usable again, the next write succeeds and clears it.
        std::fs::remove_dir(&path).unwrap();
        r.submit(&state_with_agent("A-2")).durable().await.unwrap();
        assert_eq!(r.progress().failing(), None);
        assert_eq!(r.progress().failures, 1);
    }
}
