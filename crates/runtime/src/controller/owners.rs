//! Owner lookup: from a child (a pod, a ReplicaSet) to the controller objects it belongs to or that may
//! adopt it — the part of upstream's handlers and `ControllerRefManager` that every controller repeats.
//!
//! - [`Owners::controller_of`]: the owner a child's controller reference names, if it is one of ours:
//!   same kind, found by name in the child's namespace in the cache, and the same UID. As upstream, the
//!   reference's API group is not compared: the UID names exactly one object, so a same-named owner of
//!   the other family (`apps/v1` and `minikcm.dev` share pods), or a re-created owner, is never taken
//!   for ours, and a reference written with an older group version still resolves;
//! - [`Owners::selecting`]: for an orphan, every owner in its namespace whose non-empty selector matches
//!   its (non-empty) labels — each may adopt it;
//! - [`Owners::recheck`]: the uncached read before the first adoption of a claim pass, so nothing is
//!   adopted for an owner that is gone, re-created or being deleted (the cache may lag). A learner may
//!   switch it off (`mini-kcm up --without adoption-recheck`, `crate::switches::safeties`) to watch what it prevents.

use std::fmt::Debug;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, OwnerReference};
use kube::Resource;
use kube::api::ObjectMeta;
use kube::discovery::ApiResource;
use serde::de::DeserializeOwned;

use crate::api::kinds::controller_ref;
use crate::api::selector::Selector;
use crate::api::tracked_api::TrackedApi;
use crate::controller::ownership::AdoptionRefused;
use crate::informers::Informer;
use crate::switches::safeties::{Safeties, Safety};

/// The owners of one kind (and family) as a controller sees them: its cache of them and how to read
/// their selector.
pub struct Owners<K: Resource> {
    cache: Informer<K>,
    resource: ApiResource,
    selector_of: fn(&K) -> &LabelSelector,
    /// Whether [`Owners::recheck`] reads the owner fresh (always, unless a learner switched it off).
    recheck_before_adoption: bool,
}

impl<K: Resource> Clone for Owners<K> {
    fn clone(&self) -> Self {
        Owners {
            cache: self.cache.clone(),
            resource: self.resource.clone(),
            selector_of: self.selector_of,
            recheck_before_adoption: self.recheck_before_adoption,
        }
    }
}

/// The owners' cache reads through: `owners.get(namespace, name)`, `owners.list()`, ...
impl<K: Resource> std::ops::Deref for Owners<K> {
    type Target = Informer<K>;

    fn deref(&self) -> &Informer<K> {
        &self.cache
    }
}

impl<K> Owners<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    /// `resource` names the owners' kind and API group; `selector_of` reads an owner's `spec.selector`.
    pub fn new(
        cache: Informer<K>,
        resource: ApiResource,
        selector_of: fn(&K) -> &LabelSelector,
    ) -> Self {
        Owners {
            cache,
            resource,
            selector_of,
            recheck_before_adoption: true,
        }
    }

    /// The same owners, with the adoption re-check as `safeties` say.
    pub fn with_safeties(mut self, safeties: &Safeties) -> Self {
        self.recheck_before_adoption = safeties.is_on(Safety::AdoptionRecheck);
        self
    }

    /// Whether an owner reference names our kind (upstream compares the kind only; see the module header).
    pub fn is_our_kind(&self, reference: &OwnerReference) -> bool {
        reference.kind == self.resource.kind
    }

    /// The cached owner `reference` points at, for a child in `namespace`, if it is ours (kind, name and
    /// UID).
    pub(crate) fn resolve(
        &self,
        namespace: Option<&str>,
        reference: &OwnerReference,
    ) -> Option<Arc<K>> {
        if !self.is_our_kind(reference) {
            return None;
        }
        let owner = self
            .cache
            .get(namespace.unwrap_or_default(), &reference.name)?;
        (owner.meta().uid.as_deref() == Some(reference.uid.as_str())).then_some(owner)
    }

    /// The owner named by the child's controller reference, if the child has one and it is ours.
    pub fn controller_of(&self, child: &ObjectMeta) -> Option<Arc<K>> {
        self.resolve(child.namespace.as_deref(), controller_ref(child)?)
    }

    /// Owners in the child's namespace whose non-empty, valid selector matches its labels. A child
    /// without labels matches none (upstream: "no labels, no owner"). More than one is a user error,
    /// logged as upstream does; each of them gets the chance to adopt.
    pub(crate) fn selecting(&self, child: &ObjectMeta) -> Vec<Arc<K>> {
        if child.labels.as_ref().is_none_or(|l| l.is_empty()) {
            return Vec::new();
        }
        let namespace = child.namespace.as_deref().unwrap_or_default();
        let matching: Vec<_> = self
            .cache
            .list_namespace(namespace)
            .into_iter()
            .filter(|owner| {
                Selector::from_label_selector((self.selector_of)(owner))
                    .is_ok_and(|s| !s.is_empty() && s.matches_meta(child))
            })
            .collect();
        if matching.len() > 1 {
            tracing::warn!(
                object = child.name.as_deref().unwrap_or_default(),
                namespace,
                kind = %self.resource.kind,
                count = matching.len(),
                "user error: more than one {} selects this object",
                self.resource.kind
            );
        }
        matching
    }

    /// The uncached re-check before adopting for `owner`: a fresh GET through `api` (the owner's
    /// namespace) must find the same UID, not being deleted.
    /// Switched off, the cached owner is taken at its word: an owner whose deletion the cache does not
    /// show yet adopts anyway.
    pub async fn recheck(&self, api: &TrackedApi<K>, owner: &K) -> Result<(), AdoptionRefused> {
        if !self.recheck_before_adoption {
            return Ok(());
        }
        let name = owner.meta().name.as_deref().unwrap_or_default();
        let fresh = api.get(name).await.map_err(AdoptionRefused::Read)?;
        if fresh.meta().uid != owner.meta().uid {
            return Err(AdoptionRefused::Replaced {
                kind: self.resource.kind.clone(),
                got: fresh.meta().uid.clone(),
                wanted: owner.meta().uid.clone(),
            });
        }
        if fresh.meta().deletion_timestamp.is_some() {
            return Err(AdoptionRefused::Deleting {
                kind: self.resource.kind.clone(),
            });
        }
        Ok(())
    }
}
