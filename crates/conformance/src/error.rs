//! What can go wrong while building or running the upstream specs (not a spec failing: that is a result).

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ConformanceError {
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Plane(#[from] mini_kcm_local_plane::PlaneError),
    #[error("building the e2e binary failed ({status}); see the output above")]
    Build { status: String },
    #[error("the controller manager failed")]
    Manager(#[from] mini_kcm_manager::ManagerError),
    #[error("the e2e binary wrote no usable report at {path} (exit {status}); see {log}: {detail}")]
    NoReport {
        path: PathBuf,
        status: String,
        log: PathBuf,
        detail: String,
    },
    #[error("{context}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },
    #[error("{0}")]
    Random(String),
    #[error("the planes diverged in {0} sequence(s); see the report above")]
    Diverged(usize),
    #[error("specs failed on mini-kcm's plane that are not expected to fail: {0:?}")]
    UnexpectedFailures(Vec<String>),
}

impl ConformanceError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        ConformanceError::Io {
            context: context.into(),
            source,
        }
    }
}
