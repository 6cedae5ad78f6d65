//! What can stop a benchmark, each error saying what it was doing.

use std::path::PathBuf;
use std::time::Duration;

use mini_kcm_local_plane::PlaneError;

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Plane(#[from] PlaneError),
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{context}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout { what: String, waited: Duration },
    #[error("the run failed (controller log: {log})")]
    Run {
        log: PathBuf,
        #[source]
        source: Box<BenchError>,
    },
    #[error("no scenarios or no rounds to run, or mini-kcm given as its own baseline")]
    NothingToRun,
    #[error(
        "--baseline other-mini-kcm and --baseline-binary go together: one names the other's executable"
    )]
    BaselineBinary,
}

impl BenchError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn kube(context: impl Into<String>, source: kube::Error) -> Self {
        BenchError::Kube {
            context: context.into(),
            source,
        }
    }
}
