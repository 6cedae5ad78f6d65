//! A plane for one side of the comparison: the same local control plane, with either mini-kcm's
//! Deployment, ReplicaSet and DaemonSet controllers (apps/v1, in this process) or kube-controller-manager's.

use clap::ValueEnum;
use mini_kcm_local_plane::{
    LocalPlane, PlaneOptions, UpstreamWorkloadControllers, config_from_kubeconfig,
};
use mini_kcm_manager::{Kinds, ManagerError, ManagerOptions};

use crate::ConformanceError;
use mini_kcm_local_plane::Binaries;

/// Whose workload controllers the specs run against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum Side {
    /// mini-kcm's controllers on apps/v1 (kube-controller-manager runs without its own).
    Mini,
    /// kube-controller-manager's own controllers.
    Upstream,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Mini => "mini",
            Side::Upstream => "upstream",
        }
    }
}

/// A running plane of one side; [`SidePlane::stop`] stops the controllers, then the plane.
pub(crate) struct SidePlane {
    pub plane: LocalPlane,
    manager: Option<Manager>,
}

struct Manager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

impl SidePlane {
    pub(crate) async fn start(
        side: Side,
        binaries: &Binaries,
        nodes: usize,
    ) -> Result<Self, ConformanceError> {
        let mut options = PlaneOptions::new(binaries.clone());
        options.nodes = nodes;
        options.upstream_workload_controllers = match side {
            Side::Mini => UpstreamWorkloadControllers::Disabled,
            Side::Upstream => UpstreamWorkloadControllers::Enabled,
        };
        let plane = LocalPlane::start(options).await?;
        let manager = match side {
            Side::Upstream => None,
            Side::Mini => {
                let config = match config_from_kubeconfig(plane.kubeconfig()).await {
                    Ok(config) => config,
                    Err(e) => {
                        plane.stop().await;
                        return Err(e.into());
                    }
                };
                let options = ManagerOptions {
                    kinds: Kinds::Apps,
                    ..Default::default()
                };
                let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
                let task = tokio::spawn(mini_kcm_manager::run(config, options, async move {
                    let _ = stopped.await;
                }));
                Some(Manager { stop, task })
            }
        };
        Ok(SidePlane { plane, manager })
    }

    /// Whether mini-kcm's controllers stopped on their own (they should run until [`SidePlane::stop`]).
    pub(crate) fn manager_failed(&self) -> bool {
        self.manager.as_ref().is_some_and(|m| m.task.is_finished())
    }

    pub(crate) async fn stop(self) -> Result<(), ConformanceError> {
        let mut outcome = Ok(());
        if let Some(manager) = self.manager {
            let _ = manager.stop.send(());
            outcome = match manager.task.await {
                Ok(result) => result.map_err(ConformanceError::from),
                Err(e) => Err(ConformanceError::io(
                    "joining the controller manager",
                    std::io::Error::other(e),
                )),
            };
        }
        self.plane.stop().await;
        outcome
    }
}
