//! `mini-kcm run`: the controllers against a cluster, until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, ValueEnum};
use mini_kcm_manager::{Kinds, ManagerOptions};
use tokio::signal::unix::{SignalKind, signal};

/// Which API families to manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindsArg {
    /// apps/v1 (do not run beside kube-controller-manager's own workload controllers).
    Apps,
    /// The minikcm.dev CRD copies (safe beside kube-controller-manager).
    Copies,
    Both,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Which API families to manage.
    #[arg(long, value_enum, default_value_t = KindsArg::Copies)]
    kinds: KindsArg,
    /// Controllers to run, kube-controller-manager style: `*`, names, `-name` (e.g. `*,-replicaset`).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Only manage objects in this namespace.
    #[arg(long)]
    namespace: Option<String>,
    #[arg(long, default_value_t = 5)]
    concurrent_replicaset_syncs: usize,
    #[arg(long, default_value_t = 5)]
    concurrent_deployment_syncs: usize,
    #[arg(long, default_value_t = 2)]
    concurrent_daemonset_syncs: usize,
    /// Requests per second of each controller's client (0 = unlimited).
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    /// Burst of each controller's client.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// Where to serve /metrics, /healthz and /readyz.
    #[arg(long, default_value = "127.0.0.1:10280")]
    metrics_addr: SocketAddr,
    /// The informers re-deliver every object to the controllers every [period, 2 × period) (Go
    /// duration, e.g. 12h or 30m; 0 disables), as kube-controller-manager's flag.
    #[arg(long, default_value = "12h", value_parser = mini_kcm_manager::parse_go_duration)]
    min_resync_period: std::time::Duration,
}

impl RunArgs {
    pub fn manager_options(&self) -> ManagerOptions {
        ManagerOptions {
            kinds: match self.kinds {
                KindsArg::Apps => Kinds::Apps,
                KindsArg::Copies => Kinds::Copies,
                KindsArg::Both => Kinds::Both,
            },
            controllers: self.controllers.clone(),
            namespace: self.namespace.clone(),
            concurrent_replicaset_syncs: self.concurrent_replicaset_syncs,
            concurrent_deployment_syncs: self.concurrent_deployment_syncs,
            concurrent_daemonset_syncs: self.concurrent_daemonset_syncs,
            kube_api_qps: self.kube_api_qps,
            kube_api_burst: self.kube_api_burst,
            metrics_addr: Some(self.metrics_addr),
            min_resync_period: self.min_resync_period,
            ..ManagerOptions::default()
        }
    }
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = match &args.kubeconfig {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config")?,
    };
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = sigint.recv() => {},
            _ = sigterm.recv() => {},
        }
    };
    mini_kcm_manager::run(config, args.manager_options(), shutdown).await?;
    Ok(())
}
