//! How a ReplicaSet sync fails: [`SyncError`]; the key is requeued with backoff (for ever, as upstream).
//! Messages name the step; the API server's answer is the source.

use mini_kcm_runtime::controller::ownership::ClaimError;

use crate::status::ManageFailure;

/// Why a sync failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum SyncError {
    #[error("claiming pods")]
    Claim(#[from] ClaimError),
    #[error(transparent)]
    Manage(#[from] ManageFailure),
    #[error("updating the status")]
    Status(#[source] kube::Error),
}

/// The rules every controller's failures follow (`mini_kcm_runtime::controller::worker::SyncFailure`): a write
/// conflict is routine, a namespace being deleted ends the key.
impl mini_kcm_runtime::controller::worker::SyncFailure for SyncError {}
