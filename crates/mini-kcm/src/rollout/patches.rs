//! The patches of `pause`, `resume` and `restart`, with kubectl's refusals.
//!
//! kubectl computes a strategic merge patch from the object before and after the change; custom
//! resources do not accept those, so we send the equivalent JSON merge patch to both families (the
//! changes touch no list, where the two kinds of patch would differ).

use anyhow::anyhow;
use k8s_openapi::serde_json::{Value, json};

use super::resource::{RolloutKind, Target};

/// The pod-template annotation whose change makes a workload roll its pods.
pub const RESTARTED_AT_ANNOTATION: &str = "kubectl.kubernetes.io/restartedAt";

/// `pause`: only Deployments, and only running ones.
pub fn pause(target: &Target, paused: Option<bool>) -> anyhow::Result<Value> {
    match target.kind {
        RolloutKind::DaemonSet => Err(target.object_error("pausing is not supported")),
        RolloutKind::Deployment if paused == Some(true) => {
            Err(target.object_error("is already paused"))
        }
        RolloutKind::Deployment => Ok(json!({"spec": {"paused": true}})),
    }
}

/// `resume`: only Deployments, and only paused ones. `paused: false` is the default, so the field is
/// removed, as kubectl's computed patch does.
pub fn resume(target: &Target, paused: Option<bool>) -> anyhow::Result<Value> {
    match target.kind {
        RolloutKind::DaemonSet => Err(target.object_error("resuming is not supported")),
        RolloutKind::Deployment if paused != Some(true) => {
            Err(target.object_error("is not paused"))
        }
        RolloutKind::Deployment => Ok(json!({"spec": {"paused": null}})),
    }
}

/// `restart`: stamps the pod template with `now` (RFC 3339, whole seconds, as kubectl). A paused
/// Deployment would not roll, so it is refused; a second restart within the same second would be no
/// change, which kubectl reports as an error too.
pub fn restart(
    target: &Target,
    paused: Option<bool>,
    current: Option<&str>,
    now: &str,
) -> anyhow::Result<Value> {
    if target.kind == RolloutKind::Deployment && paused == Some(true) {
        return Err(
            target.object_error("can't restart paused deployment (run rollout resume first)")
        );
    }
    if current == Some(now) {
        return Err(anyhow!(
            "failed to create patch for {}: if restart has already been triggered within the past \
             second, please wait before attempting to trigger another",
            target.name
        ));
    }
    Ok(json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}}))
}

/// The current time as kubectl writes `restartedAt` (Go's `time.RFC3339`, here always in UTC).
pub fn now_rfc3339() -> String {
    k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(resource: &str) -> Target {
        Target::parse(resource, None).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(result: anyhow::Result<Value>) -> String {
        match result {
            Ok(v) => panic!("unexpected patch {v}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn pause_and_resume_toggle_spec_paused() {
        let d = target("deploy/web");
        assert_eq!(
            pause(&d, None).unwrap_or_default(),
            json!({"spec": {"paused": true}})
        );
        assert_eq!(
            pause(&d, Some(false)).unwrap_or_default(),
            json!({"spec": {"paused": true}})
        );
        assert_eq!(
            err(pause(&d, Some(true))),
            "error: deployments.apps \"web\" is already paused"
        );
        assert_eq!(
            resume(&d, Some(true)).unwrap_or_default(),
            json!({"spec": {"paused": null}})
        );
        assert_eq!(
            err(resume(&d, None)),
            "error: deployments.apps \"web\" is not paused"
        );
    }

    #[test]
    fn daemon_sets_cannot_be_paused() {
        let ds = target("mds/agent");
        assert_eq!(
            err(pause(&ds, None)),
            "error: daemonsets.minikcm.dev \"agent\" pausing is not supported"
        );
        assert_eq!(
            err(resume(&ds, Some(true))),
            "error: daemonsets.minikcm.dev \"agent\" resuming is not supported"
        );
    }

    #[test]
    fn restart_stamps_the_template() {
        let now = "2026-01-02T03:04:05Z";
        let expected = json!({"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: now}}}}});
        assert_eq!(
            restart(&target("mdeploy/web"), Some(false), None, now).unwrap_or_default(),
            expected
        );
        // DaemonSets have no pause; an older stamp is replaced.
        assert_eq!(
            restart(&target("ds/agent"), None, Some("2020-01-01T00:00:00Z"), now)
                .unwrap_or_default(),
            expected
        );
        assert_eq!(
            err(restart(&target("mdeploy/web"), Some(true), None, now)),
            "error: deployments.minikcm.dev \"web\" can't restart paused deployment (run rollout resume first)"
        );
        assert!(
            err(restart(&target("ds/agent"), None, Some(now), now)).starts_with(
                "failed to create patch for agent: if restart has already been triggered"
            )
        );
    }

    #[test]
    fn now_is_rfc3339_in_whole_seconds() {
        let now = now_rfc3339();
        assert_eq!(now.len(), "2026-01-02T03:04:05Z".len(), "{now}");
        assert!(now.ends_with('Z'), "{now}");
        assert!(now.parse::<k8s_openapi::jiff::Timestamp>().is_ok(), "{now}");
    }
}
