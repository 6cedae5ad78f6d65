//! Why a key is queued, in words a learner understands: the [`Wake`] every handler gives the queue with
//! a key, shown with the sync it leads to (the decision log's `woken_by`, the live view's queue panel).
//!
//! A handler knows what happened (a pod added, a ReplicaSet's spec changed) and where the change comes
//! from ([`Origin`]). Only a live watch event is news, so only it is `Priority::Fresh` and put in words
//! about the object. The initial list, a relist and a resync re-deliver objects the controller may well
//! have synced already: their keys are `Priority::Low` (handed out after fresh ones, within the queue's
//! aging bound) and their reason is just `"initial list"`, `"relist"` or `"resync"`: static strings, so
//! thousands of them cost no allocation and collapse into one reason per key.
//!
//! Cheap by construction: [`wake`] takes the description as a closure, and handlers call it only once they
//! know a key is queued (`ControllerCore::enqueue_all` builds it once for several owners). The describers
//! below only read the two versions of an object; they never decide anything.

use kube::api::ObjectMeta;
use mini_kcm_workqueue::Wake;

use crate::api::kinds::controller_ref;
use crate::informers::Origin;
use crate::pods::cached::CachedPod;
use crate::pods::ranking::is_pod_ready;

/// The reason of a recheck once a Ready pod should have been Ready for `minReadySeconds` (asked for by
/// the ReplicaSet and DaemonSet handlers when a pod turns Ready, and by their syncs).
pub const POD_BECOMES_AVAILABLE: &str = "a pod becomes available (minReadySeconds)";

/// The wake of a key queued for a change from `origin`: `describe()` and fresh for a live watch event;
/// the origin's name and low for the rest (`describe` is then never called).
pub fn wake(origin: Origin, describe: impl FnOnce() -> String) -> Wake {
    match origin {
        Origin::Watch => Wake::fresh(describe()),
        Origin::InitialList | Origin::Relist | Origin::Resync => Wake::low(origin.as_str()),
    }
}

fn name(meta: &ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or_default()
}

/// `"pod web-7d9f-x added"`. `kind` as people say it: `pod`, `node`, `ReplicaSet`, `Deployment`.
pub fn added(kind: &str, meta: &ObjectMeta) -> String {
    if meta.deletion_timestamp.is_some() {
        // First seen already terminating (e.g. after a restart): the handler treats it as a deletion.
        return format!("{kind} {} added, already terminating", name(meta));
    }
    format!("{kind} {} added", name(meta))
}

/// `"pod web-7d9f-x deleted"`.
pub fn deleted(kind: &str, meta: &ObjectMeta) -> String {
    format!("{kind} {} deleted", name(meta))
}

/// What changed between two versions of an object, from its metadata: `"Deployment web spec changed
/// (generation 3)"`, `"ReplicaSet web-7d9f status changed"`, `"... labels changed"`, ... The first
/// match wins, spec first. A workload's status lives in a subresource that does not bump the
/// generation, so an update that changed neither the generation nor the metadata changed the status.
pub fn updated(kind: &str, old: &ObjectMeta, new: &ObjectMeta) -> String {
    let name = name(new);
    if old.uid != new.uid {
        format!("{kind} {name} deleted and created again")
    } else if old.generation != new.generation {
        format!(
            "{kind} {name} spec changed (generation {})",
            new.generation.unwrap_or_default()
        )
    } else if old.deletion_timestamp.is_none() && new.deletion_timestamp.is_some() {
        format!("{kind} {name} is being deleted")
    } else if old.labels != new.labels {
        format!("{kind} {name} labels changed")
    } else if controller_ref(old) != controller_ref(new) {
        format!("{kind} {name} owner changed")
    } else if old.annotations != new.annotations {
        format!("{kind} {name} annotations changed")
    } else if old.resource_version == new.resource_version {
        format!("{kind} {name} unchanged")
    } else {
        format!("{kind} {name} status changed")
    }
}

