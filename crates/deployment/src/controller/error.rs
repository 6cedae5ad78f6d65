//! How a Deployment sync fails: [`SyncError`]; the key is retried with backoff, at most
//! [`MAX_RETRIES`](super::MAX_RETRIES) times in a row, as upstream. Messages name the step; the API
//! server's answer is the source.

use mini_kcm_runtime::controller::ownership::ClaimError;

/// Why a sync failed; the key is retried with backoff (at most 15 times in a row, as upstream).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming ReplicaSets")]
    Claim(#[from] ClaimError),
    #[error("reading the existing new ReplicaSet")]
    ReadNewReplicaSet(#[source] kube::Error),
    #[error("creating ReplicaSet {name}")]
    CreateReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating ReplicaSet {name}")]
    UpdateReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting ReplicaSet {name}")]
    DeleteReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating the Deployment's annotations")]
    UpdateAnnotations(#[source] kube::Error),
    #[error("updating the Deployment's status")]
    UpdateStatus(#[source] kube::Error),
    #[error("updating the Deployment")]
    UpdateDeployment(#[source] kube::Error),
    #[error(transparent)]
    Plan(#[from] crate::Error),
    #[error("unexpected deployment strategy type: {0}")]
    UnexpectedStrategy(String),
    #[error("hash collision with ReplicaSet {replica_set}; collisionCount raised")]
    HashCollision { replica_set: String },
    #[error("no new ReplicaSet after creating one")]
    NoNewReplicaSet,
}

/// The rules every controller's failures follow (`mini_kcm_runtime::controller::worker::SyncFailure`): a write
/// conflict is routine, a namespace being deleted ends the key.
impl mini_kcm_runtime::controller::worker::SyncFailure for SyncError {}
