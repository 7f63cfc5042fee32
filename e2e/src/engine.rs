//! One GET against a Docker engine's API over its Unix socket, the way the
//! suite reads Swarm's own records (`/tasks`, `/nodes`) without a process
//! per sample. HTTP/1.0, so the engine answers with one body and closes
//! (no chunked encoding to undo).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// One API call answers in milliseconds; this bounds a wedged engine.
const DEADLINE: Duration = Duration::from_secs(30);

/// `GET path` on the engine at `socket`: the JSON body of a 200 answer.
pub fn get(socket: &Path, path: &str) -> Result<serde_json::Value, String> {
    let what = format!("GET {path} on {}", socket.display());
    let mut stream = UnixStream::connect(socket).map_err(|e| format!("{what}: {e}"))?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    stream.set_write_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: docker\r\n\r\n").map_err(|e| format!("{what}: {e}"))?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| format!("{what}: {e}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| format!("{what}: no HTTP answer: {answer}"))?;
    let status = head.split_whitespace().nth(1).unwrap_or_default();
    if status != "200" {
        return Err(format!("{what}: {head}\n{body}"));
    }
    serde_json::from_str(body).map_err(|e| format!("{what}: {e}: {body}"))
}
