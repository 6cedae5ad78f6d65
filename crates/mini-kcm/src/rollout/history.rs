//! `mini-kcm rollout history`: the revisions of a Deployment (its ReplicaSets' revision annotations) or
//! of a DaemonSet (its ControllerRevisions), rendered like kubectl's `REVISION  CHANGE-CAUSE` table, or
//! one revision's pod template.
//!
//! Reading the history is shared with `undo`, which picks its target among the same objects.

use std::collections::BTreeMap;

use anyhow::{Context, bail};
use k8s_openapi::api::apps::v1::ControllerRevision;
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::serde_json::{self, Value};
use kube::api::ListParams;
use kube::{Api, Client};
use mini_kcm_deployment::revision;
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DaemonSetObject, DeploymentObject, ReplicaSetObject, WorkloadKind, controller_uid,
};
use mini_kcm_runtime::api::selector::Selector;

/// The annotation kubectl reads a revision's change cause from.
pub const CHANGE_CAUSE_ANNOTATION: &str = "kubernetes.io/change-cause";

/// One revision of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Revision {
    pub number: i64,
    pub change_cause: Option<String>,
    /// The pod template of this revision, as `history --revision` shows it.
    pub template: PodTemplateSpec,
}

/// The ReplicaSets controlled by `d` (kubectl's `GetAllReplicaSets`: listed by the Deployment's
/// selector, kept when their controller reference is the Deployment).
pub async fn owned_replica_sets(
    client: &Client,
    family: ApiFamily,
    d: &DeploymentObject,
) -> anyhow::Result<Vec<ReplicaSetObject>> {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    let api: Api<ReplicaSetObject> = Api::namespaced_with(
        client.clone(),
        d.metadata.namespace.as_deref().unwrap_or_default(),
        &WorkloadKind::ReplicaSet.api_resource(family),
    );
    let params = list_params(&d.spec.selector)
        .with_context(|| format!("failed to retrieve replica sets from deployment {name}"))?;
    let list = api
        .list(&params)
        .await
        .with_context(|| format!("failed to retrieve replica sets from deployment {name}"))?;
    let uid = d.metadata.uid.as_deref();
    Ok(list
        .items
        .into_iter()
        .filter(|rs| uid.is_some() && controller_uid(&rs.metadata) == uid)
        .collect())
}

/// The ControllerRevisions controlled by `ds` (kubectl's `daemonSetHistory`). They are `apps/v1`
/// objects for both families; the owner reference names the DaemonSet of either family.
pub async fn owned_controller_revisions(
    client: &Client,
    ds: &DaemonSetObject,
) -> anyhow::Result<Vec<ControllerRevision>> {
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    let api: Api<ControllerRevision> = Api::namespaced(
        client.clone(),
        ds.metadata.namespace.as_deref().unwrap_or_default(),
    );
    let params = list_params(&ds.spec.selector)
        .with_context(|| format!("failed to create selector for DaemonSet {name}"))?;
    let list = api
        .list(&params)
        .await
        .with_context(|| format!("unable to find history controlled by DaemonSet {name}"))?;
    let uid = ds.metadata.uid.as_deref();
    Ok(list
        .items
        .into_iter()
        .filter(|cr| uid.is_some() && controller_uid(&cr.metadata) == uid)
        .collect())
}

/// A list narrowed to the workload's selector on the server.
fn list_params(
    selector: &k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector,
) -> anyhow::Result<ListParams> {
    let selector = Selector::from_label_selector(selector)?;
    let rendered = selector.to_string();
    Ok(if rendered.is_empty() {
        ListParams::default()
    } else {
        ListParams::default().labels(&rendered)
    })
}

/// A Deployment's revisions by number. As in kubectl, the change cause (from the ReplicaSet) is also
/// put into the template's annotations, and a ReplicaSet whose revision does not parse is skipped.
pub fn deployment_revisions(rss: &[ReplicaSetObject]) -> BTreeMap<i64, Revision> {
    let mut revisions = BTreeMap::new();
    for rs in rss {
        let number = match revision(&rs.metadata) {
            Ok(n) => n,
            Err(e) => {
                tracing::warn!(
                    replica_set = rs.metadata.name.as_deref().unwrap_or_default(),
                    error = %e,
                    "unable to get the revision of a ReplicaSet; skipped"
                );
                continue;
            }
        };
        let change_cause = change_cause(&rs.metadata);
        let mut template = rs.spec.template.clone().unwrap_or_default();
        if let Some(cause) = &change_cause {
            template
                .metadata
                .get_or_insert_with(Default::default)
                .annotations
                .get_or_insert_with(Default::default)
                .insert(CHANGE_CAUSE_ANNOTATION.to_string(), cause.clone());
        }
        revisions.insert(
            number,
            Revision {
                number,
                change_cause,
                template,
            },
        );
    }
    revisions
}

