//! Leader election, as kube-controller-manager does it: one `coordination.k8s.io/v1` Lease, client-go's
//! timing rules, and a fence on every controller's writes.
//!
//! Expectations and work queues live in one process, so two replicas must never both write. The rules
//! (client-go's `leaderelection`), with kube-controller-manager's defaults:
//! - A candidate tries about every **retry period** (2 s, jittered below it) to take the Lease. It may
//!   take it when it is free, or when the record it holds has not changed for a whole **lease duration**
//!   (15 s) *as this candidate observed it* (its own clock; the holder's timestamps are never compared
//!   across machines). It also tries exactly when that observed lease expires, so a standby takes over
//!   at most lease duration + retry period after the holder's last renewal (plus API latency).
//! - The leader renews every retry period. If no renewal succeeds for a **renew deadline** (10 s) it has
//!   lost: the manager stops every controller and the process exits non-zero, like upstream.
//! - The write fence (see `mini_kcm_runtime::api::client::WriteFence`) is open only until a renewal's *start*
//!   plus the renew deadline, so a leader that stalls (a paused process, a partition) stops writing at
//!   least `lease duration − renew deadline` before any other replica can take over.
//!
//! Why not the kube-lease-manager crate: its holder renews once per (duration − grace) and keeps
//! reporting leadership while renewals fail, so it has no renew deadline to fence writes on.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use mini_kcm_runtime::api::client::WriteFence;
use rand::Rng;
use tokio::sync::watch;
use tokio::time::Instant;

/// kube-controller-manager's `--leader-elect-*` settings.
#[derive(Debug, Clone)]
pub struct LeaderElectionConfig {
    pub lease_name: String,
    pub lease_namespace: String,
    /// This replica's holder identity (pod name or host name plus a random suffix).
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// kube-controller-manager's defaults: 15 s / 10 s / 2 s.
    pub fn new(lease_namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaderElectionConfig {
            lease_name: "mini-kcm".into(),
            lease_namespace: lease_namespace.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Why leader election ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderElectionError {
    #[error(
        "invalid leader election timing: need lease duration > renew deadline > retry period > 0 (client-go's rule)"
    )]
    InvalidTiming,
    #[error("lost the lease {namespace}/{name}: no renewal succeeded within the renew deadline")]
    Lost { namespace: String, name: String },
}

/// Where the Lease lives: the API server, or memory in unit tests.
pub(crate) trait LeaseStore: Send + Sync {
    /// The Lease, `None` when it does not exist.
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, kube::Error>> + Send;
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
    /// Replaces the Lease; fails with a conflict when its resourceVersion is not the stored one.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<Lease, kube::Error>> + Send;
}

/// The Lease through the API server.
pub(crate) struct ApiLeaseStore {
    api: Api<Lease>,
    name: String,
}

impl ApiLeaseStore {
    pub(crate) fn new(client: kube::Client, config: &LeaderElectionConfig) -> Self {
        ApiLeaseStore {
            api: Api::namespaced(client, &config.lease_namespace),
            name: config.lease_name.clone(),
        }
    }
}

impl LeaseStore for ApiLeaseStore {
    async fn get(&self) -> Result<Option<Lease>, kube::Error> {
        self.api.get_opt(&self.name).await
    }
    async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api.create(&PostParams::default(), lease).await
    }
    async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await
    }
}

/// What others can see of the election (health checks, metrics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeaderState {
    Standby,
    Leading {
        /// When the last successful renewal started.
        renewed: Instant,
    },
    Lost,
}

/// One replica's elector.
pub(crate) struct LeaderElector<S> {
    config: LeaderElectionConfig,
    store: S,
    fence: WriteFence,
    state: watch::Sender<LeaderState>,
    /// The holder record as last seen, and when this replica saw it change.
    observed: Option<(LeaseSpec, Instant)>,
}

