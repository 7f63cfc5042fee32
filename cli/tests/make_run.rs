//! `make run`'s output pace: `scripts/run-example examples/pi.yaml` run on a
//! fresh data dir (warm: the binary and the images built) prints a line at
//! least every 10 s in every phase (building, images, starting the stack,
//! the job, stopping), so a long phase never looks hung; and the log it
//! keeps for people, DATA/up.log, holds no ANSI escape. The bound is on the
//! tool's output, not on how fast anything runs: a slow phase passes as
//! long as it says so. The binary is this test build's (`MPISWARM_BIN`):
//! the script's own `cargo build -p mpiswarm` resolves features apart from
//! the workspace's test build and compiled the workspace a second time
//! beside the other tests (308 s of a CI run's nextest phase); cargo paces
//! that phase itself, a line per crate.

mod up;

use std::io::{BufRead, BufReader, Read};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest `make run` may go without printing a line.
const MAX_QUIET: Duration = Duration::from_secs(10);
/// The whole run: a rebuild of the binary, the stack starting, pi, the stack stopping.
const DEADLINE: Duration = Duration::from_secs(15 * 60);

/// The script in its own process group; on drop the group is stopped and
/// the data dir's stack taken down.
struct Script {
    child: Child,
    data: tempfile::TempDir,
}

impl Drop for Script {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let group = format!("-{}", self.child.id());
            let kill = |signal: &str| Command::new("kill").args([signal, "--", &group]).stderr(Stdio::null()).status();
            let _sent = kill("-TERM");
            let stop_by = Instant::now() + Duration::from_secs(30);
            while matches!(self.child.try_wait(), Ok(None)) && Instant::now() < stop_by {
                std::thread::sleep(Duration::from_millis(200)); // waiting for the script's trap to stop its stack
            }
            let _killed = kill("-KILL");
            let _reaped = self.child.wait();
        }
        let _down = up::mpiswarm(&["down"], self.data.path(), Duration::from_secs(120));
    }
}

/// Sends each line of `from` with the time it arrived, tagged with `stream`.
fn forward(from: impl Read + Send + 'static, stream: &'static str, to: mpsc::Sender<(Instant, String)>) {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if to.send((Instant::now(), format!("{stream}: {line}"))).is_err() {
                return;
            }
        }
    });
}

#[test]
fn make_run_prints_a_line_at_least_every_10_s_and_its_up_log_has_no_ansi_escapes() {
    let data = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(up::repo().join("scripts/run-example"))
        .arg("examples/pi.yaml")
        .current_dir(up::repo())
        .env("MPISWARM_DATA_DIR", data.path())
        .env("MPISWARM_BIN", env!("CARGO_BIN_EXE_mpiswarm"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("scripts/run-example starts");
    let (tx, rx) = mpsc::channel();
    forward(child.stdout.take().expect("piped stdout"), "stdout", tx.clone());
    forward(child.stderr.take().expect("piped stderr"), "stderr", tx);
    let mut script = Script { child, data };

    let started = Instant::now();
    let mut last = started;
    let mut lines = Vec::new();
    let mut gaps = Vec::new();
    // Both streams are closed (the channel disconnects) when the script and
    // every process holding its output have exited.
    loop {
        let left = DEADLINE.checked_sub(started.elapsed()).unwrap_or_default();
        match rx.recv_timeout(left) {
            Ok((at, line)) => {
                let quiet = at.duration_since(last);
                if quiet > MAX_QUIET {
                    gaps.push(format!("{quiet:.1?} without a line before [{:.1?}] {line}", at - started));
                }
                lines.push(format!("[{:>6.1?}] {line}", at - started));
                last = at;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("make run did not end within {DEADLINE:?}:\n{}", lines.join("\n"))
            }
        }
    }
    let status = script.child.wait().expect("the script's status");
    let transcript = lines.join("\n");
    let tail = Instant::now().duration_since(last);
    assert!(status.success(), "make run failed ({status}):\n{transcript}");
    assert!(transcript.contains("stdout: pi: 3.1"), "make run prints pi:\n{transcript}");
    assert!(
        gaps.is_empty() && tail <= MAX_QUIET,
        "quiet for more than {MAX_QUIET:?}: {gaps:#?} (and {tail:.1?} at the end)\n{transcript}"
    );
    println!("{transcript}");

    let log = std::fs::read_to_string(script.data.path().join("up.log")).expect("make run kept DATA/up.log");
    assert!(
        log.contains("mpiswarm up: ready") && log.contains(" INFO "),
        "up.log is up's output, its components' logs among it:\n{log}"
    );
    assert!(!log.contains("\x1b["), "up.log holds ANSI escapes:\n{log}");
}
