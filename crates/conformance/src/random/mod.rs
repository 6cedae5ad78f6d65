//! `mini-kcm conformance --random N`: the same random user operations on two planes, one reconciled by
//! kube-controller-manager's workload controllers and one by mini-kcm's, and after each operation, once
//! both have settled, their states compared with upstream as the oracle (docs/conformance.md).
//!
//! - `ops.rs`: the operations, drawn from a seed, written as the `kubectl` commands they are;
//! - `state.rs`: the state compared, normalised, and the differences between two states;
//! - `rules.rs`: the deliberate differences, each a named rule with the doc that explains it.
//!
//! A sequence runs in a namespace of its own on both planes; the nodes' labels, taints and cordons it
//! set are undone before the next. After an operation, each plane has settled when its state stayed the
//! same for [`QUIET`] (one that does not within [`SETTLE_WITHIN`] is a divergence); states that still
//! differ then are compared again until [`AGREE_WITHIN`] (after a node's removal
//! [`AGREE_AFTER_NODE_REMOVAL_WITHIN`]) has passed (a progress deadline or `minReadySeconds` elapses on
//! each plane at its own moment), and only then is it a divergence. Agreement must hold on the next
//! poll, and for [`QUIET`] where it came late; after the last operation the planes are compared once
//! more after a pause. mini-kcm's manager exiting is a divergence.

mod ops;
mod rules;
mod state;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mini_kcm_local_plane::{Binaries, config_from_kubeconfig};
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::time::Instant;

use crate::ConformanceError;
use crate::side::{Side, SidePlane};
use ops::Op;

/// How long a plane's state must stay the same to count as settled.
const QUIET: Duration = Duration::from_secs(3);
/// The longest wait for a plane to settle.
const SETTLE_WITHIN: Duration = Duration::from_secs(90);
/// How long two settled planes may take to agree.
const AGREE_WITHIN: Duration = Duration::from_secs(30);
/// How long two planes may take to agree after a node was removed: its pods stay until
/// kube-controller-manager's pod garbage collector deletes them, 40 s after the node is gone and
/// checked every 20 s, and the DaemonSets only then act on their loss (on both planes alike; before
/// that they differ wherever upstream had surged onto the removed node, which it picks at random).
const AGREE_AFTER_NODE_REMOVAL_WITHIN: Duration = Duration::from_secs(90);
const POLL: Duration = Duration::from_millis(500);
/// Workload writes on a plane, after the last operation and its agreement, beyond the other plane's,
/// that make a hot loop. Timers write on both planes alike (a progress deadline passing, pods becoming
/// available after `minReadySeconds`: seed 7006 wrote 3 on each), a loop writes on.
const HOT_LOOP_WRITES: u64 = 3;

/// What `--random` runs.
#[derive(Debug, Clone)]
pub(crate) struct RandomPlan {
    pub(crate) sequences: usize,
    pub(crate) first_seed: u64,
    pub(crate) ops: usize,
    pub(crate) nodes: usize,
    pub(crate) out: PathBuf,
    /// On a divergence, drop every operation it does not need (each try is a replay).
    pub(crate) minimise: bool,
}

/// The first operation after which the planes did not agree.
#[derive(Debug, Clone)]
pub(crate) struct Divergence {
    pub(crate) seed: u64,
    /// The commands up to and including the one after which the states differ.
    pub(crate) commands: Vec<String>,
    pub(crate) differences: Vec<String>,
}

/// A plane's state once it stopped changing, or when the wait for that gave up.
struct Settled {
    state: Value,
    /// It stayed the same for [`QUIET`] within [`SETTLE_WITHIN`].
    settled: bool,
}

/// One plane of the comparison, with what runs commands against it.
struct Target {
    side: Side,
    plane: SidePlane,
    client: kube::Client,
    kubeconfig: PathBuf,
    kubectl: PathBuf,
    /// Invariants broken in the states read so far ([`state::broken_invariants`]).
    broken: std::sync::Mutex<Vec<String>>,
}