impl<S: LeaseStore> LeaderElector<S> {
    pub(crate) fn new(
        config: LeaderElectionConfig,
        store: S,
        fence: WriteFence,
    ) -> Result<Self, LeaderElectionError> {
        let valid = config.retry_period > Duration::ZERO
            && config.retry_period < config.renew_deadline
            && config.renew_deadline < config.lease_duration;
        if !valid {
            return Err(LeaderElectionError::InvalidTiming);
        }
        Ok(LeaderElector {
            config,
            store,
            fence,
            state: watch::Sender::new(LeaderState::Standby),
            observed: None,
        })
    }

    /// Follows the election's state.
    pub(crate) fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.state.subscribe()
    }

    /// Campaigns until this replica leads, then renews until it loses (the error) or `stop` completes
    /// (then it releases the Lease so a standby takes over at once, and returns `Ok`).
    pub(crate) async fn run(
        &mut self,
        stop: impl Future<Output = ()>,
    ) -> Result<(), LeaderElectionError> {
        tokio::pin!(stop);
        let outcome = tokio::select! {
            outcome = self.lead() => outcome,
            () = &mut stop => Ok(()),
        };
        self.fence.close();
        if outcome.is_ok() && matches!(*self.state.borrow(), LeaderState::Leading { .. }) {
            self.release().await;
        }
        self.state.send_replace(match outcome {
            Ok(()) => LeaderState::Standby,
            Err(_) => LeaderState::Lost,
        });
        outcome
    }

    async fn lead(&mut self) -> Result<(), LeaderElectionError> {
        tracing::info!(
            lease = %format!("{}/{}", self.config.lease_namespace, self.config.lease_name),
            identity = %self.config.identity,
            "attempting to acquire the leader lease"
        );
        loop {
            let started = Instant::now();
            if self.try_acquire_or_renew().await {
                self.became_leader(started);
                break;
            }
            tokio::time::sleep_until(self.next_attempt()).await;
        }
        tracing::info!(identity = %self.config.identity, "acquired the leader lease");
        let mut last_renewal = Instant::now();
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = last_renewal + self.config.renew_deadline;
            let started = Instant::now();
            let renewed = tokio::time::timeout_at(deadline, self.try_acquire_or_renew())
                .await
                .unwrap_or(false);
            if renewed {
                last_renewal = started;
                self.became_leader(started);
            } else if Instant::now() >= deadline {
                self.fence.close();
                tracing::error!(
                    identity = %self.config.identity,
                    "failed to renew the leader lease within the renew deadline; stopping"
                );
                return Err(LeaderElectionError::Lost {
                    namespace: self.config.lease_namespace.clone(),
                    name: self.config.lease_name.clone(),
                });
            }
        }
    }

    /// When a standby tries again: after a jittered fraction of the retry period, or exactly when the
    /// holder's record (as this replica observed it) expires, whichever comes first. Polling at most
    /// every 0.9 retry periods bounds how late a renewal is observed, and waking at the expiry removes
    /// the wait for the next poll, so a standby takes over at most lease duration + retry period after
    /// the holder's last renewal (plus API latency). client-go jitters its polls *up* to 2.2 retry
    /// periods and can take up to lease duration + 2 × 2.2 retry periods: a deliberate difference.
    fn next_attempt(&self) -> Instant {
        let now = Instant::now();
        let poll = now + jittered_below(self.config.retry_period);
        let expiry = self.observed.as_ref().map(|(record, seen_at)| {
            *seen_at + lease_duration_of(record, self.config.lease_duration)
        });
        match expiry {
            Some(expiry) if expiry > now => poll.min(expiry),
            _ => poll,
        }
    }

    fn became_leader(&self, renewal_started: Instant) {
        self.fence
            .open_until(renewal_started + self.config.renew_deadline);
        self.state.send_replace(LeaderState::Leading {
            renewed: renewal_started,
        });
    }

    /// One attempt: take or renew the Lease if this replica may. True when it holds it now.
    async fn try_acquire_or_renew(&mut self) -> bool {
        let now = Instant::now();
        let wall = MicroTime(Timestamp::now());
        let lease_seconds = i32::try_from(self.config.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let current = match self.store.get().await {
            Ok(lease) => lease,
            Err(e) => {
                tracing::debug!(error = %e, "reading the leader lease failed");
                return false;
            }
        };
        let Some(mut lease) = current else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.lease_namespace.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(lease_seconds),
                    acquire_time: Some(wall.clone()),
                    renew_time: Some(wall),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.store.create(&lease).await {
                Ok(created) => {
                    self.observed = Some((created.spec.unwrap_or_default(), now));
                    true
                }
                Err(e) => {
                    tracing::debug!(error = %e, "creating the leader lease failed");
                    false
                }
            };
        };
        let record = lease.spec.clone().unwrap_or_default();
        if self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| *seen != record)
        {
            self.observed = Some((record.clone(), now));
        }
        let holder = record.holder_identity.as_deref().unwrap_or_default();
        let held_by_us = holder == self.config.identity;
        let fresh = self.observed.as_ref().is_some_and(|(_, seen_at)| {
            now < *seen_at + lease_duration_of(&record, self.config.lease_duration)
        });
        if !holder.is_empty() && !held_by_us && fresh {
            return false;
        }
        let transitions = record.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(lease_seconds),
            acquire_time: if held_by_us {
                record.acquire_time.clone()
            } else {
                Some(wall.clone())
            },
            renew_time: Some(wall),
            lease_transitions: Some(if held_by_us {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..record
        });
        match self.store.replace(&lease).await {
            Ok(stored) => {
                self.observed = Some((stored.spec.unwrap_or_default(), now));
                true
            }
            Err(e) => {
                tracing::debug!(error = %e, "updating the leader lease failed");
                false
            }
        }
    }

    /// Gives the Lease up (an empty holder), so a standby need not wait for it to expire. As client-go
    /// since 1.37, a conflict is retried with a fresh read: a renewal cancelled on our side may still have
    /// been written, moving the Lease's resourceVersion under the release. All of it within the renew
    /// deadline.
    async fn release(&mut self) {
        let deadline = self.config.renew_deadline;
        if tokio::time::timeout(deadline, self.try_release())
            .await
            .is_err()
        {
            tracing::warn!(
                ?deadline,
                "releasing the leader lease timed out; it expires on its own"
            );
        }
    }

    async fn try_release(&mut self) {
        loop {
            let Ok(Some(mut lease)) = self.store.get().await else {
                return;
            };
            let mut spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(&self.config.identity) {
                return;
            }
            let now = MicroTime(Timestamp::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now.clone());
            spec.acquire_time = Some(now);
            lease.spec = Some(spec);
            match self.store.replace(&lease).await {
                Ok(_) => {
                    tracing::info!("released the leader lease");
                    return;
                }
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    tracing::debug!("conflict while releasing the leader lease; reading it again");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "releasing the leader lease failed");
                    return;
                }
            }
        }
    }
}

