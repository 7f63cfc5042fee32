//! RecordIO framing of Mesos event streams: each record is its length in
//! decimal ASCII, a `\n`, then exactly that many bytes. Records follow one
//! another with no separator and no trailing newline
//! (`96\n{"type":"SUBSCRIBED",...}20\n{"type":"HEARTBEAT"}`).
//!
//! [`RecordIoCodec`] is a `tokio_util` codec, so a byte stream of any chunking
//! decodes into whole records; [`encode_json`] frames one JSON record.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use serde::Serialize;
use tokio_util::codec::{Decoder, Encoder};

/// The largest record the decoder accepts by default (64 MiB), so a corrupt
/// or hostile length cannot make it allocate without bound.
pub const DEFAULT_MAX_RECORD_BYTES: usize = 64 * 1024 * 1024;

/// Why a RecordIO stream could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum RecordIoError {
    #[error("RecordIO length header {header:?} is not a decimal number")]
    BadLength { header: String },
    #[error("RecordIO record of {length} bytes exceeds the limit of {max} bytes")]
    TooLarge { length: usize, max: usize },
    #[error("RecordIO stream ended inside a record ({buffered} bytes buffered)")]
    Truncated { buffered: usize },
    #[error("I/O error on the RecordIO stream: {0}")]
    Io(#[from] std::io::Error),
}

/// Encodes `Bytes` records and decodes a byte stream into `Bytes` records.
#[derive(Debug, Clone)]
pub struct RecordIoCodec {
    max_record_bytes: usize,
    /// Length of the record whose header was parsed but whose body has not
    /// fully arrived yet.
    pending: Option<usize>,
}

impl Default for RecordIoCodec {
    fn default() -> Self {
        Self::new(DEFAULT_MAX_RECORD_BYTES)
    }
}

impl RecordIoCodec {
    pub fn new(max_record_bytes: usize) -> Self {
        Self { max_record_bytes, pending: None }
    }
}

/// The header may not be longer than the decimal form of `usize::MAX`.
const MAX_HEADER_DIGITS: usize = 20;

impl Decoder for RecordIoCodec {
    type Item = Bytes;
    type Error = RecordIoError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, RecordIoError> {
        let length = match self.pending {
            Some(length) => length,
            None => {
                let Some(newline) = src.iter().position(|b| *b == b'\n') else {
                    if src.len() > MAX_HEADER_DIGITS {
                        return Err(bad_length(&src[..MAX_HEADER_DIGITS]));
                    }
                    return Ok(None);
                };
                let header = &src[..newline];
                if header.is_empty() || header.len() > MAX_HEADER_DIGITS || !header.iter().all(u8::is_ascii_digit) {
                    return Err(bad_length(header));
                }
                let length: usize =
                    std::str::from_utf8(header).ok().and_then(|s| s.parse().ok()).ok_or_else(|| bad_length(header))?;
                if length > self.max_record_bytes {
                    return Err(RecordIoError::TooLarge { length, max: self.max_record_bytes });
                }
                src.advance(newline + 1);
                self.pending = Some(length);
                length
            }
        };
        if src.len() < length {
            src.reserve(length - src.len());
            return Ok(None);
        }
        self.pending = None;
        Ok(Some(src.split_to(length).freeze()))
    }

    fn decode_eof(&mut self, src: &mut BytesMut) -> Result<Option<Bytes>, RecordIoError> {
        match self.decode(src)? {
            Some(record) => Ok(Some(record)),
            None if src.is_empty() && self.pending.is_none() => Ok(None),
            None => Err(RecordIoError::Truncated { buffered: src.len() }),
        }
    }
}

fn bad_length(header: &[u8]) -> RecordIoError {
    RecordIoError::BadLength { header: String::from_utf8_lossy(header).into_owned() }
}

impl Encoder<Bytes> for RecordIoCodec {
    type Error = RecordIoError;

    fn encode(&mut self, record: Bytes, dst: &mut BytesMut) -> Result<(), RecordIoError> {
        dst.reserve(record.len() + MAX_HEADER_DIGITS + 1);
        dst.put_slice(record.len().to_string().as_bytes());
        dst.put_u8(b'\n');
        dst.put_slice(&record);
        Ok(())
    }
}

/// Frames `record` as one RecordIO record.
pub fn encode(record: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(record.len() + 8);
    out.put_slice(record.len().to_string().as_bytes());
    out.put_u8(b'\n');
    out.put_slice(record);
    out.freeze()
}

/// Serialises `value` as compact JSON and frames it as one RecordIO record.
pub fn encode_json<T: Serialize>(value: &T) -> Result<Bytes, serde_json::Error> {
    Ok(encode(&serde_json::to_vec(value)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn framing_is_length_newline_bytes_with_no_separator() {
        let mut out = BytesMut::new();
        let mut codec = RecordIoCodec::default();
        codec.encode(Bytes::from_static(b"{\"type\":\"HEARTBEAT\"}"), &mut out).unwrap();
        codec.encode(Bytes::from_static(b"ab"), &mut out).unwrap();
        assert_eq!(&out[..], b"20\n{\"type\":\"HEARTBEAT\"}2\nab");
    }

    #[test]
    fn a_non_numeric_header_is_rejected_with_the_header() {
        let mut codec = RecordIoCodec::default();
        let err = codec.decode(&mut BytesMut::from(&b"1x\nab"[..])).unwrap_err();
        assert!(err.to_string().contains("\"1x\""), "{err}");
    }

    #[test]
    fn an_oversized_record_is_rejected_before_buffering() {
        let mut codec = RecordIoCodec::new(10);
        let err = codec.decode(&mut BytesMut::from(&b"11\n"[..])).unwrap_err();
        assert!(matches!(err, RecordIoError::TooLarge { length: 11, max: 10 }), "{err}");
    }

    #[test]
    fn a_stream_that_ends_mid_record_is_an_error() {
        let mut codec = RecordIoCodec::default();
        let mut buf = BytesMut::from(&b"5\nab"[..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(matches!(codec.decode_eof(&mut buf), Err(RecordIoError::Truncated { .. })));
    }

    proptest! {
        #[test]
        fn any_records_survive_any_chunking(
            records in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 0..8),
            chunk in 1usize..50,
        ) {
            let mut wire = BytesMut::new();
            let mut codec = RecordIoCodec::default();
            for r in &records {
                codec.encode(Bytes::from(r.clone()), &mut wire).unwrap();
            }
            let mut decoder = RecordIoCodec::default();
            let mut buf = BytesMut::new();
            let mut decoded = Vec::new();
            for piece in wire.chunks(chunk) {
                buf.extend_from_slice(piece);
                while let Some(r) = decoder.decode(&mut buf).unwrap() {
                    decoded.push(r.to_vec());
                }
            }
            prop_assert!(decoder.decode_eof(&mut buf).unwrap().is_none());
            prop_assert_eq!(decoded, records);
        }
    }
}
