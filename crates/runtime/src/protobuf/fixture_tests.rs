//! The decoding on bytes captured from a 1.37.2 API server (`crates/runtime/tests/fixtures/protobuf/`,
//! whose README.md says how): objects, lists, watch streams and errors. That every kept field of a pod
//! and a node decodes alike from protobuf and JSON is `super::kept_fields`'s test.

use k8s_openapi::api::core::v1::{Node, Pod};

use super::messages::{ProtobufKind, cached_node};
use super::watch_event::{WatchFrame, decode_status, decode_watch_event};
use super::wire::Frames;
use crate::pods::cached::{CachedPod, ContainerRestarts};

fn json<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> T {
    serde_json::from_slice(bytes).unwrap()
}

#[test]
fn a_pod_decodes_as_its_json_does() {
    let decoded = CachedPod::decode_object(fixture!("pod.pb")).unwrap();
    let from_json: CachedPod = json(&fixture!("pod.json"));
    assert_eq!(decoded, from_json.trimmed());
    let whole: Pod = json(&fixture!("pod.json"));
    assert_eq!(decoded, CachedPod::from(whole));
    // What the fixture was made to carry came through.
    let meta = &decoded.metadata;
    assert_eq!(
        meta.annotations.as_ref().unwrap()["controller.kubernetes.io/pod-deletion-cost"],
        "5"
    );
    assert_eq!(
        meta.finalizers.as_deref(),
        Some(&["example.com/fixture".to_string()][..])
    );
    assert_eq!(
        meta.owner_references.as_ref().unwrap()[0].controller,
        Some(true)
    );
    assert!(meta.creation_timestamp.is_some());
    let spec = decoded.spec.as_ref().unwrap();
    let sidecars: Vec<&str> = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(sidecars, ["proxy"]);
    let status = decoded.status.as_ref().unwrap();
    assert_eq!(status.phase.as_deref(), Some("Running"));
    assert_eq!(status.conditions.as_ref().unwrap()[0].type_, "Ready");
    // Restarts: app 3 and the sidecar's 2; `setup` restarted once but is not a sidecar.
    let restarts = |s: &Option<Vec<ContainerRestarts>>| -> Vec<(String, i32)> {
        s.iter()
            .flatten()
            .map(|c| (c.name.clone(), c.restart_count))
            .collect()
    };
    assert_eq!(restarts(&status.container_statuses), [("app".into(), 3)]);
    assert_eq!(
        restarts(&status.init_container_statuses),
        [("proxy".into(), 2)]
    );
}

#[test]
fn a_daemon_pod_keeps_its_node_affinity() {
    let decoded = CachedPod::decode_object(fixture!("daemon-pod.pb")).unwrap();
    let from_json: CachedPod = json(&fixture!("daemon-pod.json"));
    assert_eq!(decoded, from_json.trimmed());
    let terms = &decoded
        .spec
        .unwrap()
        .affinity
        .unwrap()
        .node_affinity
        .unwrap()
        .required_during_scheduling_ignored_during_execution
        .unwrap()
        .node_selector_terms;
    let field = &terms[0].match_fields.as_ref().unwrap()[0];
    assert_eq!(
        (field.key.as_str(), field.operator.as_str()),
        ("metadata.name", "In")
    );
}

#[test]
fn a_node_decodes_as_its_json_does() {
    let decoded = Node::decode_object(fixture!("node.pb")).unwrap();
    assert_eq!(decoded, cached_node(json(&fixture!("node.json"))));
    let spec = decoded.spec.unwrap();
    assert_eq!(spec.unschedulable, Some(true));
    let taints = spec.taints.unwrap();
    assert_eq!(taints.len(), 2);
    assert!(taints.iter().any(|t| t.time_added.is_some()), "{taints:?}");
    assert!(decoded.status.is_none(), "the node's status is not kept");
}

