//! The resource argument of `mini-kcm rollout <verb>`: which object, of which kind and family.
//!
//! `TYPE` is read by [`crate::kind_name`], the parser `explain` uses too: Deployments and DaemonSets of
//! both families (`deploy/web`, `deployments.minikcm.dev/web`, `mds/agent`, ...); a name without a
//! group means `apps/v1`. Like kubectl, both `TYPE/NAME` and `TYPE NAME` are accepted.

use anyhow::{anyhow, bail};
use kube::discovery::ApiResource;
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};

use crate::kind_name::{KindName, parse_kind_name};

/// The kinds that have rollouts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RolloutKind {
    Deployment,
    DaemonSet,
}

/// One object named on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub kind: RolloutKind,
    pub family: ApiFamily,
    pub name: String,
}

impl Target {
    /// Parses `TYPE/NAME`, or `TYPE` followed by `name`.
    pub fn parse(resource: &str, name: Option<&str>) -> anyhow::Result<Target> {
        let (type_name, name) = match (resource.split_once('/'), name) {
            (Some(_), Some(_)) => bail!(
                "there is no need to specify a resource type as a separate argument when passing \
                 arguments in resource/name form (e.g. 'mini-kcm rollout status resource/<resource_name>' \
                 instead of 'mini-kcm rollout status resource resource/<resource_name>')"
            ),
            (Some((type_name, name)), None) => (type_name, name),
            (None, Some(name)) => (resource, name),
            (None, None) => bail!(
                "a resource name is required: TYPE/NAME or TYPE NAME (e.g. deployment/web, mds/agent)"
            ),
        };
        if name.is_empty() {
            bail!("resource name may not be empty");
        }
        if name.contains('/') {
            bail!("arguments in resource/name form must have a single resource and name");
        }
        let (kind, family) = parse_type(type_name)?;
        Ok(Target {
            kind,
            family,
            name: name.to_string(),
        })
    }

    pub fn workload_kind(&self) -> WorkloadKind {
        match self.kind {
            RolloutKind::Deployment => WorkloadKind::Deployment,
            RolloutKind::DaemonSet => WorkloadKind::DaemonSet,
        }
    }

    pub fn api_resource(&self) -> ApiResource {
        self.workload_kind().api_resource(self.family)
    }

    /// The object as kubectl's name printer shows it: `deployment.apps/web`,
    /// `daemonset.minikcm.dev/agent`.
    pub fn display(&self) -> String {
        format!(
            "{}.{}/{}",
            self.workload_kind().kind().to_lowercase(),
            self.family.group(),
            self.name
        )
    }

    /// The resource as kubectl names it in per-object errors: `deployments.apps`,
    /// `daemonsets.minikcm.dev`.
    pub fn resource_group(&self) -> String {
        format!("{}.{}", self.workload_kind().plural(), self.family.group())
    }

    /// kubectl's per-object error for a patch it could not compute, e.g.
    /// `error: deployments.apps "web" is already paused`.
    pub fn object_error(&self, message: &str) -> anyhow::Error {
        anyhow!("error: {} {:?} {message}", self.resource_group(), self.name)
    }
}

