//! The shared machinery of mini-kcm's controllers, written once and used by the ReplicaSet, Deployment and
//! DaemonSet controllers.
//!
//! Where to start reading: [`controller`] (the core every controller is built on — `ControllerCore` and
//! the `Reconcile` trait: the shared fields, the prologue of each sync, the queue key, owner lookup and
//! the `Controller` trait the manager runs), then [`worker`] (the loop that takes keys from the queue,
//! calls a sync and decides what becomes of the key),
//! [`informers`] (the caches a sync reads), [`expectations`] (why a sync waits for its own writes to show)
//! and [`ownership`] (claiming children). The rest are the parts a sync calls: [`pods`] (ranking, creation
//! and deletion), [`slow_start`], [`selector`], [`events`], [`decisions`] (what `mini-kcm explain` shows),
//! [`tracked_api`] (the one way a controller writes, each write recorded for [`consistency`]) and
//! [`status_writes`]; [`features`] holds `--feature-gates`, [`safeties`] the mechanisms a learner may switch off; [`kinds`] names the two API families and the
//! shared indexes. For unit tests, with the `testing` feature that only dev-dependencies switch on,
//! `recorded_api` is an API server in the test's process, and `controller::offline` builds a controller
//! on it.
//! docs/architecture.md maps each to its upstream name.
//!
//! The modules are public where another crate names them, and inside them only what is named outside is
//! `pub`; the rest is `pub(crate)`.

// Keeps every `pub` that no other crate can reach from claiming more than pub(crate).
#![warn(unreachable_pub)]
// Docs link private items where that is where the reader should go: `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod api_errors;
pub mod client;
pub mod consistency;
pub mod controller;
mod counter;
pub mod decisions;
mod event_correlation;
pub mod events;
pub mod expectations;
pub mod features;
pub mod informers;
pub mod inspect;
pub mod int_or_percent;
pub mod kinds;
pub mod metrics;
pub mod object;
pub mod ownership;
pub mod pods;
mod protobuf;
#[cfg(any(test, feature = "testing"))]
pub mod recorded_api;
pub mod safeties;
pub mod selector;
pub mod slow_start;
pub mod status_writes;
pub mod tracked_api;
mod transport;
pub mod worker;
