//! The cache behind an informer: objects by `namespace/name`, plus secondary indexes.

use std::collections::HashMap;
use std::sync::Arc;

use kube::Resource;

/// The cache key of an object: `namespace/name`, or `name` for cluster-scoped objects (client-go's
/// `MetaNamespaceKeyFunc`). The controllers' queues use the typed `crate::controller::ObjectKey`.
pub(crate) type CacheKey = String;

/// The cache key of an object.
pub(crate) fn key_of<K: Resource>(object: &K) -> CacheKey {
    let meta = object.meta();
    cache_key(
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}

/// The cache key of `namespace/name` (`namespace` empty: a cluster-scoped object).
pub(crate) fn cache_key(namespace: &str, name: &str) -> CacheKey {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

/// A secondary index: a function from an object to the index values it is filed under.
pub(crate) type IndexFn<K> = Arc<dyn Fn(&K) -> Vec<String> + Send + Sync>;

/// The objects filed under one index value, by their shared keys.
type Filed<K> = HashMap<Arc<str>, Arc<K>>;

/// The objects by key and by index value. An object's key is allocated once and shared (`Arc<str>`) by
/// the map and every index entry of the object: with one pod index by owner and one by node, a pod's key
/// is kept once instead of three times.
pub(crate) struct Store<K> {
    objects: HashMap<Arc<str>, Arc<K>>,
    index_fns: HashMap<&'static str, IndexFn<K>>,
    /// Index name → value → the objects filed under it. The entries hold the objects themselves (one more
    /// pointer each) so that a lookup by index, which every sync does, needs no second lookup per object.
    indexes: HashMap<&'static str, HashMap<String, Filed<K>>>,
}

impl<K: Resource> Store<K> {
    pub(crate) fn new(index_fns: HashMap<&'static str, IndexFn<K>>) -> Self {
        let indexes = index_fns
            .keys()
            .map(|name| (*name, HashMap::new()))
            .collect();
        Store {
            objects: HashMap::new(),
            index_fns,
            indexes,
        }
    }

    pub(crate) fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.get(key).cloned()
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(|key| &**key)
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<K>> {
        self.objects.values()
    }

    pub(crate) fn len(&self) -> usize {
        self.objects.len()
    }

    /// Inserts or replaces; returns the previous version.
    pub(crate) fn upsert(&mut self, key: CacheKey, object: Arc<K>) -> Option<Arc<K>> {
        // An object already cached keeps its shared key.
        let key: Arc<str> = match self.objects.get_key_value(key.as_str()) {
            Some((shared, _)) => shared.clone(),
            None => key.into(),
        };
        let old = self.objects.insert(key.clone(), object.clone());
        if let Some(old) = &old {
            self.unindex(&key, old);
        }
        self.index(&key, &object);
        old
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<Arc<K>> {
        let old = self.objects.remove(key)?;
        self.unindex(key, &old);
        Some(old)
    }

    /// Objects filed under `value` in index `index` (empty for an unknown index).
    pub(crate) fn by_index(&self, index: &str, value: &str) -> Vec<Arc<K>> {
        self.indexes
            .get(index)
            .and_then(|values| values.get(value))
            .map(|objects| objects.values().cloned().collect())
            .unwrap_or_default()
    }

    pub(crate) fn has_index(&self, index: &str) -> bool {
        self.indexes.contains_key(index)
    }

    fn index(&mut self, key: &Arc<str>, object: &Arc<K>) {
        for (name, index_fn) in &self.index_fns {
            let Some(values) = self.indexes.get_mut(name) else {
                continue;
            };
            for value in index_fn(object) {
                values
                    .entry(value)
                    .or_default()
                    .insert(key.clone(), object.clone());
            }
        }
    }

    fn unindex(&mut self, key: &str, object: &K) {
        for (name, index_fn) in &self.index_fns {
            let Some(values) = self.indexes.get_mut(name) else {
                continue;
            };
            for value in index_fn(object) {
                if let Some(objects) = values.get_mut(&value) {
                    objects.remove(key);
                    if objects.is_empty() {
                        values.remove(&value);
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::cached::{CachedPod, CachedPodSpec};
    use kube::api::ObjectMeta;

    fn pod(ns: &str, name: &str, node: &str) -> Arc<CachedPod> {
        Arc::new(CachedPod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                ..Default::default()
            },
            spec: Some(CachedPodSpec {
                node_name: Some(node.into()),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn by_node() -> IndexFn<CachedPod> {
        Arc::new(|p: &CachedPod| {
            p.spec
                .as_ref()
                .and_then(|s| s.node_name.clone())
                .into_iter()
                .collect()
        })
    }

    #[test]
    fn indexes_follow_updates_and_removals() {
        let mut store = Store::new(HashMap::from([("node", by_node())]));
        store.upsert("a/p1".into(), pod("a", "p1", "n1"));
        store.upsert("a/p2".into(), pod("a", "p2", "n1"));
        assert_eq!(store.by_index("node", "n1").len(), 2);
        store.upsert("a/p1".into(), pod("a", "p1", "n2"));
        assert_eq!(store.by_index("node", "n1").len(), 1);
        assert_eq!(store.by_index("node", "n2").len(), 1);
        // A lookup by index returns the current version of an object.
        let mut relabelled = pod("a", "p2", "n1");
        Arc::make_mut(&mut relabelled).metadata.labels = Some([("v".into(), "2".into())].into());
        store.upsert("a/p2".into(), relabelled.clone());
        assert!(Arc::ptr_eq(&store.by_index("node", "n1")[0], &relabelled));
        store.remove("a/p2");
        assert!(store.by_index("node", "n1").is_empty());
        assert_eq!(key_of(pod("a", "p1", "n").as_ref()), "a/p1");
    }

    #[test]
    fn an_object_and_its_index_entries_share_one_key() {
        let mut store = Store::new(HashMap::from([("node", by_node())]));
        store.upsert("a/p1".into(), pod("a", "p1", "n1"));
        store.upsert("a/p1".into(), pod("a", "p1", "n2"));
        let (key, _) = store.objects.get_key_value("a/p1").expect("cached");
        let indexed = store.indexes["node"]["n2"].keys().next().expect("indexed");
        assert!(Arc::ptr_eq(key, indexed));
        assert_eq!(Arc::strong_count(key), 2, "the map and one index entry");
    }

    #[test]
    fn a_cluster_scoped_object_is_cached_under_its_name() {
        let node = k8s_openapi::api::core::v1::Node {
            metadata: ObjectMeta {
                name: Some("node-1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        assert_eq!(key_of(&node), "node-1");
        assert_eq!(cache_key("", "node-1"), key_of(&node));
        assert_eq!(cache_key("a", "p1"), "a/p1");
    }
}
