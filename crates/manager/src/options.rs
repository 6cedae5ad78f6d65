//! The manager's options (the flags of `mini-kcm run`), with kube-controller-manager's defaults.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::informers::ContentType;
use mini_kcm_runtime::switches::features::FeatureGates;
use mini_kcm_runtime::switches::safeties::Safeties;
use mini_kcm_workqueue::Priorities;

use crate::leader_election::{LeaderElectionConfig, default_identity};
use crate::secure_serving::SecureServing;

/// Which API families to manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kinds {
    /// `apps/v1` only (instead of kube-controller-manager's controllers).
    Apps,
    /// The `minikcm.dev` CRD copies only (safe beside kube-controller-manager).
    Copies,
    Both,
}

impl Kinds {
    pub(crate) fn families(self) -> Vec<ApiFamily> {
        match self {
            Kinds::Apps => vec![ApiFamily::Apps],
            Kinds::Copies => vec![ApiFamily::Copies],
            Kinds::Both => vec![ApiFamily::Apps, ApiFamily::Copies],
        }
    }
}

/// The controllers mini-kcm has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControllerName {
    ReplicaSet,
    Deployment,
    DaemonSet,
}

impl ControllerName {
    pub const ALL: [ControllerName; 3] = [
        ControllerName::ReplicaSet,
        ControllerName::Deployment,
        ControllerName::DaemonSet,
    ];

