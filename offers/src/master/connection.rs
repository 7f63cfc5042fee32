//! One open event stream, to a framework or an agent: a channel the master
//! writes RecordIO records into and the HTTP layer streams out. The master
//! never blocks on a client: a full or closed stream is the client's loss.

use bytes::Bytes;
use mpiswarm_mesos::recordio;
use serde::Serialize;
use tokio::sync::mpsc;

/// One open event stream (to a framework or an agent).
#[derive(Debug)]
pub struct Connection {
    pub stream_id: String,
    tx: mpsc::UnboundedSender<Bytes>,
}

impl Connection {
    pub(super) fn open() -> (Self, mpsc::UnboundedReceiver<Bytes>) {
        let (tx, rx) = mpsc::unbounded_channel();
        (Self { stream_id: uuid::Uuid::new_v4().to_string(), tx }, rx)
    }

    /// Sends one event as a RecordIO record; false if the stream is gone.
    pub(super) fn send<E: Serialize>(&self, event: &E) -> bool {
        match recordio::encode_json(event) {
            Ok(record) => self.tx.send(record).is_ok(),
            Err(e) => {
                tracing::error!(error = %e, "cannot encode event");
                false
            }
        }
    }
}

/// A newly opened stream: its id and the events to write to the client.
#[derive(Debug)]
pub struct Opened {
    pub id: String,
    pub stream_id: String,
    pub events: mpsc::UnboundedReceiver<Bytes>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_goes_out_as_one_recordio_record_and_a_closed_stream_says_so() {
        let (conn, mut rx) = Connection::open();
        assert!(conn.send(&serde_json::json!({"type": "HEARTBEAT"})));
        let record = rx.try_recv().unwrap();
        assert_eq!(&record[..], b"20\n{\"type\":\"HEARTBEAT\"}");
        drop(rx);
        assert!(!conn.send(&serde_json::json!({"type": "HEARTBEAT"})), "the client went away");
    }

    #[test]
    fn every_stream_gets_its_own_id() {
        assert_ne!(Connection::open().0.stream_id, Connection::open().0.stream_id);
    }
}
