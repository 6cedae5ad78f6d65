//! What a benchmark produced: per-run numbers, per-scenario medians and ratios, the table printed on
//! stdout, the JSON file and the SVG plots.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::BenchError;
use crate::audit::ClientRequests;
use crate::scenario::{Scenario, Size, Sizes};
use crate::side::{ClientLimits, Side};
use crate::stats::{MIN_ROUNDS_FOR_P, median, range, rank_sum_p, ratio};
use crate::svg::{Series, step_chart};

/// One side in one round of one scenario.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub side: Side,
    pub round: u32,
    pub namespace: String,
    /// The impersonated user whose requests are counted.
    pub user: String,
    /// From starting the process until all three controllers have acted on the probe objects.
    pub startup_seconds: f64,
    /// From the create or update until the status says done.
    pub seconds_to_done: f64,
    /// The plane's floor in the same round (see `floor`): the time no controller can beat.
    pub plane_floor_seconds: Option<f64>,
    /// The CPU the floor's client spent on the same pod writes and watches in that round.
    pub plane_floor_cpu_seconds: Option<f64>,
    /// User plus system CPU of the whole process life (start-up, scenario, settling).
    pub cpu_seconds: f64,
    /// The part of it from the create or update until done.
    pub timed_cpu_seconds: f64,
    /// Wake-ups (voluntary context switches, all threads) from the create or update until done.
    pub timed_wakeups: u64,
    /// Wake-ups of the whole process life.
    pub wakeups: u64,
    /// Events of the scenario's pods from the create or update until done.
    pub pod_events: u64,
    /// Bytes of the write bodies the API server read over the process's life (see `body_bytes`).
    pub write_body_bytes: Option<u64>,
    /// How many write bodies that was.
    pub write_bodies: Option<u64>,
    /// CPU spent during the settle window after the scenario was done.
    pub idle_cpu_seconds: f64,
    pub settle_seconds: f64,
    /// The kernel's high-water mark of the resident set (VmHWM).
    pub peak_rss_bytes: u64,
    /// The resident set at the end of the settle window.
    pub steady_rss_bytes: u64,
    /// Its anonymous part (`RssAnon`: heap and stacks, not the executable's pages).
    pub steady_anon_rss_bytes: u64,
    /// All requests of the process, as counted in the audit log.
    pub requests_total: u64,
    /// create, update, patch, delete and deletecollection among them.
    pub requests_writes: u64,
    /// Client name to `"<verb> <resource>"` to count.
    pub requests: ClientRequests,
    /// (seconds since the create or update, Ready pods of the new revision).
    pub ready_pods: Vec<(f64, f64)>,
}

/// The plane's floor of one scenario in one round (see `floor`).
#[derive(Debug, Clone, Serialize)]
pub struct FloorRun {
    pub round: u32,
    pub namespace: String,
    /// From the first create until every new pod is Ready (and every old one deleted).
    pub seconds_to_done: f64,
    /// CPU of the floor's client (the controllers' transport and informers, no controller) over
    /// that time.
    pub cpu_seconds: f64,
    /// Its wake-ups over that time.
    pub wakeups: u64,
    /// Events of the floor's pods over that time.
    pub pod_events: u64,
    /// (seconds since the first create, Ready pods of the new revision).
    pub ready_pods: Vec<(f64, f64)>,
}

/// The medians of one metric on both sides, their ranges, and whether they differ beyond the rounds'
/// scatter.
#[derive(Debug, Clone, Serialize)]
pub struct MetricSummary {
    pub metric: String,
    pub mini_kcm: Option<f64>,
    /// The baseline's (upstream's, unless `--baseline` says otherwise).
    pub baseline: Option<f64>,
    /// mini-kcm / baseline.
    pub ratio: Option<f64>,
    /// Smallest and largest value over mini-kcm's rounds.
    pub mini_kcm_range: Option<(f64, f64)>,
    /// The same over the baseline's rounds.
    pub baseline_range: Option<(f64, f64)>,
    /// The rank-sum test's p-value (see [`rank_sum_p`]): small (say below 0.05) when the sides differ
    /// beyond what the rounds scatter; `None` below [`MIN_ROUNDS_FOR_P`] rounds per side.
    pub p: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub scenario: Scenario,
    pub description: String,
    pub limits: ClientLimits,
    pub runs: Vec<RunResult>,
    /// The plane's floor, one per round (empty with `--plane-floor false`).
    pub plane_floor: Vec<FloorRun>,
    pub summary: Vec<MetricSummary>,
}

