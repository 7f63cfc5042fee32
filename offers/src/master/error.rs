//! The one error type of the master's calls: what Mesos would answer, as an
//! HTTP status and a plain-text message. Semantic problems with tasks and
//! offers are not errors here; they become status updates on the stream.

/// A call the master refuses, with the HTTP status Mesos would answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{status}: {message}")]
pub struct CallError {
    pub status: u16,
    pub message: String,
}

impl CallError {
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self { status: 400, message: message.into() }
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self { status: 403, message: message.into() }
    }

    /// 503: the call was carried out in memory but its registry write failed,
    /// so it would not survive a restart; the client should retry later.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self { status: 503, message: message.into() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_constructor_carries_its_status_and_the_message_reads_alone() {
        assert_eq!(CallError::bad_request("x").status, 400);
        assert_eq!(CallError::forbidden("x").status, 403);
        let e = CallError::unavailable("registry write failed");
        assert_eq!((e.status, e.to_string().as_str()), (503, "503: registry write failed"));
    }
}
