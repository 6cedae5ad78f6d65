//! `mini-kcm explain <kind>/<name>`: why a running manager does what it does to one object, at a glance.
//!
//! It asks the manager's live view (`/debug/controllers/object` on its `--metrics-addr`, see
//! docs/live-view.md) and prints the object's queue state, its expectations, what it owns (a Deployment's
//! ReplicaSets and pods with their `pod-template-hash`, a DaemonSet's node → pod map) and its recent
//! decisions: what each sync saw, planned, why, what it wrote and how that went.
//!
//! The address defaults to the manager of a running `mini-kcm up` (which records it in its state
//! directory, [`MANAGER_ADDR_FILE`]), else `mini-kcm run`'s default `127.0.0.1:10280`. One plain HTTP/1.0
//! GET per request over tokio: the endpoint is local and unauthenticated, so no HTTP client is needed.

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;

use anyhow::Context;
use clap::{Args, ValueEnum};
use mini_kcm_local_plane::Binaries;
use mini_kcm_manager::{ObjectView, PodEntry, ViewedKind};
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_runtime::observability::decisions::{Decision, Outcome};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::kind_name::parse_kind_name;

/// Reads `<kind>/<name>` with the kind parser `rollout` uses; the family is the one the kind's name says,
/// else `--family`, else apps/v1. A name and a `--family` that disagree are refused rather than one
/// silently winning.
pub(crate) fn parse_target(
    target: &str,
    family: Option<Family>,
) -> anyhow::Result<(ViewedKind, Family, &str)> {
    let (kind, name) = target
        .split_once('/')
        .with_context(|| format!("{target:?}: expected <kind>/<name>"))?;
    let named = parse_kind_name(kind).with_context(|| {
        format!("unknown kind {kind:?}: use deployment, replicaset or daemonset (or deploy, rs, ds, mdeploy, mrs, mds)")
    })?;
    let named_family = named.family.map(|f| match f {
        ApiFamily::Apps => Family::Apps,
        ApiFamily::Copies => Family::Copies,
    });
    let family = match (named_family, family) {
        (Some(named), Some(flag)) if named != flag => {
            anyhow::bail!("{kind:?} names the {named:?} family but --family says {flag:?}")
        }
        (named, flag) => named.or(flag).unwrap_or(Family::Apps),
    };
    let kind = match named.kind {
        WorkloadKind::Deployment => ViewedKind::Deployment,
        WorkloadKind::ReplicaSet => ViewedKind::ReplicaSet,
        WorkloadKind::DaemonSet => ViewedKind::DaemonSet,
    };
    Ok((kind, family, name))
}

/// The file in a plane's state directory where `mini-kcm up` writes its manager's HTTP address.
pub const MANAGER_ADDR_FILE: &str = "manager.addr";
/// `mini-kcm run`'s default `--metrics-addr`.
const RUN_DEFAULT_ADDR: &str = "127.0.0.1:10280";
/// Decisions shown per ReplicaSet of an explained Deployment.
const RS_DECISIONS: usize = 3;
/// ReplicaSets of a Deployment whose decisions are fetched (the newest revisions).
const RS_WITH_DECISIONS: usize = 3;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Family {
    Apps,
    Copies,
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// `deployment/NAME`, `replicaset/NAME` or `daemonset/NAME`, with the names `rollout` takes (`deploy`,
    /// `rs`, `ds`, the copies' `mdeploy`, `mrs`, `mds`, `deployments.minikcm.dev`, ...).
    target: String,
    #[arg(short = 'n', long, default_value = "default")]
    namespace: String,
    /// `apps` (apps/v1) or `copies` (minikcm.dev/v1). Default: the family the kind's name says
    /// (`mdeploy`, `….minikcm.dev`), else `apps`.
    #[arg(long, value_enum)]
    family: Option<Family>,
    /// The manager's HTTP address (its `--metrics-addr`). Default: the manager of the running
    /// `mini-kcm up`, else 127.0.0.1:10280.
    #[arg(long, env = "MINI_KCM_MANAGER_ADDR")]
    manager_addr: Option<String>,
    /// How many of the object's newest decisions to print (the manager keeps up to 32 per object).
    #[arg(long, default_value_t = 10)]
    decisions: usize,
}

