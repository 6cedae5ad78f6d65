//! Pods and nodes as the API server sends them in protobuf (`application/vnd.kubernetes.protobuf`),
//! decoded into what the caches keep.
//!
//! Why: pods are nearly all the bytes a controller-manager lists and watches, and decoding them is most of
//! its CPU at scale. kube-controller-manager asks for protobuf (its `--kube-api-content-type` default);
//! JSON costs several times more to parse. mini-kcm does the same for the two kinds that dominate:
//! pods and nodes. Everything else (Deployments, ReplicaSets, DaemonSets, ControllerRevisions, whose
//! templates must survive byte for byte, and the CRD copies, which have no protobuf encoding) stays JSON,
//! and every write is JSON.
//!
//! The format, in three layers:
//! - **Envelope** ([`wire::unwrap_envelope`]): every object or list body is the 4 bytes `k8s\0` and then a
//!   `runtime.Unknown` message whose `raw` field holds the object's own message (`Pod`, `PodList`,
//!   `Status`).
//! - **Watch frames** ([`wire::Frames`]): a watch's body is a sequence of frames, each a 4-byte big-endian
//!   length and then a `WatchEvent` message: its `type` (`ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK`,
//!   `ERROR`) and the object, itself in the envelope.
//! - **Messages** ([`messages`]): the kept subset of `Pod`, `Node`, `ObjectMeta`, `Status` and friends,
//!   written as `prost` messages with the field numbers of the `generated.proto` files of `k8s.io/api`
//!   and `k8s.io/apimachinery` (unchanged from 1.35 to 1.37). A field a message does not declare is
//!   skipped by its length, never allocated: a pod's containers, volumes and most of its status are never
//!   decoded at all.
//!
//! Why hand-written messages rather than the `k8s-pb` crate: `k8s-pb` is generated from 1.35's protos and
//! decodes every field of a pod (allocating all of it, the cost this module exists to avoid), and it
//! offers nothing for the kept subset. The kept subset is small (about 60 fields); `kept_fields` lists
//! them with their field numbers and holds both decodings to that list on objects captured from a
//! 1.37.2 API server (`crates/runtime/tests/fixtures/protobuf/`): every kept field is set in some
//! fixture, and a pod or node decoded from protobuf equals the same object decoded from JSON and kept as
//! the cache keeps it.

pub(crate) mod messages;
pub(crate) mod watch_event;
pub(crate) mod wire;

/// The bytes of a captured fixture (`crates/runtime/tests/fixtures/protobuf/`; its README.md says how
/// they were captured).
#[cfg(test)]
macro_rules! fixture {
    ($name:literal) => {
        bytes::Bytes::from_static(include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/protobuf/",
            $name
        )))
    };
}

#[cfg(test)]
mod fixture_tests;
#[cfg(test)]
mod kept_fields;

pub(crate) use messages::ProtobufKind;
pub(crate) use watch_event::WatchFrame;
pub(crate) use wire::{DecodeError, Frames};

/// The content type of a protobuf object or list.
pub(crate) const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// The content type of a protobuf watch: length-prefixed frames.
pub(crate) const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";