/// The whole benchmark, as written to `bench.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub command: String,
    pub size: Size,
    pub sizes: Sizes,
    pub rounds: u32,
    /// What mini-kcm was compared with.
    pub baseline: Side,
    pub limits: ClientLimits,
    pub kubernetes_version: String,
    pub mini_kcm_version: String,
    pub cpus: usize,
    /// /proc/loadavg when the benchmark started and ended: how busy the machine was otherwise.
    pub load_average_start: String,
    pub load_average_end: String,
    pub plane_startup_seconds: f64,
    pub total_seconds: f64,
    pub scenarios: Vec<ScenarioResult>,
    /// `--scenarios fresh-under-load`, which compares three sides in runs of its own (`fresh.rs`).
    pub fresh_under_load: Option<FreshReport>,
    /// `--scenarios failover` (`failover.rs`).
    pub failover: Option<FailoverReport>,
    /// `--scenarios scale` (`scale.rs`).
    pub scale: Option<ScaleReport>,
}

// ---- fresh-under-load (`fresh.rs`) ----

/// One side in one round.
#[derive(Debug, Clone, Serialize)]
pub struct FreshRun {
    pub side: Side,
    pub round: u32,
    /// The Deployment scaled in this run.
    pub scaled: String,
    /// From starting the process until its first restored status was seen.
    pub first_write_seconds: f64,
    /// From the scale until the scaled Deployment was complete with its new size.
    pub fresh_change_seconds: f64,
    /// From starting the process until every Deployment was complete again.
    pub flood_done_seconds: f64,
}

/// The scenario's result: its size and every run.
#[derive(Debug, Clone, Serialize)]
pub struct FreshReport {
    pub deployments: u32,
    pub pods_per_deployment: u32,
    pub limits: ClientLimits,
    pub runs: Vec<FreshRun>,
}

// ---- failover (`failover.rs`) ----

/// One side in one round; every time is in seconds from the kill.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverRun {
    pub side: Side,
    pub round: u32,
    /// The old leader's last renewal plus the Lease's duration: the earliest anyone may take over.
    pub lease_expired_seconds: f64,
    /// The standby holds the Lease.
    pub lease_taken_seconds: f64,
    /// The standby's first write for the change: the Deployment's ReplicaSet scaled.
    pub first_write_seconds: f64,
    /// The Deployment complete with its new size.
    pub reconciled_seconds: f64,
}

/// The scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct FailoverReport {
    pub deployments: u32,
    pub pods_per_deployment: u32,
    pub runs: Vec<FailoverRun>,
}

// ---- scale (`scale.rs`) ----

/// One size of the population, as the bench made it.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleSize {
    pub pods: u32,
    pub replica_sets: u32,
    /// From the first create of this size's additional ReplicaSets and pods until every pod was Ready.
    pub populate_seconds: f64,
    /// `VmRSS` of each process of the plane (etcd, kube-apiserver, ...) once every pod was Ready.
    pub plane_rss_bytes: BTreeMap<String, u64>,
}

/// One side at one size in one round.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleRun {
    pub side: Side,
    pub round: u32,
    pub pods: u32,
    /// From starting the process until its log says every controller's caches are synced.
    pub caches_synced_seconds: f64,
    /// From starting the process until a watch saw its first write (a stale ReplicaSet status restored).
    pub first_write_seconds: f64,
    /// From starting the process until every ReplicaSet status was restored.
    pub statuses_restored_seconds: f64,
    /// User plus system CPU from the start until every status was restored.
    pub startup_cpu_seconds: f64,
    /// `VmRSS` and `RssAnon` at the end of the settle window after the statuses were restored.
    pub steady_rss_bytes: u64,
    pub steady_anon_rss_bytes: u64,
    /// CPU seconds per second in that settle window.
    pub idle_cpu_per_second: f64,
    /// Pods whose annotation the bench changed, one update event each.
    pub pod_events: u32,
    /// From the first change until the side was idle again.
    pub events_seconds: f64,
    /// CPU over that window less the idle rate over it.
    pub events_cpu_seconds: f64,
    pub cpu_seconds_per_1000_pod_events: f64,
    /// The forced relist, at the largest size only.
    pub relist: Option<RelistRun>,
}

