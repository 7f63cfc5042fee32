//! What a Swarm task's state means for the Mesos task it runs: the one place
//! that reads Swarm task states. Pure; the agent feeds it what it listed.

use bollard::models::{Task, TaskState as SwarmState};
use mpiswarm_mesos::{Reason, TaskState};

/// The Mesos view of one service's current Swarm task.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    pub state: TaskState,
    pub reason: Option<Reason>,
    pub message: String,
    pub exit_code: Option<i64>,
    /// Whether the last log lines belong in the message (tasks that ended).
    pub wants_logs: bool,
    /// A launch failure of the engine's that another attempt may not meet
    /// (the container never ran, and its image is there): the agent starts
    /// the task again before it reports the failure ([`crate::start_retries`]).
    pub retryable: bool,
}

impl Observed {
    pub(crate) fn simple(state: TaskState, message: impl Into<String>) -> Self {
        Self { state, reason: None, message: message.into(), exit_code: None, wants_logs: false, retryable: false }
    }
}

/// The newest Swarm task among `tasks` (a service with restart condition
/// none has one, but a node failure can leave an older one behind).
pub fn newest(tasks: &[Task]) -> Option<&Task> {
    tasks.iter().max_by_key(|t| t.version.as_ref().and_then(|v| v.index).unwrap_or(0))
}

/// Maps the newest task of a service. `image` names the image in messages.
pub fn observe(task: &Task, image: &str) -> Observed {
    let status = task.status.as_ref();
    let state = status.and_then(|s| s.state).unwrap_or(SwarmState::NEW);
    let err = status.and_then(|s| s.err.clone()).unwrap_or_default();
    let msg = status.and_then(|s| s.message.clone()).unwrap_or_default();
    let exit_code = status.and_then(|s| s.container_status.as_ref()).and_then(|c| c.exit_code);
    match state {
        SwarmState::NEW
        | SwarmState::ALLOCATED
        | SwarmState::PENDING
        | SwarmState::ASSIGNED
        | SwarmState::ACCEPTED
        | SwarmState::PREPARING
        | SwarmState::READY
        | SwarmState::STARTING => Observed::simple(TaskState::Starting, format!("swarm task {state}: {msg}")),
        SwarmState::RUNNING => Observed::simple(TaskState::Running, "container running"),
        // The tail of a finished task's output is its result (a launcher's
        // mpirun report), so it travels with FINISHED too.
        SwarmState::COMPLETE => Observed {
            exit_code: Some(exit_code.unwrap_or(0)),
            wants_logs: true,
            ..Observed::simple(TaskState::Finished, "container exited with code 0")
        },
        // The runtime could not start the container (Docker's exit code
        // 128 and no output): a launch failure with Docker's own words,
        // not a program that exited. A busy engine fails so at times
        // ("unable to remount dir as readonly ... device or resource busy"),
        // so it is worth another attempt.
        SwarmState::FAILED if err.starts_with("starting container failed") => Observed {
            reason: Some(Reason::ReasonContainerLaunchFailed),
            exit_code,
            retryable: true,
            ..Observed::simple(TaskState::Failed, format!("the container did not start: {err}"))
        },
        SwarmState::FAILED => {
            let message = match exit_code {
                Some(code) => format!("container exited with code {code}"),
                None => format!("container failed: {err}"),
            };
            Observed {
                reason: Some(Reason::ReasonCommandExecutorFailed),
                exit_code,
                wants_logs: true,
                ..Observed::simple(TaskState::Failed, message)
            }
        }
        // Swarm rejects before any container runs: a missing image, an
        // unknown secret, a mount that cannot be made.
        // A missing image stays missing; anything else may not recur.
        SwarmState::REJECTED => Observed {
            reason: Some(Reason::ReasonContainerLaunchFailed),
            retryable: !image_missing(&err),
            ..Observed::simple(TaskState::Failed, rejected_message(&err, image))
        },
        SwarmState::SHUTDOWN | SwarmState::REMOVE => {
            Observed { reason: None, exit_code, ..Observed::simple(TaskState::Killed, "service shut down") }
        }
        SwarmState::ORPHANED => Observed {
            reason: Some(Reason::ReasonAgentRemoved),
            ..Observed::simple(TaskState::Lost, format!("swarm task orphaned: its node is gone ({err})"))
        },
    }
}

/// Whether Docker's reason says the image is not there and cannot be pulled.
fn image_missing(err: &str) -> bool {
    let lower = err.to_ascii_lowercase();
    lower.contains("no such image") || lower.contains("not found") || lower.contains("pull access denied")
}

