//! `mini-kcm bench` as a CI smoke test: the small sizes, one round. It starts its own plane, runs every
//! scenario against mini-kcm, against kube-controller-manager and with no controller (the plane's
//! floor), and must produce a complete report.
//! Timings are not asserted (the machine is shared); only that every number was measured.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::process::Command;

use mini_kcm_e2e::mini_kcm_binary;
use serde_json::Value;

const SCENARIOS: [&str; 5] = [
    "scale-up",
    "rolling-update",
    "daemonset",
    "steady",
    "concurrent-rollouts",
];

#[test]
fn bench_measures_every_scenario_on_both_sides() {
    let binary = mini_kcm_binary();
    let out = std::env::temp_dir().join(format!("mini-kcm-bench-smoke-{}", std::process::id()));
    let output = Command::new(&binary)
        .args(["bench", "--size", "small", "--rounds", "1", "--scenarios"])
        .arg(format!("{},fresh-under-load", SCENARIOS.join(",")))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "mini-kcm bench failed:\n{stdout}\n{stderr}"
    );
    for scenario in SCENARIOS {
        assert!(stdout.contains(&format!("{scenario}: ")), "{stdout}");
        assert!(out.join(format!("{scenario}.svg")).exists());
    }

    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("bench.json")).unwrap()).unwrap();
    fresh_under_load_measured_three_sides(&report, &stdout);
    let scenarios = report["scenarios"].as_array().unwrap();
    let names: Vec<&str> = scenarios
        .iter()
        .map(|s| s["scenario"].as_str().unwrap())
        .collect();
    assert_eq!(names, SCENARIOS);
    for scenario in scenarios {
        let name = scenario["scenario"].as_str().unwrap();
        let runs = scenario["runs"].as_array().unwrap();
        let sides: Vec<&str> = runs.iter().map(|r| r["side"].as_str().unwrap()).collect();
        assert_eq!(sides, ["mini-kcm", "upstream"], "{name}");
        for run in runs {
            let what = format!("{name} {}", run["side"]);
            for field in [
                "seconds_to_done",
                "cpu_seconds",
                "peak_rss_bytes",
                "steady_rss_bytes",
                "steady_anon_rss_bytes",
                "requests_total",
                "requests_writes",
            ] {
                let value = run[field].as_f64().unwrap();
                assert!(value > 0.0, "{what}: {field} = {value}");
            }
            // A controller process, not a shell: at least a few MiB resident, less than a few GiB.
            let peak = run["peak_rss_bytes"].as_f64().unwrap();
            assert!((4e6..4e9).contains(&peak), "{what}: peak RSS {peak}");
            assert!(run["requests_writes"].as_f64() <= run["requests_total"].as_f64());
            assert!(run["steady_anon_rss_bytes"].as_f64() <= run["steady_rss_bytes"].as_f64());
            // The writes are the side's own controllers', never another client's.
            let clients: Vec<&String> = run["requests"].as_object().unwrap().keys().collect();
            for controller in ["deployment-controller", "replicaset-controller"] {
                assert!(
                    clients.iter().any(|c| c.as_str() == controller),
                    "{what}: no requests of {controller} in {clients:?}"
                );
            }
            // The ready-pods series ends with every pod of the new revision ready.
            let series = run["ready_pods"].as_array().unwrap();
            let last = series.last().unwrap()[1].as_f64().unwrap();
            assert!(last > 0.0, "{what}: ready pods {series:?}");
        }
        // The plane's floor ran too, and ended with its pods Ready.
        let floors = scenario["plane_floor"].as_array().unwrap();
        assert_eq!(floors.len(), 1, "{name}");
        assert!(floors[0]["seconds_to_done"].as_f64().unwrap() > 0.0);
        let series = floors[0]["ready_pods"].as_array().unwrap();
        assert!(
            series.last().unwrap()[1].as_f64().unwrap() > 0.0,
            "{name}: floor {series:?}"
        );
        for run in runs {
            assert_eq!(
                run["plane_floor_seconds"], floors[0]["seconds_to_done"],
                "{name}"
            );
        }
        let ratios: Vec<&Value> = scenario["summary"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| &m["ratio"])
            .collect();
        assert!(
            ratios.iter().filter(|r| r.is_number()).count() >= 5,
            "{name}: {ratios:?}"
        );
    }
    std::fs::remove_dir_all(&out).unwrap();
}

/// The fresh-under-load runs: mini-kcm with and without priorities and upstream, every time measured.
fn fresh_under_load_measured_three_sides(report: &Value, stdout: &str) {
    assert!(stdout.contains("fresh-under-load: "), "{stdout}");
    let runs = report["fresh_under_load"]["runs"].as_array().unwrap();
    let sides: Vec<&str> = runs.iter().map(|r| r["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["mini-kcm", "mini-kcm-no-priority", "upstream"]);
    for run in runs {
        for field in [
            "first_write_seconds",
            "fresh_change_seconds",
            "flood_done_seconds",
        ] {
            let value = run[field].as_f64().unwrap();
            assert!(value > 0.0, "{}: {field} = {value}", run["side"]);
        }
        // The scale comes after the first write, and the flood ends after both.
        assert!(run["flood_done_seconds"].as_f64() >= run["first_write_seconds"].as_f64());
    }
}
