//! Tasks' kept output over HTTP, in the shape of Mesos' `/files` endpoints:
//! `GET /files/read?path=/tasks/<framework id>/<task id>/stdout&offset=N&length=M`
//! answers `{"data": "...", "offset": N}` (`offset=-1`: the current size,
//! with empty data), and `GET /files/browse?path=/tasks[/<fw>[/<task>]]`
//! lists what is there as Mesos FileInfo objects. Read-only; disk reads run
//! in `spawn_blocking`.
//!
//! Offsets count every byte the task wrote. Output is bounded, so when the
//! asked bytes are no longer kept the answer starts later, and its `offset`
//! says where. A path segment is percent-decoded, so an id holding `/` is
//! written `%2F`.

use std::time::UNIX_EPOCH;

use axum::Json;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use crate::sandbox::{Entry, Sandbox, Stream, percent_decode};

/// The most bytes one read answers with.
pub const MAX_READ: u64 = 4 * 1024 * 1024;

const SCHEME: &str = "task output is at /tasks/<framework id>/<task id>/stdout (or stderr)";

#[derive(Debug, Deserialize)]
pub struct ReadQuery {
    path: Option<String>,
    offset: Option<String>,
    length: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct BrowseQuery {
    path: Option<String>,
}

/// A parsed `/tasks/...` path.
#[derive(Debug, Clone, PartialEq)]
enum Target {
    Root,
    Framework(String),
    Task(String, String),
    File(String, String, Stream),
}

fn parse(path: &str) -> Option<Target> {
    let rest = path.strip_prefix("/tasks")?;
    let segments: Vec<String> =
        rest.trim_end_matches('/').split('/').skip(1).map(percent_decode).collect::<Option<_>>()?;
    if !rest.is_empty() && !rest.starts_with('/') {
        return None;
    }
    match segments.as_slice() {
        [] => Some(Target::Root),
        [fw] => Some(Target::Framework(fw.clone())),
        [fw, task] => Some(Target::Task(fw.clone(), task.clone())),
        [fw, task, file] => Some(Target::File(fw.clone(), task.clone(), Stream::from_name(file)?)),
        _ => None,
    }
}

fn error(status: StatusCode, message: String) -> Response {
    (status, message).into_response()
}

fn not_found(path: &str) -> Response {
    error(StatusCode::NOT_FOUND, format!("no such file or directory: '{path}'; {SCHEME}"))
}

fn failed(e: impl std::fmt::Display) -> Response {
    error(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot read task output: {e}"))
}

/// The longest prefix of `data` that ends on a character boundary (the rest
/// is read next time), as text; bytes that are not UTF-8 become U+FFFD.
fn text(data: &[u8]) -> String {
    let end = match std::str::from_utf8(data) {
        Ok(_) => data.len(),
        // An incomplete character at the very end waits for the next read.
        Err(e) if e.error_len().is_none() && data.len() - e.valid_up_to() < 4 => e.valid_up_to(),
        Err(_) => data.len(),
    };
    String::from_utf8_lossy(&data[..end]).into_owned()
}

/// `GET /files/read`.
pub async fn read(sandbox: Sandbox, q: ReadQuery) -> Response {
    let Some(path) = q.path else {
        return error(StatusCode::BAD_REQUEST, format!("Expecting 'path' to be present; {SCHEME}"));
    };
    let Some(offset) = q.offset else {
        return error(StatusCode::BAD_REQUEST, "Expecting 'offset' to be present (-1 for the size)".into());
    };
    let Ok(offset) = offset.parse::<i64>() else {
        return error(StatusCode::BAD_REQUEST, format!("Failed to parse offset: '{offset}' is not an integer"));
    };
    let length = match q.length.as_deref().map(str::parse::<i64>) {
        None => MAX_READ,
        Some(Ok(n)) if n >= 0 => u64::try_from(n).unwrap_or(MAX_READ).min(MAX_READ),
        Some(_) => {
            let given = q.length.unwrap_or_default();
            return error(
                StatusCode::BAD_REQUEST,
                format!("Failed to parse length: '{given}' is not a non-negative integer"),
            );
        }
    };
    if offset < -1 {
        return error(StatusCode::BAD_REQUEST, format!("Negative offset provided: {offset} (only -1, for the size)"));
    }
    let Some(Target::File(fw, task, stream)) = parse(&path) else {
        return not_found(&path);
    };
    let answer = tokio::task::spawn_blocking(move || {
        if offset == -1 {
            return sandbox.size(&fw, &task, stream).map(|size| size.map(|s| (s, Vec::new())));
        }
        sandbox.read(&fw, &task, stream, u64::try_from(offset).unwrap_or(0), length)
    })
    .await;
    match answer {
        Ok(Ok(Some((at, data)))) => Json(serde_json::json!({"data": text(&data), "offset": at})).into_response(),
        Ok(Ok(None)) => not_found(&path),
        Ok(Err(e)) => failed(e),
        Err(e) => failed(e),
    }
}

/// `GET /files/browse`.
pub async fn browse(sandbox: Sandbox, q: BrowseQuery) -> Response {
    let Some(path) = q.path else {
        return error(StatusCode::BAD_REQUEST, format!("Expecting 'path' to be present; {SCHEME}"));
    };
    let target = parse(&path);
    let base = path.trim_end_matches('/').to_owned();
    let listing = tokio::task::spawn_blocking(move || match target {
        Some(Target::Root) => sandbox.browse(&[]),
        Some(Target::Framework(fw)) => sandbox.browse(&[&fw]),
        Some(Target::Task(fw, task)) => sandbox.browse(&[&fw, &task]),
        _ => Ok(None),
    })
    .await;
    match listing {
        Ok(Ok(Some(entries))) => {
            let infos: Vec<_> = entries.iter().map(|e| file_info(&base, e)).collect();
            Json(serde_json::Value::Array(infos)).into_response()
        }
        Ok(Ok(None)) => not_found(&path),
        Ok(Err(e)) => failed(e),
        Err(e) => failed(e),
    }
}

/// Mesos' FileInfo JSON.
fn file_info(base: &str, e: &Entry) -> serde_json::Value {
    let name: String =
        e.name.bytes().map(|b| if b == b'/' { "%2F".to_owned() } else { char::from(b).to_string() }).collect();
    let mtime = e.mtime.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    serde_json::json!({
        "path": format!("{base}/{name}"),
        "nlink": if e.is_dir { 2 } else { 1 },
        "size": e.size,
        "mtime": mtime,
        "mode": if e.is_dir { "drwx------" } else { "-rw-------" },
        "uid": "root",
        "gid": "root",
    })
}

/// Query extractors for the router.
pub type Read = Query<ReadQuery>;
pub type Browse = Query<BrowseQuery>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_name_a_root_a_framework_a_task_or_a_stream() {
        assert_eq!(parse("/tasks"), Some(Target::Root));
        assert_eq!(parse("/tasks/"), Some(Target::Root));
        assert_eq!(parse("/tasks/fw"), Some(Target::Framework("fw".into())));
        assert_eq!(parse("/tasks/fw/t1/"), Some(Target::Task("fw".into(), "t1".into())));
        assert_eq!(parse("/tasks/fw/t1/stderr"), Some(Target::File("fw".into(), "t1".into(), Stream::Stderr)));
        assert_eq!(parse("/tasks/fw/a%2Fb/stdout"), Some(Target::File("fw".into(), "a/b".into(), Stream::Stdout)));
        assert_eq!(parse("/tasks/fw/t1/secret"), None);
        assert_eq!(parse("/tasksx"), None);
        assert_eq!(parse("/etc/passwd"), None);
        assert_eq!(parse("/tasks/fw/t/stdout/more"), None);
        assert_eq!(parse("/tasks/fw/%zz/stdout"), None);
    }

    #[test]
    fn text_keeps_a_split_character_for_the_next_read() {
        let pi = "π=3.14".as_bytes();
        assert_eq!(text(pi), "π=3.14");
        assert_eq!(text(&pi[..1]), "", "half of π waits");
        assert_eq!(text(&[b'a', 0xff, b'b']), "a\u{fffd}b");
    }
}
