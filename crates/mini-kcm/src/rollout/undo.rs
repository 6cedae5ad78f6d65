//! `mini-kcm rollout undo`: the revision to go back to and the patch that restores it.
//!
//! Deployments follow current kubectl (`DeploymentRollbacker`): the chosen ReplicaSet's template,
//! minus its `pod-template-hash` label, replaces the Deployment's template, and the ReplicaSet's
//! annotations replace the Deployment's (except the controller's own bookkeeping annotations, which
//! the Deployment keeps), in one JSON patch. The Deployment controller then finds the old ReplicaSet
//! by template and makes it the newest revision; the legacy `rollbackTo` annotation is not used.
//!
//! DaemonSets follow `DaemonSetRollbacker`: the ControllerRevision's template replaces the
//! DaemonSet's. kubectl sends the revision's strategic merge patch, which custom resources do not
//! accept; its `"$patch": "replace"` replaces the whole template, which a JSON patch does as well.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::serde_json::{self, json};
use mini_kcm_deployment::{
    POD_TEMPLATE_HASH_LABEL, equal_ignore_hash, revision, skip_copy_annotation,
};
use mini_kcm_runtime::api::kinds::{DaemonSetObject, DeploymentObject, ReplicaSetObject};

use super::history::revision_template;

/// What `undo` does.
#[derive(Debug, Clone, PartialEq)]
pub enum Rollback {
    /// Nothing to do; the message follows the object's name.
    Skip(String),
    /// Send this JSON patch, then print `rolled back`.
    Patch(json_patch::Patch),
}

/// What kubectl prints after the object's name once the patch is sent.
pub const ROLLED_BACK: &str = "rolled back";

fn skipped(to_revision: i64) -> Rollback {
    Rollback::Skip(format!(
        "skipped rollback (current template already matches revision {to_revision})"
    ))
}

fn revision_not_found(to_revision: i64) -> anyhow::Error {
    anyhow!("unable to find specified revision {to_revision} in history")
}

/// The ReplicaSet holding `to_revision` (0: the one before the newest), as kubectl's
/// `deploymentRevision`.
pub fn deployment_rollback_target<'a>(
    d: &DeploymentObject,
    rss: &'a [ReplicaSetObject],
    to_revision: i64,
) -> anyhow::Result<&'a ReplicaSetObject> {
    let mut latest: Option<(i64, &ReplicaSetObject)> = None;
    let mut previous: Option<(i64, &ReplicaSetObject)> = None;
    for rs in rss {
        let Ok(v) = revision(&rs.metadata) else {
            continue;
        };
        if to_revision > 0 {
            if v == to_revision {
                return Ok(rs);
            }
            continue;
        }
        if latest.is_none_or(|(l, _)| l < v) {
            previous = latest;
            latest = Some((v, rs));
        } else if previous.is_none_or(|(p, _)| p < v) {
            previous = Some((v, rs));
        }
    }
    if to_revision > 0 {
        return Err(revision_not_found(to_revision));
    }
    previous.map(|(_, rs)| rs).ok_or_else(|| {
        anyhow!(
            "no rollout history found for deployment {:?}",
            d.metadata.name.as_deref().unwrap_or_default()
        )
    })
}