/// A DaemonSet's revisions by number, each with the template it describes.
pub fn daemon_set_revisions(
    ds: &DaemonSetObject,
    history: &[ControllerRevision],
) -> anyhow::Result<BTreeMap<i64, Revision>> {
    let mut revisions = BTreeMap::new();
    for cr in history {
        let template = revision_template(ds, cr)?;
        revisions.insert(
            cr.revision.unwrap_or_default(),
            Revision {
                number: cr.revision.unwrap_or_default(),
                change_cause: change_cause(&cr.metadata),
                template,
            },
        );
    }
    Ok(revisions)
}

fn change_cause(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.annotations
        .as_ref()?
        .get(CHANGE_CAUSE_ANNOTATION)
        .filter(|c| !c.is_empty())
        .cloned()
}

/// The pod template a DaemonSet ControllerRevision records. kubectl applies the revision's data (a
/// strategic merge patch) to the DaemonSet; the DaemonSet controller always writes the whole template
/// with `"$patch": "replace"`, so that template is the answer. Data without the directive is merged
/// into the current template as a JSON merge patch (lists replaced, not merged by key: the only
/// difference to a strategic merge, and only for hand-made revisions).
pub fn revision_template(
    ds: &DaemonSetObject,
    cr: &ControllerRevision,
) -> anyhow::Result<PodTemplateSpec> {
    let name = cr.metadata.name.as_deref().unwrap_or_default();
    let Some(patch) = cr.data.0.get("spec").and_then(|s| s.get("template")) else {
        return Ok(ds.spec.template.clone());
    };
    let mut patch = patch.clone();
    let replace = match &mut patch {
        Value::Object(fields) => fields
            .remove("$patch")
            .is_some_and(|d| d.as_str() == Some("replace")),
        _ => bail!("unable to parse history {name}"),
    };
    let template = if replace {
        patch
    } else {
        let mut current = serde_json::to_value(&ds.spec.template)?;
        json_patch::merge(&mut current, &patch);
        current
    };
    serde_json::from_value(template).with_context(|| format!("unable to parse history {name}"))
}

/// kubectl's `rollout history` output for one object: the name, then the table or one revision.
pub fn render(
    display: &str,
    revisions: &BTreeMap<i64, Revision>,
    revision: i64,
) -> anyhow::Result<String> {
    if revisions.is_empty() {
        return Ok(format!("{display} \nNo rollout history found.\n"));
    }
    if revision > 0 {
        let Some(found) = revisions.get(&revision) else {
            bail!("unable to find the specified revision");
        };
        return Ok(format!(
            "{display} with revision #{revision}\n{}\n",
            render_template(&found.template)?
        ));
    }
    let mut rows = vec![("REVISION".to_string(), "CHANGE-CAUSE".to_string())];
    rows.extend(revisions.values().map(|r| {
        (
            r.number.to_string(),
            r.change_cause.clone().unwrap_or_else(|| "<none>".into()),
        )
    }));
    Ok(format!("{display} \n{}\n", tabbed(&rows)))
}

/// Two columns as kubectl's tabwriter lays them out (minimum width 0, padding 2, spaces): the first
/// column as wide as its widest cell plus two, the last cell of a line unpadded.
pub fn tabbed(rows: &[(String, String)]) -> String {
    let width = rows
        .iter()
        .map(|(first, _)| first.chars().count())
        .max()
        .unwrap_or(0)
        + 2;
    rows.iter()
        .map(|(first, second)| format!("{first:<width$}{second}\n"))
        .collect()
}

