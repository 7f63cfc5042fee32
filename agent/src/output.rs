//! Keeping each task's output: a follower per running task reads its
//! service's log from Docker (following while it runs) and appends it to the
//! task's sandbox ([`crate::sandbox`]); when the task ends, the follower is
//! stopped and one last read catches what it had not seen, before the
//! service is removed. Writes run in `spawn_blocking`, never under a lock.
//!
//! Output is removed when the task is gone for good: at the acknowledgement
//! of any end but TASK_FINISHED and TASK_FAILED (a kill, a loss), at a KILL of
//! a task the agent already forgot, and otherwise once it is older than the
//! retention period and no task the agent tracks owns it.
//!
//! [`Outputs`] owns the followers and the sandbox; it does not know which
//! tasks exist (callers say which service belongs to whom, and which tasks
//! still claim their output), and holds its locks only in plain methods,
//! never across an `.await`.

use std::collections::HashMap;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use futures::stream::BoxStream;
use mpiswarm_mesos::{FrameworkId, TaskId, TaskState};
use tokio::sync::watch;

use crate::locks::lock;
use crate::sandbox::{Cursor, Sandbox, Stream};
use crate::swarm::{LogLine, Swarm, SwarmError};
use crate::watchdog::Spawner;

/// A running follower: stop it by sending `true`; `done` turns true once it
/// has written its last line.
struct Follower {
    stop: watch::Sender<bool>,
    done: watch::Receiver<bool>,
}

/// How often kept output is checked against its retention period.
const EXPIRY_EVERY: Duration = Duration::from_secs(60);
/// How long a task's end waits for its follower and its last read.
const FINISH_DEADLINE: Duration = Duration::from_secs(30);
/// Lines written to the sandbox in one blocking call, at most.
const BATCH_LINES: usize = 4096;
/// How long a batch waits for more lines after its first.
const BATCH_WINDOW: Duration = Duration::from_millis(50);

/// Which task a service's output belongs to.
#[derive(Debug, Clone)]
pub(crate) struct Owner {
    pub framework_id: String,
    pub task_id: String,
}

impl Owner {
    pub(crate) fn new(framework_id: &FrameworkId, task_id: &TaskId) -> Self {
        Self { framework_id: framework_id.value.clone(), task_id: task_id.value.clone() }
    }
}

/// The kept output of tasks, and who follows it.
pub struct Outputs<S: Swarm> {
    reader: Reader<S>,
    /// By service name.
    followers: Mutex<HashMap<String, Follower>>,
    last_expiry: Mutex<Option<Instant>>,
    retention: Duration,
    spawner: Spawner,
}

/// Reads a service's log from Swarm into its owner's sandbox; cheap to clone
/// into a follower.
struct Reader<S: Swarm> {
    swarm: Arc<S>,
    sandbox: Sandbox,
}

impl<S: Swarm> Clone for Reader<S> {
    fn clone(&self) -> Self {
        Self { swarm: Arc::clone(&self.swarm), sandbox: self.sandbox.clone() }
    }
}

