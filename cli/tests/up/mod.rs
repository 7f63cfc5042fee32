//! What the cli tests share: `mpiswarm up` started in the background on a
//! fresh data dir (ready once it wrote DATA/stack.json, its stderr in
//! DATA/up.log) and taken down with `mpiswarm down` when dropped, and
//! every command run under the test's deadline.

#![allow(dead_code)] // each test uses its own part

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs a command under `deadline`.
pub fn run(cmd: Command, deadline: Duration) -> Output {
    mpiswarm_testkit::output_within(cmd, None, deadline)
}

/// `mpiswarm ARGS --data-dir DATA`, from the repository's root (for examples/).
pub fn mpiswarm(args: &[&str], data: &Path, deadline: Duration) -> Output {
    run(command(args, data), deadline)
}

/// The command `mpiswarm ARGS --data-dir DATA`, run from the repository's root.
pub fn command(args: &[&str], data: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mpiswarm"));
    cmd.args(args).arg("--data-dir").arg(data).current_dir(repo());
    cmd
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub struct Up {
    pub child: Child,
    /// The temporary data dir, when `up` made one ([`Up::start`]).
    pub data: Option<tempfile::TempDir>,
    /// The data dir, canonical (as `up` labels and records it).
    pub dir: PathBuf,
    deadline: Duration,
}

impl Up {
    /// `mpiswarm up --no-build ARGS` on a fresh data dir, once it is ready.
    pub fn start(args: &[&str], deadline: Duration) -> Up {
        let data = tempfile::tempdir().expect("tempdir");
        let dir = data.path().canonicalize().expect("canonical data dir");
        let mut up = Self::start_at(&dir, args, deadline);
        up.data = Some(data);
        up
    }

    /// `mpiswarm up --no-build ARGS --data-dir DIR` (DIR made if missing),
    /// once it is ready.
    pub fn start_at(dir: &Path, args: &[&str], deadline: Duration) -> Up {
        std::fs::create_dir_all(dir).expect("data dir");
        let dir = dir.canonicalize().expect("canonical data dir");
        let child = Command::new(env!("CARGO_BIN_EXE_mpiswarm"))
            .args(["up", "--no-build"])
            .args(args)
            .arg("--data-dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("up.log")).expect("log"))
            .spawn()
            .expect("mpiswarm up starts");
        let mut up = Up { child, data: None, dir, deadline };
        let started = Instant::now();
        while !up.dir.join("stack.json").exists() {
            if let Ok(Some(status)) = up.child.try_wait() {
                panic!("mpiswarm up {args:?} exited ({status}): {}", up.log());
            }
            assert!(
                started.elapsed() < deadline,
                "mpiswarm up {args:?} was not ready within {deadline:?}: {}",
                up.log()
            );
            std::thread::sleep(Duration::from_millis(200)); // polling a file the other process writes
        }
        up
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("up.log")).unwrap_or_default()
    }

    /// `mpiswarm ARGS` against this stack; a command that outlives the
    /// deadline fails the test with the stack's logs (what a timeout alone
    /// would not explain).
    pub fn mpiswarm(&self, args: &[&str]) -> Output {
        mpiswarm_testkit::try_output_within(command(args, &self.dir), None, self.deadline)
            .unwrap_or_else(|e| panic!("{e}\n{}", self.report()))
    }

    /// up's log, the last lines of each component's log, and Swarm's
    /// services with their tasks.
    pub fn report(&self) -> String {
        const LINES: usize = 60;
        let mut report = format!("--- up.log\n{}", self.log());
        let mut logs: Vec<_> =
            std::fs::read_dir(self.dir.join("logs")).into_iter().flatten().flatten().map(|e| e.path()).collect();
        logs.sort();
        for path in logs {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(LINES)..].join("\n");
            report.push_str(&format!("\n--- last {LINES} lines of {}\n{tail}", path.display()));
        }
        let mut services = Command::new("sh");
        services.args(["-c", "docker service ls; docker service ls -q | xargs -r docker service ps --no-trunc"]);
        let out = run(services, Duration::from_secs(30));
        report.push_str(&format!("\n--- docker services\n{}", String::from_utf8_lossy(&out.stdout)));
        report
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // Not a panic while a failing test unwinds: that would abort.
        let _ = mpiswarm_testkit::try_output_within(command(&["down"], &self.dir), None, self.deadline);
    }
}
