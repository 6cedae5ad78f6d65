//! One control plane per test binary.
//!
//! Each `#[tokio::test]` has its own runtime, which ends with the test; a plane must outlive them all.
//! So the plane is started and owned by a dedicated thread with its own runtime that never ends, and tests
//! only share its [`PlaneInfo`] (kubeconfig, logs) and build their own clients.

use mini_kcm_local_plane::{
    Binaries, DEFAULT_LOG_FILTER, LocalPlane, PlaneInfo, PlaneOptions, UpstreamWorkloadControllers,
    VersionSet,
};
use std::sync::OnceLock;

/// What the plane of a test binary looks like. The first call of [`shared_plane`] decides.
#[derive(Debug, Clone, Copy)]
pub struct PlaneConfig {
    pub nodes: usize,
    pub upstream_workload_controllers: UpstreamWorkloadControllers,
}

impl Default for PlaneConfig {
    fn default() -> Self {
        PlaneConfig {
            nodes: 3,
            upstream_workload_controllers: UpstreamWorkloadControllers::Disabled,
        }
    }
}

/// The plane of this test binary, started on first use. Panics (failing the test) with the reason if it
/// cannot start.
pub fn shared_plane(config: PlaneConfig) -> &'static PlaneInfo {
    static PLANE: OnceLock<Result<PlaneInfo, String>> = OnceLock::new();
    let result = PLANE.get_or_init(|| start_owned_plane(config));
    match result {
        Ok(info) => info,
        Err(e) => panic!("the shared test control plane did not start: {e}"),
    }
}

fn start_owned_plane(config: PlaneConfig) -> Result<PlaneInfo, String> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_LOG_FILTER)),
        )
        .with_test_writer()
        .try_init();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("mini-kcm-test-plane".into())
        .spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(format!("building a runtime: {e}")));
                    return;
                }
            };
            runtime.block_on(async move {
                let started = async {
                    let binaries = Binaries::ensure(&VersionSet::selected()?).await?;
                    let mut options = PlaneOptions::new(binaries);
                    options.nodes = config.nodes;
                    options.upstream_workload_controllers = config.upstream_workload_controllers;
                    LocalPlane::start(options).await
                }
                .await;
                match started {
                    Ok(plane) => {
                        let (requests, served) = tokio::sync::mpsc::unbounded_channel();
                        crate::faults::install(requests, &plane);
                        let _ = tx.send(Ok(plane.info().clone()));
                        // Keep the plane (and this runtime) alive until the test binary exits,
                        // applying the faults tests ask for.
                        crate::faults::serve(plane, served).await;
                    }
                    Err(e) => {
                        let _ = tx.send(Err(mini_kcm_runtime::controller::worker::error_chain(&e)));
                    }
                }
            });
        })
        .map_err(|e| format!("spawning the plane thread: {e}"))?;
    rx.recv()
        .map_err(|_| "the plane thread ended without an answer".to_string())?
}
