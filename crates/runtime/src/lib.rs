//! The shared machinery of mini-kcm's controllers, written once and used by the ReplicaSet, Deployment and
//! DaemonSet controllers. Six modules, in reading order:
//!
//! - [`controller`]: the core every controller is built on: `ControllerCore` and the `Reconcile` trait
//!   (the shared fields, the prologue of each sync, the queue key, owner lookup, the `Controller` trait
//!   the manager runs), the [`worker`](controller::worker) loop that decides what becomes of a key after a
//!   sync, and what keeps a sync from acting twice or on what is not its own: expectations, the
//!   read-your-own-writes check (`consistency`) and ownership (claiming children).
//! - [`informers`]: the shared caches a sync reads, one list+watch per kind.
//! - [`pods`]: the cached pod, the deletion ranking, creating and deleting pods in slow-start batches.
//! - [`api`]: the client, the two API families ([`kinds`](api::kinds)), decoding, selectors and
//!   int-or-percent values, the one way a controller writes ([`tracked_api`](api::tracked_api)) and its
//!   status writes.
//! - [`observability`]: Events, the decisions behind each sync with their reasons (what `mini-kcm
//!   explain` shows), metrics and the live views.
//! - [`switches`]: `--feature-gates` and the safety mechanisms a learner may switch off.
//!
//! For unit tests, with the `testing` feature that only dev-dependencies switch on, `recorded_api` is an
//! API server in the test's process, and `controller::offline` builds a controller on it.
//! docs/architecture.md maps each module to its upstream name.
//!
//! The modules are public where another crate names them, and inside them only what is named outside is
//! `pub`; the rest is `pub(crate)`.

// Keeps every `pub` that no other crate can reach from claiming more than pub(crate).
#![warn(unreachable_pub)]
// Every public item and field says what it is: the surface other crates read.
#![warn(missing_docs)]
// Docs link private items where that is where the reader should go: `cargo doc --document-private-items`.
#![allow(rustdoc::private_intra_doc_links)]

pub mod api;
pub mod controller;
pub mod informers;
pub mod observability;
pub mod pods;
mod protobuf;
#[cfg(any(test, feature = "testing"))]
pub mod recorded_api;
pub mod switches;
