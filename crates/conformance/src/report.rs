//! Reading Ginkgo's JSON reports, and the side-by-side table.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde::Deserialize;

use crate::Side;
use crate::specs::{SpecSet, expected_failure};

/// What happened to one spec in one run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    /// Failed, panicked or timed out; the start of the failure message ([`failure_summary`]).
    Failed(String),
    /// Skipped by the spec itself (a missing provider or feature), not by the focus.
    Skipped(String),
    /// Listed by the dry run but missing from every report (its process crashed or was killed).
    NotRun,
}

impl Outcome {
    pub fn short(&self) -> &'static str {
        match self {
            Outcome::Passed => "pass",
            Outcome::Failed(_) => "FAIL",
            Outcome::Skipped(_) => "skip",
            Outcome::NotRun => "not run",
        }
    }
}

/// One spec's result.
#[derive(Debug, Clone)]
pub struct SpecResult {
    pub set: SpecSet,
    pub spec: String,
    pub outcome: Outcome,
    pub seconds: f64,
}

#[derive(Debug, Deserialize)]
struct SuiteReport {
    #[serde(rename = "SpecReports", default)]
    spec_reports: Option<Vec<SpecReport>>,
}

#[derive(Debug, Deserialize)]
struct SpecReport {
    #[serde(rename = "ContainerHierarchyTexts", default)]
    containers: Option<Vec<String>>,
    #[serde(rename = "LeafNodeText", default)]
    leaf: String,
    #[serde(rename = "LeafNodeType", default)]
    leaf_type: String,
    #[serde(rename = "State", default)]
    state: String,
    #[serde(rename = "RunTime", default)]
    run_time_ns: i64,
    #[serde(rename = "Failure", default)]
    failure: Option<Failure>,
}

#[derive(Debug, Deserialize)]
struct Failure {
    #[serde(rename = "Message", default)]
    message: String,
}

/// A spec as one report names it, with its state and run time.
#[derive(Debug, Clone)]
pub(crate) struct Reported {
    pub spec: String,
    pub outcome: Outcome,
    pub seconds: f64,
    /// The dry run marks what would run as passed and what the focus excludes as skipped.
    pub selected: bool,
    /// False for a failed suite node (set-up, reporting), named `[<node type>]`.
    pub is_spec: bool,
}

/// Lines of a failure message kept: a message often opens with a header ("invariants were violated
/// during daemonset update:") and says what happened on the next lines.
const SUMMARY_LINES: usize = 4;
/// Characters kept of those lines.
const SUMMARY_CHARS: usize = 600;

/// The first non-empty lines of a failure message, joined with " / " and cut at [`SUMMARY_CHARS`].
fn failure_summary(message: &str) -> String {
    let joined = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .take(SUMMARY_LINES)
        .collect::<Vec<_>>()
        .join(" / ");
    match joined.char_indices().nth(SUMMARY_CHARS) {
        Some((cut, _)) => format!("{}…", &joined[..cut]),
        None => joined,
    }
}

/// The `It` specs of a Ginkgo JSON report (suite set-up nodes that failed count as a failed spec named
/// after the node, so a broken set-up cannot pass unnoticed).
pub(crate) fn read_report(path: &Path) -> Result<Vec<Reported>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let suites: Vec<SuiteReport> = serde_json::from_str(&text).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for report in suites
        .into_iter()
        .flat_map(|s| s.spec_reports.unwrap_or_default())
    {
        let mut texts = report.containers.clone().unwrap_or_default();
        texts.push(report.leaf.clone());
        let spec = texts
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" ");
        let message = report
            .failure
            .as_ref()
            .map(|f| failure_summary(&f.message))
            .unwrap_or_default();
        let outcome = match report.state.as_str() {
            "passed" => Outcome::Passed,
            "skipped" | "pending" => Outcome::Skipped(message),
            _ => Outcome::Failed(format!("{}: {message}", report.state)),
        };
        let is_spec = report.leaf_type == "It";
        if !is_spec && !matches!(outcome, Outcome::Failed(_)) {
            continue;
        }
        out.push(Reported {
            spec: if is_spec {
                spec
            } else {
                format!("[{}]", report.leaf_type)
            },
            selected: !matches!(outcome, Outcome::Skipped(_)),
            is_spec,
            outcome,
            seconds: report.run_time_ns.max(0) as f64 / 1e9,
        });
    }
    Ok(out)
}

/// The results of one side.
#[derive(Debug, Clone)]
pub struct SideResults {
    pub side: Side,
    pub results: Vec<SpecResult>,
    pub wall_seconds: f64,
}

impl SideResults {
    pub fn outcome(&self, spec: &str) -> Option<&Outcome> {
        self.results
            .iter()
            .find(|r| r.spec == spec)
            .map(|r| &r.outcome)
    }

    /// The specs that did not pass and are not expected to fail, with what happened.
    pub fn unexpected_failures(&self) -> Vec<&SpecResult> {
        self.results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Failed(_) | Outcome::NotRun))
            .filter(|r| expected_failure(&r.spec).is_none())
            .collect()
    }

    /// Expected failures that passed (the list must stay true).
    pub fn unexpected_passes(&self) -> Vec<&SpecResult> {
        self.results
            .iter()
            .filter(|r| r.outcome == Outcome::Passed && expected_failure(&r.spec).is_some())
            .collect()
    }

    fn counts(&self) -> (usize, usize, usize) {
        let passed = self
            .results
            .iter()
            .filter(|r| r.outcome == Outcome::Passed)
            .count();
        let skipped = self
            .results
            .iter()
            .filter(|r| matches!(r.outcome, Outcome::Skipped(_)))
            .count();
        (passed, self.results.len() - passed - skipped, skipped)
    }
}

