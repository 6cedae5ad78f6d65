//! The protobuf envelope (`k8s\0` + `runtime.Unknown`) and the framing of a watch's body.

use bytes::{Buf, Bytes, BytesMut};
use prost::Message;

/// The 4 bytes before every protobuf object body.
const MAGIC: &[u8; 4] = b"k8s\0";

/// A frame larger than this is refused rather than buffered: the API server's own limit on an object is
/// about 3 MiB (etcd's request size), far below it.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// What went wrong decoding protobuf bytes from the API server.
#[derive(Debug, thiserror::Error)]
pub(crate) enum DecodeError {
    #[error("not a Kubernetes protobuf body (no k8s\\0 prefix)")]
    NoEnvelope,
    #[error("malformed {what} message")]
    Message {
        what: &'static str,
        #[source]
        source: prost::DecodeError,
    },
    #[error("a watch frame of {0} bytes (over the {MAX_FRAME} byte limit)")]
    FrameTooLarge(usize),
    #[error("a watch event of unknown type {0:?}")]
    UnknownEventType(String),
    #[error("expected a {expected} in the envelope, got {got:?}")]
    WrongKind { expected: &'static str, got: String },
}

impl DecodeError {
    pub(crate) fn message(what: &'static str) -> impl FnOnce(prost::DecodeError) -> DecodeError {
        move |source| DecodeError::Message { what, source }
    }
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, Message)]
struct TypeMeta {
    #[prost(string, tag = "1")]
    api_version: String,
    #[prost(string, tag = "2")]
    kind: String,
}

/// `runtime.Unknown`: the envelope's message.
#[derive(Clone, PartialEq, Message)]
struct Unknown {
    #[prost(message, optional, tag = "1")]
    type_meta: Option<TypeMeta>,
    #[prost(bytes = "bytes", tag = "2")]
    raw: Bytes,
}

/// An enveloped body's kind (`Pod`, `PodList`, `Status`; empty when the server did not say) and its
/// message bytes (a slice of `body`, not a copy).
pub(crate) fn unwrap_envelope(mut body: Bytes) -> Result<(String, Bytes), DecodeError> {
    if body.len() < MAGIC.len() || &body[..MAGIC.len()] != MAGIC {
        return Err(DecodeError::NoEnvelope);
    }
    body.advance(MAGIC.len());
    let unknown = Unknown::decode(body).map_err(DecodeError::message("runtime.Unknown"))?;
    let kind = unknown.type_meta.map(|t| t.kind).unwrap_or_default();
    Ok((kind, unknown.raw))
}

/// Splits a watch body, arriving in chunks of any size, into frames: a 4-byte big-endian length, then
/// that many bytes.
#[derive(Debug, Default)]
pub(crate) struct Frames {
    buffered: BytesMut,
}

impl Frames {
    /// Appends a chunk of the body.
    pub(crate) fn push(&mut self, chunk: &[u8]) {
        self.buffered.extend_from_slice(chunk);
    }

    /// The next complete frame, if one is buffered.
    pub(crate) fn next_frame(&mut self) -> Option<Result<Bytes, DecodeError>> {
        let header: [u8; 4] = self.buffered.get(..4)?.try_into().ok()?;
        let len = u32::from_be_bytes(header) as usize;
        if len > MAX_FRAME {
            return Some(Err(DecodeError::FrameTooLarge(len)));
        }
        if self.buffered.len() - 4 < len {
            // Room for the rest of the frame at once, rather than growing by doubling.
            self.buffered.reserve(len + 4 - self.buffered.len());
            return None;
        }
        self.buffered.advance(4);
        Some(Ok(self.buffered.split_to(len).freeze()))
    }

    /// Bytes of an incomplete frame still buffered (a body that ends here was cut mid-frame).
    pub(crate) fn pending(&self) -> usize {
        self.buffered.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut out = (payload.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn frames_are_found_across_chunks_of_any_size() {
        let mut body = frame(b"first");
        body.extend(frame(b""));
        body.extend(frame(&[7u8; 300]));
        for chunk_size in [1, 3, 4, 5, 64, body.len()] {
            let mut frames = Frames::default();
            let mut seen = Vec::new();
            for chunk in body.chunks(chunk_size) {
                frames.push(chunk);
                while let Some(f) = frames.next_frame() {
                    seen.push(f.unwrap().len());
                }
            }
            assert_eq!(seen, [5, 0, 300], "chunks of {chunk_size}");
            assert_eq!(frames.pending(), 0);
        }
    }

    #[test]
    fn an_absurd_frame_length_is_an_error_not_an_allocation() {
        let mut frames = Frames::default();
        frames.push(&u32::MAX.to_be_bytes());
        assert!(matches!(
            frames.next_frame(),
            Some(Err(DecodeError::FrameTooLarge(_)))
        ));
    }

    #[test]
    fn a_body_without_the_prefix_is_refused() {
        assert!(matches!(
            unwrap_envelope(Bytes::from_static(b"{\"kind\":\"Pod\"}")),
            Err(DecodeError::NoEnvelope)
        ));
        assert!(matches!(
            unwrap_envelope(Bytes::from_static(b"k8")),
            Err(DecodeError::NoEnvelope)
        ));
    }

    #[test]
    fn garbage_after_the_prefix_is_an_error() {
        assert!(matches!(
            unwrap_envelope(Bytes::from_static(b"k8s\0\xff\xff\xff")),
            Err(DecodeError::Message { .. })
        ));
    }
}

/// Protobuf bodies as the API server writes them, for tests of the decoding and of the watcher.
#[cfg(test)]
pub(crate) mod encode {
    use super::*;

    /// `message` of `kind` in the envelope.
    pub(crate) fn enveloped(kind: &str, message: Vec<u8>) -> Bytes {
        let mut out = MAGIC.to_vec();
        Unknown {
            type_meta: Some(TypeMeta {
                api_version: "v1".into(),
                kind: kind.into(),
            }),
            raw: message.into(),
        }
        .encode(&mut out)
        .unwrap();
        out.into()
    }
}