#[test]
fn a_list_page_has_its_version_continue_token_and_items() {
    let page = CachedPod::decode_list(fixture!("pod-list.pb")).unwrap();
    #[derive(serde::Deserialize)]
    struct Metadata {
        #[serde(rename = "resourceVersion")]
        resource_version: String,
        #[serde(rename = "continue")]
        continue_: String,
    }
    #[derive(serde::Deserialize)]
    struct List {
        metadata: Metadata,
        items: Vec<CachedPod>,
    }
    let from_json: List = json(&fixture!("pod-list.json"));
    assert_eq!(
        page.resource_version.as_deref(),
        Some(from_json.metadata.resource_version.as_str())
    );
    assert_eq!(
        page.continue_token.as_deref(),
        Some(from_json.metadata.continue_.as_str())
    );
    let items: Vec<CachedPod> = from_json
        .items
        .into_iter()
        .map(CachedPod::trimmed)
        .collect();
    assert_eq!(page.items, items);
    assert_eq!(page.items.len(), 2);
}

/// The events of a captured watch body, fed in chunks of `chunk` bytes.
fn watch_events(body: &[u8], chunk: usize) -> Vec<WatchFrame<CachedPod>> {
    let mut frames = Frames::default();
    let mut events = Vec::new();
    for piece in body.chunks(chunk) {
        frames.push(piece);
        while let Some(frame) = frames.next_frame() {
            events.push(decode_watch_event(frame.unwrap()).unwrap());
        }
    }
    assert_eq!(frames.pending(), 0, "the capture ends on a frame boundary");
    events
}

fn describe(event: &WatchFrame<CachedPod>) -> String {
    let name = |p: &CachedPod| p.metadata.name.clone().unwrap_or_default();
    match event {
        WatchFrame::Added(p) => format!("ADDED {}", name(p)),
        WatchFrame::Modified(p) => {
            let deleting = if p.metadata.deletion_timestamp.is_some() {
                " (deleting)"
            } else {
                ""
            };
            format!("MODIFIED {}{deleting}", name(p))
        }
        WatchFrame::Deleted(p) => format!("DELETED {}", name(p)),
        WatchFrame::Bookmark {
            initial_events_end, ..
        } => format!("BOOKMARK end={initial_events_end}"),
        WatchFrame::Error(s) => format!("ERROR {} {}", s.code, s.reason),
    }
}

#[test]
fn a_streamed_list_ends_with_its_bookmark() {
    let body = &fixture!("watch-initial-events.pb");
    for chunk in [7, 1000, body.len()] {
        let events = watch_events(body, chunk);
        let seen: Vec<String> = events.iter().map(describe).collect();
        // The namespace's five pods, then the bookmark.
        assert_eq!(seen.len(), 6, "{seen:?}");
        assert!(
            seen[..5].iter().all(|s| s.starts_with("ADDED ")),
            "{seen:?}"
        );
        assert_eq!(seen[5], "BOOKMARK end=true");
        let WatchFrame::Bookmark {
            resource_version, ..
        } = &events[5]
        else {
            unreachable!()
        };
        assert!(resource_version.parse::<u64>().unwrap() > 0);
    }
}

#[test]
fn a_watch_shows_a_creation_an_update_and_a_deletion_in_two_steps() {
    let events = watch_events(&fixture!("watch-changes.pb"), 333);
    let kinds: Vec<String> = events
        .iter()
        .map(|e| describe(e).split(' ').next().unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]);
    assert!(
        describe(&events[2]).ends_with("(deleting)"),
        "{}",
        describe(&events[2])
    );
}

#[test]
fn an_expired_watch_says_410_gone_in_an_error_event() {
    let events = watch_events(&fixture!("watch-gone.pb"), 10);
    let seen: Vec<String> = events.iter().map(describe).collect();
    assert_eq!(seen, ["ERROR 410 Expired"]);
}

#[test]
fn error_bodies_are_statuses() {
    let not_found = decode_status(fixture!("status-not-found.pb")).unwrap();
    assert_eq!(
        (not_found.code, not_found.reason.as_str()),
        (404, "NotFound")
    );
    assert!(
        not_found.message.contains("does-not-exist"),
        "{}",
        not_found.message
    );
    // A CRD asked for in protobuf only: the refusal is itself protobuf.
    let refused = decode_status(fixture!("deployment-refused.pb")).unwrap();
    assert_eq!(
        (refused.code, refused.reason.as_str()),
        (406, "NotAcceptable")
    );
}

#[test]
fn a_pod_is_not_a_node() {
    assert!(Node::decode_object(fixture!("pod.pb")).is_err());
}
