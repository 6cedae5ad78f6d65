//! The exploration's CI subset, its determinism, and the proof that it can fail: with each safety
//! mechanism switched off it finds the violation that mechanism prevents. The whole exploration is
//! `cargo run --release -p mini-kcm-simulation` (docs/reliability.md).

use std::collections::BTreeSet;

use mini_kcm_runtime::switches::safeties::{Safeties, Safety};
use mini_kcm_simulation::explore::{Exploration, explore};
use mini_kcm_simulation::run::run;
use mini_kcm_simulation::scenarios::{self, Scenario};
use mini_kcm_simulation::schedule::{Failure, Fault, describe};

fn scenario(name: &str) -> Scenario {
    scenarios::named(name).unwrap_or_else(|| panic!("no scenario {name}"))
}

/// Every single fault of `name` with `safeties`, no random schedules.
fn single_faults(name: &str, safeties: &Safeties) -> Exploration {
    explore(&scenario(name), safeties, 1, 0, 0, 1)
}

fn invariants_broken(exploration: &Exploration) -> BTreeSet<&'static str> {
    exploration
        .found
        .iter()
        .flat_map(|f| f.violations.iter().map(|v| v.invariant))
        .collect()
}

fn print_found(exploration: &Exploration) {
    for found in exploration.found.iter().take(3) {
        println!("{}: {}", exploration.scenario, describe(&found.schedule));
        for violation in &found.violations {
            println!("  {violation}");
        }
    }
}

#[test]
fn every_scenario_reaches_its_steady_state_without_faults() {
    for scenario in scenarios::all() {
        let report = run(&scenario, &[], &Safeties::all_on());
        assert!(
            report.violations.is_empty(),
            "{}: {:?}\n{}",
            scenario.name,
            report.violations,
            report.trace.join("\n")
        );
        assert!(report.writes.len() > 3, "{} wrote little", scenario.name);
    }
}

#[test]
fn the_same_schedule_makes_the_same_run() {
    let proportional = vec![
        Fault::Stale {
            sync: 10,
            resource: "v1/pods".into(),
            lag: 2,
        },
        Fault::CrashAfter { write: 20 },
        Fault::Fail {
            write: 30,
            how: Failure::TimeoutPersisted,
        },
    ];
    // A restart and a relist hand every object over at once: the order the controllers then see them
    // in must not vary.
    let relisted = vec![
        Fault::Relist {
            sync: 3,
            resource: "v1/pods".into(),
        },
        Fault::CrashBefore { write: 8 },
    ];
    for (name, schedule) in [
        ("deployment-proportional", vec![]),
        ("deployment-proportional", proportional),
        ("daemonset-nodes", relisted.clone()),
        ("adoption", relisted),
    ] {
        let scenario = scenario(name);
        let first = run(&scenario, &schedule, &Safeties::all_on());
        let second = run(&scenario, &schedule, &Safeties::all_on());
        assert!(
            first.restarts > 0 || schedule.is_empty(),
            "{name}: no crash"
        );
        assert_eq!(first.trace, second.trace, "{name}: {}", describe(&schedule));
        assert_eq!(
            first.writes,
            second.writes,
            "{name}: {}",
            describe(&schedule)
        );
        assert_eq!(
            first.changes,
            second.changes,
            "{name}: {}",
            describe(&schedule)
        );
        assert_eq!(first.syncs, second.syncs);
    }
}

/// Every `MINI_KCM_EXPLORE_STRIDE`-th single fault (default 8) of every scenario, plus a few random
/// schedules of three faults: no invariant may break.
#[test]
fn the_ci_subset_of_the_exploration_breaks_no_invariant() {
    let stride = std::env::var("MINI_KCM_EXPLORE_STRIDE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(8);
    let mut schedules = 0;
    let mut failures = Vec::new();
    for scenario in scenarios::all() {
        let exploration = explore(&scenario, &Safeties::all_on(), stride, 5, 3, 7);
        println!(
            "{}: {} schedules in {:?}",
            exploration.scenario, exploration.schedules, exploration.elapsed
        );
        schedules += exploration.schedules;
        print_found(&exploration);
        failures.extend(
            exploration
                .found
                .iter()
                .map(|f| format!("{}: {}", exploration.scenario, describe(&f.schedule))),
        );
    }
    println!("{schedules} schedules");
    assert!(failures.is_empty(), "failing schedules: {failures:#?}");
}

#[test]
fn without_slow_start_a_quota_gets_every_doomed_creation() {
    let found = single_faults("replicaset-scale", &Safeties::without([Safety::SlowStart]));
    print_found(&found);
    assert!(invariants_broken(&found).contains("slow-start"));
}

#[test]
fn without_the_adoption_recheck_an_owner_being_deleted_adopts() {
    let found = single_faults(
        "adoption-by-deleted-owner",
        &Safeties::without([Safety::AdoptionRecheck]),
    );
    print_found(&found);
    assert!(invariants_broken(&found).contains("adopt-only-live-owners"));
}

#[test]
fn without_read_your_own_writes_a_sync_writes_from_a_stale_version() {
    let found = single_faults(
        "replicaset-scale",
        &Safeties::without([Safety::ReadYourOwnWrites]),
    );
    print_found(&found);
    let broken = invariants_broken(&found);
    assert!(broken.contains("read-your-own-writes"));
    // Expectations still hold the pod counts.
    assert!(!broken.contains("no-duplicate-pods"), "{broken:?}");
}

/// Expectations and read-your-own-writes both keep a ReplicaSet from creating pods its cache does not
/// show yet (the latter since 1.36): only with both off does a stale view make duplicates.
#[test]
fn without_expectations_and_read_your_own_writes_a_stale_view_makes_duplicates() {
    let found = single_faults(
        "replicaset-scale",
        &Safeties::without([Safety::Expectations, Safety::ReadYourOwnWrites]),
    );
    print_found(&found);
    assert!(invariants_broken(&found).contains("no-duplicate-pods"));
    let expectations_only = single_faults(
        "replicaset-scale",
        &Safeties::without([Safety::Expectations]),
    );
    assert!(
        expectations_only.found.is_empty(),
        "read-your-own-writes alone holds: {:?}",
        invariants_broken(&expectations_only)
    );
}
