//! The shared machinery of mini-kcm's controllers, written once and used by the ReplicaSet, Deployment and
//! DaemonSet controllers.

pub mod api_errors;
pub mod client;
pub mod consistency;
pub mod controller;
mod counter;
pub mod decisions;
pub mod event_correlation;
pub mod events;
pub mod expectations;
pub mod informers;
pub mod inspect;
pub mod int_or_percent;
pub mod kinds;
pub mod metrics;
pub mod object;
pub mod ownership;
pub mod pods;
pub mod selector;
pub mod slow_start;
pub mod status_writes;
pub mod transport;
pub mod worker;
