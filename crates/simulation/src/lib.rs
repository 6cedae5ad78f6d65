//! A deterministic simulation of mini-kcm's three controllers, for exploring the schedules a controller
//! can meet — a crash after (or before) every write, a cache that lags at every sync, every write
//! failing in every way — as systematic testing of controllers does (Sieve, OSDI 2022; Acto, SOSP
//! 2023), with upstream's guarantees checked as invariants after every step.
//!
//! The controllers are the production code, built from the descriptors the manager uses; only their
//! surroundings are simulated:
//! - [`cluster`]: the API server's state (the runtime's recorded API, serving the controllers'
//!   requests) and the scheduler, kubelets, garbage collector and users acting on it;
//! - `process`: one mini-kcm process on shared informers whose watch events the run delivers, and
//!   which a crash replaces by a fresh one;
//! - [`schedule`]: the faults of one run, counted in the run's own writes and syncs;
//! - [`run`]: one scenario under one schedule, on one thread with simulated time: the same inputs
//!   make the same run;
//! - [`invariants`]: the named properties checked at each write, after each step and at rest;
//! - [`scenarios`]: the named scenarios;
//! - [`explore`]: every single fault a scenario's baseline offers, random schedules of several, and
//!   the minimisation of a failing schedule.
//!
//! `mini-kcm-explore` (this crate's binary) runs the whole exploration; the crate's tests run the CI
//! subset and prove the harness can fail (docs/reliability.md).

pub mod cluster;
pub mod explore;
pub mod invariants;
mod objects;
mod process;
pub mod run;
pub mod scenarios;
pub mod schedule;
