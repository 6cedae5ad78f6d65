//! `mini-kcm`: the command line of the project.
//!
//! - `mini-kcm up` builds (once, cached) and runs a real local control plane with simulated nodes (and,
//!   with `--real-node`, one node that runs real containers), in the foreground, until Ctrl-C or SIGTERM.
//! - `mini-kcm run` runs the controllers against the current kubeconfig or in-cluster config.
//! - `mini-kcm build-plane` only builds the control plane binaries (CI uses it to warm the cache).
//! - `mini-kcm rollout` is `kubectl rollout` for Deployments and DaemonSets of both families.
//! - `mini-kcm bench` runs mini-kcm and kube-controller-manager side by side on a local plane
//!   (docs/performance.md).
//! - `mini-kcm explain` shows one object's queue state, expectations, tree and decisions from a running
//!   manager (docs/live-view.md).
//! - `mini-kcm conformance` runs Kubernetes' own e2e specs for these controllers on a local plane, with
//!   `--compare` beside kube-controller-manager's (docs/conformance.md).
//! - `mini-kcm env` prints the shell exports that put `mini-kcm` and a running plane's `kubectl` on
//!   `PATH` and set `KUBECONFIG` (`eval "$(cargo run -q -p mini-kcm -- env)"`, the docs' set-up line).
//! - `mini-kcm version` prints the version, git revision and the Kubernetes version it mirrors.
//!
//! `up`, `env`, `build-plane`, `bench` and `conformance` exist with the `local-plane` feature (the
//! default); the image is built without it, so it carries only what runs in a cluster.

mod allocator;
mod duration;
#[cfg(feature = "local-plane")]
mod env;
mod explain;
#[cfg(all(test, feature = "local-plane"))]
mod flag_tables;
mod kind_name;
mod kubeconfig;
mod rollout;
mod run;
#[cfg(feature = "local-plane")]
mod up;

use std::io::IsTerminal;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use mini_kcm_local_plane::DEFAULT_LOG_FILTER;

/// Warnings and errors only (the plane's start-up probes' errors off, as in the default).
const QUIET_LOG_FILTER: &str = "warn,kube_client::client::builder=off";

#[derive(Debug, Parser)]
#[command(
    name = "mini-kcm",
    version,
    about = "Deployment, ReplicaSet and DaemonSet controllers, in Rust"
)]
struct Cli {
    /// Log format: `text` (coloured only on a terminal) or `json` (one object per line, for log
    /// collectors). The filter comes from RUST_LOG.
    #[arg(long, value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a local control plane (etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kwok)
    /// with simulated nodes on 127.0.0.1, in the foreground; `--real-node` adds one node that runs real
    /// containers (containerd, kubelet, kube-proxy).
    #[cfg(feature = "local-plane")]
    Up(up::UpArgs),
    /// Run the controllers against a cluster (kubeconfig or in-cluster config), like
    /// kube-controller-manager.
    Run(Box<run::RunArgs>),
    /// Build (or find cached) the control plane binaries and print where they are.
    #[cfg(feature = "local-plane")]
    BuildPlane,
    /// Manage the rollout of a Deployment or DaemonSet, apps/v1 or minikcm.dev copy, like
    /// `kubectl rollout`.
    Rollout(rollout::RolloutArgs),
    /// Benchmark mini-kcm against kube-controller-manager on a local plane (docs/performance.md).
    #[cfg(feature = "local-plane")]
    Bench(mini_kcm_bench::BenchArgs),
    /// Explain what a running manager does to one object and why: queue state, expectations,
    /// ReplicaSets and pods or node map, recent decisions (docs/live-view.md).
    Explain(explain::ExplainArgs),
    /// Run Kubernetes' own e2e specs for Deployments, ReplicaSets and DaemonSets on a local plane with
    /// mini-kcm's controllers (and with kube-controller-manager's: --compare) (docs/conformance.md).
    #[cfg(feature = "local-plane")]
    Conformance(mini_kcm_conformance::ConformanceArgs),
    /// Print shell exports for a running `mini-kcm up`: `mini-kcm` and the plane's `kubectl` on PATH,
    /// KUBECONFIG set. Use: eval "$(cargo run -q -p mini-kcm -- env)".
    #[cfg(feature = "local-plane")]
    Env(env::EnvArgs),
    /// Print the version, the git revision and the Kubernetes version whose controllers it mirrors.
    Version,
}

/// `Cli::parse`, keeping what `/flagz` needs: `run`'s effective flags.
fn parse(args: impl IntoIterator<Item = std::ffi::OsString>) -> Cli {
    let mut command = Cli::command();
    let matches = command
        .try_get_matches_from_mut(args)
        .unwrap_or_else(|e| e.exit());
    let mut cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.format(&mut command).exit());
    if let (Command::Run(args), Some(run), Some(run_matches)) = (
        &mut cli.command,
        command.find_subcommand("run"),
        matches.subcommand_matches("run"),
    ) {
        args.flags = run::effective_flags(run, run_matches);
    }
    cli
}

/// Whether `command` runs mini-kcm's controllers in this process for long, with a progress line per step
/// (random conformance).
fn runs_for_long_in_process(command: &Command) -> bool {
    #[cfg(feature = "local-plane")]
    if let Command::Conformance(args) = command {
        return args.random > 0;
    }
    let _ = command;
    false
}

