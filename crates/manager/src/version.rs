//! What this build is: `mini-kcm version`, the metrics every Kubernetes component exports about
//! itself (build info, process CPU/memory/file descriptors), and when the process started.

use std::time::{Duration, SystemTime};

use prometheus::Registry;

/// The version of this build.
#[derive(Debug, Clone, Copy)]
pub struct Version {
    pub version: &'static str,
    pub git_revision: &'static str,
    /// The Kubernetes release whose controllers mini-kcm mirrors (and whose plane the tests run).
    pub kubernetes_version: &'static str,
}

/// The compiler that built this binary (`rustc --version`, from build.rs), `/statusz`'s toolchain.
pub(crate) const RUSTC_VERSION: &str = match option_env!("MINI_KCM_RUSTC_VERSION") {
    Some(version) => version,
    // Only a stale build script's output lacks it; say so rather than fail the build.
    None => "rustc (unknown version)",
};

/// The oldest Kubernetes minor mini-kcm supports (`OLDEST_SUPPORTED_MINOR` in versions.env, from build.rs);
/// `None` only for a build without that file.
pub(crate) fn oldest_supported_minor() -> Option<u32> {
    env!("MINI_KCM_OLDEST_SUPPORTED_MINOR").parse().ok()
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

/// When this process started: the process collector's `process_start_time_seconds` where there is one
/// (Linux), else now (the manager starts right after the process does).
pub(crate) fn process_start_time(registry: &Registry) -> SystemTime {
    registry
        .gather()
        .iter()
        .filter(|family| family.name() == "process_start_time_seconds")
        .filter_map(|family| {
            family
                .get_metric()
                .first()
                .map(|m| m.get_gauge().get_value())
        })
        .find(|seconds| seconds.is_finite() && *seconds > 0.0)
        .map_or_else(SystemTime::now, |seconds| {
            SystemTime::UNIX_EPOCH + Duration::from_secs_f64(seconds)
        })
}
