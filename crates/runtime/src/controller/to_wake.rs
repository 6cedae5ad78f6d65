//! Which owners a child's event concerns: the routing every controller's child handler needs (pods for
//! ReplicaSets and DaemonSets, ControllerRevisions for DaemonSets, ReplicaSets for Deployments), written
//! once so the four handlers cannot drift apart.
//!
//! The rule, as upstream's handlers have it:
//! - a child with a controller reference concerns that controller only, and only if it is one of ours
//!   (kind, name and UID: [`Owners::controller_of`]);
//! - when the controller reference changed, the former controller must look again too (it lost a child);
//! - an orphan that is new, or whose labels or controller reference changed, concerns every owner whose
//!   selector matches it ([`Owners::selecting`]): any of them may adopt it.
//!
//! A deleted child concerns only its controller ([`Owners::controller_of`] again). What a handler does
//! besides waking (counting an expected creation, a delayed look for `minReadySeconds`) stays with it.

use std::fmt::Debug;
use std::sync::Arc;

use kube::Resource;
use kube::api::ObjectMeta;
use serde::de::DeserializeOwned;

use super::owners::Owners;
use crate::api::kinds::controller_ref;

/// The owners one child event concerns, by why.
#[derive(Debug)]
pub struct ToWake<K> {
    /// The owner the child's old controller reference named, when the reference changed.
    pub former_controller: Option<Arc<K>>,
    /// The owner the child's controller reference names now, if it is one of ours.
    pub controller: Option<Arc<K>>,
    /// For an orphan that is new or whose labels or reference changed: every owner selecting it.
    pub adopters: Vec<Arc<K>>,
}

impl<K> ToWake<K> {
    /// Every owner to wake: the former controller, the controller, then the possible adopters.
    pub fn all(&self) -> impl Iterator<Item = &Arc<K>> {
        self.former_controller
            .iter()
            .chain(self.controller.iter())
            .chain(self.adopters.iter())
    }
}

