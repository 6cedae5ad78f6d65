//! The e2e binary: upstream's spec packages behind mini-kcm's own test main (`deploy/conformance`), built
//! once per version set into the plane's cache by an embedded copy of `deploy/conformance/build.sh`.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use mini_kcm_local_plane::{Binaries, VersionSet};

use crate::ConformanceError;

const BUILD_SCRIPT: &str = include_str!("../../../deploy/conformance/build.sh");
const SUITE: &str = include_str!("../../../deploy/conformance/suite_test.go");

/// The built e2e binary and the plane binaries it runs beside (kubectl for the sig-cli specs).
#[derive(Debug, Clone)]
pub struct E2eBinary {
    pub path: PathBuf,
    pub plane: Binaries,
}

impl E2eBinary {
    /// Builds the control plane and the e2e binary when they are not cached, and returns both.
    pub async fn ensure() -> Result<Self, ConformanceError> {
        let versions = VersionSet::selected()?;
        let plane = Binaries::ensure(&versions).await?;
        let set_dir = plane
            .dir()
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| plane.dir().to_path_buf());
        let suite = set_dir.join("conformance-suite_test.go");
        std::fs::write(&suite, SUITE)
            .map_err(|e| ConformanceError::io(format!("writing {}", suite.display()), e))?;
        let output = tokio::process::Command::new("bash")
            .arg("-c")
            .arg(BUILD_SCRIPT)
            .arg("mini-kcm-build-conformance")
            .envs(versions.as_env())
            .env("MINI_KCM_CACHE", Binaries::cache_root())
            .env("CONFORMANCE_SUITE", &suite)
            .stdin(Stdio::null())
            .stderr(Stdio::inherit())
            .output()
            .await
            .map_err(|e| ConformanceError::io("running the conformance build script", e))?;
        if !output.status.success() {
            return Err(ConformanceError::Build {
                status: output.status.to_string(),
            });
        }
        let stdout = String::from_utf8_lossy(&output.stdout);
        let path = stdout
            .lines()
            .last()
            .map(|line| PathBuf::from(line.trim()))
            .filter(|p| p.is_file())
            .ok_or_else(|| ConformanceError::Build {
                status: format!("no binary path in its output {stdout:?}"),
            })?;
        Ok(E2eBinary { path, plane })
    }
}
