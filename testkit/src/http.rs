//! One plain-HTTP GET from a test to a component on loopback (the offer
//! layer's `/master/state`, an agent's `/state`), without an HTTP client
//! crate or a `curl` on the machine: HTTP/1.0, so the server answers with
//! one body and closes (no chunked encoding to undo).

use base64::Engine as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Bounds a server that accepts and never answers.
const DEADLINE: Duration = Duration::from_secs(10);

/// `GET url` (`http://HOST:PORT/PATH`): the status code and body, or why not.
pub fn get(url: &str) -> Result<(u16, String), String> {
    get_as(url, None)
}

/// [`get`] with HTTP basic authentication as `credential` (principal, secret).
pub fn get_as(url: &str, credential: Option<&(String, String)>) -> Result<(u16, String), String> {
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("{url}: only http:// URLs"))?;
    let (host, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let io = |e: std::io::Error| format!("GET {url}: {e}");
    let addr =
        std::net::ToSocketAddrs::to_socket_addrs(host).map_err(io)?.next().ok_or(format!("{url}: no address"))?;
    let mut stream = TcpStream::connect_timeout(&addr, DEADLINE).map_err(io)?;
    stream.set_read_timeout(Some(DEADLINE)).map_err(io)?;
    stream.set_write_timeout(Some(DEADLINE)).map_err(io)?;
    let auth = credential.map_or_else(String::new, |(p, s)| {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{p}:{s}"));
        format!("Authorization: Basic {token}\r\n")
    });
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {host}\r\n{auth}\r\n").map_err(io)?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(io)?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer.split_once("\r\n\r\n").ok_or_else(|| format!("GET {url}: no HTTP answer: {answer}"))?;
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).ok_or(format!("GET {url}: {head}"))?;
    Ok((status, body.to_owned()))
}

/// `GET url` that must answer 200: its body.
pub fn get_ok(url: &str) -> Result<String, String> {
    get_ok_as(url, None)
}

/// [`get_ok`] with HTTP basic authentication as `credential`.
pub fn get_ok_as(url: &str, credential: Option<&(String, String)>) -> Result<String, String> {
    match get_as(url, credential)? {
        (200, body) => Ok(body),
        (status, body) => Err(format!("GET {url}: {status} {body}")),
    }
}

/// The operator credential (principal, secret) an `mpiswarm up` stack
/// recorded in its `stack.json` (`operatorCredential`, a Mesos credential
/// file), if it recorded one.
pub fn stack_operator(stack: &serde_json::Value) -> Result<Option<(String, String)>, String> {
    let Some(path) = stack["operatorCredential"].as_str() else { return Ok(None) };
    let credential = mpiswarm_mesos::credential::Credential::from_file(std::path::Path::new(path))
        .map_err(|e| format!("the stack's operator credential: {e}"))?;
    Ok(Some(credential.into_pair()))
}
