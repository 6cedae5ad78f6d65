//! The pinned versions of the control plane components.
//!
//! They live in ONE file, `deploy/control-plane/versions.env`, which the build script sources and this
//! crate embeds at compile time, so the Rust side and the shell side can never disagree.
//!
//! Another Kubernetes version can be chosen for one run (`mini-kcm up --kubernetes-version`, or
//! `MINI_KCM_KUBERNETES_VERSION` for the tests and the version matrix): it is cached in a version set
//! of its own beside the pinned one, with the same etcd and kwok.

use crate::PlaneError;

const VERSIONS_ENV: &str = include_str!("../../../deploy/control-plane/versions.env");

/// Picks another Kubernetes version for a run ([`VersionSet::selected`]).
pub const KUBERNETES_VERSION_VAR: &str = "MINI_KCM_KUBERNETES_VERSION";

/// The oldest Kubernetes minor mini-kcm supports (`OLDEST_SUPPORTED_MINOR` in versions.env; the manager
/// reads the same line at build time; docs/versions-and-gates.md#supported-kubernetes-versions).
pub fn oldest_supported_minor() -> Result<u32, PlaneError> {
    let value = lookup(VERSIONS_ENV, "OLDEST_SUPPORTED_MINOR")?;
    value.parse().map_err(|_| {
        PlaneError::Versions(format!(
            "OLDEST_SUPPORTED_MINOR={value:?} is not a Kubernetes minor"
        ))
    })
}

/// The value of `key` in a versions.env text (`KEY=value`, `#` comments).
fn lookup(text: &str, key: &str) -> Result<String, PlaneError> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| line.split_once('='))
        .find(|(k, _)| k.trim() == key)
        .map(|(_, v)| v.trim().trim_matches('"').to_string())
        .filter(|v| !v.is_empty())
        .ok_or_else(|| PlaneError::Versions(format!("{key} missing in versions.env")))
}

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
            lookup(text, key).and_then(|v| {
                if v.starts_with('v') {
                    Ok(v)
                } else {
                    Err(PlaneError::Versions(format!(
                        "{key}={v} is not of the form vX.Y.Z"
                    )))
                }
            })
        };
        Ok(VersionSet {
            kubernetes: lookup("KUBERNETES_VERSION")?,
            etcd: lookup("ETCD_VERSION")?,
            kwok: lookup("KWOK_VERSION")?,
        })
    }

    /// The pinned versions, with the Kubernetes version of `$MINI_KCM_KUBERNETES_VERSION` when it is set
    /// and not empty (how the tests and `deploy/version-matrix.sh` pick another version).
    pub fn selected() -> Result<Self, PlaneError> {
        let pinned = Self::pinned()?;
        match std::env::var(KUBERNETES_VERSION_VAR) {
            Ok(v) if !v.trim().is_empty() => pinned.with_kubernetes(&v),
            _ => Ok(pinned),
        }
    }

    /// This set with another Kubernetes version (`1.35.4` or `v1.35.4`; the oldest supported minor and
    /// later).
    pub fn with_kubernetes(mut self, version: &str) -> Result<Self, PlaneError> {
        let oldest = oldest_supported_minor()?;
        let version = version.trim();
        let bare = version.strip_prefix('v').unwrap_or(version);
        let parts: Vec<&str> = bare.split('.').collect();
        let numbers: Option<Vec<u32>> = parts.iter().map(|p| p.parse().ok()).collect();
        match numbers.as_deref() {
            Some([1, minor, _]) if *minor >= oldest => {
                self.kubernetes = format!("v{bare}");
                Ok(self)
            }
            Some([1, _, _]) => Err(PlaneError::UnsupportedVersion(format!(
                "Kubernetes {version} is older than the oldest supported minor, 1.{oldest} (upstream \
                 supports the newest three minors)"
            ))),
            _ => Err(PlaneError::UnsupportedVersion(format!(
                "{version:?} is not a Kubernetes version of the form 1.X.Y"
            ))),
        }
    }

    /// The minor of the Kubernetes version (`36` for v1.36.3).
    pub fn kubernetes_minor(&self) -> Option<u32> {
        self.kubernetes
            .split('.')
            .nth(1)
            .and_then(|m| m.parse().ok())
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
        assert!(v.kubernetes.starts_with("v1.37."), "{v:?}");
        assert!(v.etcd.starts_with("v3.7."), "{v:?}");
        assert_eq!(oldest_supported_minor().unwrap(), 35);
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

    #[test]
    fn another_kubernetes_version_keeps_etcd_and_kwok() {
        let pinned = VersionSet::pinned().unwrap();
        let v = pinned.clone().with_kubernetes("1.35.4").unwrap();
        assert_eq!(v.kubernetes, "v1.35.4");
        assert_eq!(v.kubernetes_minor(), Some(35));
        assert_eq!((&v.etcd, &v.kwok), (&pinned.etcd, &pinned.kwok));
        assert_eq!(
            pinned
                .clone()
                .with_kubernetes("v1.36.3")
                .unwrap()
                .kubernetes,
            "v1.36.3"
        );
        for bad in ["1.34.4", "1.33.9", "1.35", "latest", "2.0.0"] {
            assert!(pinned.clone().with_kubernetes(bad).is_err(), "{bad}");
        }
        let refused = pinned.with_kubernetes("1.34.4").unwrap_err().to_string();
        assert!(
            refused.contains("older than the oldest supported minor, 1.35"),
            "{refused}"
        );
    }
}