pub async fn run(args: ExplainArgs) -> anyhow::Result<()> {
    let (kind, family, name) = parse_target(&args.target, args.family)?;
    let family = match family {
        Family::Apps => "apps",
        Family::Copies => "copies",
    };
    let addr = match args.manager_addr {
        Some(addr) => addr,
        None => running_up_manager_addr().unwrap_or_else(|| RUN_DEFAULT_ADDR.to_string()),
    };
    let query = format!(
        "kind={}&family={family}&namespace={}&name={}",
        kind.kind(),
        encode(&args.namespace),
        encode(name)
    );
    let mut view: ObjectView =
        get_json(&addr, &format!("/debug/controllers/object?{query}")).await?;
    view.decisions.truncate(args.decisions);
    let mut rs_decisions = Vec::new();
    for rs in view.replica_sets.iter().take(RS_WITH_DECISIONS) {
        let path = format!(
            "/debug/controllers/decisions?controller=replicaset&family={family}&namespace={}&name={}&limit={RS_DECISIONS}",
            encode(&view.namespace),
            encode(&rs.name)
        );
        let decisions: Vec<Decision> = get_json(&addr, &path).await?;
        rs_decisions.push((rs.name.clone(), decisions));
    }
    // `explain … | grep -q …` closes the pipe early: that is not an error.
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(render(&view, &rs_decisions).as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => written.context("writing to stdout"),
    }
}

/// The manager address a running `mini-kcm up` recorded: that of the plane `$KUBECONFIG` names (`up`
/// prints `<slot>/kubeconfig`; several planes may run side by side), else the first plane slot whose
/// owner still runs.
fn running_up_manager_addr() -> Option<String> {
    up_manager_addr(
        &Binaries::cache_root().join("planes"),
        std::env::var_os("KUBECONFIG"),
    )
}

/// [`running_up_manager_addr`] with the plane slots' folder and `$KUBECONFIG` given.
fn up_manager_addr(planes: &Path, kubeconfig: Option<std::ffi::OsString>) -> Option<String> {
    let named_slot = kubeconfig.and_then(|paths| {
        std::env::split_paths(&paths)
            .next()
            .and_then(|kubeconfig| kubeconfig.parent().map(Path::to_path_buf))
    });
    if let Some(addr) = named_slot.and_then(|slot| live_manager_addr(&slot)) {
        return Some(addr);
    }
    let mut slots: Vec<_> = std::fs::read_dir(planes)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    slots.sort();
    slots.into_iter().find_map(|slot| live_manager_addr(&slot))
}

/// The address in `slot`, if its owner process is alive (a stopped plane leaves a stale file).
fn live_manager_addr(slot: &Path) -> Option<String> {
    let pid = std::fs::read_to_string(slot.join("owner.pid")).ok()?;
    let pid: u32 = pid.trim().parse().ok()?;
    if !Path::new(&format!("/proc/{pid}")).exists() {
        return None;
    }
    let addr = std::fs::read_to_string(slot.join(MANAGER_ADDR_FILE)).ok()?;
    Some(addr.trim().to_string()).filter(|a| !a.is_empty())
}