/// Every watch expired (the plane's `expire_watches`) and the side relisted.
#[derive(Debug, Clone, Serialize)]
pub struct RelistRun {
    /// From the expiry's start (the API server stopped) until the side had replaced a pod deleted after
    /// the API server was back, i.e. its pod informer had relisted and resumed.
    pub seconds: f64,
    /// The peak resident set from just before the expiry until the side was idle again: `VmHWM` after
    /// resetting it (`/proc/<pid>/clear_refs`), or the largest 200 ms sample if larger.
    pub peak_rss_bytes: u64,
    /// `VmRSS` once the side was idle again.
    pub rss_after_bytes: u64,
    /// The peak over the run's steady RSS.
    pub peak_over_steady: f64,
}

/// A least-squares line of steady memory against pods for one side, and where it leads.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleFit {
    pub side: Side,
    pub rss_bytes_per_pod: f64,
    /// The line at 0 pods.
    pub rss_intercept_bytes: f64,
    pub anon_rss_bytes_per_pod: f64,
    pub anon_rss_intercept_bytes: f64,
    pub projected_pods: u32,
    pub projected_rss_bytes: f64,
    pub projected_anon_rss_bytes: f64,
}

/// The scenario's result.
#[derive(Debug, Clone, Serialize)]
pub struct ScaleReport {
    pub pods_per_replica_set: u32,
    pub nodes: u32,
    pub limits: ClientLimits,
    pub settle_seconds: f64,
    pub sizes: Vec<ScaleSize>,
    pub runs: Vec<ScaleRun>,
    /// One per side, when at least two sizes were measured.
    pub fits: Vec<ScaleFit>,
}

const MIB: f64 = 1024.0 * 1024.0;

/// How a metric is read from a run (`None`: not measured in that run).
type ReadMetric = fn(&RunResult) -> Option<f64>;

/// The metrics of the table: name and how to read it from a run.
const METRICS: [(&str, ReadMetric); 15] = [
    ("time to done (s)", |r| Some(r.seconds_to_done)),
    // What the controller adds to the plane's own time, the part a controller can change.
    ("time above the plane floor (s)", |r| {
        r.plane_floor_seconds.map(|floor| r.seconds_to_done - floor)
    }),
    ("controller CPU (s)", |r| Some(r.cpu_seconds)),
    ("CPU until done (s)", |r| Some(r.timed_cpu_seconds)),
    // What the controller costs beyond moving the same pods through the same transport.
    ("CPU until done above the floor (s)", |r| {
        r.plane_floor_cpu_seconds
            .map(|floor| r.timed_cpu_seconds - floor)
    }),
    ("wake-ups until done", |r| Some(r.timed_wakeups as f64)),
    ("wake-ups per pod event", |r| {
        (r.pod_events > 0).then(|| r.timed_wakeups as f64 / r.pod_events as f64)
    }),
    ("wake-ups per API write", |r| {
        (r.requests_writes > 0).then(|| r.wakeups as f64 / r.requests_writes as f64)
    }),
    ("idle CPU in settle window (s)", |r| {
        Some(r.idle_cpu_seconds)
    }),
    ("peak RSS (MiB)", |r| Some(r.peak_rss_bytes as f64 / MIB)),
    ("steady RSS (MiB)", |r| {
        Some(r.steady_rss_bytes as f64 / MIB)
    }),
    ("steady anonymous RSS (MiB)", |r| {
        Some(r.steady_anon_rss_bytes as f64 / MIB)
    }),
    ("API requests", |r| Some(r.requests_total as f64)),
    ("API writes", |r| Some(r.requests_writes as f64)),
    ("request body bytes per write", |r| {
        let (bytes, writes) = (r.write_body_bytes?, r.write_bodies?);
        (writes > 0).then(|| bytes as f64 / writes as f64)
    }),
];

