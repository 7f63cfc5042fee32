//! Running a command from a test with one overall deadline: its output is
//! drained on threads of its own (so a chatty command cannot block on a full
//! pipe), and a command still running at the deadline is killed and the test
//! fails with what it printed. Tests call this, never a bare `output()`.

use std::io::{Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to its end, feeding it `stdin`, or panics after `deadline`.
pub fn output_within(cmd: Command, stdin: Option<&str>, deadline: Duration) -> Output {
    try_output_within(cmd, stdin, deadline).unwrap_or_else(|e| panic!("{e}"))
}

/// As [`output_within`], but a command still running at `deadline` is
/// killed and returned as an error holding what it printed, so that the
/// caller can add what it knows (the logs of a stack) before failing.
pub fn try_output_within(mut cmd: Command, stdin: Option<&str>, deadline: Duration) -> Result<Output, String> {
    let what = format!("{cmd:?}");
    let mut child = cmd
        .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{what} cannot start: {e}"));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        // Dropped at the end of this block: the command sees end of input.
        let _ = pipe.write_all(text.as_bytes());
    }
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(child.stdout.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let err = drain(child.stderr.take().map(|p| Box::new(p) as Box<dyn Read + Send>));
    let until = Instant::now() + deadline;
    let status = loop {
        if let Some(status) = child.try_wait().expect("poll child") {
            break status;
        }
        if Instant::now() >= until {
            let _ = child.kill();
            let _ = child.wait();
            let (out, err) = (out.join().unwrap_or_default(), err.join().unwrap_or_default());
            return Err(format!(
                "{what} did not finish within {deadline:?}; it printed:\n{}{}",
                String::from_utf8_lossy(&out),
                String::from_utf8_lossy(&err)
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output { status, stdout: out.join().unwrap_or_default(), stderr: err.join().unwrap_or_default() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_and_stdin_come_through() {
        let mut cmd = Command::new("sh");
        cmd.args(["-c", "cat; echo err >&2"]);
        let out = output_within(cmd, Some("hello"), Duration::from_secs(30));
        assert!(out.status.success());
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
        assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    }

    #[test]
    #[should_panic(expected = "did not finish within")]
    fn a_command_that_outlives_its_deadline_fails_the_test() {
        let mut cmd = Command::new("sleep");
        cmd.arg("30");
        output_within(cmd, None, Duration::from_millis(200));
    }
}
