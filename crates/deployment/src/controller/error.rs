//! How a Deployment sync fails: [`SyncError`]; the key is retried with backoff, at most
//! [`MAX_RETRIES`](super::MAX_RETRIES) times in a row, as upstream.

use mini_kcm_runtime::api_errors::{is_conflict, is_namespace_terminating};
use mini_kcm_runtime::ownership::ClaimError;

/// Why a sync failed; the key is retried with backoff (at most 15 times in a row, as upstream).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming ReplicaSets: {0}")]
    Claim(#[from] ClaimError),
    #[error("reading the existing new ReplicaSet: {0}")]
    ReadNewReplicaSet(#[source] kube::Error),
    #[error("creating ReplicaSet {name}: {source}")]
    CreateReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating ReplicaSet {name}: {source}")]
    UpdateReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting ReplicaSet {name}: {source}")]
    DeleteReplicaSet {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("updating the Deployment's annotations: {0}")]
    UpdateAnnotations(#[source] kube::Error),
    #[error("updating the Deployment's status: {0}")]
    UpdateStatus(#[source] kube::Error),
    #[error("updating the Deployment: {0}")]
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

impl mini_kcm_runtime::worker::SyncFailure for SyncError {
    /// A write conflict means our cache was behind; the retry reads fresher objects. Routine.
    fn is_routine(&self) -> bool {
        self.api_error().is_some_and(is_conflict)
    }

    /// As upstream's `handleErr`: a write refused because the namespace is being deleted ends the key.
    fn forgets_the_key(&self) -> bool {
        self.api_error().is_some_and(is_namespace_terminating)
    }
}

impl SyncError {
    /// The API server's answer, for the failures of a request.
    fn api_error(&self) -> Option<&kube::Error> {
        match self {
            SyncError::ReadNewReplicaSet(source)
            | SyncError::UpdateAnnotations(source)
            | SyncError::UpdateStatus(source)
            | SyncError::UpdateDeployment(source)
            | SyncError::CreateReplicaSet { source, .. }
            | SyncError::UpdateReplicaSet { source, .. }
            | SyncError::DeleteReplicaSet { source, .. } => Some(source),
            SyncError::Claim(_)
            | SyncError::Plan(_)
            | SyncError::UnexpectedStrategy(_)
            | SyncError::HashCollision { .. }
            | SyncError::NoNewReplicaSet => None,
        }
    }
}