/// What a pod update means to its owners: `"pod web-7d9f-x became Ready (update)"`, `"... is
/// terminating (update)"`, `"... labels changed (update)"`, ... The first match wins.
pub fn pod_updated(old: &CachedPod, new: &CachedPod) -> String {
    let name = name(&new.metadata);
    let what =
        if old.metadata.deletion_timestamp.is_none() && new.metadata.deletion_timestamp.is_some() {
            "is terminating".to_string()
        } else if !is_pod_ready(old) && is_pod_ready(new) {
            "became Ready".to_string()
        } else if is_pod_ready(old) && !is_pod_ready(new) {
            "is no longer Ready".to_string()
        } else if controller_ref(&old.metadata) != controller_ref(&new.metadata) {
            "owner changed".to_string()
        } else if old.metadata.labels != new.metadata.labels {
            "labels changed".to_string()
        } else if let Some(phase) = phase(new).filter(|p| phase(old) != Some(*p)) {
            format!("is {phase}")
        } else {
            "changed".to_string()
        };
    format!("pod {name} {what} (update)")
}

fn phase(pod: &CachedPod) -> Option<&str> {
    pod.status.as_ref()?.phase.as_deref()
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::PodCondition;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use mini_kcm_workqueue::Priority;

    use super::*;
    use crate::pods::cached::CachedPodStatus;

    fn meta(name: &str, generation: i64, rv: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            uid: Some("u".into()),
            generation: Some(generation),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    fn pod(ready: bool, rv: &str) -> CachedPod {
        CachedPod {
            metadata: meta("web-7d9f-x", 1, rv),
            spec: None,
            status: Some(CachedPodStatus {
                phase: Some("Running".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_watch_events_are_described_and_fresh() {
        let fresh = wake(Origin::Watch, || "pod p added".into());
        assert_eq!(fresh.reason, "pod p added");
        assert_eq!(fresh.priority, Priority::Fresh);
        for (origin, reason) in [
            (Origin::InitialList, "initial list"),
            (Origin::Relist, "relist"),
            (Origin::Resync, "resync"),
        ] {
            let low = wake(origin, || unreachable!("a re-delivery is not described"));
            assert_eq!(low.reason, reason);
            assert_eq!(low.priority, Priority::Low);
        }
    }

    #[test]
    fn an_update_says_what_changed_spec_first() {
        let old = meta("web", 2, "10");
        assert_eq!(
            updated("Deployment", &old, &meta("web", 3, "11")),
            "Deployment web spec changed (generation 3)"
        );
        assert_eq!(
            updated("ReplicaSet", &old, &meta("web", 2, "11")),
            "ReplicaSet web status changed"
        );
        let mut labelled = meta("web", 2, "11");
        labelled.labels = Some([("a".to_string(), "b".to_string())].into());
        assert_eq!(
            updated("ReplicaSet", &old, &labelled),
            "ReplicaSet web labels changed"
        );
        let mut deleting = meta("web", 2, "11");
        deleting.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(
            updated("DaemonSet", &old, &deleting),
            "DaemonSet web is being deleted"
        );
        assert_eq!(
            added("node", &meta("kwok-node-2", 0, "1")),
            "node kwok-node-2 added"
        );
        assert_eq!(deleted("pod", &meta("p", 0, "1")), "pod p deleted");
    }

    #[test]
    fn a_pod_update_names_the_transition() {
        assert_eq!(
            pod_updated(&pod(false, "1"), &pod(true, "2")),
            "pod web-7d9f-x became Ready (update)"
        );
        assert_eq!(
            pod_updated(&pod(true, "1"), &pod(false, "2")),
            "pod web-7d9f-x is no longer Ready (update)"
        );
        let mut terminating = pod(true, "2");
        terminating.metadata.deletion_timestamp = Some(Time(Default::default()));
        assert_eq!(
            pod_updated(&pod(true, "1"), &terminating),
            "pod web-7d9f-x is terminating (update)"
        );
        assert_eq!(
            pod_updated(&pod(true, "1"), &pod(true, "2")),
            "pod web-7d9f-x changed (update)"
        );
    }
}