/// Resolves a resource type name (without the object name) with the parser `explain` shares; a name
/// without a group means `apps/v1`, as with kubectl.
fn parse_type(type_name: &str) -> anyhow::Result<(RolloutKind, ApiFamily)> {
    let Some(KindName { kind, family }) = parse_kind_name(type_name) else {
        bail!("the server doesn't have a resource type {type_name:?}")
    };
    let family = family.unwrap_or(ApiFamily::Apps);
    match kind {
        WorkloadKind::Deployment => Ok((RolloutKind::Deployment, family)),
        WorkloadKind::DaemonSet => Ok((RolloutKind::DaemonSet, family)),
        WorkloadKind::ReplicaSet => bail!(
            "rollout is not supported for {}.{}: use a Deployment or a DaemonSet",
            kind.plural(),
            family.group()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mini_kcm_runtime::api::kinds::COPIES_GROUP;

    fn parsed(resource: &str) -> (RolloutKind, ApiFamily, String) {
        match Target::parse(resource, None) {
            Ok(t) => (t.kind, t.family, t.name),
            Err(e) => panic!("{resource}: {e}"),
        }
    }

    #[test]
    fn apps_names_singular_plural_short_and_grouped() {
        for ty in [
            "deployment",
            "deployments",
            "deploy",
            "Deployment",
            "deployment.apps",
            "deployments.apps",
            "deployments.v1.apps",
        ] {
            assert_eq!(
                parsed(&format!("{ty}/web")),
                (RolloutKind::Deployment, ApiFamily::Apps, "web".into()),
                "{ty}"
            );
        }
        for ty in [
            "daemonset",
            "daemonsets",
            "ds",
            "daemonset.apps",
            "DaemonSets.v1.apps",
        ] {
            assert_eq!(
                parsed(&format!("{ty}/agent")),
                (RolloutKind::DaemonSet, ApiFamily::Apps, "agent".into()),
                "{ty}"
            );
        }
    }

    #[test]
    fn copies_names_need_the_group_or_their_short_name() {
        for ty in [
            "deployments.minikcm.dev",
            "deployment.minikcm.dev",
            "deployments.v1.minikcm.dev",
            "mdeploy",
            "MDeploy",
        ] {
            assert_eq!(
                parsed(&format!("{ty}/web")),
                (RolloutKind::Deployment, ApiFamily::Copies, "web".into()),
                "{ty}"
            );
        }
        for ty in ["daemonsets.minikcm.dev", "daemonset.minikcm.dev", "mds"] {
            assert_eq!(
                parsed(&format!("{ty}/agent")),
                (RolloutKind::DaemonSet, ApiFamily::Copies, "agent".into()),
                "{ty}"
            );
        }
    }

    /// `explain` and `rollout` share one kind parser; this keeps it so, whatever either grows.
    #[test]
    fn every_name_rollout_accepts_explain_accepts_as_the_same_object() {
        use crate::explain::{Family, parse_target};
        use crate::kind_name::SHORT_NAMES;
        let mut names: Vec<String> = SHORT_NAMES.iter().map(|(s, ..)| s.to_string()).collect();
        for base in ["deployment", "replicaset", "daemonset"] {
            for name in [base.to_string(), format!("{base}s"), base.to_uppercase()] {
                for suffix in ["", ".apps", ".v1.apps", ".minikcm.dev", ".v1.minikcm.dev"] {
                    names.push(format!("{name}{suffix}"));
                }
            }
        }
        let mut accepted = 0;
        for ty in &names {
            let resource = format!("{ty}/web");
            let Ok(target) = Target::parse(&resource, None) else {
                continue;
            };
            accepted += 1;
            let (kind, family, name) = parse_target(&resource, None)
                .unwrap_or_else(|e| panic!("rollout takes {ty:?}, explain refuses it: {e}"));
            assert_eq!(kind.kind(), target.workload_kind().kind(), "{ty}");
            let expected = match target.family {
                ApiFamily::Apps => Family::Apps,
                ApiFamily::Copies => Family::Copies,
            };
            assert_eq!(family, expected, "{ty}");
            assert_eq!(name, "web");
        }
        // Every Deployment and DaemonSet short name, plus 2 kinds × 3 spellings × 5 suffixes.
        assert_eq!(
            accepted,
            4 + 30,
            "rollout accepted fewer names than it should"
        );
    }

    #[test]
    fn type_and_name_as_two_arguments() {
        let t = Target::parse("mdeploy", Some("web")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(t.kind, RolloutKind::Deployment);
        assert_eq!(t.family, ApiFamily::Copies);
        assert_eq!(t.name, "web");
    }

    #[test]
    fn rejects_what_kubectl_rejects() {
        let err = |resource: &str, name: Option<&str>| match Target::parse(resource, name) {
            Ok(t) => panic!("{resource} parsed as {t:?}"),
            Err(e) => e.to_string(),
        };
        assert!(err("deployment", None).contains("resource name is required"));
        assert!(err("deployment/web", Some("web")).contains("no need to specify a resource type"));
        assert!(err("deployment/", None).contains("may not be empty"));
        assert_eq!(
            err("statefulset/db", None),
            "the server doesn't have a resource type \"statefulset\""
        );
        // Short names take no group, as with kubectl's REST mapper.
        assert!(err("deploy.apps/web", None).contains("doesn't have a resource type"));
        assert!(err("replicaset/web", None).contains("replicasets.apps"));
        assert!(err("mrs/web", None).contains("replicasets.minikcm.dev"));
    }

    #[test]
    fn display_and_resource_names_like_kubectl() {
        let apps = Target::parse("deploy/web", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(apps.display(), "deployment.apps/web");
        assert_eq!(apps.resource_group(), "deployments.apps");
        let copy = Target::parse("mds/agent", None).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(copy.display(), "daemonset.minikcm.dev/agent");
        assert_eq!(copy.resource_group(), "daemonsets.minikcm.dev");
        assert_eq!(
            copy.object_error("pausing is not supported").to_string(),
            "error: daemonsets.minikcm.dev \"agent\" pausing is not supported"
        );
        assert_eq!(
            copy.api_resource().api_version,
            format!("{COPIES_GROUP}/v1")
        );
    }
}