fn main() -> std::process::ExitCode {
    let cli = parse(std::env::args_os());
    // Random conformance runs mini-kcm's controllers in this process for an hour or more: their
    // routine logs would bury the one line per operation that tells the progress.
    let default_filter = if runs_for_long_in_process(&cli.command) {
        QUIET_LOG_FILTER
    } else {
        DEFAULT_LOG_FILTER
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => logs.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => logs.json().with_current_span(true).init(),
    }
    let threads = match &cli.command {
        Command::Run(args) => args.threads,
        // The local plane, the benchmark and conformance drivers supervise processes and watch many
        // objects at once: one thread per CPU, tokio's default.
        _ => 0,
    };
    let runtime = match async_runtime(threads) {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("mini-kcm: error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    runtime.block_on(run_command(cli.command))
}

/// The async runtime: `threads` 1 is tokio's current-thread runtime (every task on the main thread), 0
/// its multi-thread runtime with one worker per CPU (or `TOKIO_WORKER_THREADS`), N that many workers.
fn async_runtime(threads: usize) -> std::io::Result<tokio::runtime::Runtime> {
    let mut builder = match threads {
        1 => tokio::runtime::Builder::new_current_thread(),
        0 => tokio::runtime::Builder::new_multi_thread(),
        n => {
            let mut builder = tokio::runtime::Builder::new_multi_thread();
            builder.worker_threads(n);
            builder
        }
    };
    builder.enable_all().build()
}

async fn run_command(command: Command) -> std::process::ExitCode {
    let result = match command {
        #[cfg(feature = "local-plane")]
        Command::Up(args) => up::run(args).await,
        Command::Run(args) => run::run(*args).await,
        #[cfg(feature = "local-plane")]
        Command::BuildPlane => up::build_plane().await,
        Command::Explain(args) => explain::run(args).await,
        #[cfg(feature = "local-plane")]
        Command::Env(args) => env::run(args),
        #[cfg(feature = "local-plane")]
        Command::Bench(args) => mini_kcm_bench::run(args)
            .await
            .map(|_| ())
            .map_err(Into::into),
        #[cfg(feature = "local-plane")]
        Command::Conformance(args) => mini_kcm_conformance::run(args)
            .await
            .map(|_| ())
            .map_err(Into::into),
        Command::Version => {
            println!("{}", mini_kcm_manager::VERSION);
            Ok(())
        }
        // Prints its errors itself, in kubectl's words.
        Command::Rollout(args) => return rollout::run(args).await,
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mini-kcm: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::runtime::RuntimeFlavor;

    #[test]
    fn run_uses_one_thread_by_default_and_the_other_commands_one_per_cpu() {
        let threads = |args: &[&str]| match Cli::parse_from(args).command {
            Command::Run(run) => run.threads,
            _ => 0,
        };
        assert_eq!(threads(&["mini-kcm", "run"]), 1);
        assert_eq!(threads(&["mini-kcm", "run", "--threads", "4"]), 4);
        assert_eq!(threads(&["mini-kcm", "version"]), 0);
    }

    /// `/flagz` gets every flag of `run`: given, defaulted, unset (empty) and global; not `--help`.
    #[test]
    fn run_hands_the_manager_its_effective_flags() {
        let cli = parse(
            [
                "mini-kcm",
                "run",
                "--kinds=apps",
                "--controllers",
                "*,-daemonset",
                "--leader-elect",
            ]
            .map(Into::into),
        );
        let Command::Run(run) = cli.command else {
            panic!("not run")
        };
        let flags = run.manager_options().flags;
        for (name, value) in [
            ("kinds", "apps"),
            ("controllers", "*,-daemonset"),
            ("leader-elect", "true"),
            ("concurrent-deployment-syncs", "5"),
            ("min-resync-period", "12h"),
            ("metrics-addr", "127.0.0.1:10280"),
            ("kubeconfig", ""),
            ("log-format", "text"),
        ] {
            assert_eq!(
                flags.get(name).map(String::as_str),
                Some(value),
                "{name}: {flags:?}"
            );
        }
        assert!(
            !flags.contains_key("help") && !flags.contains_key("flags"),
            "{flags:?}"
        );
        // Every flag of `run` is there.
        let expected = <run::RunArgs as clap::Args>::augment_args(clap::Command::new("run"))
            .get_arguments()
            .filter_map(|a| a.get_long())
            .count();
        assert_eq!(flags.len(), expected + 1, "{flags:?}");
    }

    #[test]
    fn threads_choose_the_runtime() {
        let one = async_runtime(1).unwrap();
        assert_eq!(one.handle().runtime_flavor(), RuntimeFlavor::CurrentThread);
        let three = async_runtime(3).unwrap();
        assert_eq!(three.handle().runtime_flavor(), RuntimeFlavor::MultiThread);
        assert_eq!(three.metrics().num_workers(), 3);
        let per_cpu = async_runtime(0).unwrap();
        assert_eq!(
            per_cpu.handle().runtime_flavor(),
            RuntimeFlavor::MultiThread
        );
        assert!(per_cpu.metrics().num_workers() >= 1);
    }
}
