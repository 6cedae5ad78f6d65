//! `mini-kcm up`: a local control plane in the foreground, stopped cleanly on Ctrl-C or SIGTERM.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, ValueEnum};
use mini_kcm_local_plane::{
    Binaries, LocalPlane, PlaneOptions, REAL_NODE_TAINT, RealNodeOptions,
    UpstreamWorkloadControllers, VersionSet, config_from_kubeconfig,
};
use mini_kcm_manager::{FeatureGates, Kinds, ManagerOptions};
use mini_kcm_runtime::switches::safeties::{Safeties, Safety};
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
    /// Also run one real node on this host (containerd, kubelet, kube-proxy; needs root and
    /// deploy/real-node/ensure-runtime.sh), tainted `mini-kcm.dev/real-node=true:NoSchedule`. Imports
    /// target/image/mini-kcm.tar when it exists. See docs/local-control-plane.md.
    #[arg(long)]
    real_node: bool,
    /// An image archive (`docker save` or OCI) to import into the real node; repeatable.
    #[arg(long = "image", value_name = "PATH", requires = "real_node")]
    images: Vec<PathBuf>,
    /// Run the plane at another Kubernetes version (1.35 and later, e.g. 1.35.4): built once and cached
    /// beside the pinned one. Default: $MINI_KCM_KUBERNETES_VERSION, else the pinned version.
    #[arg(long, value_name = "1.X.Y")]
    kubernetes_version: Option<String>,
    /// Feature gates of mini-kcm's controllers (as `mini-kcm run --feature-gates`).
    #[arg(long, default_value = "", value_parser = crate::run::parse_feature_gates)]
    feature_gates: FeatureGates,
    /// For learning only: switch one safety mechanism of the controllers off, to watch the failure it
    /// prevents (docs/tour-breaking.md): expectations, slow-start, adoption-recheck,
    /// read-your-own-writes. Repeatable or comma-separated. Not a flag of `mini-kcm run`.
    #[arg(long = "without", value_name = "MECHANISM", value_delimiter = ',')]
    without: Vec<Safety>,
    /// For learning only: every watch event reaches the controllers' caches this late (e.g. 2s), so the
    /// windows the safety mechanisms guard are wide enough to see. Not a flag of `mini-kcm run`.
    #[arg(long, value_name = "DURATION", default_value = "0", value_parser = crate::duration::parse_go_duration)]
    watch_delay: Duration,
}

impl UpArgs {
    /// What a learner asked to break (`--without`, `--watch-delay`), for the in-process manager.
    fn breaking(&self) -> Breaking {
        Breaking {
            safeties: Safeties::without(self.without.iter().copied()),
            watch_delay: self.watch_delay,
        }
    }
}

/// The manager's options that only `up` sets: a local plane is the one place to break things.
#[derive(Debug, Clone, Default)]
struct Breaking {
    safeties: Safeties,
    watch_delay: Duration,
}

/// The archive deploy/image/build.sh writes, relative to the repository root.
const DEFAULT_IMAGE_ARCHIVE: &str = "target/image/mini-kcm.tar";

pub async fn build_plane() -> anyhow::Result<()> {
    let binaries = Binaries::ensure(&VersionSet::selected()?).await?;
    println!("{}", binaries.dir().display());
    Ok(())
}