impl<K> Owners<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// The owners a child added (`old` is `None`) or updated from `old` to `new` concerns.
    pub fn to_wake(&self, old: Option<&ObjectMeta>, new: &ObjectMeta) -> ToWake<K> {
        let reference_changed = old.is_some_and(|old| controller_ref(old) != controller_ref(new));
        let former_controller = old
            .filter(|_| reference_changed)
            .and_then(|old| self.controller_of(old));
        if controller_ref(new).is_some() {
            return ToWake {
                former_controller,
                controller: self.controller_of(new),
                adopters: Vec::new(),
            };
        }
        let labels_changed = old.is_none_or(|old| old.labels != new.labels);
        let adopters = if labels_changed || reference_changed {
            self.selecting(new)
        } else {
            Vec::new()
        };
        ToWake {
            former_controller,
            controller: None,
            adopters,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use k8s_openapi::api::apps::v1::ReplicaSetSpec;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};

    use super::*;
    use crate::api::kinds::{ApiFamily, ReplicaSetObject, WorkloadKind, workload_informer};
    use crate::informers::SharedInformers;

    /// ReplicaSets `web` (selects app=web), `web-2` (app=web too) and `db` (app=db) in `ns`.
    fn owners() -> Owners<ReplicaSetObject> {
        let client = crate::recorded_api::RecordedApi::new().client();
        let informers = SharedInformers::new(client, None);
        let resource = WorkloadKind::ReplicaSet.api_resource(ApiFamily::Apps);
        let cache = workload_informer(&informers, WorkloadKind::ReplicaSet, ApiFamily::Apps);
        for (name, app) in [("web", "web"), ("web-2", "web"), ("db", "db")] {
            let mut rs = ReplicaSetObject::new(
                name,
                &resource,
                ReplicaSetSpec {
                    selector: LabelSelector {
                        match_labels: Some(labels(app)),
                        ..Default::default()
                    },
                    ..Default::default()
                },
            );
            rs.metadata.namespace = Some("ns".into());
            rs.metadata.uid = Some(format!("uid-{name}"));
            cache.cache_insert(rs);
        }
        Owners::new(cache, resource, |rs| &rs.spec.selector)
    }

    fn labels(app: &str) -> BTreeMap<String, String> {
        BTreeMap::from([("app".to_string(), app.to_string())])
    }

    /// A pod labelled app=`app`, controlled by the ReplicaSet `owner` (name, UID) when given.
    fn pod(app: &str, owner: Option<(&str, &str)>) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".into()),
            namespace: Some("ns".into()),
            labels: Some(labels(app)),
            owner_references: owner.map(|(name, uid)| {
                vec![OwnerReference {
                    api_version: "apps/v1".into(),
                    kind: "ReplicaSet".into(),
                    name: name.into(),
                    uid: uid.into(),
                    controller: Some(true),
                    block_owner_deletion: Some(true),
                }]
            }),
            ..Default::default()
        }
    }

    fn names(owners: &[Arc<ReplicaSetObject>]) -> BTreeSet<String> {
        owners
            .iter()
            .map(|rs| rs.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    fn name(owner: &Option<Arc<ReplicaSetObject>>) -> Option<String> {
        owner.as_ref().and_then(|rs| rs.metadata.name.clone())
    }

    fn everyone(wake: &ToWake<ReplicaSetObject>) -> Vec<String> {
        wake.all()
            .map(|rs| rs.metadata.name.clone().unwrap_or_default())
            .collect()
    }

    #[tokio::test]
    async fn a_new_owned_child_wakes_only_its_controller() {
        let owners = owners();
        let wake = owners.to_wake(None, &pod("web", Some(("web", "uid-web"))));
        assert_eq!(everyone(&wake), ["web"]);
        assert_eq!(name(&wake.controller).as_deref(), Some("web"));
    }

    #[tokio::test]
    async fn a_child_of_someone_else_wakes_nobody() {
        let owners = owners();
        // Same name, other UID: a re-created owner, or the other family's.
        let stranger = pod("web", Some(("web", "uid-of-another")));
        assert_eq!(
            everyone(&owners.to_wake(None, &stranger)),
            Vec::<String>::new()
        );
        let updated = owners.to_wake(Some(&stranger), &stranger);
        assert_eq!(everyone(&updated), Vec::<String>::new());
    }

    #[tokio::test]
    async fn a_new_orphan_wakes_every_owner_selecting_it() {
        let owners = owners();
        let wake = owners.to_wake(None, &pod("web", None));
        assert!(wake.controller.is_none());
        assert_eq!(
            names(&wake.adopters),
            BTreeSet::from(["web".into(), "web-2".into()])
        );
    }

    #[tokio::test]
    async fn an_unchanged_orphan_wakes_nobody() {
        let owners = owners();
        let orphan = pod("web", None);
        assert_eq!(
            everyone(&owners.to_wake(Some(&orphan), &orphan)),
            Vec::<String>::new()
        );
    }

    #[tokio::test]
    async fn an_orphan_whose_labels_changed_wakes_the_owners_selecting_its_new_labels() {
        let owners = owners();
        let wake = owners.to_wake(Some(&pod("web", None)), &pod("db", None));
        assert_eq!(everyone(&wake), ["db"]);
    }

    #[tokio::test]
    async fn a_changed_controller_reference_wakes_the_former_controller_too() {
        let owners = owners();
        let wake = owners.to_wake(
            Some(&pod("web", Some(("web", "uid-web")))),
            &pod("web", Some(("web-2", "uid-web-2"))),
        );
        assert_eq!(name(&wake.former_controller).as_deref(), Some("web"));
        assert_eq!(name(&wake.controller).as_deref(), Some("web-2"));
        assert!(wake.adopters.is_empty());
        assert_eq!(everyone(&wake), ["web", "web-2"]);
    }

    #[tokio::test]
    async fn a_released_child_wakes_its_former_controller_and_every_possible_adopter() {
        let owners = owners();
        // Same labels: only the dropped reference makes it an orphan to adopt.
        let wake = owners.to_wake(
            Some(&pod("web", Some(("web", "uid-web")))),
            &pod("web", None),
        );
        assert_eq!(name(&wake.former_controller).as_deref(), Some("web"));
        assert!(wake.controller.is_none());
        assert_eq!(
            names(&wake.adopters),
            BTreeSet::from(["web".into(), "web-2".into()])
        );
    }

    #[tokio::test]
    async fn an_owned_child_whose_labels_changed_wakes_only_its_controller() {
        let owners = owners();
        let wake = owners.to_wake(
            Some(&pod("web", Some(("web", "uid-web")))),
            &pod("db", Some(("web", "uid-web"))),
        );
        assert_eq!(everyone(&wake), ["web"]);
    }
}
