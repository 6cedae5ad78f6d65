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
//!
//! Where to start reading: `plane.rs` (`LocalPlane::start`: the components in dependency order, each
//! waited for by its health endpoint, then the nodes), `process.rs` (how a component runs and dies with
//! its parent), `binaries.rs` and `versions.rs` (building and caching the binaries), `pki.rs` (the
//! certificates). The API is the `pub use` list below and [`nodes`]; everything else is private.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]
// Docs link private items where that is where the reader should go: `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

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
pub use pki::REAL_NODE_NAME;
pub use plane::{Component, LocalPlane, PlaneInfo, PlaneOptions, UpstreamWorkloadControllers};
pub use plane::{REPLACED_CONTROLLERS, client_from_kubeconfig, config_from_kubeconfig};
pub use ports::port_in_use;
pub use process::ManagedProcess;
pub use real_node::{
    CGROUP_ROOT as REAL_NODE_CGROUP_ROOT, NODE_TOOLS_IMAGE, REAL_NODE_TAINT, RealNodeOptions,
};
pub use versions::{KUBERNETES_VERSION_VAR, VersionSet, oldest_supported_minor};

/// The kwok stage file the simulated nodes run (documented in `deploy/kwok/stages.yaml`).
pub(crate) const KWOK_STAGES: &str = include_str!("../../../deploy/kwok/stages.yaml");

/// The log filter used when `RUST_LOG` is unset. kube's client logs every failed request at error level,
/// which while polling a starting component is expected noise; the callers report real failures.
pub const DEFAULT_LOG_FILTER: &str = "info,kube_client::client::builder=off";
