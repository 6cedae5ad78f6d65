//! A watch's events in protobuf: each frame's `WatchEvent` (its type and an enveloped object), and the
//! `Status` of an error, as the watcher (`crate::informers`) reads them.

use bytes::Bytes;
use prost::Message;

use super::messages::{ProtobufKind, Status};
use super::wire::{DecodeError, unwrap_envelope};

/// `runtime.RawExtension`: a watch event's object (an envelope again).
#[derive(Clone, PartialEq, Message)]
struct RawExtension {
    #[prost(bytes = "bytes", tag = "1")]
    raw: Bytes,
}

/// `meta.v1.WatchEvent`.
#[derive(Clone, PartialEq, Message)]
struct WatchEventMessage {
    #[prost(string, tag = "1")]
    type_: String,
    #[prost(message, optional, tag = "2")]
    object: Option<RawExtension>,
}

/// An API `Status` in the envelope (the body of an error response, or a watch's `ERROR` event), as kube
/// reports API errors.
pub(crate) fn decode_status(body: Bytes) -> Result<kube::core::Status, DecodeError> {
    let (kind, raw) = unwrap_envelope(body)?;
    if !kind.is_empty() && kind != "Status" {
        return Err(DecodeError::WrongKind {
            expected: "Status",
            got: kind,
        });
    }
    let status = Status::decode(raw).map_err(DecodeError::message("Status"))?;
    Ok(status.into_kube())
}

/// One decoded watch event.
#[derive(Debug)]
pub(crate) enum WatchFrame<K> {
    Added(K),
    Modified(K),
    Deleted(K),
    /// The resourceVersion the watch has reached; `initial_events_end` marks the end of a streamed list
    /// (the annotation `k8s.io/initial-events-end`).
    Bookmark {
        resource_version: String,
        initial_events_end: bool,
    },
    Error(Box<kube::core::Status>),
}

/// Decodes one frame's `WatchEvent` (the frame's bytes without its length prefix).
pub(crate) fn decode_watch_event<K: ProtobufKind>(
    frame: Bytes,
) -> Result<WatchFrame<K>, DecodeError> {
    let event = WatchEventMessage::decode(frame).map_err(DecodeError::message("WatchEvent"))?;
    let object = event.object.map(|o| o.raw).unwrap_or_default();
    match event.type_.as_str() {
        "ADDED" => Ok(WatchFrame::Added(K::decode_object(object)?)),
        "MODIFIED" => Ok(WatchFrame::Modified(K::decode_object(object)?)),
        "DELETED" => Ok(WatchFrame::Deleted(K::decode_object(object)?)),
        "BOOKMARK" => {
            let bookmark = K::decode_object(object)?;
            let meta = kube::Resource::meta(&bookmark);
            Ok(WatchFrame::Bookmark {
                resource_version: meta.resource_version.clone().unwrap_or_default(),
                initial_events_end: meta.annotations.as_ref().is_some_and(|a| {
                    a.get("k8s.io/initial-events-end").map(String::as_str) == Some("true")
                }),
            })
        }
        "ERROR" => Ok(WatchFrame::Error(Box::new(decode_status(object)?))),
        other => Err(DecodeError::UnknownEventType(other.to_string())),
    }
}

#[cfg(test)]
pub(crate) mod encode {
    use super::*;
    use crate::protobuf::wire::encode::enveloped;

    /// A watch frame: the length, then a `WatchEvent` of `type_` around `object` (enveloped).
    pub(crate) fn frame(type_: &str, object: Bytes) -> Vec<u8> {
        let event = WatchEventMessage {
            type_: type_.into(),
            object: Some(RawExtension { raw: object }),
        }
        .encode_to_vec();
        let mut out = (event.len() as u32).to_be_bytes().to_vec();
        out.extend(event);
        out
    }

    /// A `Status` with `code` and `reason`, enveloped.
    pub(crate) fn status(code: i32, reason: &str, message: &str) -> Bytes {
        enveloped(
            "Status",
            Status::failure(code, reason, message).encode_to_vec(),
        )
    }
}