/// The lease duration a record asks for (its holder's setting), else ours.
fn lease_duration_of(record: &LeaseSpec, default: Duration) -> Duration {
    record
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
        .map(Duration::from_secs)
        .unwrap_or(default)
}

/// Somewhere in [0.5, 0.9) × `period`: candidates stay out of step, and never wait a whole period.
fn jittered_below(period: Duration) -> Duration {
    period.mul_f64(rand::rng().random_range(0.5..0.9))
}

/// This replica's identity: the pod (or host) name and a random suffix, as kube-controller-manager
/// forms it, so a restarted pod with the same name is a new candidate.
pub(crate) fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "mini-kcm".into());
    let suffix: String = (0..8)
        .map(|_| {
            char::from(b"abcdefghijklmnopqrstuvwxyz0123456789"[rand::rng().random_range(0..36)])
        })
        .collect();
    format!("{base}_{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A Lease in memory with the API server's optimistic concurrency (resourceVersion), and a switch
    /// that makes every call fail (an unreachable API server).
    #[derive(Clone, Default)]
    struct MemoryStore {
        lease: Arc<Mutex<Option<Lease>>>,
        down: Arc<Mutex<bool>>,
        /// This many of the next reads are each followed by a write of another client's (a renewal
        /// that lands late), so a write based on that read conflicts.
        writes_after_read: Arc<Mutex<u32>>,
    }

    fn unavailable() -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("unavailable", "ServiceUnavailable")
                .with_code(503)
                .boxed(),
        )
    }

    fn conflict() -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure("conflict", "Conflict")
                .with_code(409)
                .boxed(),
        )
    }

    impl MemoryStore {
        fn holder(&self) -> Option<String> {
            self.lease
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|l| l.spec.as_ref()?.holder_identity.clone())
        }
        fn transitions(&self) -> i32 {
            self.lease
                .lock()
                .unwrap()
                .as_ref()
                .and_then(|l| l.spec.as_ref()?.lease_transitions)
                .unwrap_or(0)
        }
        fn set_down(&self, down: bool) {
            *self.down.lock().unwrap() = down;
        }
    }

    impl LeaseStore for MemoryStore {
        async fn get(&self) -> Result<Option<Lease>, kube::Error> {
            if *self.down.lock().unwrap() {
                return Err(unavailable());
            }
            let read = self.lease.lock().unwrap().clone();
            let mut late_writes = self.writes_after_read.lock().unwrap();
            if *late_writes > 0 {
                *late_writes -= 1;
                if let Some(stored) = self.lease.lock().unwrap().as_mut() {
                    let version = stored.metadata.resource_version.as_deref().unwrap_or("0");
                    let next = version.parse::<u64>().unwrap_or(0) + 1;
                    stored.metadata.resource_version = Some(next.to_string());
                }
            }
            Ok(read)
        }
        async fn create(&self, lease: &Lease) -> Result<Lease, kube::Error> {
            let mut stored = self.lease.lock().unwrap();
            if *self.down.lock().unwrap() || stored.is_some() {
                return Err(conflict());
            }
            let mut lease = lease.clone();
            lease.metadata.resource_version = Some("1".into());
            *stored = Some(lease.clone());
            Ok(lease)
        }
        async fn replace(&self, lease: &Lease) -> Result<Lease, kube::Error> {
            if *self.down.lock().unwrap() {
                return Err(unavailable());
            }
            let mut stored = self.lease.lock().unwrap();
            let current = stored
                .as_ref()
                .and_then(|l| l.metadata.resource_version.clone());
            if current != lease.metadata.resource_version {
                return Err(conflict());
            }
            let next: u64 = current.and_then(|v| v.parse().ok()).unwrap_or(0) + 1;
            let mut lease = lease.clone();
            lease.metadata.resource_version = Some(next.to_string());
            *stored = Some(lease.clone());
            Ok(lease)
        }
    }

    fn elector(store: &MemoryStore, identity: &str) -> (LeaderElector<MemoryStore>, WriteFence) {
        let fence = WriteFence::new();
        let config = LeaderElectionConfig::new("kube-system", identity);
        (
            LeaderElector::new(config, store.clone(), fence.clone()).unwrap(),
            fence,
        )
    }

    /// An elector of `identity` running until the returned sender fires, once it leads.
    async fn leading_until_stopped(
        store: &MemoryStore,
        identity: &str,
    ) -> (
        tokio::task::JoinHandle<Result<(), LeaderElectionError>>,
        tokio::sync::oneshot::Sender<()>,
        WriteFence,
    ) {
        let (mut elector, fence) = elector(store, identity);
        let mut state = elector.subscribe();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            elector
                .run(async {
                    let _ = stopped.await;
                })
                .await
        });
        wait_leading(&mut state).await;
        (task, stop, fence)
    }

    async fn wait_leading(state: &mut watch::Receiver<LeaderState>) -> Instant {
        state
            .wait_for(|s| matches!(s, LeaderState::Leading { .. }))
            .await
            .unwrap();
        Instant::now()
    }

    #[test]
    fn timing_must_follow_client_gos_rule() {
        let store = MemoryStore::default();
        let mut config = LeaderElectionConfig::new("ns", "a");
        config.renew_deadline = config.lease_duration;
        assert!(matches!(
            LeaderElector::new(config, store, WriteFence::new()),
            Err(LeaderElectionError::InvalidTiming)
        ));
    }

    #[tokio::test(start_paused = true)]
    async fn one_leader_and_a_standby_takes_over_only_after_the_lease_expires() {
        let store = MemoryStore::default();
        let (mut a, fence_a) = elector(&store, "a");
        let (mut b, fence_b) = elector(&store, "b");
        let mut state_a = a.subscribe();
        let mut state_b = b.subscribe();
        let (stop_a, stopped_a) = tokio::sync::oneshot::channel::<()>();
        let task_a = tokio::spawn(async move {
            a.run(async {
                let _ = stopped_a.await;
            })
            .await
        });
        wait_leading(&mut state_a).await;
        assert!(fence_a.allows_writes());
        let task_b = tokio::spawn(async move { b.run(std::future::pending()).await });
        // b keeps campaigning while a renews: a stays the only leader and the only writer.
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(store.holder().as_deref(), Some("a"));
        assert_eq!(*state_b.borrow(), LeaderState::Standby);
        assert!(!fence_b.allows_writes());

        // a freezes (its task stops running): b may lead only a full lease duration after it last saw
        // a renew; a's fence closed before that.
        task_a.abort();
        let frozen = Instant::now();
        let took_over = wait_leading(&mut state_b).await;
        // At least a lease duration after b last saw a renewal (seen at most 1.8 s late, a renewal at
        // most 2 s before the freeze); at most a lease duration plus a retry period after it.
        let elapsed = took_over - frozen;
        assert!(elapsed >= Duration::from_secs(13), "{elapsed:?}");
        assert!(elapsed <= Duration::from_secs(15 + 2), "{elapsed:?}");
        assert!(
            !fence_a.allows_writes(),
            "the old leader's fence must be closed by then"
        );
        assert!(fence_b.allows_writes());
        assert_eq!(store.holder().as_deref(), Some("b"));
        assert_eq!(store.transitions(), 1);
        drop(stop_a);
        task_b.abort();
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_stops_after_the_renew_deadline() {
        let store = MemoryStore::default();
        let (mut a, fence) = elector(&store, "a");
        let mut state = a.subscribe();
        let task = tokio::spawn(async move { a.run(std::future::pending()).await });
        wait_leading(&mut state).await;
        store.set_down(true);
        let down = Instant::now();
        let result = task.await.unwrap();
        assert!(matches!(result, Err(LeaderElectionError::Lost { .. })));
        let lost_after = Instant::now() - down;
        assert!(lost_after <= Duration::from_secs(10), "{lost_after:?}");
        assert!(!fence.allows_writes());
        assert_eq!(*state.borrow(), LeaderState::Lost);
    }

    /// upstream (client-go 1.37): a release that conflicts with a renewal landing late is retried.
    #[tokio::test(start_paused = true)]
    async fn a_release_that_conflicts_is_retried_with_a_fresh_read() {
        let store = MemoryStore::default();
        let (task_a, stop, _) = leading_until_stopped(&store, "a").await;
        assert_eq!(store.holder().as_deref(), Some("a"));
        // The release's first two reads are each overtaken by a write.
        *store.writes_after_read.lock().unwrap() = 2;
        stop.send(()).unwrap();
        assert!(task_a.await.unwrap().is_ok());
        assert_eq!(*store.writes_after_read.lock().unwrap(), 0);
        assert_eq!(store.holder(), None, "released on the third try");
    }

    #[tokio::test(start_paused = true)]
    async fn stopping_releases_the_lease_for_a_quick_takeover() {
        let store = MemoryStore::default();
        let (task_a, stop, fence_a) = leading_until_stopped(&store, "a").await;
        let (mut b, _) = elector(&store, "b");
        let mut state_b = b.subscribe();
        let task_b = tokio::spawn(async move { b.run(std::future::pending()).await });
        tokio::time::sleep(Duration::from_secs(5)).await;
        stop.send(()).unwrap();
        assert!(task_a.await.unwrap().is_ok());
        assert!(!fence_a.allows_writes());
        let released = Instant::now();
        wait_leading(&mut state_b).await;
        // Within one retry period, not a lease duration.
        assert!(Instant::now() - released <= Duration::from_secs(2));
        task_b.abort();
    }
}
