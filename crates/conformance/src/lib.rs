//! `mini-kcm conformance`: Kubernetes' own e2e specs for the workload controllers, run against a local
//! plane whose Deployment, ReplicaSet and DaemonSet controllers are mini-kcm's, and with `--compare` also
//! against one with kube-controller-manager's, side by side (docs/conformance.md).
//!
//! The specs are upstream's (`test/e2e/apps`, and for the widened net `test/e2e/apimachinery` and
//! `test/e2e/kubectl`), compiled from the same k8s.io/kubernetes module as the plane behind mini-kcm's own
//! test main ([`E2eBinary`]). A spec counts against mini-kcm when it fails on mini-kcm's plane and is not
//! an expected failure ([`specs::EXPECTED_FAILURES`], each failing with upstream's controllers too).
//!
//! Where to start reading: [`run`] (below), then `side.rs` (the plane of one side), `run.rs` (running the
//! e2e binary against it), `specs.rs` (which specs, and the expected failures) and `report.rs`.

// The public surface is the list of `pub` items below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod binary;
mod error;
mod random;
mod report;
mod run;
mod side;
pub mod specs;

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;

pub use binary::E2eBinary;
pub use error::ConformanceError;
pub use report::{Outcome, SideResults, SpecResult, table};

pub use side::Side;
use side::SidePlane;
pub use specs::SpecSet;

/// The command line of `mini-kcm conformance`.
#[derive(Debug, Clone, Args)]
pub struct ConformanceArgs {
    /// Also run the specs against kube-controller-manager's own controllers and print both side by side.
    #[arg(long)]
    pub compare: bool,
    /// Which spec sets to run (comma-separated): apps (sig-apps Deployment, ReplicaSet, Daemon set,
    /// ControllerRevision), disruption (sig-apps DisruptionController), widened (apimachinery and kubectl
    /// specs that drive Deployments and ReplicaSets).
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = SpecSet::ALL)]
    pub sets: Vec<SpecSet>,
    /// e2e processes running specs at once on a plane (`[Serial]` specs always run alone).
    #[arg(long, default_value_t = 4)]
    pub parallel: usize,
    /// Simulated nodes of each plane.
    #[arg(long, default_value_t = 3)]
    pub nodes: usize,
    /// Where reports, logs and the table (table.md) go.
    #[arg(long, default_value = "target/conformance")]
    pub out: PathBuf,
    /// Instead of upstream's specs: N sequences of random user operations, each replayed on a plane
    /// with kube-controller-manager's workload controllers and one with mini-kcm's, every settled state
    /// compared (0: none).
    #[arg(long, default_value_t = 0)]
    pub random: usize,
    /// The first sequence's seed (the next ones count up from it).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Operations per sequence.
    #[arg(long, default_value_t = 15)]
    pub ops: usize,
    /// With --random: report a divergence as found, without minimising it (each try replays the
    /// sequence on both planes).
    #[arg(long)]
    pub no_minimise: bool,
    /// Only list the specs the sets select, on each side's plane (Ginkgo's dry run), and run none: a
    /// quick check of the setup (a few seconds per side instead of minutes).
    #[arg(long)]
    pub list: bool,
}

/// `out` resolved against the current directory now: the e2e binary runs in a folder of its own, where
/// a relative report path would name another file than the one read back.
fn absolute_out(out: &Path) -> Result<PathBuf, ConformanceError> {
    std::path::absolute(out)
        .map_err(|e| ConformanceError::io(format!("resolving {}", out.display()), e))
}

/// Runs the specs of `sets` on a fresh plane of `side` and returns one result per spec.
pub async fn run_side(
    side: Side,
    binary: &E2eBinary,
    sets: &[SpecSet],
    parallel: usize,
    nodes: usize,
    out: PathBuf,
    progress: impl Fn(&str),
) -> Result<SideResults, ConformanceError> {
    let started = Instant::now();
    let (_, results) = on_side(side, binary, sets, parallel, nodes, out, false, &progress).await?;
    Ok(SideResults {
        side,
        results,
        wall_seconds: started.elapsed().as_secs_f64(),
    })
}

/// Starts a plane of `side`, lists the specs of `sets` on it, runs them unless `list_only`, stops the
/// plane. Returns the listed specs and the results (none when only listing).
#[allow(clippy::too_many_arguments)]
async fn on_side(
    side: Side,
    binary: &E2eBinary,
    sets: &[SpecSet],
    parallel: usize,
    nodes: usize,
    out: PathBuf,
    list_only: bool,
    progress: &impl Fn(&str),
) -> Result<(Vec<(SpecSet, String)>, Vec<SpecResult>), ConformanceError> {
    let out = absolute_out(&out)?;
    std::fs::create_dir_all(&out)
        .map_err(|e| ConformanceError::io(format!("creating {}", out.display()), e))?;
    progress(&format!(
        "{}: starting a plane with {nodes} nodes",
        side.name()
    ));
    let side_plane = SidePlane::start(side, &binary.plane, nodes).await?;
    let kubeconfig = side_plane.plane.kubeconfig().to_path_buf();
    let plan = run::RunPlan {
        binary,
        kubeconfig: &kubeconfig,
        sets,
        parallel,
        out,
    };
    let outcome = async {
        let specs = run::list(&plan).await?;
        progress(&format!(
            "{}: {} specs selected; reports and logs in {}",
            side.name(),
            specs.len(),
            plan.out.display()
        ));
        if list_only {
            return Ok::<_, ConformanceError>((specs, Vec::new()));
        }
        let results = run::run(&plan, &specs, |line| {
            progress(&format!("{}: {line}", side.name()))
        })
        .await?;
        Ok((specs, results))
    }
    .await;
    let manager_failed = side_plane.manager_failed();
    let stopped = side_plane.stop().await;
    let listed_and_results = outcome?;
    if manager_failed {
        stopped?;
    }
    Ok(listed_and_results)
}

