//! Errors of the local control plane, each saying what failed and where to look.

use std::path::PathBuf;
use std::time::Duration;

/// What can go wrong while building, starting or talking to the local control plane.
#[derive(Debug, thiserror::Error)]
pub enum PlaneError {
    #[error("{context}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("invalid version pin in deploy/control-plane/versions.env: {0}")]
    Versions(String),
    #[error("unsupported Kubernetes version: {0}")]
    UnsupportedVersion(String),
    #[error("building the control plane binaries failed (exit {status}); see the output above")]
    Build { status: String },
    #[error("'{tool}' was not found on PATH: {hint}")]
    MissingTool {
        tool: &'static str,
        hint: &'static str,
    },
    #[error("generating certificates failed")]
    Pki(#[from] rcgen::Error),
    #[error("{component} exited early ({status}); last lines of {log}:\n{tail}")]
    ComponentExited {
        component: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("timed out after {waited:?} waiting for {what}{detail}")]
    Timeout {
        what: String,
        waited: Duration,
        detail: String,
    },
    #[error("state directory {dir} is in use by running process {pid}; pass another --state-dir")]
    StateDirInUse { dir: PathBuf, pid: u32 },
    #[error(
        "another plane runs a real node on this host (it holds {lock}); stop it, or start this plane without --real-node"
    )]
    RealNodeInUse { lock: PathBuf },
    #[error("kubelet rules: {0}")]
    KubeletRules(String),
    #[error("real node: {0}")]
    RealNode(String),
    #[error("reading kubeconfig {path}")]
    Kubeconfig {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error("installing the minikcm.dev CRDs")]
    Crds(#[from] mini_kcm_crds::Error),
    #[error("building a client")]
    Client(#[source] kube::Error),
    #[error("Kubernetes API call failed while {context}")]
    Api {
        context: String,
        #[source]
        source: kube::Error,
    },
}

impl PlaneError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        PlaneError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn api(context: impl Into<String>, source: kube::Error) -> Self {
        PlaneError::Api {
            context: context.into(),
            source,
        }
    }
}
