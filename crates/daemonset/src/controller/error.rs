//! How a DaemonSet sync fails: [`SyncError`] (the key is requeued with backoff) and the failures of its
//! history step ([`HistoryFailure`]).

use mini_kcm_runtime::ownership::ClaimError;
use mini_kcm_runtime::pods::control::PodWriteErrors;

use crate::history::HistoryError;
use crate::update::UpdateError;

/// Why a sync failed; the key is requeued with backoff (forever, as upstream).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming pods: {0}")]
    ClaimPods(#[source] ClaimError),
    #[error("failed to construct revisions of DaemonSet: {0}")]
    History(#[from] HistoryFailure),
    #[error(transparent)]
    Manage(#[from] PodWriteErrors),
    #[error("couldn't get unavailable numbers: {0}")]
    RollingUpdate(#[from] UpdateError),
    #[error("failed to clean up revisions of DaemonSet: {0}")]
    Cleanup(#[source] kube::Error),
    #[error("error storing status for DaemonSet: {0}")]
    Status(#[source] kube::Error),
}

impl mini_kcm_runtime::worker::SyncFailure for SyncError {}

/// Why the history could not be constructed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HistoryFailure {
    #[error(transparent)]
    Data(#[from] HistoryError),
    #[error("creating ControllerRevision {name}: {source}")]
    CreateRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading ControllerRevision {name}: {source}")]
    ReadRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("labelling ControllerRevision {name}: {source}")]
    LabelRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("renumbering ControllerRevision {name}: {source}")]
    RenumberRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting ControllerRevision {name}: {source}")]
    DeleteRevision {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("reading DaemonSet {name}: {source}")]
    ReadDaemonSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("bumping the collisionCount of DaemonSet {name}: {source}")]
    BumpCollisionCount {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("relabelling pod {name}: {source}")]
    RelabelPod {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("claiming ControllerRevisions: {0}")]
    Claim(#[from] mini_kcm_runtime::ownership::ClaimError),
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
