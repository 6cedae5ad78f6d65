//! Exploration: every single fault a scenario's baseline run offers — a crash before and after each
//! write, each write failing in each way, each sync on a cache lagging by each suffix of the events it
//! was just given, each watch breaking before each sync — each run to the end with the invariants
//! checked; and random schedules of several faults, minimised when one fails.

use std::time::{Duration, Instant};

use mini_kcm_runtime::switches::safeties::Safeties;

use crate::invariants::Violation;
use crate::run::{Report, run};
use crate::scenarios::Scenario;
use crate::schedule::{Failure, Fault, Schedule};

/// Every single fault the baseline run `baseline` offers.
pub fn single_faults(baseline: &Report) -> Vec<Fault> {
    let mut faults = Vec::new();
    for (write, what) in baseline.writes.iter().enumerate() {
        faults.push(Fault::CrashBefore { write });
        faults.push(Fault::CrashAfter { write });
        for how in Failure::ALL {
            if how != Failure::Quota || what == "create pods" {
                faults.push(Fault::Fail { write, how });
            }
        }
    }
    for (sync, given) in baseline.syncs.iter().enumerate() {
        for (resource, count) in given {
            for lag in 1..=*count {
                faults.push(Fault::Stale {
                    sync,
                    resource: resource.clone(),
                    lag,
                });
            }
            faults.push(Fault::Relist {
                sync,
                resource: resource.clone(),
            });
        }
    }
    faults
}

/// A schedule that broke an invariant, minimised, with what it broke.
#[derive(Debug, Clone)]
pub struct Found {
    /// The shortest schedule found that still breaks an invariant.
    pub schedule: Schedule,
    /// What it broke.
    pub violations: Vec<Violation>,
    /// The minimised run's steps.
    pub trace: Vec<String>,
}

/// What exploring one scenario found.
#[derive(Debug, Clone)]
pub struct Exploration {
    /// The scenario.
    pub scenario: &'static str,
    /// The baseline run (no fault).
    pub baseline: Report,
    /// Schedules run (the baseline included).
    pub schedules: usize,
    /// Schedules that broke an invariant (each minimised).
    pub found: Vec<Found>,
    /// Time taken.
    pub elapsed: Duration,
}

impl Exploration {
    /// Milliseconds per thousand schedules.
    pub fn per_thousand(&self) -> Duration {
        let count = u32::try_from(self.schedules.max(1)).unwrap_or(u32::MAX);
        self.elapsed.saturating_mul(1000) / count
    }
}

/// Runs the baseline of `scenario` and every single fault it offers (every `stride`-th only, when
/// `stride` > 1: the CI subset), then `random` schedules of `faults` faults each drawn with `seed`.
pub fn explore(
    scenario: &Scenario,
    safeties: &Safeties,
    stride: usize,
    random: usize,
    faults: usize,
    seed: u64,
) -> Exploration {
    let started = Instant::now();
    let baseline = run(scenario, &[], safeties);
    let mut schedules = 1;
    let mut found = Vec::new();
    if !baseline.violations.is_empty() {
        found.push(Found {
            schedule: Vec::new(),
            violations: baseline.violations.clone(),
            trace: baseline.trace.clone(),
        });
    }
    // A failing baseline fails every schedule: it is the one finding.
    if !found.is_empty() {
        return Exploration {
            scenario: scenario.name,
            baseline,
            schedules,
            found,
            elapsed: started.elapsed(),
        };
    }
    let singles = single_faults(&baseline);
    let mut tried: Vec<Schedule> = singles
        .iter()
        .step_by(stride.max(1))
        .map(|f| vec![f.clone()])
        .collect();
    let mut draw = Draw(seed.max(1));
    for _ in 0..random {
        if singles.is_empty() {
            break;
        }
        let mut schedule: Schedule = (0..faults.max(1))
            .map(|_| singles[draw.below(singles.len())].clone())
            .collect();
        schedule.sort();
        schedule.dedup();
        tried.push(schedule);
    }
    for schedule in tried {
        schedules += 1;
        let report = run(scenario, &schedule, safeties);
        if !report.violations.is_empty() {
            let (schedule, report) = minimise(scenario, safeties, schedule, report);
            if !found.iter().any(|f| f.schedule == schedule) {
                found.push(Found {
                    schedule,
                    violations: report.violations,
                    trace: report.trace,
                });
            }
        }
    }
    Exploration {
        scenario: scenario.name,
        baseline,
        schedules,
        found,
        elapsed: started.elapsed(),
    }
}

/// The shortest schedule left after dropping faults one at a time while the run still breaks an
/// invariant (a failing schedule of one fault is already minimal).
pub fn minimise(
    scenario: &Scenario,
    safeties: &Safeties,
    mut schedule: Schedule,
    mut report: Report,
) -> (Schedule, Report) {
    let mut index = 0;
    while schedule.len() > 1 && index < schedule.len() {
        let mut shorter = schedule.clone();
        shorter.remove(index);
        let attempt = run(scenario, &shorter, safeties);
        if attempt.violations.is_empty() {
            index += 1;
        } else {
            schedule = shorter;
            report = attempt;
        }
    }
    (schedule, report)
}

/// A small deterministic generator (xorshift64*): the same seed draws the same schedules.
struct Draw(u64);

impl Draw {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let value = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        usize::try_from(value % u64::try_from(n.max(1)).unwrap_or(1)).unwrap_or(0)
    }
}