/// `sequences` sequences of `ops` random operations from `seed`, each replayed on a plane with
/// kube-controller-manager's workload controllers and one with mini-kcm's (`--random`; reports go to
/// `out`). Returns how many diverged (each reported, and minimised unless `minimise` is false).
pub async fn random_sequences(
    sequences: usize,
    seed: u64,
    ops: usize,
    out: &Path,
    minimise: bool,
    progress: impl Fn(&str),
) -> Result<usize, ConformanceError> {
    let versions = mini_kcm_local_plane::VersionSet::selected()?;
    let binaries = mini_kcm_local_plane::Binaries::ensure(&versions).await?;
    let plan = random::RandomPlan {
        sequences,
        first_seed: seed,
        ops,
        nodes: 3,
        out: absolute_out(out)?,
        minimise,
    };
    Ok(random::run_random(&binaries, &plan, progress).await?.len())
}

/// `mini-kcm conformance`: runs the sets on mini-kcm's plane (and upstream's with `--compare`), prints
/// the table and writes it to `<out>/table.md`. Fails when a spec fails on mini-kcm's plane that is not an
/// expected failure.
pub async fn run(args: ConformanceArgs) -> Result<Vec<SideResults>, ConformanceError> {
    let progress = |line: &str| eprintln!("conformance: {line}");
    if args.random > 0 {
        let versions = mini_kcm_local_plane::VersionSet::selected()?;
        let binaries = mini_kcm_local_plane::Binaries::ensure(&versions).await?;
        let plan = random::RandomPlan {
            sequences: args.random,
            first_seed: args.seed,
            ops: args.ops,
            nodes: args.nodes,
            out: absolute_out(&args.out)?,
            minimise: !args.no_minimise,
        };
        let divergences = random::run_random(&binaries, &plan, progress).await?;
        progress(&format!(
            "{} sequence(s) of {} operations from seed {}: {} diverged",
            plan.sequences,
            plan.ops,
            plan.first_seed,
            divergences.len()
        ));
        if !divergences.is_empty() {
            return Err(ConformanceError::Diverged(divergences.len()));
        }
        return Ok(Vec::new());
    }
    progress("building (or finding cached) the plane and the e2e binary");
    let binary = E2eBinary::ensure().await?;
    let mut sides = vec![Side::Mini];
    if args.compare {
        sides.push(Side::Upstream);
    }
    let out_root = absolute_out(&args.out)?;
    if args.list {
        for side in sides {
            let out = out_root.join(side.name());
            let (specs, _) = on_side(
                side,
                &binary,
                &args.sets,
                args.parallel,
                args.nodes,
                out,
                true,
                &progress,
            )
            .await?;
            for (set, spec) in &specs {
                println!("{}\t{}\t{spec}", side.name(), set.name());
            }
            progress(&format!("{}: {} specs listed", side.name(), specs.len()));
        }
        return Ok(Vec::new());
    }
    let mut results = Vec::new();
    for side in sides {
        let out = out_root.join(side.name());
        results.push(
            run_side(
                side,
                &binary,
                &args.sets,
                args.parallel,
                args.nodes,
                out,
                progress,
            )
            .await?,
        );
    }
    let table = table(&results);
    println!("{table}");
    let path = out_root.join("table.md");
    std::fs::write(&path, &table)
        .map_err(|e| ConformanceError::io(format!("writing {}", path.display()), e))?;
    progress(&format!("table written to {}", path.display()));
    let mini = &results[0];
    let failures = mini.unexpected_failures();
    if !failures.is_empty() {
        return Err(ConformanceError::UnexpectedFailures(
            failures.iter().map(|r| r.spec.clone()).collect(),
        ));
    }
    Ok(results)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_relative_out_is_resolved_against_the_current_directory() {
        let resolved =
            absolute_out(Path::new("target/conformance")).unwrap_or_else(|e| panic!("{e}"));
        let cwd = std::env::current_dir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(resolved, cwd.join("target/conformance"));
        let already = cwd.join("elsewhere");
        assert_eq!(
            absolute_out(&already).unwrap_or_else(|e| panic!("{e}")),
            already
        );
    }

    #[test]
    fn the_default_out_is_relative_so_it_needs_resolving() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            args: ConformanceArgs,
        }
        let args = Cli::parse_from(["conformance"]).args;
        assert!(args.out.is_relative());
        assert!(
            absolute_out(&args.out)
                .unwrap_or_else(|e| panic!("{e}"))
                .is_absolute()
        );
    }
}