/// Medians per side, their ratio, ranges and p-value, for every metric.
pub(crate) fn summarize(runs: &[RunResult], baseline: Side) -> Vec<MetricSummary> {
    METRICS
        .iter()
        .map(|(metric, read)| {
            let of = |side: Side| -> Vec<f64> {
                runs.iter()
                    .filter(|r| r.side == side)
                    .filter_map(read)
                    .collect()
            };
            let (ours, theirs) = (of(Side::MiniKcm), of(baseline));
            let (mini_kcm, baseline) = (median(&ours), median(&theirs));
            MetricSummary {
                metric: metric.to_string(),
                mini_kcm,
                baseline,
                ratio: ratio(mini_kcm, baseline),
                mini_kcm_range: range(&ours),
                baseline_range: range(&theirs),
                p: rank_sum_p(&ours, &theirs),
            }
        })
        .collect()
}

/// The table printed on stdout.
pub(crate) fn table(report: &Report) -> String {
    let mut out = String::new();
    let baseline = report.baseline.name();
    let _ = writeln!(
        out,
        "mini-kcm bench: size {}, {} round(s), medians (ranges); ratio = mini-kcm / {baseline}",
        size_name(report.size),
        report.rounds
    );
    if report.rounds as usize >= MIN_ROUNDS_FOR_P {
        let _ = writeln!(
            out,
            "p: how often two sides that do not differ would look this far apart (rank-sum test)"
        );
    }
    let _ = writeln!(
        out,
        "{:<34} {:>22} {:>22} {:>8} {:>6}",
        "", "mini-kcm", baseline, "ratio", "p"
    );
    for scenario in &report.scenarios {
        let _ = writeln!(
            out,
            "{}: {} ({})",
            scenario.scenario.name(),
            scenario.description,
            scenario.limits.describe()
        );
        if !scenario.plane_floor.is_empty() {
            let floors: Vec<f64> = scenario
                .plane_floor
                .iter()
                .map(|f| f.seconds_to_done)
                .collect();
            let _ = writeln!(
                out,
                "  {:<32} {:>22}",
                "plane floor, no controller (s)",
                with_range(median(&floors), range(&floors))
            );
        }
        for metric in &scenario.summary {
            let _ = writeln!(
                out,
                "  {:<32} {:>22} {:>22} {:>8} {:>6}",
                metric.metric,
                with_range(metric.mini_kcm, metric.mini_kcm_range),
                with_range(metric.baseline, metric.baseline_range),
                number(metric.ratio, 2),
                p_value(metric.p)
            );
        }
    }
    out
}

fn size_name(size: Size) -> &'static str {
    match size {
        Size::Small => "small",
        Size::Full => "full",
    }
}

/// A median, followed by the range of the rounds when they differ.
fn with_range(median: Option<f64>, range: Option<(f64, f64)>) -> String {
    match range {
        Some((min, max)) if min < max => format!(
            "{} ({}–{})",
            number(median, 2),
            number(Some(min), 2),
            number(Some(max), 2)
        ),
        _ => number(median, 2),
    }
}

/// Two decimals, or "<0.01" rather than a p-value of 0.00, which no finite number of rounds gives.
fn p_value(p: Option<f64>) -> String {
    match p {
        Some(p) if p < 0.01 => "<0.01".into(),
        p => number(p, 2),
    }
}

fn number(value: Option<f64>, decimals: usize) -> String {
    match value {
        Some(v) if v.abs() >= 1000.0 => format!("{v:.0}"),
        Some(v) => format!("{v:.decimals$}"),
        None => "-".into(),
    }
}

