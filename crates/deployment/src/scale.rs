//! One scaling step of a ReplicaSet, and the write it implies (upstream's `scaleReplicaSet`).
//!
//! Every plan in this crate is a list of [`ScaleStep`]s, executed in order by the controller. A step
//! resizes one ReplicaSet and, with it, refreshes the `desired-replicas` / `max-replicas` annotations to
//! the Deployment's current `(replicas, replicas + maxSurge)`: those annotations are what lets the next
//! sync tell a scaling event from a rollout, so they must move together with the size.

use crate::accessors::{deployment_replicas, name, rs_replicas};
use crate::annotations::{replicas_annotations_need_update, set_replicas_annotations};
use crate::strategy::max_surge;
use crate::{DeploymentObject, ReplicaSetObject};

/// The event reason of every ReplicaSet resize.
pub(crate) const SCALING_REPLICA_SET_REASON: &str = "ScalingReplicaSet";

/// Resize one ReplicaSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScaleStep {
    /// The ReplicaSet's name (unique in the Deployment's namespace).
    pub name: String,
    /// Its `spec.replicas` when the step applies (after earlier steps of the same plan).
    pub from: i32,
    /// The new `spec.replicas`.
    pub to: i32,
    /// Write even when the size does not change, if the replicas annotations are stale. Proportional
    /// scaling forces; rollout steps are lazy (written only when the size changes).
    pub force: bool,
}

impl ScaleStep {
    pub(crate) fn new(rs: &ReplicaSetObject, to: i32, force: bool) -> Self {
        ScaleStep {
            name: name(&rs.metadata).to_string(),
            from: rs_replicas(rs),
            to,
            force,
        }
    }

    /// The replicas this step removes (negative when it adds).
    pub(crate) fn scaled_down(&self) -> i32 {
        self.from.saturating_sub(self.to)
    }
}

/// The ReplicaSet to write for resizing `rs` to `new_scale`, or `None` when nothing needs writing.
///
/// Lazy (`force == false`): only when the size differs. Forced: also when only the replicas annotations
/// are stale. The returned copy has the new size and fresh annotations; the controller PUTs it and, if
/// the size changed, emits [`scaling_event_message`].
pub(crate) fn scale_replica_set(
    rs: &ReplicaSetObject,
    new_scale: i32,
    d: &DeploymentObject,
    force: bool,
) -> Option<ReplicaSetObject> {
    let size_changes = rs_replicas(rs) != new_scale;
    if !force && !size_changes {
        return None;
    }
    let desired = deployment_replicas(d);
    // Go's int32 sum wraps (max-replicas "-2147483648" for 2147483647 + 1); saturate (see `rolling`).
    let max = desired.saturating_add(max_surge(d));
    if !size_changes && !replicas_annotations_need_update(rs, desired, max) {
        return None;
    }
    let mut updated = rs.clone();
    updated.spec.replicas = Some(new_scale);
    set_replicas_annotations(&mut updated, desired, max);
    Some(updated)
}

/// The Normal `ScalingReplicaSet` event message for a resize, `None` when the size did not change.
pub(crate) fn scaling_event_message(rs_name: &str, from: i32, to: i32) -> Option<String> {
    let direction = match from.cmp(&to) {
        std::cmp::Ordering::Less => "up",
        std::cmp::Ordering::Greater => "down",
        std::cmp::Ordering::Equal => return None,
    };
    Some(format!(
        "Scaled {direction} replica set {rs_name} from {from} to {to}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::annotations::{DESIRED_REPLICAS_ANNOTATION, MAX_REPLICAS_ANNOTATION};
    use crate::testutil::{deployment, rs, with_annotations};

    #[test]
    fn lazy_and_forced_writes() {
        let d = deployment("foo", 10, 3, 2);
        let stale = rs("foo-1", 4);
        assert!(scale_replica_set(&stale, 4, &d, false).is_none());
        let forced = scale_replica_set(&stale, 4, &d, true).unwrap();
        let a = forced.metadata.annotations.as_ref().unwrap();
        assert_eq!(
            (
                a[DESIRED_REPLICAS_ANNOTATION].as_str(),
                a[MAX_REPLICAS_ANNOTATION].as_str()
            ),
            ("10", "13")
        );
        let fresh = with_annotations(
            rs("foo-1", 4),
            &[
                (DESIRED_REPLICAS_ANNOTATION, "10"),
                (MAX_REPLICAS_ANNOTATION, "13"),
            ],
        );
        assert!(scale_replica_set(&fresh, 4, &d, true).is_none());
        let resized = scale_replica_set(&fresh, 6, &d, false).unwrap();
        assert_eq!(resized.spec.replicas, Some(6));
    }

    #[test]
    fn event_messages() {
        assert_eq!(
            scaling_event_message("foo-1", 3, 5).as_deref(),
            Some("Scaled up replica set foo-1 from 3 to 5")
        );
        assert_eq!(
            scaling_event_message("foo-1", 5, 0).as_deref(),
            Some("Scaled down replica set foo-1 from 5 to 0")
        );
        assert_eq!(scaling_event_message("foo-1", 5, 5), None);
    }
}
