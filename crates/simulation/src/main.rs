//! `mini-kcm-explore`: the whole exploration (every single fault of every named scenario, and random
//! schedules of several faults), as a table, with each failing schedule minimised and its steps.
//!
//! `cargo run --release -p mini-kcm-simulation -- [--scenario NAME]... [--without SAFETY]...
//! [--stride N] [--random N --faults K --seed S]`

use std::process::ExitCode;

use clap::Parser;
use mini_kcm_runtime::switches::safeties::{Safeties, Safety};
use mini_kcm_simulation::explore::explore;
use mini_kcm_simulation::scenarios;
use mini_kcm_simulation::schedule::describe;

#[derive(Parser)]
#[command(
    name = "mini-kcm-explore",
    about = "Explores crash points, stale views and failed writes of the named scenarios"
)]
struct Args {
    /// Only these scenarios (default: all).
    #[arg(long)]
    scenario: Vec<String>,
    /// Switch a safety mechanism off (expectations, slow-start, adoption-recheck, read-your-own-writes).
    #[arg(long)]
    without: Vec<Safety>,
    /// Run every N-th single fault only.
    #[arg(long, default_value_t = 1)]
    stride: usize,
    /// Random schedules per scenario, besides the single faults.
    #[arg(long, default_value_t = 0)]
    random: usize,
    /// Faults per random schedule.
    #[arg(long, default_value_t = 3)]
    faults: usize,
    /// The random schedules' seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Print the steps of each failing schedule.
    #[arg(long)]
    trace: bool,
}

fn main() -> ExitCode {
    let args = Args::parse();
    let safeties = Safeties::without(args.without.iter().copied());
    let chosen: Vec<_> = scenarios::all()
        .into_iter()
        .filter(|s| args.scenario.is_empty() || args.scenario.iter().any(|n| n == s.name))
        .collect();
    if chosen.is_empty() {
        eprintln!("no scenario of that name; the scenarios are:");
        for s in scenarios::all() {
            eprintln!("  {}: {}", s.name, s.about);
        }
        return ExitCode::FAILURE;
    }
    println!("| scenario | baseline steps | writes | syncs | schedules | failing | ms per 1000 |");
    println!("| --- | --- | --- | --- | --- | --- | --- |");
    let (mut total, mut failing) = (0, 0);
    let mut found = Vec::new();
    for scenario in &chosen {
        eprintln!("exploring {} ...", scenario.name);
        let e = explore(
            scenario,
            &safeties,
            args.stride,
            args.random,
            args.faults,
            args.seed,
        );
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            e.scenario,
            e.baseline.steps,
            e.baseline.writes.len(),
            e.baseline.syncs.len(),
            e.schedules,
            e.found.len(),
            e.per_thousand().as_millis()
        );
        total += e.schedules;
        failing += e.found.len();
        found.extend(e.found.into_iter().map(|f| (e.scenario, f)));
    }
    println!("\n{total} schedules, {failing} failing");
    for (scenario, f) in &found {
        println!("\n{scenario}: {}", describe(&f.schedule));
        for v in &f.violations {
            println!("  {v}");
        }
        if args.trace {
            for step in &f.trace {
                println!("    {step}");
            }
        }
    }
    if failing == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
