//! The pinned versions of the control plane components.
//!
//! They live in ONE file, `deploy/control-plane/versions.env`, which the build script sources and this
//! crate embeds at compile time, so the Rust side and the shell side can never disagree.

use crate::PlaneError;

const VERSIONS_ENV: &str = include_str!("../../../deploy/control-plane/versions.env");

/// The versions of Kubernetes (apiserver, scheduler, controller-manager, kubectl), etcd and kwok.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionSet {
    pub kubernetes: String,
    pub etcd: String,
    pub kwok: String,
}

impl VersionSet {
    /// The versions pinned in `deploy/control-plane/versions.env`.
    pub fn pinned() -> Result<Self, PlaneError> {
        Self::parse(VERSIONS_ENV)
    }

    fn parse(text: &str) -> Result<Self, PlaneError> {
        let lookup = |key: &str| {
            text.lines()
                .map(str::trim)
                .filter(|line| !line.starts_with('#'))
                .filter_map(|line| line.split_once('='))
                .find(|(k, _)| k.trim() == key)
                .map(|(_, v)| v.trim().trim_matches('"').to_string())
                .filter(|v| v.starts_with('v'))
                .ok_or_else(|| {
                    PlaneError::Versions(format!("{key} missing or not of the form vX.Y.Z"))
                })
        };
        Ok(VersionSet {
            kubernetes: lookup("KUBERNETES_VERSION")?,
            etcd: lookup("ETCD_VERSION")?,
            kwok: lookup("KWOK_VERSION")?,
        })
    }

    /// The name of this version set's folder in the binary cache.
    pub fn name(&self) -> String {
        format!(
            "k8s-{}_etcd-{}_kwok-{}",
            self.kubernetes, self.etcd, self.kwok
        )
    }

    /// The environment the build script reads the versions from.
    pub fn as_env(&self) -> [(&'static str, &str); 3] {
        [
            ("KUBERNETES_VERSION", &self.kubernetes),
            ("ETCD_VERSION", &self.etcd),
            ("KWOK_VERSION", &self.kwok),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pinned_versions_parse() {
        let v = VersionSet::pinned().expect("versions.env parses");
        assert!(v.kubernetes.starts_with("v1.36."), "{v:?}");
        assert!(v.etcd.starts_with("v3.6."), "{v:?}");
        assert_eq!(v.kwok, "v0.8.0");
        assert_eq!(
            v.name(),
            format!("k8s-{}_etcd-{}_kwok-v0.8.0", v.kubernetes, v.etcd)
        );
    }

    #[test]
    fn missing_key_is_an_error() {
        let err =
            VersionSet::parse("KUBERNETES_VERSION=v1.36.3\nETCD_VERSION=v3.6.1\n").unwrap_err();
        assert!(err.to_string().contains("KWOK_VERSION"), "{err}");
    }
}
