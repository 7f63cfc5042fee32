//! How the test agent decides a task's fate from its command: the LAST
//! word(s) of the command line, which is where the job's own program sits
//! in the controller's commands (`sh /etc/mpiswarm/rank launcher mpirun ...
//! -np 4 true`). Pure: no clock, no I/O; the agent acts on the [`Outcome`].

use mpiswarm_mesos::{CommandInfo, TaskInfo};
use std::time::Duration;

/// Task label that makes the test agent fail the task's launch on purpose
/// (TASK_FAILED, REASON_CONTAINER_LAUNCH_FAILED), as if its container could
/// not start. Value `true` (on every agent) or an agent's hostname (only
/// there, so one part of a gang fails while the others start).
pub const FAIL_LAUNCH_LABEL: &str = "mpiswarm.io/test-fail-launch";

/// What happens to a launched task.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Outcome {
    /// RUNNING, then at once FINISHED (code 0) or FAILED (any other code).
    Exits(i32),
    /// RUNNING, then FINISHED (code 0) after this long (tokio time).
    FinishesAfter(Duration),
    /// RUNNING until KILL or SHUTDOWN.
    RunsUntilKilled,
}

/// The fate of `command` by its last words:
/// - `true`, `exit 0`: exits 0;
/// - `false`: exits 1;
/// - `exit N` (0..=255): exits N;
/// - `sleep N` (seconds, may be fractional): finishes after N seconds;
/// - anything else (`sshd -D`, a bare `exit`, `exit 300`, `sleep x`): runs until killed.
///
/// The words are those of `value` followed by `arguments` (so a
/// `shell=false` command is read the same way); a trailing `;` is ignored.
pub fn outcome(command: Option<&CommandInfo>) -> Outcome {
    let Some(command) = command else { return Outcome::RunsUntilKilled };
    let words: Vec<&str> = command
        .value
        .as_deref()
        .unwrap_or("")
        .split_whitespace()
        .chain(command.arguments.iter().flat_map(|a| a.split_whitespace()))
        .collect();
    let words: Vec<&str> = match words.split_last() {
        Some((last, rest)) if *last == ";" => rest.to_vec(),
        _ => words,
    };
    let Some((&last, rest)) = words.split_last() else { return Outcome::RunsUntilKilled };
    let last = last.trim_end_matches(';');
    match (rest.last().copied(), last) {
        (_, "true") => Outcome::Exits(0),
        (_, "false") => Outcome::Exits(1),
        (Some("exit"), n) => n.parse::<u8>().map_or(Outcome::RunsUntilKilled, |n| Outcome::Exits(i32::from(n))),
        (Some("sleep"), n) => n
            .parse::<f64>()
            .ok()
            .and_then(|s| Duration::try_from_secs_f64(s).ok())
            .map_or(Outcome::RunsUntilKilled, Outcome::FinishesAfter),
        _ => Outcome::RunsUntilKilled,
    }
}

/// Whether `task` asks the test agent called `hostname` to fail its launch
/// ([`FAIL_LAUNCH_LABEL`] set to `true` or to `hostname`).
pub fn fails_launch(task: &TaskInfo, hostname: &str) -> bool {
    task.labels.as_ref().and_then(|l| l.get(FAIL_LAUNCH_LABEL)).is_some_and(|v| v == "true" || v == hostname)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mpiswarm_mesos::{AgentId, Labels};

    fn of(line: &str) -> Outcome {
        outcome(Some(&CommandInfo::shell(line)))
    }

    #[test]
    fn the_program_at_the_end_of_a_launcher_line_decides() {
        let launcher = "sh /etc/mpiswarm/rank launcher mpirun --hostfile /etc/mpi/hostfile -np 4";
        assert_eq!(of(&format!("{launcher} true")), Outcome::Exits(0));
        assert_eq!(of(&format!("{launcher} false")), Outcome::Exits(1));
        assert_eq!(of(&format!("{launcher} exit 0")), Outcome::Exits(0));
        assert_eq!(of(&format!("{launcher} exit 3")), Outcome::Exits(3));
        assert_eq!(of(&format!("{launcher} sleep 2")), Outcome::FinishesAfter(Duration::from_secs(2)));
        assert_eq!(of(&format!("{launcher} sleep 0.25")), Outcome::FinishesAfter(Duration::from_millis(250)));
        assert_eq!(of(&format!("{launcher} ./pi")), Outcome::RunsUntilKilled);
    }

    #[test]
    fn bare_programs_and_trailing_semicolons() {
        assert_eq!(of("true"), Outcome::Exits(0));
        assert_eq!(of("  false  "), Outcome::Exits(1));
        assert_eq!(of("exit 255"), Outcome::Exits(255));
        assert_eq!(of("true;"), Outcome::Exits(0));
        assert_eq!(of("exit 2 ;"), Outcome::Exits(2));
    }

    #[test]
    fn workers_and_anything_unrecognised_run_until_killed() {
        assert_eq!(of("sh /etc/mpiswarm/rank worker"), Outcome::RunsUntilKilled);
        assert_eq!(of(""), Outcome::RunsUntilKilled);
        assert_eq!(of("exit"), Outcome::RunsUntilKilled);
        assert_eq!(of("exit 256"), Outcome::RunsUntilKilled);
        assert_eq!(of("exit -1"), Outcome::RunsUntilKilled);
        assert_eq!(of("sleep"), Outcome::RunsUntilKilled);
        assert_eq!(of("sleep forever"), Outcome::RunsUntilKilled);
        assert_eq!(of("sleep -1"), Outcome::RunsUntilKilled);
        assert_eq!(of("echo true-ish"), Outcome::RunsUntilKilled);
        assert_eq!(outcome(None), Outcome::RunsUntilKilled);
    }

    #[test]
    fn arguments_of_a_non_shell_command_count_as_words() {
        let c = CommandInfo {
            shell: Some(false),
            value: Some("sleep".into()),
            arguments: vec!["sleep".into(), "1.5".into()],
            ..CommandInfo::default()
        };
        assert_eq!(outcome(Some(&c)), Outcome::FinishesAfter(Duration::from_millis(1500)));
    }

    #[test]
    fn the_label_set_to_true_or_to_this_agents_hostname_fails_a_launch() {
        let mut t = TaskInfo::new("t", "t", &AgentId::new("a"));
        assert!(!fails_launch(&t, "node1"));
        t.labels = Some(Labels::from_pairs([(FAIL_LAUNCH_LABEL, "false")]));
        assert!(!fails_launch(&t, "node1"));
        t.labels = Some(Labels::from_pairs([("other", "x"), (FAIL_LAUNCH_LABEL, "true")]));
        assert!(fails_launch(&t, "node1"));
        t.labels = Some(Labels::from_pairs([(FAIL_LAUNCH_LABEL, "node2")]));
        assert!(!fails_launch(&t, "node1"));
        assert!(fails_launch(&t, "node2"));
    }
}
