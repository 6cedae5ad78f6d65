//! Shared informers: one list+watch per kind, a local cache every controller reads, and change
//! notifications fanned out to every controller that registered a handler.
//!
//! Why: a controller-manager runs several controllers that look at the same objects (the ReplicaSet
//! and DaemonSet controllers both watch pods; the Deployment and ReplicaSet controllers both watch
//! ReplicaSets). Watching once and sharing the cache keeps the API server's load independent of how many
//! controllers run, and gives every controller the same consistent view.
//!
//! - [`Informer`]: one kind's cache with indexes ([`Indexer`]), listers and change handlers.
//! - [`SharedInformers`]: hands out the one [`Informer`] per kind and scope, so two controllers asking for
//!   pods get the same watch.
//! - [`Change`]: what handlers see: added, updated (old and new), deleted. Deletions that happened while
//!   the watch was down are found when the informer relists, and reported as [`Change::Deleted`] too.
//!   Each comes with its [`Origin`]: a live watch event, the initial list, a relist or a resync.
//! - [`with_watch_backoff`]: how soon a failed watch tries again ([`WatchBackoff`], [`RetryBudget`]):
//!   within 2 s, and at once after a 410 Gone, so informers resume promptly after an API server restart.
//! - `list_mode`: full lists streamed as a watch's initial events where the API server supports it
//!   (KEP-3157), in pages otherwise.
//! - [`ContentType`] (`content_type`): protobuf for pods and nodes (`crate::protobuf`, listed and
//!   watched by `protobuf_watch`), JSON for the rest, JSON after a server refused protobuf.
//! - `watch_delay`: a watch whose events reach the cache a fixed delay late, for learners and tests
//!   (`mini-kcm up --watch-delay`).

mod backoff;
mod content_type;
mod factory;
mod informer;
mod list_mode;
mod protobuf_watch;
mod store;
mod watch_delay;

pub use backoff::{RetryBudget, WatchBackoff, with_watch_backoff};
pub use content_type::{ContentType, UnknownContentType};
#[cfg(feature = "testing")]
pub use factory::SimulatedEvent;
pub use factory::{SharedInformers, Watched};
pub use informer::{Change, Indexer, Informer, Origin};