fn rejected_message(err: &str, image: &str) -> String {
    if image_missing(err) {
        format!("image '{image}' is not present on this node and cannot be pulled: {err}")
    } else {
        format!("swarm rejected the task (image '{image}'): {err}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bollard::models::{ContainerStatus, ObjectVersion, TaskStatus};

    fn task(state: SwarmState, err: &str, exit: Option<i64>, index: u64) -> Task {
        Task {
            version: Some(ObjectVersion { index: Some(index) }),
            status: Some(TaskStatus {
                state: Some(state),
                err: (!err.is_empty()).then(|| err.to_owned()),
                container_status: exit.map(|code| ContainerStatus { exit_code: Some(code), ..Default::default() }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn a_zero_exit_is_finished_and_a_non_zero_exit_is_failed_with_its_code() {
        let done = observe(&task(SwarmState::COMPLETE, "", Some(0), 1), "img");
        assert_eq!((done.state, done.exit_code), (TaskState::Finished, Some(0)));
        let failed = observe(&task(SwarmState::FAILED, "task: non-zero exit (3)", Some(3), 1), "img");
        assert_eq!((failed.state, failed.exit_code), (TaskState::Failed, Some(3)));
        assert!(failed.message.contains("code 3"), "{}", failed.message);
        assert!(failed.wants_logs);
    }

    #[test]
    fn a_container_the_runtime_could_not_start_is_a_launch_failure_in_dockers_words() {
        let err = "starting container failed: OCI runtime create failed: unable to start container process";
        let o = observe(&task(SwarmState::FAILED, err, Some(128), 1), "img");
        assert_eq!(
            (o.state, o.reason, o.exit_code),
            (TaskState::Failed, Some(Reason::ReasonContainerLaunchFailed), Some(128))
        );
        assert!(
            o.message.contains("did not start") && o.message.contains("OCI runtime create failed"),
            "{}",
            o.message
        );
        assert!(!o.wants_logs, "no program ran, so its output would replace Docker's reason with nothing");
    }

    #[test]
    fn a_rejected_task_for_a_missing_image_is_failed_naming_the_image() {
        let o = observe(&task(SwarmState::REJECTED, "No such image: nope/missing:1", None, 1), "nope/missing:1");
        assert_eq!(o.state, TaskState::Failed);
        assert_eq!(o.reason, Some(Reason::ReasonContainerLaunchFailed));
        assert!(o.message.contains("image 'nope/missing:1' is not present"), "{}", o.message);
        assert!(!o.retryable, "a missing image stays missing");
    }

    #[test]
    fn only_launch_failures_that_may_not_recur_are_retryable() {
        let busy =
            "starting container failed: error mounting: unable to remount dir as readonly: device or resource busy";
        assert!(observe(&task(SwarmState::FAILED, busy, Some(128), 1), "i").retryable);
        let mount = "invalid mount config for type \"bind\": bind source path does not exist: /nope";
        assert!(observe(&task(SwarmState::REJECTED, mount, None, 1), "i").retryable);
        for (state, err, exit) in [
            (SwarmState::FAILED, "task: non-zero exit (3)", Some(3)),
            (SwarmState::REJECTED, "No such image: nope/missing:1", None),
            (SwarmState::REJECTED, "pull access denied for nope/missing", None),
            (SwarmState::COMPLETE, "", Some(0)),
            (SwarmState::ORPHANED, "node gone", None),
            (SwarmState::SHUTDOWN, "", None),
        ] {
            assert!(!observe(&task(state, err, exit, 1), "i").retryable, "{state:?} {err}");
        }
    }

    #[test]
    fn states_before_running_are_starting_and_orphaned_is_lost() {
        for s in
            [SwarmState::NEW, SwarmState::PENDING, SwarmState::ASSIGNED, SwarmState::PREPARING, SwarmState::STARTING]
        {
            assert_eq!(observe(&task(s, "", None, 1), "i").state, TaskState::Starting, "{s:?}");
        }
        assert_eq!(observe(&task(SwarmState::RUNNING, "", None, 1), "i").state, TaskState::Running);
        assert_eq!(observe(&task(SwarmState::ORPHANED, "", None, 1), "i").state, TaskState::Lost);
        assert_eq!(observe(&task(SwarmState::SHUTDOWN, "", None, 1), "i").state, TaskState::Killed);
    }

    #[test]
    fn the_newest_task_wins() {
        let tasks = vec![task(SwarmState::FAILED, "", Some(1), 7), task(SwarmState::RUNNING, "", None, 9)];
        assert_eq!(observe(newest(&tasks).unwrap(), "i").state, TaskState::Running);
    }
}