impl<S: Swarm + 'static> Outputs<S> {
    /// The outputs kept in `data_dir`'s sandbox, each stream bounded by
    /// `limit` bytes, kept `retention` once no task claims them.
    pub(crate) fn new(
        swarm: Arc<S>,
        data_dir: &std::path::Path,
        limit: u64,
        retention: Duration,
        spawner: Spawner,
    ) -> Self {
        Self {
            reader: Reader { swarm, sandbox: Sandbox::new(data_dir.join("sandbox"), limit) },
            followers: Mutex::default(),
            last_expiry: Mutex::default(),
            retention,
            spawner,
        }
    }

    /// The kept output of tasks (served on `/files`).
    pub(crate) fn sandbox(&self) -> &Sandbox {
        &self.reader.sandbox
    }

    /// Starts following `service`'s output into `owner`'s sandbox, unless a
    /// follower already does.
    pub(crate) fn follow(&self, service: &str, owner: Owner) {
        let mut followers = lock(&self.followers);
        if followers.contains_key(service) {
            return;
        }
        let (stop, stopped) = watch::channel(false);
        let (finished, done) = watch::channel(false);
        let reader = self.reader.clone();
        let name = service.to_owned();
        let work = async move {
            reader.follow(&name, &owner, stopped).await;
            finished.send_replace(true);
        };
        self.spawner.spawn(format!("output of {service}"), work);
        followers.insert(service.to_owned(), Follower { stop, done });
    }

    /// Follows every one of `live` (service, owner) that has no follower
    /// (tasks adopted after a restart).
    pub(crate) fn follow_all(&self, live: impl IntoIterator<Item = (String, Owner)>) {
        for (service, owner) in live {
            self.follow(&service, owner);
        }
    }

    /// Stops the follower of `service` and reads the rest of its (ended)
    /// output, so the sandbox holds all of it before the service goes.
    pub(crate) async fn finish(&self, service: &str, owner: Owner) {
        self.stop(service).await;
        let mut cursors = self.reader.cursors(&owner).await;
        let rest = self.reader.swarm.logs(service, false, since(&cursors));
        match tokio::time::timeout(FINISH_DEADLINE, self.reader.pump(rest, &owner, &mut cursors)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => tracing::warn!(service, error = %e, "the end of the task's output could not be read"),
            Err(_) => tracing::warn!(service, "the end of the task's output took too long to read"),
        }
    }

    /// Stops the follower of `service` (if any) and waits until it wrote its last line.
    pub(crate) async fn stop(&self, service: &str) {
        let Some(mut follower) = lock(&self.followers).remove(service) else { return };
        follower.stop.send_replace(true);
        if tokio::time::timeout(FINISH_DEADLINE, follower.done.wait_for(|d| *d)).await.is_err() {
            tracing::warn!(service, "the output follower did not stop in time");
        }
    }

    /// Removes `owner`'s output at once, off this worker.
    pub(crate) fn remove(&self, owner: Owner) {
        let sandbox = self.reader.sandbox.clone();
        let remove = tokio::task::spawn_blocking(move || sandbox.remove(&owner.framework_id, &owner.task_id));
        self.spawner.spawn("output removal", async move {
            match remove.await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "could not remove a task's output"),
                Err(e) => tracing::warn!(error = %e, "the output removal did not run"),
            }
        });
    }

    /// At most once a minute: removes output that no task in `claimed`
    /// (framework id, task id) owns once it is older than the retention period.
    pub(crate) async fn expire_if_due(&self, claimed: impl FnOnce() -> HashSet<(String, String)>) {
        let due = {
            let mut last = lock(&self.last_expiry);
            let due = last.is_none_or(|at| at.elapsed() >= EXPIRY_EVERY);
            if due {
                *last = Some(Instant::now());
            }
            due
        };
        if !due {
            return;
        }
        let claimed = claimed();
        let sandbox = self.reader.sandbox.clone();
        let retention = self.retention;
        let expire = move || {
            sandbox.expire(SystemTime::now(), retention, |fw, task| claimed.contains(&(fw.to_owned(), task.to_owned())))
        };
        match tokio::task::spawn_blocking(expire).await {
            Ok(Ok(removed)) if !removed.is_empty() => {
                tracing::info!(?removed, "removed task output past its retention")
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => tracing::warn!(error = %e, "could not expire task output"),
            Err(e) => tracing::warn!(error = %e, "the output expiry did not run"),
        }
    }
}

