//! `--round-log FILE`: every offer round's input and outcome as one JSON
//! line, so a round can be replayed through `policy::queue_round` and
//! compared with what the controller wrote into the statuses. Lines are
//! written in order by one thread of their own, never on an async worker.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Sender, channel};
use std::sync::{Mutex, OnceLock};

static WRITER: OnceLock<Mutex<Sender<(PathBuf, String)>>> = OnceLock::new();

fn writer() -> &'static Mutex<Sender<(PathBuf, String)>> {
    WRITER.get_or_init(|| {
        let (tx, rx) = channel::<(PathBuf, String)>();
        std::thread::Builder::new()
            .name("round-log".into())
            .spawn(move || {
                for (path, line) in rx {
                    let written = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(&path)
                        .and_then(|mut f| writeln!(f, "{line}"));
                    if let Err(e) = written {
                        tracing::warn!(path = %path.display(), error = %e, "cannot append to the round log");
                    }
                }
            })
            .map_err(|e| tracing::warn!(error = %e, "cannot start the round-log writer"))
            .ok();
        Mutex::new(tx)
    })
}

/// Queues one line for `path`.
pub fn append(path: &Path, line: String) {
    let tx = writer().lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ignored = tx.send((path.to_owned(), line));
}
