//! A real Kubernetes control plane on 127.0.0.1, for demos, end-to-end tests and benchmarks.
//!
//! mini-kcm's controllers must be proven against the real API machinery (validation, patches, status
//! subresources, watch semantics, the real scheduler and garbage collector), and no Docker engine is
//! assumed. So this crate builds etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl
//! and kwok from Go modules ([`Binaries`]), and runs them as child processes ([`LocalPlane`]) with
//! simulated nodes whose pods become Running and Ready ([`nodes`], `deploy/kwok/stages.yaml`), and
//! optionally one real node (containerd, kubelet, kube-proxy) that runs real containers.
//!
//! ```no_run
//! # async fn demo() -> Result<(), mini_kcm_local_plane::PlaneError> {
//! use mini_kcm_local_plane::{Binaries, LocalPlane, PlaneOptions, VersionSet};
//! let binaries = Binaries::ensure(&VersionSet::pinned()?).await?;
//! let plane = LocalPlane::start(PlaneOptions::new(binaries)).await?;
//! let client = plane.client().await?;
//! # let _ = client; plane.stop().await; Ok(()) }
//! ```

mod binaries;
mod error;
mod faults;
mod health;
mod kubelet_rules;
pub mod nodes;
mod pki;
mod plane;
mod ports;
mod process;
mod real_node;
mod state_dir;
mod versions;

pub use binaries::Binaries;
pub use error::PlaneError;
pub use kubelet_rules::{
    DEFAULT_UNPULLABLE_IMAGES, KUBELET_RULES_ENV, KubeletRules, UNPULLABLE_IMAGES_ENV,
};
pub use pki::REAL_NODE_NAME;
pub use plane::{Component, LocalPlane, PlaneInfo, PlaneOptions, UpstreamWorkloadControllers};
pub use plane::{REPLACED_CONTROLLERS, client_from_kubeconfig, config_from_kubeconfig};
pub use ports::port_in_use;
pub use process::ManagedProcess;
pub use real_node::{
    BRIDGE as REAL_NODE_BRIDGE, CGROUP_ROOT as REAL_NODE_CGROUP_ROOT, NODE_TOOLS_IMAGE,
    REAL_NODE_TAINT, RealNodeInfo, RealNodeOptions,
};
pub use versions::VersionSet;

/// The kwok stage file the simulated nodes run (documented in `deploy/kwok/stages.yaml`).
pub const KWOK_STAGES: &str = include_str!("../../../deploy/kwok/stages.yaml");

/// The label that selects an opt-in kwok pod behaviour (`never-ready`, `fail`).
pub const KWOK_BEHAVIOUR_LABEL: &str = "minikcm.dev/kwok-behaviour";
/// The annotation that delays readiness of a pod (a Go duration such as `5s`).
pub const KWOK_READY_AFTER_ANNOTATION: &str = "minikcm.dev/ready-after";
/// The annotation that delays the failure of a pod labelled `fail` (a Go duration).
pub const KWOK_FAIL_AFTER_ANNOTATION: &str = "minikcm.dev/fail-after";

/// The log filter used when `RUST_LOG` is unset. kube's client logs every failed request at error level,
/// which while polling a starting component is expected noise; the callers report real failures.
pub const DEFAULT_LOG_FILTER: &str = "info,kube_client::client::builder=off";
