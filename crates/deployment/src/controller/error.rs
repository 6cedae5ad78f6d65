//! How a Deployment sync fails: [`SyncError`]; the key is retried with backoff, at most
//! [`MAX_RETRIES`](super::MAX_RETRIES) times in a row, as upstream.

use mini_kcm_runtime::api_errors::{is_conflict, is_namespace_terminating};
use mini_kcm_runtime::ownership::ClaimError;

/// Why a sync failed; the key is retried with backoff (at most 15 times in a row, as upstream).
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming ReplicaSets: {0}")]
    Claim(#[from] ClaimError),
    #[error("{action}: {source}")]
    Api {
        action: String,
        #[source]
        source: kube::Error,
    },
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
        matches!(self, SyncError::Api { source, .. } if is_conflict(source))
    }

    /// As upstream's `handleErr`: a write refused because the namespace is being deleted ends the key.
    fn forgets_the_key(&self) -> bool {
        matches!(self, SyncError::Api { source, .. } if is_namespace_terminating(source))
    }
}

impl SyncError {
    pub(crate) fn api(action: impl Into<String>, source: kube::Error) -> Self {
        SyncError::Api {
            action: action.into(),
            source,
        }
    }
}