impl Target {
    async fn start(
        side: Side,
        binaries: &Binaries,
        nodes: usize,
    ) -> Result<Target, ConformanceError> {
        let plane = SidePlane::start(side, binaries, nodes).await?;
        let kubeconfig = plane.plane.kubeconfig().to_path_buf();
        let config = config_from_kubeconfig(&kubeconfig).await?;
        let client = kube::Client::try_from(config).map_err(|e| ConformanceError::Kube {
            context: "building a client".into(),
            source: e,
        })?;
        Ok(Target {
            side,
            plane,
            client,
            kubeconfig,
            kubectl: binaries.path("kubectl"),
            broken: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// Runs `kubectl <args>` (in namespace `ns` when given), with `stdin`; its output on failure.
    async fn kubectl(
        &self,
        ns: Option<&str>,
        args: &[String],
        stdin: Option<&str>,
    ) -> Result<(), String> {
        let mut command = tokio::process::Command::new(&self.kubectl);
        command.arg("--kubeconfig").arg(&self.kubeconfig);
        if let Some(ns) = ns {
            command.args(["-n", ns]);
        }
        command
            .args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| e.to_string())?;
        if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
            pipe.write_all(text.as_bytes())
                .await
                .map_err(|e| e.to_string())?;
        }
        let output = child.wait_with_output().await.map_err(|e| e.to_string())?;
        if output.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&output.stderr).trim().to_string())
        }
    }

    /// Applies `op`; what a refused command said (both planes should refuse alike: it is compared).
    async fn apply(&self, ns: &str, op: &Op) -> String {
        let result = match op {
            Op::Apply { manifest, .. } => {
                self.kubectl(
                    Some(ns),
                    &["apply".into(), "-f".into(), "-".into()],
                    Some(&manifest.to_string()),
                )
                .await
            }
            Op::Kubectl { args } => self.kubectl(Some(ns), args, None).await,
            Op::Burst { ops } => {
                // Each command's own outcome, in order: a refusal is compared as the others are.
                let mut said = Vec::new();
                for op in ops {
                    said.push(Box::pin(self.apply(ns, op)).await);
                }
                return said.join(", ");
            }
            Op::OnPod {
                owner,
                index,
                verb,
                rest,
            } => match self.pod_at(ns, owner, *index).await {
                Some(pod) => {
                    let args: Vec<String> = verb
                        .iter()
                        .cloned()
                        .chain([pod])
                        .chain(rest.iter().cloned())
                        .collect();
                    self.kubectl(Some(ns), &args, None).await
                }
                None => Ok(()),
            },
        };
        match result {
            Ok(()) => "ok".into(),
            // The server's words name objects by generated names: only whether it failed is compared.
            Err(_) => "refused".into(),
        }
    }

    /// The rule "daemonset-recount-on-node-verdict" ([`rules::RULES`]): for upstream's plane only.
    async fn recount_daemon_sets(&self, ns: &str, step: usize) {
        let _ = self
            .kubectl(Some(ns), &rules::recount_daemon_sets_args(step), None)
            .await;
    }

    /// The `index`-th live pod of `owner` ([`state::pod_at`]); `None` when it has none.
    async fn pod_at(&self, ns: &str, owner: &str, index: usize) -> Option<String> {
        use k8s_openapi::api::core::v1::Pod;
        let pods = kube::Api::<Pod>::namespaced(self.client.clone(), ns)
            .list(&Default::default())
            .await
            .ok()?
            .items;
        let nodes = state::nodes(&self.client).await.ok()?;
        state::pod_at(&pods, &nodes, owner, index)
    }

    /// The writes to the workload resources this plane's API server has answered so far
    /// ([`state::workload_writes`] of its `/metrics`).
    async fn workload_writes(&self) -> Result<u64, ConformanceError> {
        let context = || format!("reading the API server's metrics on {}", self.side.name());
        let request = http::Request::get("/metrics")
            .body(Vec::new())
            .map_err(|e| ConformanceError::Random(format!("{}: {e}", context())))?;
        let text = self
            .client
            .request_text(request)
            .await
            .map_err(|e| ConformanceError::Kube {
                context: context(),
                source: e,
            })?;
        Ok(state::workload_writes(&text))
    }

    /// The namespace's normalised state; the invariants it breaks are kept for [`Target::take_broken`].
    async fn state(&self, ns: &str) -> Result<Value, ConformanceError> {
        let (state, broken) =
            state::snapshot(&self.client, ns)
                .await
                .map_err(|e| ConformanceError::Kube {
                    context: format!("reading the state of {} on {}", ns, self.side.name()),
                    source: e,
                })?;
        if !broken.is_empty() {
            let mut seen = self.broken.lock().unwrap_or_else(|e| e.into_inner());
            for b in broken {
                if !seen.contains(&b) {
                    seen.push(b);
                }
            }
        }
        Ok(state)
    }

    /// The invariants broken in any state read since the last call, each once.
    fn take_broken(&self) -> Vec<String> {
        std::mem::take(&mut *self.broken.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Waits until the state stays the same for [`QUIET`] and returns it; after [`SETTLE_WITHIN`], the
    /// last state with `settled: false` (a plane that never settles is a divergence).
    async fn settled(&self, ns: &str) -> Result<Settled, ConformanceError> {
        let deadline = Instant::now() + SETTLE_WITHIN;
        let mut last = self.state(ns).await?;
        let mut since = Instant::now();
        loop {
            tokio::time::sleep(POLL).await;
            let now = self.state(ns).await?;
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= QUIET {
                return Ok(Settled {
                    state: last,
                    settled: true,
                });
            }
            if Instant::now() >= deadline {
                return Ok(Settled {
                    state: last,
                    settled: false,
                });
            }
        }
    }

    /// Deletes a namespace whose sequence is over, without waiting: its workloads would otherwise go on
    /// reacting to the next sequences' node operations.
    async fn clear(&self, ns: &str) {
        let args = ["delete", "namespace", ns, "--wait=false"].map(String::from);
        let _ = self.kubectl(None, &args, None).await;
    }

    /// Undoes what sequences do to nodes, and makes the namespace.
    async fn prepare(&self, ns: &str) -> Result<(), ConformanceError> {
        let all = |args: &[&str]| args.iter().map(|a| (*a).to_string()).collect::<Vec<_>>();
        let _ = self
            .kubectl(
                None,
                &all(&["label", "nodes", "--all", "random/agent-"]),
                None,
            )
            .await;
        let _ = self
            .kubectl(None, &all(&["taint", "nodes", "--all", "random-"]), None)
            .await;
        let _ = self
            .kubectl(None, &all(&["uncordon", "-l", "type=kwok"]), None)
            .await;
        let _ = self
            .kubectl(
                None,
                &all(&["delete", "node", ops::EXTRA_NODE, "--ignore-not-found"]),
                None,
            )
            .await;
        self.kubectl(None, &all(&["create", "namespace", ns]), None)
            .await
            .map_err(|e| {
                ConformanceError::Random(format!(
                    "creating namespace {ns} on {}: {e}",
                    self.side.name()
                ))
            })?;
        // Pods need the namespace's default ServiceAccount, which a controller adds shortly after.
        let deadline = Instant::now() + Duration::from_secs(30);
        while self
            .kubectl(Some(ns), &all(&["get", "serviceaccount", "default"]), None)
            .await
            .is_err()
        {
            if Instant::now() >= deadline {
                return Err(ConformanceError::Random(format!(
                    "no default ServiceAccount in {ns}"
                )));
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(())
    }
}

/// Runs the plan: both planes started side by side, then the sequences one after another. Returns the
/// divergences found (at most one per sequence: it stops at the first).
pub(crate) async fn run_random(
    binaries: &Binaries,
    plan: &RandomPlan,
    progress: impl Fn(&str),
) -> Result<Vec<Divergence>, ConformanceError> {
    progress(&format!(
        "starting two planes with {} nodes each",
        plan.nodes
    ));
    let (mini, upstream) = tokio::join!(
        Target::start(Side::Mini, binaries, plan.nodes),
        Target::start(Side::Upstream, binaries, plan.nodes)
    );
    let (mini, upstream) = (mini?, upstream?);
    let outcome = sequences(&mini, &upstream, plan, &progress).await;
    let (a, b) = tokio::join!(mini.plane.stop(), upstream.plane.stop());
    let divergences = outcome?;
    a?;
    b?;
    Ok(divergences)
}

async fn sequences(
    mini: &Target,
    upstream: &Target,
    plan: &RandomPlan,
    progress: &impl Fn(&str),
) -> Result<Vec<Divergence>, ConformanceError> {
    let nodes = node_names(mini).await?;
    let mut divergences = Vec::new();
    for offset in 0..plan.sequences {
        let seed = plan.first_seed.wrapping_add(offset as u64);
        let ns = format!("random-{seed}");
        let ops = ops::generate(seed, plan.ops, &nodes);
        let label = format!("seed {seed}");
        let Some((step, differences)) = replay(mini, upstream, &ns, &ops, &label, progress).await?
        else {
            continue;
        };
        let ran = &ops[..=step];
        let divergence = Divergence {
            seed,
            commands: ran.iter().map(|op| op.command(&ns)).collect(),
            differences,
        };
        report(&plan.out, &divergence, mini, upstream, &ns).await?;
        if plan.minimise {
            let kept = minimise(mini, upstream, seed, ran, progress).await?;
            let commands: Vec<String> = kept.iter().map(|op| op.command(&ns)).collect();
            let text = format!(
                "seed {seed}: minimised to {} of {} commands, still diverging:\n\n{}\n",
                kept.len(),
                ran.len(),
                commands.join("\n")
            );
            println!("{text}");
            let path = plan
                .out
                .join(format!("random-{seed}"))
                .join("minimised.txt");
            std::fs::write(&path, text)
                .map_err(|e| ConformanceError::io(format!("writing {}", path.display()), e))?;
        }
        divergences.push(divergence);
    }
    Ok(divergences)
}

/// Runs `ops` on both planes in a fresh namespace `ns`; the first step after which they differ, with
/// the differences, or `None` when they agree after every step.
async fn replay(
    mini: &Target,
    upstream: &Target,
    ns: &str,
    ops: &[Op],
    label: &str,
    progress: &impl Fn(&str),
) -> Result<Option<(usize, Vec<String>)>, ConformanceError> {
    let (a, b) = tokio::join!(mini.prepare(ns), upstream.prepare(ns));
    a?;
    b?;
    // What an earlier sequence broke was reported with it.
    mini.take_broken();
    upstream.take_broken();
    let outcome = steps(mini, upstream, ns, ops, label, progress).await;
    if matches!(outcome, Ok(None)) {
        tokio::join!(mini.clear(ns), upstream.clear(ns));
    }
    outcome
}

async fn steps(
    mini: &Target,
    upstream: &Target,
    ns: &str,
    ops: &[Op],
    label: &str,
    progress: &impl Fn(&str),
) -> Result<Option<(usize, Vec<String>)>, ConformanceError> {
    let mut writes = Writes::start(mini, upstream).await?;
    for (step, op) in ops.iter().enumerate() {
        let (said_mini, said_upstream) = tokio::join!(mini.apply(ns, op), upstream.apply(ns, op));
        if op.changes_nodes() {
            // Upstream's only: mini-kcm's DaemonSets must get there through its own node handling.
            upstream.recount_daemon_sets(ns, step).await;
        }
        let mut differences = Vec::new();
        if said_mini != said_upstream {
            differences.push(format!(
                "the command: mini {said_mini} | upstream {said_upstream}"
            ));
        }
        differences.extend(agreement(mini, upstream, ns, op.removes_node()).await?);
        if mini.plane.manager_failed() {
            differences.push("mini-kcm's controller manager exited".into());
        }
        differences.extend(broken_invariants(mini, upstream));
        let (by_mini, by_upstream) = writes.since_last(mini, upstream).await?;
        progress(&format!(
            "{label} step {}/{}: {} ({}; workload writes: mini {by_mini}, upstream {by_upstream})",
            step + 1,
            ops.len(),
            op.summary(),
            if differences.is_empty() {
                "same".to_string()
            } else {
                format!("{} differences", differences.len())
            }
        ));
        if !differences.is_empty() {
            return Ok(Some((step, differences)));
        }
    }
    // Once more after a pause with no operation: a late write (a hot loop, a delayed requeue that
    // undoes the agreement) shows here.
    tokio::time::sleep(QUIET).await;
    let mut differences = agreement(mini, upstream, ns, false).await?;
    differences.extend(broken_invariants(mini, upstream));
    let (by_mini, by_upstream) = writes.since_last(mini, upstream).await?;
    for (side, n, other) in [
        (Side::Mini, by_mini, by_upstream),
        (Side::Upstream, by_upstream, by_mini),
    ] {
        if n >= other.saturating_add(HOT_LOOP_WRITES) {
            differences.push(format!(
                "{}: {n} workload writes after the last step with no operation, the other plane {other} (a hot loop)",
                side.name()
            ));
        }
    }
    progress(&format!(
        "{label} after the last step, re-checked: {} (workload writes meanwhile: mini {by_mini}, \
         upstream {by_upstream}; in all: mini {}, upstream {})",
        if differences.is_empty() {
            "same".to_string()
        } else {
            format!("{} differences", differences.len())
        },
        writes.total.0,
        writes.total.1,
    ));
    if !differences.is_empty() {
        return Ok(Some((ops.len().saturating_sub(1), differences)));
    }
    Ok(None)
}

/// The invariants either plane broke in a state read since the last call, as differences.
fn broken_invariants(mini: &Target, upstream: &Target) -> Vec<String> {
    [mini, upstream]
        .into_iter()
        .flat_map(|t| {
            t.take_broken()
                .into_iter()
                .map(move |b| format!("{} broke an invariant: {b}", t.side.name()))
        })
        .collect()
}

/// Writes to the workload resources on both planes, counted from their API servers' metrics.
struct Writes {
    /// The counters at the last reading (mini, upstream).
    last: (u64, u64),
    /// Since the sequence started (mini, upstream).
    total: (u64, u64),
}

impl Writes {
    async fn start(mini: &Target, upstream: &Target) -> Result<Writes, ConformanceError> {
        let (a, b) = tokio::join!(mini.workload_writes(), upstream.workload_writes());
        Ok(Writes {
            last: (a?, b?),
            total: (0, 0),
        })
    }

    /// The writes on each plane since the last call (mini, upstream).
    async fn since_last(
        &mut self,
        mini: &Target,
        upstream: &Target,
    ) -> Result<(u64, u64), ConformanceError> {
        let (a, b) = tokio::join!(mini.workload_writes(), upstream.workload_writes());
        let now = (a?, b?);
        let delta = (
            now.0.saturating_sub(self.last.0),
            now.1.saturating_sub(self.last.1),
        );
        self.last = now;
        self.total = (self.total.0 + delta.0, self.total.1 + delta.1);
        Ok(delta)
    }
}

/// The diverging sequence `ops` with every operation dropped whose absence still leaves a divergence
/// (each candidate replayed in a namespace of its own), the last one (where it diverged) kept.
async fn minimise(
    mini: &Target,
    upstream: &Target,
    seed: u64,
    ops: &[Op],
    progress: &impl Fn(&str),
) -> Result<Vec<Op>, ConformanceError> {
    let mut kept = ops.to_vec();
    let mut index = 0;
    let mut attempt = 0;
    while index + 1 < kept.len() {
        attempt += 1;
        let mut candidate = kept.clone();
        candidate.remove(index);
        let ns = format!("random-{seed}-m{attempt}");
        let label = format!("seed {seed} minimising, without step {}", index + 1);
        if replay(mini, upstream, &ns, &candidate, &label, progress)
            .await?
            .is_some()
        {
            kept = candidate;
        } else {
            index += 1;
        }
    }
    Ok(kept)
}

/// The differences left once both planes settled and were given [`AGREE_WITHIN`] to agree, or
/// [`AGREE_AFTER_NODE_REMOVAL_WITHIN`] right after a node's removal or while daemon pods still sit on
/// a removed node (until the pod garbage collector deletes them, upstream's rolling update counts such
/// a node as unavailable, and it may have picked that node's pod to replace first: at random).
///
/// Agreement must last: equal states read again a poll later (both were already quiet for [`QUIET`]),
/// and, where they only came to agree after differing, equal on every poll for [`QUIET`]. A plane
/// that did not settle is a difference of its own.
async fn agreement(
    mini: &Target,
    upstream: &Target,
    ns: &str,
    node_removed: bool,
) -> Result<Vec<String>, ConformanceError> {
    let (a, b) = tokio::join!(mini.settled(ns), upstream.settled(ns));
    let (a, b) = (a?, b?);
    let unsettled: Vec<String> = [(&a, mini), (&b, upstream)]
        .into_iter()
        .filter(|(s, _)| !s.settled)
        .map(|(_, t)| {
            format!(
                "{} did not settle within {} s",
                t.side.name(),
                SETTLE_WITHIN.as_secs()
            )
        })
        .collect();
    if !unsettled.is_empty() {
        return Ok(unsettled);
    }
    let (mut a, mut b) = (a.state, b.state);
    let within = if node_removed
        || state::has_pods_on_removed_nodes(&a)
        || state::has_pods_on_removed_nodes(&b)
    {
        AGREE_AFTER_NODE_REMOVAL_WITHIN
    } else {
        AGREE_WITHIN
    };
    let deadline = Instant::now() + within;
    // How long equality must hold: one more poll when the settled states agree at once, QUIET when
    // they came to agree later.
    let mut hold = POLL;
    let mut equal_since: Option<Instant> = None;
    loop {
        let differences = state::differences(&a, &b);
        if differences.is_empty() {
            if equal_since.get_or_insert_with(Instant::now).elapsed() >= hold {
                return Ok(differences);
            }
        } else {
            equal_since = None;
            hold = QUIET;
            if Instant::now() >= deadline {
                return Ok(differences);
            }
        }
        tokio::time::sleep(POLL).await;
        let (x, y) = tokio::join!(mini.state(ns), upstream.state(ns));
        a = x?;
        b = y?;
    }
}

async fn node_names(target: &Target) -> Result<Vec<String>, ConformanceError> {
    use k8s_openapi::api::core::v1::Node;
    let nodes = kube::Api::<Node>::all(target.client.clone())
        .list(&Default::default())
        .await
        .map_err(|e| ConformanceError::Kube {
            context: "listing nodes".into(),
            source: e,
        })?;
    Ok(nodes
        .items
        .into_iter()
        .filter_map(|n| n.metadata.name)
        .collect())
}

/// Prints the divergence and writes both states beside it.
async fn report(
    out: &Path,
    divergence: &Divergence,
    mini: &Target,
    upstream: &Target,
    ns: &str,
) -> Result<(), ConformanceError> {
    let dir = out.join(format!("random-{}", divergence.seed));
    std::fs::create_dir_all(&dir)
        .map_err(|e| ConformanceError::io(format!("creating {}", dir.display()), e))?;
    for target in [mini, upstream] {
        let state = target.state(ns).await?;
        let path = dir.join(format!("{}.json", target.side.name()));
        std::fs::write(
            &path,
            serde_json::to_string_pretty(&state).unwrap_or_default(),
        )
        .map_err(|e| ConformanceError::io(format!("writing {}", path.display()), e))?;
    }
    let rules: Vec<String> = rules::RULES
        .iter()
        .map(|r| format!("  {}: {} ({})", r.name, r.normalisation, r.doc))
        .collect();
    let text = format!(
        "seed {}: the planes differ after these commands:\n\n{}\n\ndifferences:\n  {}\n\nboth states: {}\n\
         deliberate differences normalised on both planes:\n{}\n",
        divergence.seed,
        divergence.commands.join("\n"),
        divergence.differences.join("\n  "),
        dir.display(),
        rules.join("\n")
    );
    println!("{text}");
    let path = dir.join("divergence.txt");
    std::fs::write(&path, text)
        .map_err(|e| ConformanceError::io(format!("writing {}", path.display()), e))
}
