//! The test harness shared by the end-to-end tests and the benchmarks.
//!
//! - [`shared_plane`]: one real control plane per test binary, started on first use and killed when the
//!   binary exits (its components die with the process, see `mini_kcm_local_plane::ManagedProcess`).
//! - [`TestNamespace`]: a fresh namespace per test, with its `default` ServiceAccount in place.
//! - [`restart_component`], [`expire_watches`]: fault hooks on the shared plane.
//! - [`TestNamespace::wait_for`] and [`TestNamespace::wait_for_list`]: event-driven waits (a watch, never
//!   a sleep) that, on timeout, fail with the objects, events and component log tails that explain why.
//!
//! Where to start reading: `shared.rs` (the plane per test binary), then `namespace.rs` and `wait.rs`.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod faults;
mod namespace;
mod shared;
mod wait;

pub use faults::{FaultDone, component_pid, expire_watches, restart_component};
pub use mini_kcm_local_plane::nodes;
pub use mini_kcm_local_plane::{Component, PlaneInfo, UpstreamWorkloadControllers};
pub use namespace::TestNamespace;
pub use shared::{PlaneConfig, shared_plane};