/// A Markdown table: one row per spec, one column per side (with its run time), and the reason of each
/// expected failure; then the totals.
pub fn table(sides: &[SideResults]) -> String {
    let mut rows: BTreeMap<(SpecSet, String), Vec<String>> = BTreeMap::new();
    for (i, side) in sides.iter().enumerate() {
        for r in &side.results {
            let cells = rows
                .entry((r.set, r.spec.clone()))
                .or_insert_with(|| vec!["-".to_string(); sides.len()]);
            cells[i] = match &r.outcome {
                Outcome::Skipped(_) | Outcome::NotRun => r.outcome.short().to_string(),
                other => format!("{} ({:.0}s)", other.short(), r.seconds),
            };
        }
    }
    let mut out = String::new();
    let _ = write!(out, "| set | spec |");
    for side in sides {
        let _ = write!(out, " {} |", side.side.name());
    }
    let _ = writeln!(out, " expected failure |");
    let _ = write!(out, "| --- | --- |");
    for _ in sides {
        let _ = write!(out, " --- |");
    }
    let _ = writeln!(out, " --- |");
    for ((set, spec), cells) in &rows {
        let reason = expected_failure(spec).map_or("", |e| e.reason);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} |",
            set.name(),
            spec.replace('|', "\\|"),
            cells.join(" | "),
            reason
        );
    }
    let _ = writeln!(out);
    for side in sides {
        let (passed, failed, skipped) = side.counts();
        let _ = writeln!(
            out,
            "{}: {passed} passed, {failed} failed, {skipped} skipped in {:.0}s",
            side.side.name(),
            side.wall_seconds
        );
    }
    if let [a, b] = sides {
        let differing: Vec<&String> = rows
            .iter()
            .filter(|(_, cells)| {
                let first = cells[0].split(' ').next();
                let second = cells[1].split(' ').next();
                first != second
            })
            .map(|((_, spec), _)| spec)
            .collect();
        let _ = writeln!(
            out,
            "specs whose result differs between {} and {}: {}",
            a.side.name(),
            b.side.name(),
            if differing.is_empty() {
                "none".to_string()
            } else {
                differing
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join("; ")
            }
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPORT: &str = r#"[{"SuitePath":"/x","SpecReports":[
      {"ContainerHierarchyTexts":null,"LeafNodeText":"","LeafNodeType":"SynchronizedBeforeSuite","State":"passed","RunTime":1000},
      {"ContainerHierarchyTexts":["[sig-apps] Deployment"],"LeafNodeText":"should work [Conformance]","LeafNodeType":"It","State":"passed","RunTime":2500000000},
      {"ContainerHierarchyTexts":["[sig-apps] ReplicaSet"],"LeafNodeText":"should fail","LeafNodeType":"It","State":"failed","RunTime":1000000000,"Failure":{"Message":"timed out\nmore"}},
      {"ContainerHierarchyTexts":["[sig-apps] Other"],"LeafNodeText":"not focused","LeafNodeType":"It","State":"skipped","RunTime":0}
    ]}]"#;

    #[test]
    fn reads_specs_with_full_text_state_and_the_start_of_the_failure() {
        let dir = std::env::temp_dir().join(format!("conformance-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("r.json");
        std::fs::write(&path, REPORT).unwrap();
        let specs = read_report(&path).unwrap();
        assert_eq!(specs.len(), 3, "{specs:?}");
        assert_eq!(
            specs[0].spec,
            "[sig-apps] Deployment should work [Conformance]"
        );
        assert_eq!(specs[0].outcome, Outcome::Passed);
        assert!((specs[0].seconds - 2.5).abs() < 1e-9);
        assert_eq!(
            specs[1].outcome,
            Outcome::Failed("failed: timed out / more".into())
        );
        assert!(!specs[2].selected);
        assert!(specs.iter().all(|s| s.is_spec));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_failure_summary_keeps_the_lines_after_a_header_and_is_bounded() {
        let message =
            "invariants were violated:\n\nAn old pod on node-3 ran alongside a newer one\nx\ny\nz";
        assert_eq!(
            failure_summary(message),
            "invariants were violated: / An old pod on node-3 ran alongside a newer one / x / y"
        );
        let long = "é".repeat(SUMMARY_CHARS + 10);
        assert_eq!(failure_summary(&long).chars().count(), SUMMARY_CHARS + 1);
    }

    #[test]
    fn the_table_shows_both_sides_and_the_differences() {
        let result = |spec: &str, outcome: Outcome| SpecResult {
            set: SpecSet::Apps,
            spec: spec.into(),
            outcome,
            seconds: 3.0,
        };
        let mini = SideResults {
            side: Side::Mini,
            results: vec![
                result("a", Outcome::Passed),
                result("b", Outcome::Failed("x".into())),
            ],
            wall_seconds: 10.0,
        };
        let upstream = SideResults {
            side: Side::Upstream,
            results: vec![result("a", Outcome::Passed), result("b", Outcome::Passed)],
            wall_seconds: 11.0,
        };
        let table = table(&[mini, upstream]);
        assert!(
            table.contains("| apps | a | pass (3s) | pass (3s) |"),
            "{table}"
        );
        assert!(
            table.contains("| apps | b | FAIL (3s) | pass (3s) |"),
            "{table}"
        );
        assert!(
            table.contains("mini: 1 passed, 1 failed, 0 skipped in 10s"),
            "{table}"
        );
        assert!(
            table.contains("differs between mini and upstream: b"),
            "{table}"
        );
    }
}
