//! `mini-kcm up`: a local control plane in the foreground, stopped cleanly on Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use mini_kcm_local_plane::{
    Binaries, LocalPlane, PlaneOptions, UpstreamWorkloadControllers, VersionSet,
};
use tokio::signal::unix::{SignalKind, signal};

/// Which Deployment/ReplicaSet/DaemonSet controllers run against the plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum WorkloadControllers {
    /// mini-kcm's own controllers, in this process.
    Mini,
    /// kube-controller-manager's own controllers (for side-by-side comparison).
    Upstream,
    /// None: objects are stored but nothing reconciles them.
    None,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Number of simulated (kwok) nodes.
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Also write the admin kubeconfig here (it is always in the state directory).
    #[arg(long)]
    kubeconfig_out: Option<PathBuf>,
    /// Which workload controllers run.
    #[arg(long, value_enum, default_value_t = WorkloadControllers::Mini)]
    workload_controllers: WorkloadControllers,
    /// Where certificates, etcd data, kubeconfig and logs go (default: a free slot
    /// `planes/plane-N` under the cache directory).
    #[arg(long)]
    state_dir: Option<PathBuf>,
}

pub async fn build_plane() -> anyhow::Result<()> {
    let binaries = Binaries::ensure(&VersionSet::pinned()?).await?;
    println!("{}", binaries.dir().display());
    Ok(())
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    // Install the signal handlers first, so a Ctrl-C during start-up also stops cleanly.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;

    let binaries = Binaries::ensure(&VersionSet::pinned()?).await?;
    let mut options = PlaneOptions::new(binaries);
    options.nodes = args.nodes;
    options.state_dir = args.state_dir.clone();
    options.kubeconfig_out = args.kubeconfig_out.clone();
    options.upstream_workload_controllers = match args.workload_controllers {
        WorkloadControllers::Upstream => UpstreamWorkloadControllers::Enabled,
        WorkloadControllers::Mini | WorkloadControllers::None => {
            UpstreamWorkloadControllers::Disabled
        }
    };

    let mut plane = tokio::select! {
        plane = LocalPlane::start(options) => plane.context("starting the local control plane")?,
        _ = sigint.recv() => anyhow::bail!("interrupted during start-up"),
        _ = sigterm.recv() => anyhow::bail!("terminated during start-up"),
    };
    print_summary(&plane, &args);

    let mut health = tokio::time::interval(Duration::from_secs(1));
    let outcome = loop {
        tokio::select! {
            _ = sigint.recv() => break Ok("SIGINT"),
            _ = sigterm.recv() => break Ok("SIGTERM"),
            _ = health.tick() => {
                if let Err(e) = plane.check_running() {
                    break Err(e);
                }
            }
        }
    };
    match &outcome {
        Ok(signal) => eprintln!("mini-kcm: {signal} received, stopping the control plane"),
        Err(e) => eprintln!("mini-kcm: a component failed, stopping the control plane: {e}"),
    }
    plane.stop().await;
    eprintln!("mini-kcm: stopped");
    outcome.map(|_| ()).map_err(Into::into)
}

fn print_summary(plane: &LocalPlane, args: &UpArgs) {
    let info = plane.info();
    let kubeconfig = args.kubeconfig_out.as_ref().unwrap_or(&info.kubeconfig);
    let controllers = match args.workload_controllers {
        WorkloadControllers::Mini => {
            "mini (mini-kcm's own controllers are not built yet: nothing reconciles Deployments, \
             ReplicaSets or DaemonSets; use --workload-controllers upstream for kube-controller-manager's)"
        }
        WorkloadControllers::Upstream => "upstream (kube-controller-manager's own)",
        WorkloadControllers::None => "none",
    };
    println!(
        "mini-kcm: control plane ready in {:.1}s (Kubernetes {}, {} nodes Ready)",
        info.startup_seconds,
        info.kubernetes_version,
        info.nodes.len()
    );
    println!("  API server:           {}", info.server);
    println!("  kubeconfig:           {}", kubeconfig.display());
    println!("  component logs:       {}", info.log_dir.display());
    println!("  binaries:             {}", info.bin_dir.display());
    println!("  state:                {}", info.state_dir.display());
    println!("  workload controllers: {controllers}");
    println!(
        "  try:                  {}/kubectl --kubeconfig {} get nodes",
        info.bin_dir.display(),
        kubeconfig.display()
    );
    println!("mini-kcm: running; press Ctrl-C to stop");
}
