//! Workload kind names as the command line takes them, for every subcommand that names an object
//! (`rollout`, `explain`): one parser, so a name one of them accepts the other accepts too.
//!
//! kubectl resolves `TYPE` through API discovery; the six resources we know are resolved locally (no
//! discovery round trip, and the CRD copies need no special casing):
//!
//! - singular and plural names (`deployment`, `replicasets`, ...), case-insensitive, optionally with a
//!   group suffix: `.apps` / `.v1.apps` names `apps/v1`, `.minikcm.dev` / `.v1.minikcm.dev` the copies;
//! - short names, only without a group (as kubectl's REST mapper): `deploy`, `rs`, `ds` (no family of
//!   their own), and the copies' `mdeploy`, `mrs`, `mds`.

use mini_kcm_crds::names::{DAEMON_SET_SHORT_NAME, DEPLOYMENT_SHORT_NAME, REPLICA_SET_SHORT_NAME};
use mini_kcm_runtime::api::kinds::{ApiFamily, COPIES_GROUP, WorkloadKind};

/// Short names: the apps/v1 ones say no family (like a plain `deployment`), the copies' say theirs.
pub const SHORT_NAMES: &[(&str, WorkloadKind, Option<ApiFamily>)] = &[
    ("deploy", WorkloadKind::Deployment, None),
    ("rs", WorkloadKind::ReplicaSet, None),
    ("ds", WorkloadKind::DaemonSet, None),
    (
        DEPLOYMENT_SHORT_NAME,
        WorkloadKind::Deployment,
        Some(ApiFamily::Copies),
    ),
    (
        REPLICA_SET_SHORT_NAME,
        WorkloadKind::ReplicaSet,
        Some(ApiFamily::Copies),
    ),
    (
        DAEMON_SET_SHORT_NAME,
        WorkloadKind::DaemonSet,
        Some(ApiFamily::Copies),
    ),
];

/// A kind named on the command line and the family its name says, if it says one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KindName {
    pub kind: WorkloadKind,
    /// `None` for a name without a group (`deployment`, `ds`): the caller picks its default.
    pub family: Option<ApiFamily>,
}

/// Resolves a resource type name (without the object name); `None` if it names none of our kinds.
pub fn parse_kind_name(type_name: &str) -> Option<KindName> {
    let lowered = type_name.to_ascii_lowercase();
    if let Some(&(_, kind, family)) = SHORT_NAMES.iter().find(|(short, ..)| *short == lowered) {
        return Some(KindName { kind, family });
    }
    let copies_suffixes = [format!(".v1.{COPIES_GROUP}"), format!(".{COPIES_GROUP}")];
    let (base, family) = if let Some(base) = copies_suffixes
        .iter()
        .find_map(|suffix| lowered.strip_suffix(suffix.as_str()))
    {
        (base, Some(ApiFamily::Copies))
    } else if let Some(base) = lowered
        .strip_suffix(".v1.apps")
        .or_else(|| lowered.strip_suffix(".apps"))
    {
        (base, Some(ApiFamily::Apps))
    } else {
        (lowered.as_str(), None)
    };
    let kind = [
        WorkloadKind::Deployment,
        WorkloadKind::ReplicaSet,
        WorkloadKind::DaemonSet,
    ]
    .into_iter()
    .find(|kind| base == kind.kind().to_ascii_lowercase() || base == kind.plural())?;
    Some(KindName { kind, family })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_singular_plural_grouped_and_short() {
        let parsed = |name| parse_kind_name(name).map(|k| (k.kind, k.family));
        assert_eq!(
            parsed("Deployments"),
            Some((WorkloadKind::Deployment, None))
        );
        assert_eq!(
            parsed("replicaset.v1.apps"),
            Some((WorkloadKind::ReplicaSet, Some(ApiFamily::Apps)))
        );
        assert_eq!(
            parsed("daemonsets.minikcm.dev"),
            Some((WorkloadKind::DaemonSet, Some(ApiFamily::Copies)))
        );
        assert_eq!(
            parsed("MDeploy"),
            Some((WorkloadKind::Deployment, Some(ApiFamily::Copies)))
        );
        assert_eq!(parsed("rs"), Some((WorkloadKind::ReplicaSet, None)));
        // Short names take no group; unknown kinds are unknown.
        assert_eq!(parsed("deploy.apps"), None);
        assert_eq!(parsed("mds.minikcm.dev"), None);
        assert_eq!(parsed("statefulset"), None);
    }
}