/// The plot of one scenario: ready pods over time, mini-kcm blue, upstream orange, the plane's floor
/// grey, rounds after the first dashed.
pub(crate) fn plot(scenario: &ScenarioResult) -> String {
    let floors = scenario.plane_floor.iter().map(|floor| Series {
        label: format!("plane floor r{}", floor.round),
        color: "#7f7f7f".into(),
        dashed: floor.round > 1,
        points: floor.ready_pods.clone(),
        markers: false,
    });
    let series: Vec<Series> = scenario
        .runs
        .iter()
        .map(|run| Series {
            label: format!("{} r{}", run.side.name(), run.round),
            color: side_color(run.side).into(),
            dashed: run.round > 1,
            points: run.ready_pods.clone(),
            markers: false,
        })
        .chain(floors)
        .collect();
    step_chart(
        &format!(
            "{}: {} ({})",
            scenario.scenario.name(),
            scenario.description,
            scenario.limits.describe()
        ),
        "seconds since create/update",
        "ready pods of the new revision",
        &series,
    )
}

/// The colour of a side in every plot.
pub(crate) fn side_color(side: Side) -> &'static str {
    match side {
        Side::MiniKcm => "#1f77b4",
        Side::Upstream => "#ff7f0e",
        Side::MiniKcmNoDecisionLog => "#2ca02c",
        Side::OtherMiniKcm => "#9467bd",
        Side::MiniKcmNoPriority => "#8c564b",
    }
}