    /// The name in `--controllers` (kube-controller-manager's short names).
    pub fn name(self) -> &'static str {
        match self {
            ControllerName::ReplicaSet => "replicaset",
            ControllerName::Deployment => "deployment",
            ControllerName::DaemonSet => "daemonset",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ManagerOptions {
    pub kinds: Kinds,
    /// kube-controller-manager syntax: `*` (all), names, `-name` to disable; e.g. `*,-replicaset`.
    pub controllers: Vec<String>,
    /// Manage only this namespace (informers are scoped to it).
    pub namespace: Option<String>,
    pub concurrent_replicaset_syncs: usize,
    pub concurrent_deployment_syncs: usize,
    pub concurrent_daemonset_syncs: usize,
    /// Per controller client, like kube-controller-manager's `--kube-api-qps` / `--kube-api-burst`.
    pub kube_api_qps: f32,
    pub kube_api_burst: u32,
    /// kube-controller-manager's `--kube-api-content-type`: what the informers ask for. Protobuf (the
    /// default) applies to pods and nodes, the kinds that have a protobuf decoding; the rest, and every
    /// write, stay JSON.
    pub kube_api_content_type: ContentType,
    /// The plain HTTP listener: every endpoint, no authentication (keep it on loopback).
    pub metrics_addr: Option<SocketAddr>,
    /// kube-controller-manager's secure port: the same endpoints over HTTPS, for callers the API server
    /// authenticates and authorizes.
    pub secure_serving: Option<SecureServing>,
    /// Who this replica is: the leader-election identity, also in every request's User-Agent.
    pub identity: String,
    /// With leader election: the controllers start (and may write) only while this replica holds the
    /// lease; losing it ends `run` with an error.
    pub leader_election: Option<LeaderElectionConfig>,
    /// kube-controller-manager's `--min-resync-period`: the shared informers re-deliver every cached
    /// object to the controllers every `[min, 2 × min)` (one random draw per manager). Zero disables it.
    pub min_resync_period: Duration,
    /// The Deployment controller's longest delay between retries of a failing key (client-go: 1000 s).
    /// Not a flag: tests lower it to reach the 15-failure drop quickly.
    pub deployment_max_retry_delay: Duration,
    /// Syncs file their decisions for `/debug/controllers` and `mini-kcm explain` (`--decision-log`).
    pub decision_log: bool,
    /// `--work-queue-priorities`: keys from live events go before keys from lists and resyncs. A
    /// deliberate difference from upstream (one FIFO), with this off switch; docs/work-queue.md.
    pub work_queue_priorities: bool,
    /// `--max-low-priority-wait`: how long a low-priority key may be passed over entirely.
    pub max_low_priority_wait: Duration,
    /// `--feature-gates`: the gates the controllers, informers and endpoints consult.
    pub feature_gates: FeatureGates,
    /// Safety mechanisms switched off, for learning (`mini-kcm up --without`). Not a flag of `mini-kcm
    /// run`, which leaves every mechanism on.
    pub safeties: Safeties,
    /// How late every watch event reaches the caches (`mini-kcm up --watch-delay`): caches that lag on
    /// purpose, so a learner sees what the safety mechanisms prevent. Not a flag of `mini-kcm run`.
    pub watch_delay: Duration,
    /// The command line's effective flags (name without dashes → value, defaults included), for
    /// `/flagz`; empty when the manager is not run from `mini-kcm run`.
    pub flags: BTreeMap<String, String>,
}

/// kube-controller-manager's default `--min-resync-period`.
pub(crate) const DEFAULT_MIN_RESYNC_PERIOD: Duration = Duration::from_secs(12 * 3600);

impl Default for ManagerOptions {
    fn default() -> Self {
        ManagerOptions {
            kinds: Kinds::Both,
            controllers: vec!["*".to_string()],
            namespace: None,
            concurrent_replicaset_syncs: 5,
            concurrent_deployment_syncs: 5,
            concurrent_daemonset_syncs: 2,
            kube_api_qps: 20.0,
            kube_api_burst: 30,
            kube_api_content_type: ContentType::default(),
            metrics_addr: None,
            secure_serving: None,
            identity: default_identity(),
            leader_election: None,
            min_resync_period: DEFAULT_MIN_RESYNC_PERIOD,
            deployment_max_retry_delay: Duration::from_secs(1000),
            decision_log: true,
            work_queue_priorities: true,
            max_low_priority_wait: Priorities::DEFAULT_MAX_LOW_WAIT,
            feature_gates: FeatureGates::default(),
            safeties: Safeties::all_on(),
            watch_delay: Duration::ZERO,
            flags: BTreeMap::new(),
        }
    }
}

impl ManagerOptions {
    /// The queue priorities every controller's queue gets.
    pub(crate) fn priorities(&self) -> Priorities {
        if self.work_queue_priorities {
            Priorities::On {
                max_low_wait: self.max_low_priority_wait,
            }
        } else {
            Priorities::Off
        }
    }

    /// Whether `controller` is enabled by `--controllers` (later entries win, `*` enables all).
    pub(crate) fn enabled(&self, controller: ControllerName) -> bool {
        let mut on = false;
        for entry in &self.controllers {
            let entry = entry.trim();
            if entry == "*" {
                on = true;
            } else if let Some(name) = entry.strip_prefix('-') {
                if name == controller.name() || name == format!("{}-controller", controller.name())
                {
                    on = false;
                }
            } else if entry == controller.name()
                || entry == format!("{}-controller", controller.name())
            {
                on = true;
            }
        }
        on
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_priorities_follow_the_two_flags() {
        let on = ManagerOptions::default();
        assert_eq!(
            on.priorities(),
            Priorities::On {
                max_low_wait: Duration::from_secs(5)
            }
        );
        let off = ManagerOptions {
            work_queue_priorities: false,
            ..Default::default()
        };
        assert_eq!(off.priorities(), Priorities::Off);
    }

    #[test]
    fn controllers_flag_follows_kube_controller_manager_syntax() {
        let with = |list: &[&str]| ManagerOptions {
            controllers: list.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        };
        assert!(with(&["*"]).enabled(ControllerName::ReplicaSet));
        assert!(!with(&["*", "-replicaset"]).enabled(ControllerName::ReplicaSet));
        assert!(!with(&["*", "-replicaset-controller"]).enabled(ControllerName::ReplicaSet));
        assert!(with(&["replicaset"]).enabled(ControllerName::ReplicaSet));
        assert!(!with(&[]).enabled(ControllerName::ReplicaSet));
        assert!(with(&["*"]).enabled(ControllerName::DaemonSet));
        assert!(!with(&["*", "-daemonset"]).enabled(ControllerName::DaemonSet));
        assert!(with(&["daemonset-controller"]).enabled(ControllerName::DaemonSet));
    }
}