pub async fn run(args: UpArgs) -> anyhow::Result<()> {
    // Install the signal handlers first, so a Ctrl-C during start-up also stops cleanly.
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;

    let versions = match &args.kubernetes_version {
        Some(version) => VersionSet::pinned()?.with_kubernetes(version)?,
        None => VersionSet::selected()?,
    };
    let binaries = Binaries::ensure(&versions).await?;
    let mut options = PlaneOptions::new(binaries);
    options.nodes = args.nodes;
    options.state_dir = args.state_dir.clone();
    options.kubeconfig_out = args.kubeconfig_out.clone();
    if args.real_node {
        let mut images = Vec::new();
        let default_archive = PathBuf::from(DEFAULT_IMAGE_ARCHIVE);
        if default_archive.is_file() {
            images.push(default_archive);
        }
        for image in &args.images {
            anyhow::ensure!(image.is_file(), "--image {}: no such file", image.display());
            images.push(image.clone());
        }
        options.real_node = Some(RealNodeOptions { images });
    }
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
    let mut manager = match args.workload_controllers {
        WorkloadControllers::Mini => {
            match start_manager(&plane, args.feature_gates.clone(), args.breaking()).await {
                Ok(manager) => Some(manager),
                Err(e) => {
                    plane.stop().await;
                    return Err(e);
                }
            }
        }
        _ => None,
    };
    if let Some(manager) = &manager {
        // `mini-kcm explain` finds the manager through this file (a stopped plane's owner.pid is stale).
        let path = plane
            .info()
            .state_dir
            .join(crate::explain::MANAGER_ADDR_FILE);
        if let Err(e) = std::fs::write(&path, manager.metrics_addr.to_string()) {
            eprintln!("mini-kcm: cannot write {}: {e}", path.display());
        }
    }
    print_summary(&plane, &args, manager.as_ref());

    let mut health = tokio::time::interval(Duration::from_secs(1));
    let outcome: anyhow::Result<&str> = loop {
        tokio::select! {
            _ = sigint.recv() => break Ok("SIGINT"),
            _ = sigterm.recv() => break Ok("SIGTERM"),
            _ = health.tick() => {
                if let Err(e) = plane.check_running() {
                    break Err(anyhow::Error::new(e).context("a control plane component failed"));
                }
                if manager.as_ref().is_some_and(|m| m.task.is_finished()) {
                    break Err(anyhow::anyhow!("the in-process controller manager stopped"));
                }
            }
        }
    };
    match &outcome {
        Ok(signal) => eprintln!("mini-kcm: {signal} received, stopping"),
        Err(e) => eprintln!("mini-kcm: {e:#}; stopping"),
    }
    if let Some(manager) = manager.take() {
        let _ = manager.stop.send(());
        match manager.task.await {
            Ok(Err(e)) => eprintln!("mini-kcm: the controller manager failed: {e}"),
            Err(e) => eprintln!("mini-kcm: the controller manager panicked: {e}"),
            Ok(Ok(())) => {}
        }
    }
    let leftovers = plane.stop().await;
    for leftover in &leftovers {
        eprintln!("mini-kcm: the real node left something behind: {leftover}");
    }
    eprintln!("mini-kcm: stopped");
    outcome.map(|_| ())
}

/// mini-kcm's controllers, running in this process against the plane.
struct InProcessManager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), mini_kcm_manager::ManagerError>>,
    metrics_addr: std::net::SocketAddr,
}

