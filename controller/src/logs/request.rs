//! What a caller of the log endpoint asks for, read and checked before
//! anything is asked of the API server: `GET /logs/{namespace}/{job}` with
//! `worker=N` (absent: the launcher), `stream=stdout|stderr` (default
//! stdout), `offset=O` (default 0; -1 asks for the current size only) and
//! `length=L` (default and most [`MAX_LENGTH`]), and the bearer token of
//! `Authorization`. Pure. The names must be Kubernetes names, so nothing a
//! caller sends can change the path of a request the controller makes.

use crate::logs::error::LogError;
use crate::names::TaskRole;

/// The most bytes one read answers with (the agent's own cap is 4 MiB).
pub const MAX_LENGTH: u64 = 1024 * 1024;

/// The output stream of a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    /// The file's name in the task's sandbox.
    pub fn file(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// Where in the stream to read: from a byte offset, or only its size (Mesos' `offset=-1`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offset {
    At(u64),
    Size,
}

/// One checked request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogRequest {
    pub namespace: String,
    pub job: String,
    pub task: TaskRole,
    pub stream: Stream,
    pub offset: Offset,
    pub length: u64,
}

/// The query as sent: every value a string, so that a malformed one is
/// refused with our message, not the framework's.
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct RawQuery {
    pub worker: Option<String>,
    pub stream: Option<String>,
    pub offset: Option<String>,
    pub length: Option<String>,
}

fn invalid(param: &'static str, value: &str, expected: &'static str) -> LogError {
    LogError::InvalidParameter { param, value: value.to_owned(), expected }
}

/// The request for `namespace`/`job` with `query`, or what is wrong with it.
pub fn parse(namespace: &str, job: &str, query: &RawQuery) -> Result<LogRequest, LogError> {
    if !is_label(namespace) {
        return Err(LogError::InvalidName { what: "namespace", value: namespace.to_owned() });
    }
    if !is_subdomain(job) {
        return Err(LogError::InvalidName { what: "MpiJob name", value: job.to_owned() });
    }
    let task = match query.worker.as_deref() {
        None => TaskRole::Launcher,
        Some(w) => TaskRole::Worker(w.parse().map_err(|_| invalid("worker", w, "a worker index (0, 1, ...)"))?),
    };
    let stream = match query.stream.as_deref() {
        None | Some("stdout") => Stream::Stdout,
        Some("stderr") => Stream::Stderr,
        Some(s) => return Err(invalid("stream", s, "stdout or stderr")),
    };
    let offset = match query.offset.as_deref() {
        None => Offset::At(0),
        Some("-1") => Offset::Size,
        Some(o) => {
            Offset::At(o.parse().map_err(|_| invalid("offset", o, "a byte offset (0 or more), or -1 for the size"))?)
        }
    };
    let length = match query.length.as_deref() {
        None => MAX_LENGTH,
        Some(l) => l.parse::<u64>().map_err(|_| invalid("length", l, "a number of bytes (0 or more)"))?.min(MAX_LENGTH),
    };
    Ok(LogRequest { namespace: namespace.to_owned(), job: job.to_owned(), task, stream, offset, length })
}

/// The token of `Authorization: Bearer TOKEN` (the scheme in any case, as
/// kube-apiserver reads it).
pub fn bearer_token(authorization: Option<&str>) -> Result<&str, LogError> {
    let header = authorization.ok_or(LogError::NoToken)?;
    let (scheme, token) = header.trim().split_once(' ').ok_or(LogError::NoToken)?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() {
        return Err(LogError::NoToken);
    }
    Ok(token)
}

/// An RFC 1123 label, as namespace names are.
fn is_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// An RFC 1123 subdomain, as MpiJob names are.
fn is_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> RawQuery {
        let get = |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| (*v).to_owned());
        RawQuery { worker: get("worker"), stream: get("stream"), offset: get("offset"), length: get("length") }
    }

    #[test]
    fn the_launchers_stdout_from_the_start_is_the_default_and_length_is_capped() {
        let r = parse("team-a", "pi", &q(&[])).unwrap();
        assert_eq!(
            (r.task, r.stream, r.offset, r.length),
            (TaskRole::Launcher, Stream::Stdout, Offset::At(0), MAX_LENGTH)
        );
        let r = parse(
            "team-a",
            "pi.v2",
            &q(&[("worker", "3"), ("stream", "stderr"), ("offset", "-1"), ("length", "9999999")]),
        )
        .unwrap();
        assert_eq!(
            (r.task, r.stream, r.offset, r.length),
            (TaskRole::Worker(3), Stream::Stderr, Offset::Size, MAX_LENGTH)
        );
        let r = parse("a", "b", &q(&[("offset", "42"), ("length", "7")])).unwrap();
        assert_eq!((r.offset, r.length), (Offset::At(42), 7));
    }

    #[test]
    fn malformed_parameters_are_refused_naming_the_parameter_the_value_and_what_is_expected() {
        for (pairs, param, value) in [
            (vec![("worker", "-1")], "worker", "-1"),
            (vec![("worker", "launcher")], "worker", "launcher"),
            (vec![("stream", "stdin")], "stream", "stdin"),
            (vec![("offset", "-2")], "offset", "-2"),
            (vec![("length", "x")], "length", "x"),
        ] {
            let err = parse("ns", "job", &q(&pairs)).unwrap_err();
            let text = err.to_string();
            assert!(matches!(err, LogError::InvalidParameter { .. }), "{text}");
            assert!(text.contains(param) && text.contains(&format!("{value:?}")), "{text}");
        }
    }

    #[test]
    fn names_that_are_not_kubernetes_names_never_reach_a_request_path() {
        for (ns, job) in
            [("", "pi"), ("Team", "pi"), ("a/b", "pi"), ("-a", "pi"), ("ns", "../secrets"), ("ns", ""), ("ns", "a..b")]
        {
            assert!(matches!(parse(ns, job, &q(&[])), Err(LogError::InvalidName { .. })), "{ns}/{job}");
        }
        assert!(parse(&"a".repeat(63), &"b".repeat(63), &q(&[])).is_ok());
        assert!(parse(&"a".repeat(64), "pi", &q(&[])).is_err());
    }

    #[test]
    fn only_a_non_empty_bearer_token_is_taken() {
        assert_eq!(bearer_token(Some("Bearer abc")).unwrap(), "abc");
        assert_eq!(bearer_token(Some("bearer  abc ")).unwrap(), "abc");
        for h in [None, Some(""), Some("Bearer"), Some("Bearer  "), Some("Basic dXNlcjpwYXNz"), Some("abc")] {
            assert!(matches!(bearer_token(h), Err(LogError::NoToken)), "{h:?}");
        }
    }
}
