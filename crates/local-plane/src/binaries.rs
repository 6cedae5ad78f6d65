//! The control plane's executables, built once from Go modules and cached outside the repository.
//!
//! The build itself is `deploy/control-plane/build.sh` (embedded here so the `mini-kcm` binary works from
//! any directory). It is idempotent: a complete cached version set is recognised in well under a second.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use crate::{PlaneError, VersionSet};

const BUILD_SCRIPT: &str = include_str!("../../../deploy/control-plane/build.sh");

/// Every executable the local control plane needs, in one cache directory.
#[derive(Debug, Clone)]
pub struct Binaries {
    dir: PathBuf,
    versions: VersionSet,
}

impl Binaries {
    /// The root of the cache: `$MINI_KCM_CACHE`, else `$HOME/.cache/mini-kcm`.
    pub fn cache_root() -> PathBuf {
        if let Some(dir) = std::env::var_os("MINI_KCM_CACHE").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir);
        }
        let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
        PathBuf::from(home).join(".cache").join("mini-kcm")
    }

    /// Builds whatever is missing (printing progress on the inherited stdout/stderr) and returns the set.
    pub async fn ensure(versions: &VersionSet) -> Result<Self, PlaneError> {
        let dir = Self::cache_root().join(versions.name()).join("bin");
        let status = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(BUILD_SCRIPT)
            .arg("mini-kcm-build-plane")
            .envs(versions.as_env())
            .env("MINI_KCM_CACHE", Self::cache_root())
            .stdin(Stdio::null())
            .status()
            .await
            .map_err(|e| match e.kind() {
                std::io::ErrorKind::NotFound => PlaneError::MissingTool {
                    tool: "bash",
                    hint: "install bash to build the control plane",
                },
                _ => PlaneError::io("running the control plane build script", e),
            })?;
        if !status.success() {
            return Err(PlaneError::Build {
                status: status
                    .code()
                    .map_or_else(|| "signal".into(), |c| c.to_string()),
            });
        }
        Ok(Binaries {
            dir,
            versions: versions.clone(),
        })
    }

    /// The folder holding the executables.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The versions these executables were built from.
    pub fn versions(&self) -> &VersionSet {
        &self.versions
    }

    /// The path of one executable (`etcd`, `kube-apiserver`, `kubectl`, `kwok`, ...).
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}
