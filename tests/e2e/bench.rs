//! `mini-kcm bench` as a CI smoke test: the small sizes, one round. It starts its own plane, runs every
//! scenario against mini-kcm, against kube-controller-manager and with no controller (the plane's
//! floor), plus `fresh-under-load`, `failover` (5 Deployments of 2 pods) and `scale` at 20 and 60 pods,
//! and must produce a complete report.
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
        .arg(format!(
            "{},fresh-under-load,failover,scale",
            SCENARIOS.join(",")
        ))
        .args(["--scale-pods", "20,60"])
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
    failover_measured_both_sides(&report, &stdout);
    scale_measured_both_sides_at_both_sizes(&report, &stdout);
    assert!(out.join("scale.svg").exists());
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
                "wakeups",
                "timed_wakeups",
                "pod_events",
                "write_body_bytes",
                "write_bodies",
            ] {
                let value = run[field].as_f64().unwrap();
                assert!(value > 0.0, "{what}: {field} = {value}");
            }
            // CPU is read in clock ticks (10 ms): a small scenario's timed part may round to none.
            assert!(run["timed_cpu_seconds"].as_f64() <= run["cpu_seconds"].as_f64());
            assert!(run["timed_wakeups"].as_f64() <= run["wakeups"].as_f64());
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
        // Its client, on a thread of its own, woke for the pod events it watched.
        assert!(floors[0]["wakeups"].as_f64().unwrap() > 0.0, "{name}");
        assert!(floors[0]["pod_events"].as_f64().unwrap() > 0.0, "{name}");
        assert!(floors[0]["cpu_seconds"].as_f64().unwrap() >= 0.0, "{name}");
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
            assert_eq!(
                run["plane_floor_cpu_seconds"], floors[0]["cpu_seconds"],
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

/// The failover runs: both sides, every time from the kill measured, and nothing reconciled before the
/// old leader's Lease was free (the Lease and the first write are polled in one loop, so their order
/// within a poll is not asserted).
fn failover_measured_both_sides(report: &Value, stdout: &str) {
    assert!(stdout.contains("\nfailover: "), "{stdout}");
    let runs = report["failover"]["runs"].as_array().unwrap();
    let sides: Vec<&str> = runs.iter().map(|r| r["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["mini-kcm", "upstream"]);
    for run in runs {
        let at = |field: &str| run[field].as_f64().unwrap();
        for field in [
            "lease_expired_seconds",
            "lease_taken_seconds",
            "first_write_seconds",
        ] {
            assert!(at(field) > 0.0, "{field}: {run}");
        }
        assert!(
            at("reconciled_seconds") >= at("first_write_seconds"),
            "{run}"
        );
        assert!(
            at("reconciled_seconds") >= at("lease_expired_seconds"),
            "{run}"
        );
    }
}

/// The scale runs: both sides at 20 and 60 pods, every number measured, the relist at the largest size
/// only, a fitted line per side.
fn scale_measured_both_sides_at_both_sizes(report: &Value, stdout: &str) {
    assert!(stdout.contains("\nscale: "), "{stdout}");
    let scale = &report["scale"];
    let sizes: Vec<u64> = scale["sizes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["pods"].as_u64().unwrap())
        .collect();
    assert_eq!(sizes, [20, 60]);
    for size in scale["sizes"].as_array().unwrap() {
        let plane = size["plane_rss_bytes"].as_object().unwrap();
        for component in ["etcd", "kube-apiserver"] {
            assert!(plane[component].as_f64().unwrap() > 1e6, "{plane:?}");
        }
    }
    let runs = scale["runs"].as_array().unwrap();
    let order: Vec<(u64, &str)> = runs
        .iter()
        .map(|r| (r["pods"].as_u64().unwrap(), r["side"].as_str().unwrap()))
        .collect();
    assert_eq!(
        order,
        [
            (20, "mini-kcm"),
            (20, "upstream"),
            (60, "mini-kcm"),
            (60, "upstream")
        ]
    );
    for run in runs {
        let what = format!("scale {} {}", run["pods"], run["side"]);
        for field in [
            "caches_synced_seconds",
            "first_write_seconds",
            "statuses_restored_seconds",
            "steady_rss_bytes",
            "steady_anon_rss_bytes",
            "events_seconds",
        ] {
            let value = run[field].as_f64().unwrap();
            assert!(value > 0.0, "{what}: {field} = {value}");
        }
        assert!(run["statuses_restored_seconds"].as_f64() >= run["first_write_seconds"].as_f64());
        assert!(run["steady_anon_rss_bytes"].as_f64() < run["steady_rss_bytes"].as_f64());
        // Every pod changed once (fewer pods than the per-run cap).
        assert_eq!(run["pod_events"], run["pods"], "{what}");
        assert!(run["cpu_seconds_per_1000_pod_events"].as_f64().unwrap() >= 0.0);
        let relist = &run["relist"];
        if run["pods"] == 60 {
            assert!(relist["seconds"].as_f64().unwrap() > 0.0, "{what}");
            // The peak is at least what was resident after the relist.
            assert!(relist["peak_rss_bytes"].as_f64() >= relist["rss_after_bytes"].as_f64());
            assert!(relist["peak_over_steady"].as_f64().unwrap() > 0.5, "{what}");
        } else {
            assert!(relist.is_null(), "{what}: {relist}");
        }
    }
    let fits = scale["fits"].as_array().unwrap();
    let sides: Vec<&str> = fits.iter().map(|f| f["side"].as_str().unwrap()).collect();
    assert_eq!(sides, ["mini-kcm", "upstream"]);
    for fit in fits {
        assert_eq!(fit["projected_pods"], 150_000);
        assert!(fit["projected_rss_bytes"].as_f64().unwrap().is_finite());
    }
}
