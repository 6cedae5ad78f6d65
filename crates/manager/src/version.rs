//! What this build is: `mini-kcm version`, and the metrics every Kubernetes component exports about
//! itself (build info, process CPU/memory/file descriptors).

use prometheus::Registry;

/// The version of this build.
#[derive(Debug, Clone, Copy)]
pub struct Version {
    pub version: &'static str,
    pub git_revision: &'static str,
    /// The Kubernetes release whose controllers mini-kcm mirrors (and whose plane the tests run).
    pub kubernetes_version: &'static str,
}

pub const VERSION: Version = Version {
    version: env!("CARGO_PKG_VERSION"),
    git_revision: env!("MINI_KCM_GIT_REVISION"),
    kubernetes_version: env!("MINI_KCM_KUBERNETES_VERSION"),
};

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "mini-kcm v{} (git {}), mirrors Kubernetes {} kube-controller-manager",
            self.version, self.git_revision, self.kubernetes_version
        )
    }
}

/// `process_*` (CPU seconds, resident memory, open fds, start time) and `mini_kcm_build_info`.
pub(crate) fn register_process_and_build_info(
    registry: &Registry,
) -> Result<(), prometheus::Error> {
    registry.register(Box::new(
        prometheus::process_collector::ProcessCollector::for_self(),
    ))?;
    let info = prometheus::IntGaugeVec::new(
        prometheus::Opts::new(
            "mini_kcm_build_info",
            "A metric with a constant '1' value labeled by version, git revision and the mirrored Kubernetes version.",
        ),
        &["version", "git_revision", "kubernetes_version"],
    )?;
    info.with_label_values(&[
        VERSION.version,
        VERSION.git_revision,
        VERSION.kubernetes_version,
    ])
    .set(1);
    registry.register(Box::new(info))?;
    Ok(())
}