/// kubectl's `DeploymentRollbacker.Rollback` without the API calls.
pub fn plan_deployment_rollback(
    d: &DeploymentObject,
    rss: &[ReplicaSetObject],
    to_revision: i64,
) -> anyhow::Result<Rollback> {
    if to_revision < 0 {
        return Err(revision_not_found(to_revision));
    }
    let target = deployment_rollback_target(d, rss, to_revision)?;
    if d.spec.paused == Some(true) {
        bail!(
            "you cannot rollback a paused deployment; resume it first with 'mini-kcm rollout resume' \
             and try again"
        );
    }
    let mut template = target.spec.template.clone().unwrap_or_default();
    if equal_ignore_hash(&template, &d.spec.template) {
        return Ok(skipped(to_revision));
    }
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    // The Deployment keeps its own bookkeeping annotations and takes every other one from the
    // ReplicaSet (which the controller copied from the Deployment of that revision).
    let mut annotations = BTreeMap::new();
    for (k, v) in d.metadata.annotations.iter().flatten() {
        if skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in target.metadata.annotations.iter().flatten() {
        if !skip_copy_annotation(k) {
            annotations.insert(k.clone(), v.clone());
        }
    }
    // `add` sets the member whether or not it exists (kubectl's `replace` fails on a Deployment
    // without annotations, which the controller never leaves, but a hand-made one might have).
    let patch = json!([
        {"op": "replace", "path": "/spec/template", "value": template},
        {"op": "add", "path": "/metadata/annotations", "value": annotations},
    ]);
    Ok(Rollback::Patch(serde_json::from_value(patch)?))
}

/// kubectl's `DaemonSetRollbacker.Rollback` without the API calls.
pub fn plan_daemon_set_rollback(
    ds: &DaemonSetObject,
    history: &[ControllerRevision],
    to_revision: i64,
) -> anyhow::Result<Rollback> {
    if to_revision < 0 {
        return Err(revision_not_found(to_revision));
    }
    if to_revision == 0 && history.len() <= 1 {
        bail!("no last revision to roll back to");
    }
    let target = if to_revision == 0 {
        let mut sorted: Vec<&ControllerRevision> = history.iter().collect();
        sorted.sort_by_key(|cr| cr.revision.unwrap_or_default());
        sorted.get(sorted.len().saturating_sub(2)).copied()
    } else {
        history
            .iter()
            .find(|cr| cr.revision.unwrap_or_default() == to_revision)
    };
    let Some(target) = target else {
        return Err(revision_not_found(to_revision));
    };
    let template = revision_template(ds, target)?;
    // kubectl compares the revision's bytes with the DaemonSet's; comparing the templates
    // semantically is the same question without depending on Go's JSON encoding. DaemonSet templates
    // carry no pod-template-hash label, so ignoring it changes nothing.
    if equal_ignore_hash(&template, &ds.spec.template) {
        return Ok(skipped(to_revision));
    }
    let patch = json!([{"op": "replace", "path": "/spec/template", "value": template}]);
    Ok(Rollback::Patch(serde_json::from_value(patch)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSetSpec, DeploymentSpec, ReplicaSetSpec};
    use k8s_openapi::api::core::v1::PodTemplateSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use k8s_openapi::serde_json::Value;
    use kube::api::ObjectMeta;
    use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};

    const REV: &str = "deployment.kubernetes.io/revision";

    fn template(image: &str, hash: Option<&str>) -> PodTemplateSpec {
        let mut template = mini_kcm_fixtures::pod_template("web", image);
        if let (Some(hash), Some(meta)) = (hash, template.metadata.as_mut()) {
            meta.labels
                .get_or_insert_with(BTreeMap::new)
                .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.into());
        }
        template
    }

    fn deployment(image: &str, annotations: &[(&str, &str)]) -> DeploymentObject {
        let mut d = DeploymentObject::new(
            "web",
            &WorkloadKind::Deployment.api_resource(ApiFamily::Apps),
            DeploymentSpec {
                template: template(image, None),
                ..Default::default()
            },
        );
        d.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        d
    }

    fn rs(revision: &str, image: &str, extra: &[(&str, &str)]) -> ReplicaSetObject {
        let mut rs = ReplicaSetObject::new(
            &format!("web-{image}"),
            &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps),
            ReplicaSetSpec {
                template: Some(template(image, Some(&format!("h{image}")))),
                ..Default::default()
            },
        );
        let mut annotations: BTreeMap<String, String> =
            [(REV.to_string(), revision.to_string())].into();
        annotations.extend(extra.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        rs.metadata.annotations = Some(annotations);
        rs
    }

    fn patch_value(rollback: Rollback) -> Value {
        match rollback {
            Rollback::Patch(p) => serde_json::to_value(p).unwrap_or_default(),
            Rollback::Skip(m) => panic!("unexpected skip: {m}"),
        }
    }

    #[test]
    fn previous_revision_is_the_second_highest() {
        let d = deployment("c", &[]);
        let rss = [rs("1", "a", &[]), rs("3", "c", &[]), rs("2", "b", &[])];
        let target = deployment_rollback_target(&d, &rss, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(target.metadata.name.as_deref(), Some("web-b"));
        let target = deployment_rollback_target(&d, &rss, 1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(target.metadata.name.as_deref(), Some("web-a"));
        let err = |rss: &[ReplicaSetObject], to| match deployment_rollback_target(&d, rss, to) {
            Ok(rs) => panic!("unexpected target {:?}", rs.metadata.name),
            Err(e) => e.to_string(),
        };
        assert_eq!(
            err(&rss, 9),
            "unable to find specified revision 9 in history"
        );
        assert_eq!(
            err(&rss[..1], 0),
            "no rollout history found for deployment \"web\""
        );
    }

    #[test]
    fn deployment_rollback_patches_template_without_hash_and_annotations() {
        let d = deployment(
            "b",
            &[
                (REV, "2"),
                ("team", "new"),
                ("kubectl.kubernetes.io/last-applied-configuration", "{}"),
            ],
        );
        let rss = [
            rs(
                "1",
                "a",
                &[("team", "old"), ("kubernetes.io/change-cause", "first")],
            ),
            rs("2", "b", &[]),
        ];
        let patch =
            patch_value(plan_deployment_rollback(&d, &rss, 0).unwrap_or_else(|e| panic!("{e}")));
        let expected_template = serde_json::to_value(template("a", None)).unwrap_or_default();
        assert_eq!(
            patch,
            json!([
                {"op": "replace", "path": "/spec/template", "value": expected_template},
                {"op": "add", "path": "/metadata/annotations", "value": {
                    REV: "2",
                    "kubectl.kubernetes.io/last-applied-configuration": "{}",
                    "team": "old",
                    "kubernetes.io/change-cause": "first",
                }},
            ])
        );
    }

    #[test]
    fn deployment_rollback_to_the_current_template_is_skipped() {
        let d = deployment("b", &[]);
        let rss = [rs("1", "a", &[]), rs("2", "b", &[])];
        assert_eq!(
            plan_deployment_rollback(&d, &rss, 2).unwrap_or_else(|e| panic!("{e}")),
            Rollback::Skip("skipped rollback (current template already matches revision 2)".into())
        );
    }

    #[test]
    fn deployment_rollback_refuses_paused_and_negative() {
        let mut d = deployment("b", &[]);
        d.spec.paused = Some(true);
        let rss = [rs("1", "a", &[]), rs("2", "b", &[])];
        let err = |d: &DeploymentObject, to| match plan_deployment_rollback(d, &rss, to) {
            Ok(r) => panic!("unexpected {r:?}"),
            Err(e) => e.to_string(),
        };
        assert!(err(&d, 0).starts_with("you cannot rollback a paused deployment"));
        assert_eq!(
            err(&d, -1),
            "unable to find specified revision -1 in history"
        );
    }

    fn daemon_set(image: &str) -> DaemonSetObject {
        let mut ds = DaemonSetObject::new(
            "agent",
            &WorkloadKind::DaemonSet.api_resource(ApiFamily::Copies),
            DaemonSetSpec {
                template: template(image, None),
                ..Default::default()
            },
        );
        ds.metadata.uid = Some("uid-1".into());
        ds
    }

    fn controller_revision(revision: i64, image: &str) -> ControllerRevision {
        let mut data = serde_json::to_value(template(image, None)).unwrap_or_default();
        if let Value::Object(fields) = &mut data {
            fields.insert("$patch".into(), json!("replace"));
        }
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("agent-{image}")),
                owner_references: Some(vec![OwnerReference {
                    controller: Some(true),
                    uid: "uid-1".into(),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            revision: Some(revision),
            data: RawExtension(json!({"spec": {"template": data}})),
        }
    }

    #[test]
    fn daemon_set_rollback_applies_the_previous_revision() {
        let ds = daemon_set("c");
        let history = [
            controller_revision(3, "c"),
            controller_revision(1, "a"),
            controller_revision(2, "b"),
        ];
        let patch = patch_value(
            plan_daemon_set_rollback(&ds, &history, 0).unwrap_or_else(|e| panic!("{e}")),
        );
        let expected = serde_json::to_value(template("b", None)).unwrap_or_default();
        assert_eq!(
            patch,
            json!([{"op": "replace", "path": "/spec/template", "value": expected}])
        );
        assert_eq!(
            plan_daemon_set_rollback(&ds, &history, 3).unwrap_or_else(|e| panic!("{e}")),
            Rollback::Skip("skipped rollback (current template already matches revision 3)".into())
        );
    }

    #[test]
    fn daemon_set_rollback_errors_like_kubectl() {
        let ds = daemon_set("a");
        let err =
            |history: &[ControllerRevision], to| match plan_daemon_set_rollback(&ds, history, to) {
                Ok(r) => panic!("unexpected {r:?}"),
                Err(e) => e.to_string(),
            };
        let one = [controller_revision(1, "a")];
        assert_eq!(err(&one, 0), "no last revision to roll back to");
        assert_eq!(
            err(&one, 5),
            "unable to find specified revision 5 in history"
        );
        assert_eq!(
            err(&one, -2),
            "unable to find specified revision -2 in history"
        );
    }
}