/// Writes `bench.json` and one `<scenario>.svg` per scenario into `dir`; returns the paths.
pub(crate) fn write_files(report: &Report, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| BenchError::io(format!("creating {}", dir.display()), e))?;
    let mut written = Vec::new();
    let json = serde_json::to_string_pretty(report)
        .map_err(|e| BenchError::io("encoding the report", std::io::Error::other(e)))?;
    let path = dir.join("bench.json");
    std::fs::write(&path, json)
        .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))?;
    written.push(path);
    for scenario in &report.scenarios {
        let path = dir.join(format!("{}.svg", scenario.scenario.name()));
        std::fs::write(&path, plot(scenario))
            .map_err(|e| BenchError::io(format!("writing {}", path.display()), e))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(side: Side, round: u32, seconds: f64, writes: u64) -> RunResult {
        RunResult {
            side,
            round,
            namespace: "ns".into(),
            user: "u".into(),
            startup_seconds: 1.0,
            seconds_to_done: seconds,
            plane_floor_seconds: Some(1.0),
            plane_floor_cpu_seconds: Some(0.5),
            cpu_seconds: 2.0,
            timed_cpu_seconds: 1.5,
            timed_wakeups: 300,
            wakeups: 400,
            pod_events: 100,
            write_body_bytes: Some(writes * 700),
            write_bodies: Some(writes),
            idle_cpu_seconds: 0.1,
            settle_seconds: 1.0,
            peak_rss_bytes: 64 * 1024 * 1024,
            steady_rss_bytes: 32 * 1024 * 1024,
            steady_anon_rss_bytes: 8 * 1024 * 1024,
            requests_total: writes * 2,
            requests_writes: writes,
            requests: ClientRequests::new(),
            ready_pods: vec![(0.0, 0.0), (seconds, 20.0)],
        }
    }

    #[test]
    fn summary_takes_medians_per_side_and_their_ratio() {
        let runs = [
            run(Side::MiniKcm, 1, 10.0, 100),
            run(Side::Upstream, 1, 20.0, 50),
            run(Side::MiniKcm, 2, 12.0, 120),
            run(Side::Upstream, 2, 30.0, 70),
            run(Side::MiniKcm, 3, 50.0, 110),
            run(Side::Upstream, 3, 25.0, 60),
        ];
        let summary = summarize(&runs, Side::Upstream);
        let time = &summary[0];
        assert_eq!(time.mini_kcm, Some(12.0));
        assert_eq!(time.baseline, Some(25.0));
        assert_eq!(time.ratio, Some(12.0 / 25.0));
        assert_eq!(time.mini_kcm_range, Some((10.0, 50.0)));
        assert_eq!(time.baseline_range, Some((20.0, 30.0)));
        // Three rounds per side are too few for a p-value.
        assert_eq!(time.p, None);
        // Each run's time less its round's floor.
        let above = &summary[1];
        assert_eq!(above.metric, "time above the plane floor (s)");
        assert_eq!(above.mini_kcm, Some(11.0));
        assert_eq!(above.baseline, Some(24.0));
        let writes = summary.iter().find(|m| m.metric == "API writes").unwrap();
        assert_eq!(writes.ratio, Some(110.0 / 60.0));
        let peak = summary
            .iter()
            .find(|m| m.metric == "peak RSS (MiB)")
            .unwrap();
        assert_eq!(peak.mini_kcm, Some(64.0));
    }

    #[test]
    fn table_has_a_line_per_metric_and_dashes_for_missing_values() {
        let runs = vec![run(Side::MiniKcm, 1, 1.5, 10)];
        let report = Report {
            command: "mini-kcm bench".into(),
            size: Size::Small,
            sizes: Sizes::of(Size::Small),
            rounds: 1,
            baseline: Side::Upstream,
            limits: ClientLimits {
                qps: 20.0,
                burst: 30,
            },
            kubernetes_version: "v1.36.3".into(),
            mini_kcm_version: "0.1.0".into(),
            cpus: 2,
            load_average_start: String::new(),
            load_average_end: String::new(),
            plane_startup_seconds: 1.0,
            total_seconds: 2.0,
            fresh_under_load: None,
            failover: None,
            scale: None,
            scenarios: vec![ScenarioResult {
                scenario: Scenario::ScaleUp,
                description: "0→20 pods".into(),
                limits: ClientLimits {
                    qps: 20.0,
                    burst: 30,
                },
                summary: summarize(&runs, Side::Upstream),
                runs,
                plane_floor: vec![FloorRun {
                    round: 1,
                    namespace: "ns".into(),
                    seconds_to_done: 1.0,
                    cpu_seconds: 0.5,
                    wakeups: 200,
                    pod_events: 60,
                    ready_pods: vec![(0.0, 0.0), (1.0, 20.0)],
                }],
            }],
        };
        let table = table(&report);
        assert!(table.contains("scale-up: 0→20 pods (QPS 20/30)"), "{table}");
        let time = table.lines().find(|l| l.contains("time to done")).unwrap();
        assert!(
            time.contains("1.50") && time.trim_end().ends_with('-'),
            "{time}"
        );
        let floor = table.lines().find(|l| l.contains("plane floor")).unwrap();
        assert!(floor.trim_end().ends_with("1.00"), "{floor}");
        assert_eq!(table.lines().count(), 4 + METRICS.len());
        let svg = plot(&report.scenarios[0]);
        assert!(svg.contains("mini-kcm r1") && svg.contains("#1f77b4"));
        assert!(svg.contains("plane floor r1"), "{svg}");
    }

    #[test]
    fn from_four_rounds_per_side_the_summary_has_a_p_value() {
        let runs: Vec<RunResult> = (1..=4)
            .flat_map(|round| {
                let faster = f64::from(round);
                [
                    run(Side::MiniKcm, round, faster, 100),
                    run(Side::Upstream, round, faster + 10.0, 100),
                ]
            })
            .collect();
        let summary = summarize(&runs, Side::Upstream);
        let time = &summary[0];
        let p = time.p.unwrap();
        assert!((p - 2.0 / 70.0).abs() < 1e-12, "{p}");
        // The same writes in every round on both sides: no difference at all.
        let writes = summary.iter().find(|m| m.metric == "API writes").unwrap();
        assert_eq!(writes.p, Some(1.0));
        assert_eq!(writes.mini_kcm_range, Some((100.0, 100.0)));
    }

    #[test]
    fn ranges_show_only_when_rounds_differ() {
        assert_eq!(with_range(Some(1.5), Some((1.5, 1.5))), "1.50");
        assert_eq!(with_range(Some(1.5), Some((1.25, 2.0))), "1.50 (1.25–2.00)");
        assert_eq!(with_range(None, None), "-");
    }

    #[test]
    fn small_p_values_are_not_printed_as_zero() {
        assert_eq!(p_value(Some(7.4e-7)), "<0.01");
        assert_eq!(p_value(Some(0.04)), "0.04");
        assert_eq!(p_value(None), "-");
    }
}
