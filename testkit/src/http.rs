//! One plain-HTTP GET from a test to a component on loopback (the offer
//! layer's `/master/state`, an agent's `/state`), without an HTTP client
//! crate or a `curl` on the machine: HTTP/1.0, so the server answers with
//! one body and closes (no chunked encoding to undo).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Bounds a server that accepts and never answers.
const DEADLINE: Duration = Duration::from_secs(10);

/// `GET url` (`http://HOST:PORT/PATH`): the status code and body, or why not.
pub fn get(url: &str) -> Result<(u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let io = |e: std::io::Error| format!("GET {url}: {e}");
    let addr =
        std::net::ToSocketAddrs::to_socket_addrs(host).map_err(io)?.next().ok_or(format!("{url}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, DEADLINE).map_err(io)?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(io)?;
    stream.set_write_timeout(Some(DEADLINE)).map_err(io)?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n\r\n").map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(io)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| format!("GET {url}: no HTTP answer: {answer}"))?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(format!("GET {url}: {head}"))?;
    Ok((status, body.to_owned()))
}

/// `GET url` that must answer 200: its body.
pub fn get_ok(url: &str) -> Result<String, String> {
    match get(url)? {
        (200, body) => Ok(body),
        (status, body) => Err(format!("GET {url}: {status} {body}")),
    }
}
