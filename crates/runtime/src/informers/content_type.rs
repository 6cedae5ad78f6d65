//! Which content type informers ask the API server for: kube-controller-manager's
//! `--kube-api-content-type`, protobuf by default.
//!
//! Protobuf is asked for only by the kinds that have a protobuf decoding (`crate::protobuf`: pods and
//! nodes, nearly all of what a controller-manager lists and watches); every other kind, and every write,
//! is JSON. A server that refuses protobuf for a resource (`406 Not Acceptable` or `415 Unsupported Media
//! Type`: an aggregated API server, a proxy in between) gets JSON from then on for that resource, for the
//! life of the process, said once in the log and shown in the live view's informer table. The refusal is
//! the answer to the first request, before any event, and the JSON watch starts with a full list: nothing
//! is lost.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use kube::runtime::watcher;

use super::list_mode::{Events, falling_back};

/// What informers ask for (`--kube-api-content-type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ContentType {
    /// `application/vnd.kubernetes.protobuf`, for the kinds that have it.
    #[default]
    Protobuf,
    /// `application/json` for everything.
    Json,
}

impl ContentType {
    /// The media type, as the flag takes it.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Protobuf => crate::protobuf::PROTOBUF,
            ContentType::Json => "application/json",
        }
    }
}

impl std::fmt::Display for ContentType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A content type the flag does not know.
#[derive(Debug, thiserror::Error)]
#[error(
    "unknown content type {0:?}: use application/vnd.kubernetes.protobuf (the default) or application/json"
)]
pub struct UnknownContentType(String);

impl FromStr for ContentType {
    type Err = UnknownContentType;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "application/vnd.kubernetes.protobuf" => Ok(ContentType::Protobuf),
            "application/json" => Ok(ContentType::Json),
            other => Err(UnknownContentType(other.to_string())),
        }
    }
}

const JSON: u8 = 0;
const PROTOBUF: u8 = 1;
const REFUSED: u8 = 2;

/// What one informer's list and watch use now; clones share it, the live view reads it.
#[derive(Debug, Clone)]
pub(crate) struct WireFormat(Arc<AtomicU8>);

impl WireFormat {
    pub(crate) fn protobuf() -> Self {
        WireFormat(Arc::new(AtomicU8::new(PROTOBUF)))
    }

    pub(crate) fn json() -> Self {
        WireFormat(Arc::new(AtomicU8::new(JSON)))
    }

    /// `"protobuf"`, `"json"`, or `"json (protobuf refused)"`.
    pub(crate) fn as_str(&self) -> &'static str {
        match self.0.load(Ordering::Relaxed) {
            PROTOBUF => "protobuf",
            REFUSED => "json (protobuf refused)",
            _ => "json",
        }
    }
}

impl Default for WireFormat {
    fn default() -> Self {
        WireFormat::json()
    }
}

/// `protobuf` until the server refuses it, then what `json` makes (see the module header).
pub(crate) fn json_after_a_refusal<K: Send + 'static>(
    protobuf: Events<K>,
    json: impl FnOnce() -> Events<K> + Send + 'static,
    kind: String,
    wire: WireFormat,
) -> Events<K> {
    falling_back(protobuf, json, is_refused_protobuf, move |error| {
        tracing::warn!(%kind, %error,
            "the API server refused protobuf; listing and watching in JSON from now on");
        wire.0.store(REFUSED, Ordering::Relaxed);
    })
}

/// A 406 or 415 answer to a list or watch: the server does not speak protobuf for this resource.
fn is_refused_protobuf(error: &watcher::Error) -> bool {
    matches!(error,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if status.code == 406 || status.code == 415)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_takes_the_two_media_types_of_kube_controller_manager() {
        assert_eq!(
            "application/vnd.kubernetes.protobuf"
                .parse::<ContentType>()
                .unwrap(),
            ContentType::Protobuf
        );
        assert_eq!(
            "application/json".parse::<ContentType>().unwrap(),
            ContentType::Json
        );
        let error = "text/yaml".parse::<ContentType>().unwrap_err();
        assert!(error.to_string().contains("application/json"), "{error}");
        assert_eq!(ContentType::default(), ContentType::Protobuf);
    }

    #[test]
    fn only_406_and_415_at_the_start_count_as_refusals() {
        let api = |code| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("m", "r").with_code(code),
            ))
        };
        assert!(is_refused_protobuf(&watcher::Error::InitialListFailed(
            api(406)
        )));
        assert!(is_refused_protobuf(&watcher::Error::WatchStartFailed(api(
            415
        ))));
        assert!(!is_refused_protobuf(&watcher::Error::WatchStartFailed(
            api(500)
        )));
        assert!(!is_refused_protobuf(&watcher::Error::WatchFailed(api(406))));
    }
}