impl<S: Swarm + 'static> Reader<S> {
    async fn follow(&self, service: &str, owner: &Owner, mut stop: watch::Receiver<bool>) {
        let mut cursors = self.cursors(owner).await;
        loop {
            let lines = self.swarm.logs(service, true, since(&cursors));
            let read = self.pump(lines, owner, &mut cursors);
            tokio::select! {
                result = read => {
                    if let Err(e) = result {
                        tracing::debug!(service, error = %e, "following the output failed; trying again");
                    }
                }
                _ = stop.wait_for(|s| *s) => return,
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_secs(1)) => {}
                _ = stop.wait_for(|s| *s) => return,
            }
        }
    }

    async fn cursors(&self, owner: &Owner) -> [Cursor; 2] {
        let sandbox = self.sandbox.clone();
        let owner = owner.clone();
        tokio::task::spawn_blocking(move || Stream::ALL.map(|s| sandbox.cursor(&owner.framework_id, &owner.task_id, s)))
            .await
            .unwrap_or_default()
    }

    /// Appends the new lines of `lines` to the sandbox, in batches, until the
    /// stream ends.
    async fn pump(
        &self,
        mut lines: BoxStream<'static, Result<LogLine, SwarmError>>,
        owner: &Owner,
        cursors: &mut [Cursor; 2],
    ) -> Result<(), SwarmError> {
        let mut seen = [0u64; 2];
        let mut ended = false;
        while !ended {
            let Some(first) = lines.next().await else { break };
            // Lines come one by one: gather what arrives within a short
            // window, so the disk sees one write per batch, not per line.
            let mut batch = vec![first?];
            let window = tokio::time::sleep(BATCH_WINDOW);
            tokio::pin!(window);
            while batch.len() < BATCH_LINES {
                tokio::select! {
                    line = lines.next() => match line {
                        Some(line) => batch.push(line?),
                        None => {
                            ended = true;
                            break;
                        }
                    },
                    () = &mut window => break,
                }
            }
            let mut data: [Vec<u8>; 2] = Default::default();
            for line in batch {
                let i = index(line.stream);
                if cursors[i].admit(line.nanos, &mut seen[i]) {
                    data[i].extend_from_slice(&line.text);
                }
            }
            let sandbox = self.sandbox.clone();
            let (owner, cursors_now) = (owner.clone(), *cursors);
            let write = move || -> std::io::Result<()> {
                for stream in Stream::ALL {
                    let bytes = &data[index(stream)];
                    if !bytes.is_empty() {
                        sandbox.append(
                            &owner.framework_id,
                            &owner.task_id,
                            stream,
                            bytes,
                            cursors_now[index(stream)],
                        )?;
                    }
                }
                Ok(())
            };
            match tokio::task::spawn_blocking(write).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => tracing::warn!(error = %e, "could not keep a task's output"),
                Err(e) => tracing::warn!(error = %e, "the output write did not run"),
            }
        }
        Ok(())
    }
}

fn index(stream: Stream) -> usize {
    match stream {
        Stream::Stdout => 0,
        Stream::Stderr => 1,
    }
}

/// The second to ask Docker for lines from: the older of the two cursors.
fn since(cursors: &[Cursor; 2]) -> i32 {
    let nanos = cursors.iter().map(|c| c.nanos).min().unwrap_or(0);
    i32::try_from(nanos.div_euclid(1_000_000_000)).unwrap_or(0)
}

/// Whether a task's output goes as soon as its end is acknowledged: every
/// end but a program's own (TASK_FINISHED, TASK_FAILED), whose output is kept
/// for the retention period.
pub(crate) fn dropped_at_acknowledgement(state: TaskState) -> bool {
    state.is_terminal() && !matches!(state, TaskState::Finished | TaskState::Failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_programs_own_end_keeps_its_output() {
        assert!(dropped_at_acknowledgement(TaskState::Killed));
        assert!(dropped_at_acknowledgement(TaskState::Lost));
        assert!(!dropped_at_acknowledgement(TaskState::Finished));
        assert!(!dropped_at_acknowledgement(TaskState::Failed));
        assert!(!dropped_at_acknowledgement(TaskState::Running), "not ended");
    }

    #[test]
    fn lines_are_asked_for_from_the_older_cursor_second() {
        let c = |nanos| Cursor { nanos, at_nanos: 1 };
        assert_eq!(since(&[c(5_900_000_000), c(7_000_000_000)]), 5);
        assert_eq!(since(&[Cursor::default(), c(7_000_000_000)]), 0);
    }
}
