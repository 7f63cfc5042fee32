//! Spawned work whose panic ends the process: every task the agent spawns
//! (per-event launches and kills, the resync, the HTTP server, the session)
//! goes through [`Spawner::spawn`], and [`Failures::first`] resolves with the
//! first that panicked, naming it, so `run` stops with an error instead of
//! carrying on without it. Work that ends normally or is aborted is no failure.

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use std::future::Future;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// A spawned task that panicked.
#[derive(Debug, thiserror::Error)]
#[error("the agent's task '{name}' panicked: {message}")]
pub struct Panicked {
    pub name: String,
    pub message: String,
}

/// Spawns watched work; cheap to clone.
#[derive(Clone)]
pub struct Spawner {
    watched: mpsc::UnboundedSender<(String, JoinHandle<()>)>,
}

/// Where panics of a [`Spawner`]'s work are reported.
pub struct Failures {
    watched: mpsc::UnboundedReceiver<(String, JoinHandle<()>)>,
}

/// A spawner and the receiver of its failures.
pub fn watchdog() -> (Spawner, Failures) {
    let (watched, rx) = mpsc::unbounded_channel();
    (Spawner { watched }, Failures { watched: rx })
}

impl Spawner {
    /// Spawns `work` on the runtime; its panic is reported as `name`'s.
    pub fn spawn(
        &self,
        name: impl Into<String>,
        work: impl Future<Output = ()> + Send + 'static,
    ) -> tokio::task::AbortHandle {
        let handle = tokio::spawn(work);
        let abort = handle.abort_handle();
        // Nobody watches any more only when the process is on its way out.
        let _ = self.watched.send((name.into(), handle));
        abort
    }
}

impl Failures {
    /// The first watched task that panics (pending forever if none does).
    pub async fn first(mut self) -> Panicked {
        let mut running = FuturesUnordered::new();
        loop {
            tokio::select! {
                Some((name, handle)) = self.watched.recv() => {
                    running.push(async move { (name, handle.await) });
                }
                Some((name, result)) = running.next(), if !running.is_empty() => {
                    if let Err(e) = result
                        && e.is_panic()
                    {
                        let payload = e.into_panic();
                        let message = payload
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                            .or_else(|| payload.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "(no message)".to_owned());
                        return Panicked { name, message };
                    }
                }
                else => std::future::pending::<()>().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn the_first_panic_is_reported_by_name_and_normal_or_aborted_ends_are_not() {
        let (spawner, failures) = watchdog();
        spawner.spawn("fine", async {});
        let forever = spawner.spawn("aborted", std::future::pending());
        forever.abort();
        spawner.spawn("launch t1", async {
            tokio::task::yield_now().await;
            panic!("boom {}", 1);
        });
        let p = tokio::time::timeout(Duration::from_secs(30), failures.first()).await.expect("reported");
        assert_eq!((p.name.as_str(), p.message.as_str()), ("launch t1", "boom 1"));
        assert_eq!(p.to_string(), "the agent's task 'launch t1' panicked: boom 1");
    }
}