/// A pod template under kubectl's `Pod Template:` heading, as indented YAML (kubectl describes it;
/// YAML shows the same fields and can be read back).
pub fn render_template(template: &PodTemplateSpec) -> anyhow::Result<String> {
    let yaml = serde_norway::to_string(template).context("rendering the pod template")?;
    let mut out = String::from("Pod Template:\n");
    for line in yaml.lines() {
        out.push_str("  ");
        out.push_str(line);
        out.push('\n');
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DaemonSetSpec, ReplicaSetSpec};
    use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
    use k8s_openapi::serde_json::json;
    use kube::api::ObjectMeta;

    fn template(image: &str) -> PodTemplateSpec {
        mini_kcm_fixtures::pod_template("web", image)
    }

    fn rs(name: &str, annotations: &[(&str, &str)], image: &str) -> ReplicaSetObject {
        let mut rs = ReplicaSetObject::new(
            name,
            &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies),
            ReplicaSetSpec {
                template: Some(template(image)),
                ..Default::default()
            },
        );
        rs.metadata.annotations = Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        rs
    }

    const REV: &str = "deployment.kubernetes.io/revision";

    #[test]
    fn table_is_laid_out_like_kubectls_tabwriter() {
        let rss = [
            rs(
                "web-b",
                &[(REV, "2"), (CHANGE_CAUSE_ANNOTATION, "set image pause:3.9")],
                "b",
            ),
            rs("web-a", &[(REV, "1")], "a"),
            rs("web-c", &[(REV, "10")], "c"),
        ];
        let out = render("deployment.apps/web", &deployment_revisions(&rss), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out,
            "deployment.apps/web \n\
             REVISION  CHANGE-CAUSE\n\
             1         <none>\n\
             2         set image pause:3.9\n\
             10        <none>\n\
             \n"
        );
    }

    #[test]
    fn wide_first_column_widens_the_table() {
        let rows = vec![
            ("REVISION".to_string(), "CHANGE-CAUSE".to_string()),
            ("1234567890123".to_string(), "x".to_string()),
        ];
        assert_eq!(
            tabbed(&rows),
            "REVISION       CHANGE-CAUSE\n1234567890123  x\n"
        );
    }

    #[test]
    fn unparsable_revisions_are_skipped_and_missing_ones_are_zero() {
        let rss = [
            rs("web-a", &[(REV, "x")], "a"),
            rs("web-b", &[], "b"),
            rs("web-c", &[(REV, "3")], "c"),
        ];
        let revisions = deployment_revisions(&rss);
        assert_eq!(revisions.keys().copied().collect::<Vec<_>>(), vec![0, 3]);
    }

    #[test]
    fn empty_history() {
        let out = render("daemonset.minikcm.dev/agent", &BTreeMap::new(), 0)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out,
            "daemonset.minikcm.dev/agent \nNo rollout history found.\n"
        );
    }

    #[test]
    fn one_revision_shows_its_template_with_the_change_cause() {
        let rss = [
            rs("web-a", &[(REV, "1")], "a"),
            rs(
                "web-b",
                &[(REV, "2"), (CHANGE_CAUSE_ANNOTATION, "bump")],
                "registry.k8s.io/pause:3.9",
            ),
        ];
        let revisions = deployment_revisions(&rss);
        let out =
            render("deployment.minikcm.dev/web", &revisions, 2).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.starts_with("deployment.minikcm.dev/web with revision #2\nPod Template:\n  "),
            "{out}"
        );
        assert!(out.contains("image: registry.k8s.io/pause:3.9"), "{out}");
        assert!(out.contains("kubernetes.io/change-cause: bump"), "{out}");
        // Every template line is indented under the heading.
        assert!(
            out.lines()
                .skip(2)
                .filter(|l| !l.is_empty())
                .all(|l| l.starts_with("  "))
        );
        match render("deployment.minikcm.dev/web", &revisions, 7) {
            Ok(out) => panic!("expected an error, got {out}"),
            Err(e) => assert_eq!(e.to_string(), "unable to find the specified revision"),
        }
    }

    fn daemon_set() -> DaemonSetObject {
        DaemonSetObject::new(
            "agent",
            &WorkloadKind::DaemonSet.api_resource(ApiFamily::Apps),
            DaemonSetSpec {
                template: template("current"),
                ..Default::default()
            },
        )
    }

    fn controller_revision(revision: i64, data: Value) -> ControllerRevision {
        ControllerRevision {
            metadata: ObjectMeta {
                name: Some(format!("agent-{revision}")),
                ..Default::default()
            },
            revision: Some(revision),
            data: RawExtension(data),
        }
    }

    #[test]
    fn daemon_set_revision_templates_come_from_the_replace_patch() {
        let ds = daemon_set();
        let mut old = serde_json::to_value(template("old")).unwrap_or_default();
        if let Value::Object(fields) = &mut old {
            fields.insert("$patch".into(), json!("replace"));
        }
        let cr = controller_revision(1, json!({"spec": {"template": old}}));
        let got = revision_template(&ds, &cr).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got, template("old"));
        // Without the directive the data is merged into the current template.
        let cr = controller_revision(
            2,
            json!({"spec": {"template": {"metadata": {"annotations": {"a": "b"}}}}}),
        );
        let got = revision_template(&ds, &cr).unwrap_or_else(|e| panic!("{e}"));
        let mut expected = template("current");
        if let Some(meta) = expected.metadata.as_mut() {
            meta.annotations = Some([("a".to_string(), "b".to_string())].into());
        }
        assert_eq!(got, expected);
    }

    #[test]
    fn daemon_set_change_causes_come_from_the_controller_revisions() {
        let ds = daemon_set();
        let mut second = controller_revision(2, json!({}));
        second.metadata.annotations =
            Some([(CHANGE_CAUSE_ANNOTATION.to_string(), "rolled".to_string())].into());
        let revisions = daemon_set_revisions(&ds, &[second, controller_revision(1, json!({}))])
            .unwrap_or_else(|e| panic!("{e}"));
        let out = render("daemonset.apps/agent", &revisions, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            out,
            "daemonset.apps/agent \nREVISION  CHANGE-CAUSE\n1         <none>\n2         rolled\n\n"
        );
    }
}
