//! The shared machinery of mini-kcm's controllers, written once and used by the ReplicaSet, Deployment and
//! DaemonSet controllers.

pub mod client;
pub mod consistency;
pub mod events;
pub mod expectations;
pub mod informers;
pub mod kinds;
pub mod metrics;
pub mod ownership;
pub mod pods;
pub mod selector;
pub mod slow_start;
pub mod worker;
