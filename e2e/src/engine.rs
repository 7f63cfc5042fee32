//! One HTTP GET of a JSON document, the way the suite reads Swarm's own
//! records from an engine's Unix socket (`/tasks`, `/nodes`) and the offer
//! layer's state over loopback TCP, without a process per sample. HTTP/1.0,
//! so the server answers with one body and closes (no chunked encoding).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

/// One call answers in milliseconds; this bounds a wedged server.
const DEADLINE: Duration = Duration::from_secs(30);

/// `GET path` on the Docker engine at `socket`: the JSON body of a 200 answer.
pub fn get(socket: &Path, path: &str) -> Result<serde_json::Value, String> {
    let what = format!("GET {path} on {}", socket.display());
    let stream = UnixStream::connect(socket).map_err(|e| format!("{what}: {e}"))?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    stream.set_write_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    exchange(stream, path, &what)
}

/// `GET url` for a plain `http://HOST:PORT/PATH` url on loopback.
pub fn get_url(url: &str) -> Result<serde_json::Value, String> {
    let what = format!("GET {url}");
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{what}: only http:// urls"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let stream = TcpStream::connect(host).map_err(|e| format!("{what}: {e}"))?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    stream.set_write_timeout(Some(DEADLINE)).map_err(|e| format!("{what}: {e}"))?;
    exchange(stream, &path, &what)
}

fn exchange(mut stream: impl Read + Write, path: &str, what: &str) -> Result<serde_json::Value, String> {
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").map_err(|e| format!("{what}: {e}"))?;
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
