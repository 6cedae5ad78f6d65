//! [`ObjectKey`]: which object a work item is about.
//!
//! Upstream's queues carry `"namespace/name"` strings that every sync splits again. A typed key is built
//! once from an object's metadata, cannot be malformed, and is what the work queue, the expectations and
//! the consistency store are indexed by. It prints as upstream's string (`namespace/name`), so logs and
//! metrics read the same (a cluster-scoped object prints as its name).

use std::fmt;

use kube::api::ObjectMeta;

/// The namespace and name of an object (the namespace is empty for cluster-scoped objects).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    namespace: String,
    name: String,
}

impl ObjectKey {
    /// The key of `namespace/name`; an empty `namespace` for a cluster-scoped object.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// The key of the object with this metadata (absent fields read as empty, as upstream's key func).
    pub fn of(meta: &ObjectMeta) -> Self {
        ObjectKey::new(
            meta.namespace.clone().unwrap_or_default(),
            meta.name.clone().unwrap_or_default(),
        )
    }

    /// Its `metadata.namespace`; empty for a cluster-scoped object.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Its `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_like_upstream_keys() {
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            name: Some("web".into()),
            ..Default::default()
        };
        assert_eq!(ObjectKey::of(&meta).to_string(), "ns/web");
        assert_eq!(ObjectKey::new("", "node-1").to_string(), "node-1");
        assert_eq!(ObjectKey::of(&meta), ObjectKey::new("ns", "web"));
    }
}