/// Percent-encodes a query value (names are DNS labels, but a typo should not break the request).
fn encode(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One HTTP/1.0 GET, its body parsed as JSON; a non-200 answer is an error with the body as reason.
async fn get_json<T: serde::de::DeserializeOwned>(addr: &str, path: &str) -> anyhow::Result<T> {
    let mut stream = tokio::net::TcpStream::connect(addr).await.with_context(|| {
        format!(
            "no manager answers at {addr}: start one (`mini-kcm up`, or `mini-kcm run --metrics-addr {addr}`) \
             or point --manager-addr at its --metrics-addr"
        )
    })?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .with_context(|| format!("sending the request to {addr}"))?;
    let mut answer = Vec::new();
    stream
        .read_to_end(&mut answer)
        .await
        .with_context(|| format!("reading the answer of {addr}"))?;
    let answer = String::from_utf8_lossy(&answer);
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .with_context(|| format!("{addr} did not answer HTTP"))?;
    let status = head.lines().next().unwrap_or_default();
    if status.split(' ').nth(1) == Some("404") {
        anyhow::bail!(
            "{addr} answers {status} for {path}: is it a mini-kcm manager with the live view (this version or newer)?"
        );
    }
    if status.split(' ').nth(1) != Some("200") {
        anyhow::bail!("{addr} answered {status}: {}", body.trim());
    }
    serde_json::from_str(body).with_context(|| format!("reading the JSON of {path}"))
}

/// The text `explain` prints.
pub fn render(view: &ObjectView, rs_decisions: &[(String, Vec<Decision>)]) -> String {
    let mut out = String::new();
    let o = &mut out;
    let _ = writeln!(
        o,
        "{} {}/{} ({})",
        view.kind, view.namespace, view.name, view.family
    );
    if !view.controller_running {
        let _ = writeln!(
            o,
            "  this manager does not run the {} controller for {}",
            view.kind, view.family
        );
    } else if !view.found {
        let _ = writeln!(
            o,
            "  not in the manager's cache (deleted, not created yet, or outside its --namespace)"
        );
    } else {
        let opt = |v: Option<i64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
        let _ = writeln!(
            o,
            "  desired:      {}    generation {} (observed {})",
            view.desired
                .map_or_else(|| "-".to_string(), |d| d.to_string()),
            opt(view.generation),
            opt(view.observed_generation)
        );
        if let Some(paused) = view.paused {
            let _ = writeln!(
                o,
                "  paused:       {paused}    revision {}",
                view.revision.as_deref().unwrap_or("-")
            );
        }
        if !view.conditions.is_empty() {
            let _ = writeln!(o, "  conditions:");
        }
        for c in &view.conditions {
            let _ = writeln!(
                o,
                "    {} {} ({}): {}",
                c.type_,
                c.status,
                c.reason.as_deref().unwrap_or("-"),
                c.message.as_deref().unwrap_or("")
            );
        }
    }
    if view.controller_running {
        let _ = writeln!(o, "  queue:        {}", view.queue.describe());
        let expects = match &view.expectations {
            Some(e) if e.satisfied => {
                format!("satisfied (recorded {:.1}s ago)", e.age_ms as f64 / 1000.0)
            }
            Some(e) => format!(
                "waiting to observe {} creation(s) and {} deletion(s) (for {:.1}s; gives up in {:.1}s)",
                e.pending_adds.max(0),
                e.pending_deletes.max(0),
                e.age_ms as f64 / 1000.0,
                e.expires_in_ms as f64 / 1000.0
            ),
            None if view.kind == ViewedKind::Deployment.kind() => {
                "none (the Deployment controller waits on its ReplicaSets' status instead)".into()
            }
            None => "nothing pending".into(),
        };
        let _ = writeln!(o, "  expectations: {expects}");
    }

    if view.kind == ViewedKind::Deployment.kind() && view.found {
        let _ = writeln!(o, "\nReplicaSets (newest revision first) and their pods:");
        if view.replica_sets.is_empty() {
            let _ = writeln!(o, "  none");
        }
        for rs in &view.replica_sets {
            let _ = writeln!(
                o,
                "  {}  revision {}  pod-template-hash {}  replicas {} (current {}, ready {}, available {})  owner {}",
                rs.name,
                rs.revision.as_deref().unwrap_or("-"),
                rs.pod_template_hash.as_deref().unwrap_or("-"),
                rs.replicas,
                rs.current,
                rs.ready,
                rs.available,
                rs.owner.as_deref().unwrap_or("none")
            );
            pod_lines(o, "    ", &rs.pods, rs.pods_omitted);
        }
    } else if view.found {
        let _ = writeln!(o, "\nPods:");
        pod_lines(o, "  ", &view.pods, view.pods_omitted);
    }

    if let Some(map) = &view.node_map {
        let _ = writeln!(o, "\nNode → pod map (from the last sync that computed it):");
        let width = map
            .nodes
            .iter()
            .map(|n| n.node.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(
            o,
            "  {:width$}  {:10}  {:30}  WHY",
            "NODE", "SHOULD RUN", "PODS"
        );
        for n in &map.nodes {
            let pods = if n.pods.is_empty() {
                "-".to_string()
            } else {
                n.pods.join(",")
            };
            let line = format!(
                "  {:width$}  {:10}  {:30}  {}",
                n.node,
                if n.should_run { "yes" } else { "no" },
                pods,
                n.why.as_deref().unwrap_or("")
            );
            let _ = writeln!(o, "{}", line.trim_end());
        }
        if map.omitted > 0 {
            let _ = writeln!(o, "  … {} more nodes", map.omitted);
        }
    }

    let _ = writeln!(o, "\nRecent decisions (newest first, times in UTC):");
    if view.decisions.is_empty() {
        let _ = writeln!(
            o,
            "  none kept (no sync decided anything yet, or --decision-log=false)"
        );
    }
    for d in &view.decisions {
        decision_lines(o, "  ", d);
    }
    for (rs, decisions) in rs_decisions {
        if decisions.is_empty() {
            continue;
        }
        let _ = writeln!(o, "\nDecisions of ReplicaSet {rs} (newest first):");
        for d in decisions {
            decision_lines(o, "  ", d);
        }
    }
    out
}

/// `HH:MM:SS.mmm` of an RFC 3339 time (the date is noise when looking at a running manager).
fn clock_time(at: &str) -> &str {
    let time = at.split_once('T').map_or(at, |(_, time)| time);
    let time = time.trim_end_matches('Z');
    match time.char_indices().nth(12) {
        Some((end, _)) => &time[..end],
        None => time,
    }
}

fn pod_lines(o: &mut String, indent: &str, pods: &[PodEntry], omitted: usize) {
    if pods.is_empty() {
        let _ = writeln!(o, "{indent}(no pods)");
    }
    for p in pods {
        let state = if p.deleting {
            "deleting"
        } else if p.ready {
            "ready"
        } else {
            "not ready"
        };
        let hash = match (&p.pod_template_hash, &p.controller_revision_hash) {
            (Some(hash), _) => format!("hash {hash}"),
            (None, Some(revision)) => format!("revision-hash {revision}"),
            (None, None) => "hash -".to_string(),
        };
        let _ = writeln!(
            o,
            "{indent}{}  {hash}  node {}  {}  {}  owner {}",
            p.name,
            p.node.as_deref().unwrap_or("(unscheduled)"),
            p.phase.as_deref().unwrap_or("-"),
            state,
            p.owner.as_deref().unwrap_or("none")
        );
    }
    if omitted > 0 {
        let _ = writeln!(o, "{indent}… {omitted} more");
    }
}

fn decision_lines(o: &mut String, indent: &str, d: &Decision) {
    let outcome = match &d.outcome {
        Outcome::Done => "done".to_string(),
        Outcome::Failed { error } => format!("FAILED: {error}"),
        // Not an error: the sync is retried (the reason's explanation follows below).
        Outcome::Retried { reason, error } => {
            format!("retried, routine ({}): {error}", reason.label())
        }
    };
    let repeats = if d.repeats > 0 {
        format!(
            "  (same decision {}×, time of the last)",
            d.repeats.saturating_add(1)
        )
    } else {
        String::new()
    };
    let _ = writeln!(
        o,
        "{indent}{}  #{}  {}/{}  {:.1} ms  {outcome}{repeats}",
        clock_time(&d.at),
        d.seq,
        d.controller,
        d.family,
        d.duration_ms
    );
    if let Outcome::Retried { reason, .. } = &d.outcome {
        let _ = writeln!(o, "{indent}    routine: {}", reason.why());
    }
    if !d.woken_by.is_empty() {
        let more = if d.woken_more > 0 {
            format!(" (+{} more)", d.woken_more)
        } else {
            String::new()
        };
        let _ = writeln!(
            o,
            "{indent}    woken by: {}{more}  (waited {:.1} ms in the queue)",
            d.woken_by.join("; "),
            d.waited_ms
        );
    }
    if !d.observed.is_empty() {
        let saw: Vec<String> = d
            .observed
            .iter()
            .map(|ob| format!("{}={}", ob.what, ob.value))
            .collect();
        let _ = writeln!(o, "{indent}    saw:     {}", saw.join(" "));
    }
    for (label, lines) in [
        ("plan:   ", &d.plan),
        ("why:    ", &d.reasons),
        ("skipped:", &d.skipped),
    ] {
        for line in lines {
            let _ = writeln!(o, "{indent}    {label} {line}");
        }
    }
    for w in &d.writes {
        let result = match (&w.error, w.routine) {
            (None, _) => "ok".to_string(),
            (Some(e), Some(reason)) => format!("{} (routine, retried): {e}", reason.label()),
            (Some(e), None) => format!("failed: {e}"),
        };
        let _ = writeln!(o, "{indent}    wrote:   {} {}: {result}", w.verb, w.object);
    }
    if d.omitted > 0 {
        let _ = writeln!(
            o,
            "{indent}    … {} more lines or writes not kept",
            d.omitted
        );
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use mini_kcm_manager::{ConditionEntry, KeyQueueState, ReplicaSetEntry};
    use mini_kcm_runtime::observability::decisions::{
        NodeMap, NodePlacement, Observation, RoutineRetry, Write,
    };

    #[test]
    fn the_plane_kubeconfig_names_wins_over_the_first_running_one() {
        let planes =
            std::env::temp_dir().join(format!("mini-kcm-explain-slots-{}", std::process::id()));
        for (slot, addr) in [("plane-1", "127.0.0.1:1"), ("plane-2", "127.0.0.1:2")] {
            let dir = planes.join(slot);
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
            // This process is alive: both slots' owners run.
            std::fs::write(dir.join("owner.pid"), std::process::id().to_string())
                .unwrap_or_else(|e| panic!("{e}"));
            std::fs::write(dir.join(MANAGER_ADDR_FILE), addr).unwrap_or_else(|e| panic!("{e}"));
        }
        let kubeconfig = |slot: &str| Some(planes.join(slot).join("kubeconfig").into_os_string());
        assert_eq!(
            up_manager_addr(&planes, kubeconfig("plane-2")).as_deref(),
            Some("127.0.0.1:2")
        );
        assert_eq!(
            up_manager_addr(&planes, None).as_deref(),
            Some("127.0.0.1:1")
        );
        // A kubeconfig of no running plane: the first that runs.
        assert_eq!(
            up_manager_addr(&planes, kubeconfig("plane-9")).as_deref(),
            Some("127.0.0.1:1")
        );
        let _ = std::fs::remove_dir_all(&planes);
    }

    fn decision() -> Decision {
        Decision {
            seq: 7,
            at: "2026-11-23T17:40:01.5Z".into(),
            controller: "replicaset".into(),
            family: "apps".into(),
            kind: "ReplicaSet".into(),
            namespace: "default".into(),
            name: "web-abc".into(),
            observed: vec![Observation {
                what: "desired".into(),
                value: 3,
            }],
            plan: vec!["creating 1 pod".into()],
            reasons: vec!["too few replicas: 2 active of 3 desired".into()],
            skipped: vec![],
            writes: vec![Write {
                verb: "create".into(),
                object: "pod web-abc-x".into(),
                error: Some("quota exceeded".into()),
                routine: None,
            }],
            omitted: 0,
            outcome: Outcome::Failed {
                error: "1 creation failed".into(),
            },
            duration_ms: 2.0,
            repeats: 0,
            woken_by: vec!["pod web-abc-y deleted".into()],
            woken_more: 0,
            waited_ms: 1.3,
        }
    }

    fn view(kind: &str) -> ObjectView {
        ObjectView {
            kind: kind.into(),
            family: "apps".into(),
            namespace: "default".into(),
            name: "web".into(),
            controller_running: true,
            found: true,
            uid: Some("u".into()),
            desired: Some(3),
            generation: Some(2),
            observed_generation: Some(2),
            paused: None,
            revision: None,
            conditions: Vec::new(),
            queue: KeyQueueState::Waiting {
                retries: 2,
                next_attempt_in_ms: 400,
                routine: None,
            },
            expectations: None,
            replica_sets: Vec::new(),
            pods: Vec::new(),
            pods_omitted: 0,
            node_map: None,
            rollout: Vec::new(),
            decisions: vec![decision()],
        }
    }

    #[test]
    fn a_deployment_reads_as_queue_tree_and_decisions() {
        let mut v = view("Deployment");
        v.replica_sets.push(ReplicaSetEntry {
            name: "web-abc".into(),
            pod_template_hash: Some("abc".into()),
            revision: Some("2".into()),
            replicas: 3,
            current: 3,
            ready: 2,
            available: 2,
            owner: Some("Deployment/web".into()),
            pods: vec![PodEntry {
                name: "web-abc-x".into(),
                owner: Some("ReplicaSet/web-abc".into()),
                pod_template_hash: Some("abc".into()),
                controller_revision_hash: None,
                node: Some("kwok-node-1".into()),
                phase: Some("Running".into()),
                ready: true,
                deleting: false,
            }],
            pods_omitted: 0,
        });
        v.paused = Some(true);
        v.revision = Some("2".into());
        v.conditions.push(ConditionEntry {
            type_: "Progressing".into(),
            status: "Unknown".into(),
            reason: Some("DeploymentPaused".into()),
            message: Some("Deployment is paused".into()),
        });
        let mut repeated = decision();
        repeated.repeats = 2;
        let text = render(&v, &[("web-abc".into(), vec![repeated])]);
        assert!(
            text.contains("  paused:       true    revision 2\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "  conditions:\n    Progressing Unknown (DeploymentPaused): Deployment is paused\n"
            ),
            "{text}"
        );
        assert!(
            text.starts_with("Deployment default/web (apps)\n"),
            "{text}"
        );
        assert!(
            text.contains("queue:        in backoff after 2 failed syncs: next attempt in 0.4s"),
            "{text}"
        );
        assert!(text.contains("waits on its ReplicaSets' status"), "{text}");
        assert!(
            text.contains("web-abc  revision 2  pod-template-hash abc  replicas 3"),
            "{text}"
        );
        assert!(
            text.contains("    web-abc-x  hash abc  node kwok-node-1  Running  ready  owner ReplicaSet/web-abc"),
            "{text}"
        );
        assert!(text.contains("why:     too few replicas"), "{text}");
        assert!(
            text.contains("    woken by: pod web-abc-y deleted  (waited 1.3 ms in the queue)\n"),
            "{text}"
        );
        assert!(
            text.contains("wrote:   create pod web-abc-x: failed: quota exceeded"),
            "{text}"
        );
        assert!(text.contains("Decisions of ReplicaSet web-abc"), "{text}");
        assert!(
            text.contains("(same decision 3×, time of the last)"),
            "{text}"
        );
    }

    #[test]
    fn a_routine_retry_is_not_shown_as_a_failure() {
        let mut v = view("ReplicaSet");
        v.queue = KeyQueueState::Waiting {
            retries: 1,
            next_attempt_in_ms: 5,
            routine: Some(RoutineRetry::Conflict),
        };
        let mut retried = decision();
        retried.outcome = Outcome::Retried {
            reason: RoutineRetry::Conflict,
            error: "updating the status: Operation cannot be fulfilled".into(),
        };
        v.decisions = vec![retried];
        let text = render(&v, &[]);
        assert!(
            !text.contains("FAILED") && !text.contains("failed sync"),
            "{text}"
        );
        assert!(
            text.contains("queue:        routine retry (write conflict, not a failure) after 1 unfinished sync"),
            "{text}"
        );
        assert!(
            text.contains("retried, routine (write conflict): updating the status"),
            "{text}"
        );
        assert!(
            text.contains(&format!("    routine: {}", RoutineRetry::Conflict.why())),
            "{text}"
        );
    }

    #[test]
    fn a_daemon_set_shows_its_node_map() {
        let mut v = view("DaemonSet");
        v.node_map = Some(NodeMap {
            nodes: vec![
                NodePlacement {
                    node: "kwok-node-1".into(),
                    should_run: true,
                    pods: vec!["agent-x".into()],
                    why: None,
                },
                NodePlacement {
                    node: "kwok-node-2".into(),
                    should_run: false,
                    pods: vec![],
                    why: Some("does not tolerate taint x".into()),
                },
            ],
            omitted: 0,
        });
        let text = render(&v, &[]);
        assert!(text.contains("Node → pod map"), "{text}");
        assert!(
            text.lines().any(|l| l.contains("kwok-node-2")
                && l.contains("no")
                && l.ends_with("does not tolerate taint x")),
            "{text}"
        );
        assert!(text.contains("expectations: nothing pending"), "{text}");
    }

    #[test]
    fn times_read_as_clock_times() {
        assert_eq!(clock_time("2026-11-23T17:40:01.512345678Z"), "17:40:01.512");
        assert_eq!(clock_time("2026-11-23T17:40:01Z"), "17:40:01");
        assert_eq!(clock_time("garbage"), "garbage");
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(encode("web-1.a_b"), "web-1.a_b");
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }

    /// A plane slot names its manager only while its owner runs (a stopped `up` leaves the file).
    #[test]
    fn a_slot_names_its_manager_only_while_its_owner_runs() {
        let slot = std::env::temp_dir().join(format!("explain-slot-{}", std::process::id()));
        std::fs::create_dir_all(&slot).unwrap();
        std::fs::write(slot.join(MANAGER_ADDR_FILE), "127.0.0.1:4242\n").unwrap();
        std::fs::write(slot.join("owner.pid"), std::process::id().to_string()).unwrap();
        assert_eq!(live_manager_addr(&slot).as_deref(), Some("127.0.0.1:4242"));
        // Above the kernel's pid limit (2^22): no such process.
        std::fs::write(slot.join("owner.pid"), "4194305").unwrap();
        assert_eq!(live_manager_addr(&slot), None);
        std::fs::remove_dir_all(&slot).unwrap();
    }

    #[tokio::test]
    async fn nothing_listening_is_a_clear_error() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap();
        let err = get_json::<ObjectView>(&port.to_string(), "/x")
            .await
            .unwrap_err();
        assert!(
            format!("{err:#}").contains("no manager answers at"),
            "{err:#}"
        );
    }
}
