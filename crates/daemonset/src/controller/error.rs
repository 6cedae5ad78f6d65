//! How a DaemonSet sync fails: [`SyncError`] (the key is requeued with backoff, for ever, as upstream)
//! and the failures of its history step ([`HistoryFailure`]). Messages name the step; the API server's
//! answer is the source.

use mini_kcm_runtime::controller::ownership::ClaimError;
use mini_kcm_runtime::pods::control::PodWriteErrors;

use crate::history::HistoryError;
use crate::update::UpdateError;

/// Why a sync failed; the key is requeued with backoff (forever, as upstream).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming pods")]
    ClaimPods(#[source] ClaimError),
    #[error("failed to construct revisions of DaemonSet")]
    History(#[from] HistoryFailure),
    #[error(transparent)]
    Manage(#[from] PodWriteErrors),
    #[error("couldn't get unavailable numbers")]
    RollingUpdate(#[from] UpdateError),
    #[error("failed to clean up revisions of DaemonSet")]
    Cleanup(#[source] kube::Error),
    #[error("error storing status for DaemonSet")]
    Status(#[source] kube::Error),
}

/// The rules every controller's failures follow (`mini_kcm_runtime::controller::worker::SyncFailure`): a write
/// conflict is routine, a namespace being deleted ends the key.
impl mini_kcm_runtime::controller::worker::SyncFailure for SyncError {}

/// Why the history could not be constructed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryFailure {
    #[error(transparent)]
    Data(#[from] HistoryError),
    #[error("creating ControllerRevision {name}")]
    CreateRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading ControllerRevision {name}")]
    ReadRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("labelling ControllerRevision {name}")]
    LabelRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("renumbering ControllerRevision {name}")]
    RenumberRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting ControllerRevision {name}")]
    DeleteRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading DaemonSet {name}")]
    ReadDaemonSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("bumping the collisionCount of DaemonSet {name}")]
    BumpCollisionCount {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("relabelling pod {name}")]
    RelabelPod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("claiming ControllerRevisions")]
    Claim(#[from] mini_kcm_runtime::controller::ownership::ClaimError),
    #[error(
        "found a stale collision count ({cached:?}, expected {fresh:?}) of the DaemonSet; will retry until it is updated"
    )]
    StaleCollisionCount {
        cached: Option<i32>,
        fresh: Option<i32>,
    },
    #[error(
        "ControllerRevision {name} already exists with another template: bumped collisionCount to {count}"
    )]
    HashCollision { name: String, count: i32 },
}