/// Installs the CRD copies and starts the manager with `--kinds both`.
async fn start_manager(
    plane: &LocalPlane,
    feature_gates: FeatureGates,
    breaking: Breaking,
) -> anyhow::Result<InProcessManager> {
    let client = plane.client().await?;
    mini_kcm_crds::install(&client)
        .await
        .context("installing the minikcm.dev CRDs")?;
    let config = config_from_kubeconfig(plane.kubeconfig()).await?;
    let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port for /metrics")?;
    let options = ManagerOptions {
        kinds: Kinds::Both,
        metrics_addr: Some(metrics_addr),
        feature_gates,
        safeties: breaking.safeties,
        watch_delay: breaking.watch_delay,
        ..Default::default()
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(mini_kcm_manager::run(config, options, async move {
        let _ = stopped.await;
    }));
    Ok(InProcessManager {
        stop,
        task,
        metrics_addr,
    })
}

fn print_summary(plane: &LocalPlane, args: &UpArgs, manager: Option<&InProcessManager>) {
    let info = plane.info();
    let kubeconfig = args.kubeconfig_out.as_ref().unwrap_or(&info.kubeconfig);
    let controllers = match args.workload_controllers {
        WorkloadControllers::Mini => format!(
            "mini (in this process, apps/v1 and minikcm.dev copies: {}; metrics on http://{addr}/metrics, \
             live view on http://{addr}/debug/controllers)",
            mini_kcm_manager::ControllerName::ALL
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", "),
            addr = manager.map_or_else(|| "-".to_string(), |m| m.metrics_addr.to_string())
        ),
        WorkloadControllers::Upstream => "upstream (kube-controller-manager's own)".to_string(),
        WorkloadControllers::None => "none".to_string(),
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
    if args.workload_controllers == WorkloadControllers::Mini {
        let breaking = args.breaking();
        for safety in breaking.safeties.switched_off() {
            println!("  SWITCHED OFF:         {safety} ({})", safety.risk());
        }
        if !breaking.watch_delay.is_zero() {
            println!(
                "  WATCH DELAY:          {:?} (every watch event reaches the caches this late)",
                breaking.watch_delay
            );
        }
    }
    if let Some(node) = &info.real_node {
        let imports = node
            .imports
            .iter()
            .map(|(path, seconds)| format!("{} ({seconds:.1}s)", path.display()))
            .collect::<Vec<_>>()
            .join(", ");
        println!(
            "  real node:            {} ({}, pods in {}; Ready in {:.1}s; taint {}={}:NoSchedule)",
            node.name,
            node.internal_ip,
            node.pod_subnet,
            node.startup_seconds,
            REAL_NODE_TAINT.0,
            REAL_NODE_TAINT.1
        );
        println!("  imported images:      {imports}");
    }
    println!(
        "  try:                  {}/kubectl --kubeconfig {} get nodes",
        info.bin_dir.display(),
        kubeconfig.display()
    );
    println!("mini-kcm: running; press Ctrl-C to stop");
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;
    use crate::{Cli, Command};

    #[test]
    fn up_switches_safeties_off_and_delays_the_watch() {
        let cli = Cli::try_parse_from([
            "mini-kcm",
            "up",
            "--without",
            "expectations,read-your-own-writes",
            "--without=slow-start",
            "--watch-delay",
            "2s",
        ])
        .unwrap_or_else(|e| panic!("{e}"));
        let Command::Up(up) = cli.command else {
            panic!("not up")
        };
        let breaking = up.breaking();
        let off: Vec<Safety> = breaking.safeties.switched_off().collect();
        assert_eq!(
            off,
            [
                Safety::Expectations,
                Safety::SlowStart,
                Safety::ReadYourOwnWrites
            ]
        );
        assert_eq!(breaking.watch_delay, Duration::from_secs(2));

        let plain = Cli::try_parse_from(["mini-kcm", "up"]).unwrap_or_else(|e| panic!("{e}"));
        let Command::Up(plain) = plain.command else {
            panic!("not up")
        };
        assert_eq!(plain.breaking().safeties, Safeties::all_on());
        assert!(plain.breaking().watch_delay.is_zero());

        let unknown = Cli::try_parse_from(["mini-kcm", "up", "--without", "everything"]);
        let error = unknown.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(error.contains("unknown safety mechanism"), "{error}");
    }

    /// Against a real cluster nothing may be switched off: `run` has neither option.
    #[test]
    fn run_refuses_to_switch_safeties_off() {
        for args in [
            ["mini-kcm", "run", "--without", "expectations"],
            ["mini-kcm", "run", "--watch-delay", "2s"],
        ] {
            let error = Cli::try_parse_from(args)
                .err()
                .unwrap_or_else(|| panic!("{args:?} was accepted"));
            assert_eq!(
                error.kind(),
                clap::error::ErrorKind::UnknownArgument,
                "{error}"
            );
        }
    }
}
