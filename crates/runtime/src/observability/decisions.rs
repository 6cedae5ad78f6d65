//! The decision log: what each sync saw, what it decided and why, and how its writes went.
//!
//! Why: the project exists to show how controllers work, and an operator debugging a stuck rollout asks
//! the same questions as a learner ("why was this pod deleted?", "why does nothing happen?"). Logs
//! answer them only for whoever reads the right lines at the right time; the decision log keeps the
//! answers per object, as data, for the manager's live view (`/debug/controllers`) and `mini-kcm explain`.
//!
//! How: the worker gives every sync a fresh draft (a task-local, so the decision code needs no extra
//! parameter), holding what woke the sync (the queue's gathered wake reasons, see
//! `crate::controller::wake`) and how long its key waited in the queue. Inside a sync, [`observe`] notes a number the decision rests on, [`plan`] what it decided,
//! [`reason`] why, [`skip`] why it did nothing, [`wrote`] an API write and its result (`PodControl` does
//! this for pod creations and deletions), [`nodes`] the DaemonSet's node → pod map, [`rollout_point`] a
//! point of a Deployment's rollout timeline (see [`RolloutPoint`]). Plans and reasons are
//! also logged at info, so the logs and the view tell the same story. When the sync returns, the worker
//! files the draft with its outcome, unless the sync decided nothing (a status refresh with nothing to
//! do is not a decision). Outside a sync, or with the log disabled, these calls do nothing.
//!
//! Memory is bounded whatever the cluster does: at most [`DecisionLimits::total`] decisions in all (the
//! oldest go first), at most [`DecisionLimits::per_object`] per object, for at most
//! [`DecisionLimits::objects`] objects (the object decided on least recently is forgotten first); each
//! decision has at most [`MAX_LINES`] lines of at most [`MAX_LINE_BYTES`] bytes, [`MAX_WRITES`]
//! writes and [`MAX_WOKEN_BY`] wake reasons, so at most ≈ 14 KiB; a node map at most [`MAX_NODES`]
//! nodes (one per DaemonSet); a rollout timeline at most [`MAX_ROLLOUT_POINTS`] points of at most
//! [`MAX_POINT_REPLICA_SETS`] ReplicaSets (one per Deployment, ≤ 40 KiB). With the defaults (5 000 decisions) that is ≤ 70 MiB in the worst case,
//! plus ≤ 40 MiB of timelines were all 1 000 objects Deployments; a typical decision is 0.5–1 KiB
//! (measured in `docs/live-view.md`), a typical timeline 2–3 KiB.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};
use std::fmt::Display;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use mini_kcm_workqueue::Woken;
use serde::{Deserialize, Serialize};

use crate::api::api_errors::is_conflict;
use crate::controller::key::ObjectKey;

/// Most lines (observations, plans, reasons) kept per decision; later ones are counted, not kept.
pub(crate) const MAX_LINES: usize = 24;
/// Longest line kept, in bytes (longer ones are cut at a character boundary and marked with `…`).
pub(crate) const MAX_LINE_BYTES: usize = 240;
/// Most writes kept per decision (a sync creating 500 pods keeps the first ones and a count).
pub(crate) const MAX_WRITES: usize = 24;
/// Most nodes kept in a DaemonSet's node → pod map.
pub(crate) const MAX_NODES: usize = 500;
/// Most points kept in a Deployment's rollout timeline (the oldest go first). A rolling update of 3
/// replicas makes about 15, one of 500 replicas a few hundred (the picture then shows its end).
pub(crate) const MAX_ROLLOUT_POINTS: usize = 100;
/// Most ReplicaSets per timeline point (the active ones, newest first; a rollout has two or three).
pub(crate) const MAX_POINT_REPLICA_SETS: usize = 6;
/// Most wake reasons kept per decision (the queue keeps as many per key between two syncs).
pub(crate) const MAX_WOKEN_BY: usize = mini_kcm_workqueue::MAX_REASONS;

/// How much the log keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecisionLimits {
    /// Decisions kept per object (the newest; a rollout of 500 replicas makes about 20).
    pub per_object: usize,
    /// Objects with a history; beyond, the one decided on least recently is forgotten.
    pub objects: usize,
    /// Decisions kept in all; beyond, the oldest is dropped.
    pub total: usize,
}

impl Default for DecisionLimits {
    fn default() -> Self {
        DecisionLimits {
            per_object: 32,
            objects: 1000,
            total: 5000,
        }
    }
}

/// Which controller instance decided (the manager runs one per controller and API family).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DecidedBy {
    /// `replicaset`, `deployment` or `daemonset`.
    pub controller: &'static str,
    /// `apps` or `copies`.
    pub family: &'static str,
    /// The kind it manages.
    pub kind: &'static str,
}

/// One sync's decision, as the live view and `mini-kcm explain` show it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Increases by one per decision filed in this log (a client polls for `seq > last seen`).
    pub seq: u64,
    /// When the sync ended (RFC 3339).
    pub at: String,
    // Names the code gives (`Cow`: borrowed from the program's own strings while in the log, owned
    // when decoded from the JSON endpoint), so thousands of kept decisions do not each copy them.
    /// The deciding controller: `replicaset`, `deployment` or `daemonset`.
    pub controller: Cow<'static, str>,
    /// Its API family: `apps` or `copies`.
    pub family: Cow<'static, str>,
    /// The kind of the object decided on, e.g. `ReplicaSet`.
    pub kind: Cow<'static, str>,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
    /// The numbers the decision rests on, in the order the sync noted them.
    pub observed: Vec<Observation>,
    /// What the sync decided to do.
    pub plan: Vec<String>,
    /// Why.
    pub reasons: Vec<String>,
    /// Why it did nothing (e.g. waiting for earlier creations to be observed).
    pub skipped: Vec<String>,
    /// The writes it made, in order, with their results.
    pub writes: Vec<Write>,
    /// Lines and writes beyond the limits, counted but not kept.
    pub omitted: usize,
    /// How the sync ended.
    pub outcome: Outcome,
    /// How long the sync took, in milliseconds (queue wait excluded: see `waited_ms`).
    pub duration_ms: f64,
    /// How many later syncs of the object decided exactly the same and wrote nothing (folded into
    /// this entry, like repeated events are, so a rollout waiting on pods does not push its earlier
    /// steps out of the log); `at`, `observed` and `waited_ms` are then the last one's, `woken_by`
    /// gathers theirs.
    #[serde(default)]
    pub repeats: u32,
    /// What queued the key since its previous sync, coalesced as the queue coalesces adds: distinct
    /// reasons, first seen first (e.g. `pod web-7d9f-x became Ready (update)`, `initial list`, `retry
    /// after a failed sync`), at most [`MAX_WOKEN_BY`].
    #[serde(default)]
    pub woken_by: Vec<String>,
    /// Wake reasons beyond `woken_by`, counted only.
    #[serde(default)]
    pub woken_more: usize,
    /// How long the key waited in the queue, from the first of those adds to the sync's start.
    #[serde(default)]
    pub waited_ms: f64,
}

impl Decision {
    /// `next` decided the same as this one and wrote nothing: it folds into this entry.
    fn repeats_as(&self, next: &Decision) -> bool {
        next.writes.is_empty()
            && self.writes.is_empty()
            && next.plan == self.plan
            && next.reasons == self.reasons
            && next.skipped == self.skipped
            && next.outcome == self.outcome
    }

    /// Gathers what woke a repeat into this entry, as the queue gathers reasons: distinct ones first
    /// seen first, at most [`MAX_WOKEN_BY`], the rest counted.
    fn fold_woken_by(&mut self, repeat: &Decision) {
        self.woken_more = self.woken_more.saturating_add(repeat.woken_more);
        for reason in &repeat.woken_by {
            if self.woken_by.contains(reason) {
                continue;
            }
            if self.woken_by.len() < MAX_WOKEN_BY {
                self.woken_by.push(reason.clone());
            } else {
                self.woken_more = self.woken_more.saturating_add(1);
            }
        }
    }
}

/// A number a decision rests on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// What was counted, e.g. `desired` or `nodes`.
    pub what: Cow<'static, str>,
    /// Its value (`i64::MAX` when it did not fit).
    pub value: i64,
}

/// One API write of a sync.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Write {
    /// `create`, `delete`, `patch`, `update`, ...
    pub verb: Cow<'static, str>,
    /// What was written, e.g. `pod web-7d9f-abcde` or `ReplicaSet web-7d9f`.
    pub object: String,
    /// The API error, if it failed.
    pub error: Option<String>,
    /// The failure is routine (a conflict: the sync is retried on fresher objects), and why.
    #[serde(default)]
    pub routine: Option<RoutineRetry>,
}

/// How the sync ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "snake_case")]
pub enum Outcome {
    /// It returned without error.
    Done,
    /// It failed and the key is retried with backoff (or dropped, as the Deployment controller does
    /// after 15 failures).
    Failed {
        /// The sync's error, cut to [`MAX_LINE_BYTES`].
        error: String,
    },
    /// It stopped for a routine reason and the key is retried: nothing is wrong (see [`RoutineRetry`]).
    /// Filed only when the sync decided something before it stopped (e.g. wrote, then hit a conflict).
    Retried {
        /// Which routine reason stopped it.
        reason: RoutineRetry,
        /// The error it stopped with, cut to [`MAX_LINE_BYTES`].
        error: String,
    },
}

/// Why a sync that did not finish is a routine retry rather than a failure. Which failures are routine
/// is decided by `crate::controller::worker::SyncFailure::routine`; this names the reason and explains it to a
/// reader (the live view's tooltips, `mini-kcm explain`).
///
/// A sync that waits for its expectations is not one of these: it finishes normally and its decision
/// says `skipped` (see `crate::controller::expectations`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoutineRetry {
    /// 409 Conflict: a write carried a resourceVersion older than the object's.
    Conflict,
    /// The caches have not yet observed this controller's own writes (read-your-own-writes).
    StaleCache,
}

impl RoutineRetry {
    /// Every reason, in declaration order (the order the inspect view counts them in).
    pub const ALL: [RoutineRetry; 2] = [RoutineRetry::Conflict, RoutineRetry::StaleCache];

    /// The rule for an API server's answer, for a failed sync (`crate::controller::worker::SyncFailure::routine`)
    /// and a failed write alike: a 409 Conflict is routine (a name clash, `AlreadyExists`, is not).
    pub fn of_api_error(error: &kube::Error) -> Option<RoutineRetry> {
        is_conflict(error).then_some(RoutineRetry::Conflict)
    }

    /// A few words: `write conflict`, `stale cache`.
    pub fn label(self) -> &'static str {
        match self {
            RoutineRetry::Conflict => "write conflict",
            RoutineRetry::StaleCache => "stale cache",
        }
    }

    /// What the retry's sync shows as having woken it (`woken_by`).
    pub fn wake_reason(self) -> &'static str {
        match self {
            RoutineRetry::Conflict => "routine retry after a write conflict",
            RoutineRetry::StaleCache => {
                "routine retry: waiting for the cache to show our own write"
            }
        }
    }

    /// Why it is routine, for a learner.
    pub fn why(self) -> &'static str {
        match self {
            RoutineRetry::Conflict => {
                "409 Conflict: someone else (another controller, a kubelet, kubectl) changed the object \
                 after the controller read it from its cache, so the API server refused the write; the \
                 retry reads the newer copy and decides again"
            }
            RoutineRetry::StaleCache => {
                "the cache has not yet seen the controller's own last write come back through its watch \
                 (read-your-own-writes); the sync stops and is retried rather than decide on stale data"
            }
        }
    }
}

/// A DaemonSet's node → pod map as its last sync computed it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeMap {
    /// Every node the sync considered, up to [`MAX_NODES`], in the order the sync listed them.
    pub nodes: Vec<NodePlacement>,
    /// Nodes beyond [`MAX_NODES`], counted only.
    pub omitted: usize,
}

/// One node of a [`NodeMap`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePlacement {
    /// The node's name.
    pub node: String,
    /// The DaemonSet wants a pod there.
    pub should_run: bool,
    /// Its daemon pods there.
    pub pods: Vec<String>,
    /// Why it should not run there, or why the pod is not (yet) there.
    pub why: Option<String>,
}

/// What one Deployment sync saw once it was done: a point of the rollout timeline the live view draws.
///
/// Why the manager keeps these rather than the page collecting them as it polls: a page opened after a
/// rollout (or a test, or `curl`) should still see how it went, and the sync already holds every number
/// at the moment it decides. Kept like the node map (beside the object's decisions, bounded, forgotten
/// with them); a point is only added when its numbers differ from the previous one or its sync filed a
/// new decision, so an idle Deployment adds nothing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RolloutPoint {
    /// When the sync ended, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The Deployment's `spec.replicas`.
    pub replicas: i32,
    /// `spec.strategy.rollingUpdate.maxSurge` resolved to pods (0 for Recreate).
    pub max_surge: i32,
    /// `spec.strategy.rollingUpdate.maxUnavailable` resolved to pods, at most `replicas` (0 for
    /// Recreate).
    pub max_unavailable: i32,
    /// Its active ReplicaSets (those with `spec.replicas` or ready pods), newest revision first; a
    /// ReplicaSet missing from a point had none.
    pub replica_sets: Vec<ReplicaSetPoint>,
    /// The `seq` of the decision this sync filed (or folded into), if it decided anything.
    pub decision: Option<u64>,
}

/// One ReplicaSet in a [`RolloutPoint`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplicaSetPoint {
    /// The ReplicaSet's name.
    pub name: String,
    /// `spec.replicas`.
    pub replicas: i32,
    /// `status.readyReplicas`.
    pub ready: i32,
}

impl RolloutPoint {
    /// The same numbers (time and decision aside).
    fn same_counts(&self, other: &RolloutPoint) -> bool {
        (self.replicas, self.max_surge, self.max_unavailable)
            == (other.replicas, other.max_surge, other.max_unavailable)
            && self.replica_sets == other.replica_sets
    }
}

/// Which decisions to return.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionFilter {
    /// Only this controller's decisions (`replicaset`, ...); `None` or empty: any.
    pub controller: Option<String>,
    /// Only this family's (`apps`, `copies`); `None` or empty: any.
    pub family: Option<String>,
    /// Only decisions on this kind (`ReplicaSet`, ...); `None` or empty: any.
    pub kind: Option<String>,
    /// Only objects in this namespace; `None` or empty: any.
    pub namespace: Option<String>,
    /// Only objects with this name; `None` or empty: any.
    pub name: Option<String>,
    /// Only decisions with a greater `seq`.
    pub after: Option<u64>,
    /// At most this many (the newest); default 100.
    pub limit: Option<usize>,
}

impl DecisionFilter {
    fn matches(&self, d: &Decision) -> bool {
        fn eq(want: &Option<String>, have: &str) -> bool {
            want.as_deref().is_none_or(|w| w.is_empty() || w == have)
        }
        eq(&self.controller, &d.controller)
            && eq(&self.family, &d.family)
            && eq(&self.kind, &d.kind)
            && eq(&self.namespace, &d.namespace)
            && eq(&self.name, &d.name)
            && self.after.is_none_or(|after| d.seq > after)
    }
}

/// The log every controller of a manager files its decisions in. Cloning shares it; a disabled log
/// keeps nothing and makes recording free.
#[derive(Clone, Default)]
pub struct DecisionLog {
    inner: Option<Arc<Mutex<LogState>>>,
}

impl std::fmt::Debug for DecisionLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DecisionLog")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

type ObjectId = (DecidedBy, ObjectKey);

struct LogState {
    limits: DecisionLimits,
    next_seq: u64,
    /// Per object, its newest decisions (oldest first), and the seq of its last one.
    objects: HashMap<ObjectId, History>,
    /// Every kept decision, oldest first: (seq, object), to drop the oldest beyond `total`.
    order: VecDeque<(u64, ObjectId)>,
}

#[derive(Default)]
struct History {
    decisions: VecDeque<Arc<Decision>>,
    last_seq: u64,
    nodes: Option<Arc<NodeMap>>,
    /// A Deployment's rollout timeline, oldest first.
    rollout: VecDeque<RolloutPoint>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl DecisionLog {
    /// An enabled, empty log keeping at most `limits` (each raised to at least 1).
    pub fn new(limits: DecisionLimits) -> Self {
        DecisionLog {
            inner: Some(Arc::new(Mutex::new(LogState {
                limits: DecisionLimits {
                    per_object: limits.per_object.max(1),
                    objects: limits.objects.max(1),
                    total: limits.total.max(1),
                },
                next_seq: 1,
                objects: HashMap::new(),
                order: VecDeque::new(),
            }))),
        }
    }

    /// A log that keeps nothing (`--decision-log=false`).
    pub fn disabled() -> Self {
        DecisionLog { inner: None }
    }

    /// Whether the log keeps decisions (false for [`DecisionLog::disabled`]).
    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// The newest decisions matching `filter`, newest first.
    pub fn recent(&self, filter: &DecisionFilter) -> Vec<Decision> {
        let Some(inner) = &self.inner else {
            return Vec::new();
        };
        let limit = filter.limit.unwrap_or(100);
        let state = lock(inner);
        let mut found: Vec<&Arc<Decision>> = state
            .objects
            .values()
            .flat_map(|h| h.decisions.iter())
            .filter(|d| filter.matches(d))
            .collect();
        found.sort_unstable_by_key(|d| std::cmp::Reverse(d.seq));
        found
            .into_iter()
            .take(limit)
            .map(|d| d.as_ref().clone())
            .collect()
    }

    /// The node → pod map of the DaemonSet `key` from its last sync that computed one.
    pub fn node_map(&self, by: DecidedBy, key: &ObjectKey) -> Option<Arc<NodeMap>> {
        let inner = self.inner.as_ref()?;
        lock(inner)
            .objects
            .get(&(by, key.clone()))
            .and_then(|h| h.nodes.clone())
    }

    /// The rollout timeline of the Deployment `key`, oldest point first.
    pub fn rollout(&self, by: DecidedBy, key: &ObjectKey) -> Vec<RolloutPoint> {
        let Some(inner) = self.inner.as_ref() else {
            return Vec::new();
        };
        lock(inner)
            .objects
            .get(&(by, key.clone()))
            .map(|h| h.rollout.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// How many decisions the log holds now.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.inner.as_ref().map_or(0, |inner| {
            lock(inner)
                .objects
                .values()
                .map(|h| h.decisions.len())
                .sum()
        })
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Starts the draft of one sync of `key`, which `woken` says what queued (the worker calls this;
    /// `None` when disabled).
    pub(crate) fn start(&self, by: DecidedBy, key: &ObjectKey, woken: Woken) -> Option<Draft> {
        self.inner.as_ref()?;
        Some(Draft {
            shared: Arc::new(Mutex::new(DraftState::default())),
            by,
            key: key.clone(),
            started: std::time::Instant::now(),
            woken,
        })
    }

    /// Files `draft` with how its sync ended. A sync that decided nothing is filed only if it failed
    /// (a routine retry that decided nothing is only counted, in `crate::observability::inspect`); a
    /// node map or rollout point is kept either way.
    pub(crate) fn file(&self, draft: Draft, outcome: Outcome) {
        let Some(inner) = &self.inner else {
            return;
        };
        let mut state = std::mem::take(&mut *lock(&draft.shared));
        let nodes = state.nodes.take().map(Arc::new);
        let point = state.rollout.take();
        let mut log = lock(inner);
        let limits = log.limits;
        let id = (draft.by, draft.key.clone());
        let failed = matches!(outcome, Outcome::Failed { .. });
        if !log.objects.contains_key(&id)
            && (nodes.is_some() || point.is_some() || state.decided_anything() || failed)
            && log.objects.len() >= limits.objects
        {
            forget_least_recent(&mut log.objects);
        }
        if let Some(nodes) = nodes {
            log.objects.entry(id.clone()).or_default().nodes = Some(nodes);
        }
        if !state.decided_anything() && !failed {
            if let Some(point) = point {
                log.objects.entry(id).or_default().add_point(point, false);
            }
            return;
        }
        let seq = log.next_seq;
        log.next_seq += 1;
        let decision = Arc::new(Decision {
            seq,
            at: k8s_openapi::jiff::Timestamp::now().to_string(),
            controller: draft.by.controller.into(),
            family: draft.by.family.into(),
            kind: draft.by.kind.into(),
            namespace: draft.key.namespace().into(),
            name: draft.key.name().into(),
            // At their length: a decision is kept for long, the growth room of its lists is not needed.
            observed: at_length(state.observed),
            plan: at_length(state.plan),
            reasons: at_length(state.reasons),
            skipped: at_length(state.skipped),
            writes: at_length(state.writes),
            omitted: state.omitted,
            outcome: match outcome {
                Outcome::Done => Outcome::Done,
                Outcome::Failed { error } => Outcome::Failed {
                    error: bounded(&error),
                },
                Outcome::Retried { reason, error } => Outcome::Retried {
                    reason,
                    error: bounded(&error),
                },
            },
            duration_ms: draft.started.elapsed().as_secs_f64() * 1000.0,
            repeats: 0,
            woken_by: draft
                .woken
                .reasons
                .iter()
                .take(MAX_WOKEN_BY)
                .map(|r| bounded(r))
                .collect(),
            woken_more: draft
                .woken
                .more
                .saturating_add(draft.woken.reasons.len().saturating_sub(MAX_WOKEN_BY)),
            waited_ms: draft.woken.waited.as_secs_f64() * 1000.0,
        });
        if let Some(last) = log
            .objects
            .get_mut(&id)
            .and_then(|h| h.decisions.back_mut())
            && last.repeats_as(&decision)
        {
            let folded = Arc::make_mut(last);
            folded.repeats = folded.repeats.saturating_add(1);
            folded.at = decision.at.clone();
            folded.waited_ms = decision.waited_ms;
            // The numbers may have moved while the decision stayed (pods going while a ReplicaSet
            // being deleted is skipped): the entry shows the latest sync's.
            folded.observed.clone_from(&decision.observed);
            folded.fold_woken_by(&decision);
            let folded_seq = folded.seq;
            if let Some(mut point) = point
                && let Some(history) = log.objects.get_mut(&id)
            {
                point.decision = Some(folded_seq);
                history.add_point(point, false);
            }
            return;
        }
        let history = log.objects.entry(id.clone()).or_default();
        if let Some(mut point) = point {
            point.decision = Some(seq);
            history.add_point(point, true);
        }
        history.decisions.push_back(decision);
        history.last_seq = seq;
        while history.decisions.len() > limits.per_object {
            history.decisions.pop_front();
        }
        log.order.push_back((seq, id));
        log.trim(limits.total);
    }
}

impl LogState {
    /// Drops the oldest decisions until at most `total` are kept. `order` may still name decisions
    /// already dropped from their object (per-object cap, forgotten object): those are skipped.
    fn trim(&mut self, total: usize) {
        let kept = |objects: &HashMap<ObjectId, History>| -> usize {
            objects.values().map(|h| h.decisions.len()).sum()
        };
        // `order` never holds fewer entries than kept decisions, so its length bounds the work.
        while self.order.len() > total {
            let Some((seq, id)) = self.order.pop_front() else {
                break;
            };
            if let Some(history) = self.objects.get_mut(&id)
                && history.decisions.front().is_some_and(|d| d.seq == seq)
            {
                history.decisions.pop_front();
                if history.is_empty() {
                    self.objects.remove(&id);
                }
            }
        }
        debug_assert!(kept(&self.objects) <= total);
    }
}

impl History {
    /// Whether nothing but the key is left.
    fn is_empty(&self) -> bool {
        self.decisions.is_empty() && self.nodes.is_none() && self.rollout.is_empty()
    }

    /// Adds a timeline point unless it repeats the previous one's numbers without a new decision.
    fn add_point(&mut self, point: RolloutPoint, new_decision: bool) {
        if !new_decision
            && self
                .rollout
                .back()
                .is_some_and(|last| last.same_counts(&point))
        {
            return;
        }
        self.rollout.push_back(point);
        while self.rollout.len() > MAX_ROLLOUT_POINTS {
            self.rollout.pop_front();
        }
    }
}

/// Drops the history of the object decided on least recently (O(objects), only when the log is full).
fn forget_least_recent(objects: &mut HashMap<ObjectId, History>) {
    let oldest = objects
        .iter()
        .min_by_key(|(_, h)| h.last_seq)
        .map(|(id, _)| id.clone());
    if let Some(oldest) = oldest {
        objects.remove(&oldest);
    }
}

/// One sync's decision being written (see the module header).
pub struct Draft {
    shared: Arc<Mutex<DraftState>>,
    by: DecidedBy,
    key: ObjectKey,
    started: std::time::Instant,
    woken: Woken,
}

impl Draft {
    /// Runs `sync` with this draft as the current one, so the recording functions reach it.
    pub(crate) async fn scope<F: Future>(&self, sync: F) -> F::Output {
        CURRENT.scope(self.shared.clone(), sync).await
    }
}

#[derive(Default)]
struct DraftState {
    observed: Vec<Observation>,
    plan: Vec<String>,
    reasons: Vec<String>,
    skipped: Vec<String>,
    writes: Vec<Write>,
    nodes: Option<NodeMap>,
    rollout: Option<RolloutPoint>,
    omitted: usize,
}

impl DraftState {
    fn decided_anything(&self) -> bool {
        !(self.plan.is_empty() && self.reasons.is_empty() && self.skipped.is_empty())
    }

    fn lines(&self) -> usize {
        self.observed.len() + self.plan.len() + self.reasons.len() + self.skipped.len()
    }
}

tokio::task_local! {
    static CURRENT: Arc<Mutex<DraftState>>;
}

/// Applies `f` to the current sync's draft, if there is one.
fn with_draft(f: impl FnOnce(&mut DraftState)) {
    let _ = CURRENT.try_with(|draft| f(&mut lock(draft)));
}

/// Whether the current sync is being recorded (to skip building expensive notes otherwise).
pub fn recording() -> bool {
    CURRENT.try_with(|_| ()).is_ok()
}

fn at_length<T>(mut list: Vec<T>) -> Vec<T> {
    list.shrink_to_fit();
    list
}

/// Cuts `text` to [`MAX_LINE_BYTES`] at a character boundary.
fn bounded(text: &str) -> String {
    if text.len() <= MAX_LINE_BYTES {
        return text.to_string();
    }
    let mut end = MAX_LINE_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

fn push_line(
    state: &mut DraftState,
    line: impl FnOnce(&mut DraftState) -> &mut Vec<String>,
    text: &dyn Display,
) {
    if state.lines() >= MAX_LINES {
        state.omitted += 1;
        return;
    }
    let text = bounded(&text.to_string());
    line(state).push(text);
}

/// Notes a number the decision rests on (e.g. `observe("desired", 5)`).
pub fn observe(what: &'static str, value: impl TryInto<i64>) {
    let value = value.try_into().unwrap_or(i64::MAX);
    with_draft(|d| {
        if d.lines() >= MAX_LINES {
            d.omitted += 1;
        } else {
            d.observed.push(Observation {
                what: what.into(),
                value,
            });
        }
    });
}

/// Notes what the sync decided to do (logged at info too).
pub fn plan(text: impl Display) {
    tracing::info!("{text}");
    with_draft(|d| push_line(d, |d| &mut d.plan, &text));
}

/// Notes why (logged at info too).
pub fn reason(text: impl Display) {
    tracing::info!("{text}");
    with_draft(|d| push_line(d, |d| &mut d.reasons, &text));
}

/// Notes why the sync did nothing (logged at debug: syncs wait often, that is routine).
pub fn skip(text: impl Display) {
    tracing::debug!("{text}");
    with_draft(|d| push_line(d, |d| &mut d.skipped, &text));
}

/// Notes an API write and its result.
pub fn wrote(verb: &'static str, object: impl Display, error: Option<&dyn Display>) {
    push_write(verb, object, error, None);
}

/// Notes an API write and the API server's answer (a conflict is noted as routine, see
/// [`RoutineRetry::of_api_error`]).
pub fn wrote_api(verb: &'static str, object: impl Display, error: Option<&kube::Error>) {
    let routine = error.and_then(RoutineRetry::of_api_error);
    push_write(verb, object, error.map(|e| e as &dyn Display), routine);
}

fn push_write(
    verb: &'static str,
    object: impl Display,
    error: Option<&dyn Display>,
    routine: Option<RoutineRetry>,
) {
    with_draft(|d| {
        if d.writes.len() >= MAX_WRITES {
            d.omitted += 1;
            return;
        }
        d.writes.push(Write {
            verb: verb.into(),
            object: bounded(&object.to_string()),
            error: error.map(|e| bounded(&e.to_string())),
            routine,
        });
    });
}

/// Notes a DaemonSet's node → pod map (only the first [`MAX_NODES`] nodes are kept).
pub fn nodes(mut placements: Vec<NodePlacement>) {
    if !recording() {
        return;
    }
    let omitted = placements.len().saturating_sub(MAX_NODES);
    placements.truncate(MAX_NODES);
    with_draft(|d| {
        d.nodes = Some(NodeMap {
            nodes: placements,
            omitted,
        })
    });
}

/// Notes what a Deployment sync saw once done, as a point of its rollout timeline (the last call of a
/// sync wins; only the first [`MAX_POINT_REPLICA_SETS`] ReplicaSets are kept). `at_ms` is set here,
/// `decision` when the sync is filed.
pub fn rollout_point(mut point: RolloutPoint) {
    if !recording() {
        return;
    }
    point.replica_sets.truncate(MAX_POINT_REPLICA_SETS);
    point.at_ms = k8s_openapi::jiff::Timestamp::now().as_millisecond();
    with_draft(|d| d.rollout = Some(point));
}

#[cfg(test)]
mod tests {
    use super::*;

    const RS: DecidedBy = DecidedBy {
        controller: "replicaset",
        family: "apps",
        kind: "ReplicaSet",
    };

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("ns", name)
    }

    async fn sync(log: &DecisionLog, name: &str, body: impl FnOnce(), failure: Option<&str>) {
        sync_woken(log, name, &["added"], body, failure).await;
    }

    /// A sync the queue handed out for `reasons`, after 5 ms in the queue.
    async fn sync_woken(
        log: &DecisionLog,
        name: &str,
        reasons: &[&str],
        body: impl FnOnce(),
        failure: Option<&str>,
    ) {
        let woken = Woken {
            reasons: reasons.iter().map(|r| Cow::Owned(r.to_string())).collect(),
            more: 0,
            priority: mini_kcm_workqueue::Priority::Fresh,
            waited: std::time::Duration::from_millis(5),
        };
        let draft = log.start(RS, &key(name), woken).expect("enabled");
        draft.scope(async { body() }).await;
        let outcome = failure.map_or(Outcome::Done, |error| Outcome::Failed {
            error: error.into(),
        });
        log.file(draft, outcome);
    }

    #[tokio::test]
    async fn a_conflicting_write_is_noted_as_routine_other_refusals_are_not() {
        let log = DecisionLog::new(DecisionLimits::default());
        let api_error = |code: u16, reason: &str| {
            kube::Error::Api(Box::new(
                kube::core::Status::failure("refused", reason).with_code(code),
            ))
        };
        sync(
            &log,
            "web",
            || {
                plan("write everything");
                wrote_api("update", "ReplicaSet web", None);
                wrote_api(
                    "update status of",
                    "ReplicaSet web",
                    Some(&api_error(409, "Conflict")),
                );
                wrote_api(
                    "create",
                    "pod web-a",
                    Some(&api_error(409, "AlreadyExists")),
                );
                wrote_api("create", "pod web-b", Some(&api_error(403, "Forbidden")));
            },
            None,
        )
        .await;
        let found = log.recent(&DecisionFilter::default());
        let routine: Vec<Option<RoutineRetry>> =
            found[0].writes.iter().map(|w| w.routine).collect();
        assert_eq!(routine, [None, Some(RoutineRetry::Conflict), None, None]);
        assert!(found[0].writes[1].error.is_some());
    }

    #[tokio::test]
    async fn a_routine_retry_is_filed_only_when_it_decided_something() {
        let log = DecisionLog::new(DecisionLimits::default());
        let retried = || Outcome::Retried {
            reason: RoutineRetry::StaleCache,
            error: "the caches have not yet observed this ReplicaSet controller's own writes"
                .into(),
        };
        let woken = || Woken {
            reasons: Vec::new(),
            more: 0,
            priority: mini_kcm_workqueue::Priority::Fresh,
            waited: std::time::Duration::ZERO,
        };
        // Held back before deciding anything: not filed.
        let draft = log.start(RS, &key("quiet"), woken()).expect("enabled");
        log.file(draft, retried());
        assert!(log.recent(&DecisionFilter::default()).is_empty());
        // Decided, then retried: filed as retried, not failed.
        let draft = log.start(RS, &key("busy"), woken()).expect("enabled");
        draft.scope(async { plan("scale to 3") }).await;
        log.file(draft, retried());
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].outcome, retried());
        // A real failure is filed even when it decided nothing.
        let draft = log.start(RS, &key("broken"), woken()).expect("enabled");
        log.file(
            draft,
            Outcome::Failed {
                error: "forbidden".into(),
            },
        );
        assert_eq!(log.recent(&DecisionFilter::default()).len(), 2);
    }

    #[tokio::test]
    async fn a_sync_that_decides_is_filed_with_its_numbers_reasons_and_writes() {
        let log = DecisionLog::new(DecisionLimits::default());
        sync(
            &log,
            "web",
            || {
                observe("desired", 5);
                observe("active", 2usize);
                reason("too few replicas: 2 active of 5 desired");
                plan("creating 3 pods in slow-start batches 1, 2");
                wrote("create", "pod web-abc", None);
                wrote("create", "pod web-def", Some(&"quota exceeded"));
            },
            None,
        )
        .await;
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(found.len(), 1);
        let d = &found[0];
        assert_eq!((d.namespace.as_str(), d.name.as_str()), ("ns", "web"));
        assert_eq!(
            d.observed[1],
            Observation {
                what: "active".into(),
                value: 2
            }
        );
        assert_eq!(d.plan, ["creating 3 pods in slow-start batches 1, 2"]);
        assert_eq!(d.writes[1].error.as_deref(), Some("quota exceeded"));
        assert_eq!(d.outcome, Outcome::Done);
    }

    #[tokio::test]
    async fn a_sync_that_decides_nothing_is_not_filed_unless_it_fails() {
        let log = DecisionLog::new(DecisionLimits::default());
        sync(&log, "quiet", || observe("desired", 1), None).await;
        assert!(log.is_empty());
        sync(&log, "broken", || {}, Some("conflict")).await;
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(
            found[0].outcome,
            Outcome::Failed {
                error: "conflict".into()
            }
        );
    }

    #[tokio::test]
    async fn memory_is_bounded_per_object_per_decision_and_overall() {
        let log = DecisionLog::new(DecisionLimits {
            per_object: 3,
            objects: 2,
            total: 100,
        });
        for i in 0..5 {
            sync(&log, "a", || plan(format_args!("a{i}")), None).await;
        }
        sync(&log, "b", || plan("b"), None).await;
        sync(&log, "c", || plan("c"), None).await; // forgets "a", decided on least recently
        assert_eq!(log.len(), 2);
        let names: Vec<String> = log
            .recent(&DecisionFilter::default())
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, ["c", "b"]);

        let log = DecisionLog::new(DecisionLimits {
            per_object: 3,
            objects: 10,
            total: 4,
        });
        for (i, name) in ["a", "b", "a", "c", "d", "a"].into_iter().enumerate() {
            sync(&log, name, || plan(format_args!("{name}{i}")), None).await;
        }
        let kept: Vec<(u64, String)> = log
            .recent(&DecisionFilter::default())
            .into_iter()
            .map(|d| (d.seq, d.name))
            .collect();
        let expected = [(6, "a"), (5, "d"), (4, "c"), (3, "a")];
        assert_eq!(kept, expected.map(|(s, n)| (s, n.to_string())));

        let log = DecisionLog::new(DecisionLimits::default());
        sync(
            &log,
            "big",
            || {
                for _ in 0..100 {
                    reason("x".repeat(1000));
                    wrote("create", "pod", None);
                }
            },
            None,
        )
        .await;
        let d = &log.recent(&DecisionFilter::default())[0];
        assert_eq!(d.reasons.len(), MAX_LINES);
        assert!(d.reasons[0].len() <= MAX_LINE_BYTES + '…'.len_utf8());
        assert_eq!(d.writes.len(), MAX_WRITES);
        assert_eq!(d.omitted, 200 - MAX_LINES - MAX_WRITES);
    }

    #[tokio::test]
    async fn filters_select_by_object_and_after_a_seq() {
        let log = DecisionLog::new(DecisionLimits::default());
        sync(&log, "a", || plan("1"), None).await;
        sync(&log, "b", || plan("2"), None).await;
        sync(&log, "a", || plan("3"), None).await;
        let only_a = DecisionFilter {
            name: Some("a".into()),
            ..Default::default()
        };
        let plans: Vec<String> = log
            .recent(&only_a)
            .into_iter()
            .flat_map(|d| d.plan)
            .collect();
        assert_eq!(plans, ["3", "1"]);
        let after = DecisionFilter {
            after: Some(2),
            ..Default::default()
        };
        assert_eq!(log.recent(&after).len(), 1);
    }

    #[tokio::test]
    async fn the_same_decision_again_without_writes_is_folded_into_the_last() {
        let log = DecisionLog::new(DecisionLimits::default());
        let blocked = || reason("surge blocked: 8 pods ≥ replicas + maxSurge (6 + 2 = 8)");
        sync(&log, "web", blocked, None).await;
        sync(&log, "web", blocked, None).await;
        // The same decision on other numbers still folds, and the entry shows the latest numbers.
        sync(
            &log,
            "web",
            || {
                observe("ready", 5);
                blocked();
            },
            None,
        )
        .await;
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].repeats, 2);
        assert_eq!(found[0].observed.len(), 1, "{:?}", found[0].observed);
        assert_eq!(found[0].observed[0].value, 5);
        // A write, or another reason, is a new entry.
        sync(
            &log,
            "web",
            || {
                blocked();
                wrote("update", "ReplicaSet web-1", None)
            },
            None,
        )
        .await;
        sync(&log, "web", || reason("room to surge"), None).await;
        assert_eq!(log.recent(&DecisionFilter::default()).len(), 3);
    }

    #[tokio::test]
    async fn a_decision_says_what_woke_its_sync_and_repeats_gather_their_wakes() {
        let log = DecisionLog::new(DecisionLimits::default());
        let waiting = || skip("waiting for 1 creation to be observed");
        sync_woken(&log, "web", &["ReplicaSet web added"], waiting, None).await;
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(found[0].woken_by, ["ReplicaSet web added"]);
        assert_eq!(found[0].waited_ms, 5.0);
        // Folded repeats keep what woke each of them, deduplicated and bounded like the queue's.
        let ready = "pod web-x became Ready (update)";
        sync_woken(&log, "web", &[ready, "ReplicaSet web added"], waiting, None).await;
        let many: Vec<String> = (0..MAX_WOKEN_BY)
            .map(|i| format!("pod web-{i} added"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        sync_woken(&log, "web", &many, waiting, None).await;
        let found = log.recent(&DecisionFilter::default());
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].repeats, 2);
        assert_eq!(found[0].woken_by.len(), MAX_WOKEN_BY);
        assert_eq!(found[0].woken_by[..2], ["ReplicaSet web added", ready]);
        assert_eq!(
            found[0].woken_more, 2,
            "the wakes beyond the bound are counted"
        );
        // A decision without a wake reason deserializes from older managers' JSON as none.
        let mut json = serde_json::to_value(&found[0]).unwrap();
        let object = json.as_object_mut().unwrap();
        object.remove("woken_by");
        object.remove("woken_more");
        object.remove("waited_ms");
        let old: Decision = serde_json::from_value(json).unwrap();
        assert!(old.woken_by.is_empty());
    }

    #[tokio::test]
    async fn a_node_map_is_kept_even_when_nothing_was_decided() {
        let log = DecisionLog::new(DecisionLimits::default());
        let placement = |node: &str| NodePlacement {
            node: node.into(),
            should_run: true,
            pods: vec![format!("ds-{node}")],
            why: None,
        };
        sync(
            &log,
            "ds",
            || nodes(vec![placement("a"), placement("b")]),
            None,
        )
        .await;
        assert!(log.is_empty(), "no decision filed");
        let map = log.node_map(RS, &key("ds")).expect("kept");
        assert_eq!(map.nodes.len(), 2);
        assert_eq!(map.omitted, 0);
    }

    #[tokio::test]
    async fn a_rollout_timeline_keeps_changes_and_decisions_not_repeats() {
        let log = DecisionLog::new(DecisionLimits::default());
        let point = |new: i32, old: i32| RolloutPoint {
            at_ms: 0,
            replicas: 3,
            max_surge: 1,
            max_unavailable: 0,
            replica_sets: [("web-new", new), ("web-old", old)]
                .into_iter()
                .filter(|(_, n)| *n > 0)
                .map(|(name, n)| ReplicaSetPoint {
                    name: name.into(),
                    replicas: n,
                    ready: n,
                })
                .collect(),
            decision: None,
        };
        // A status-only sync: a point, no decision.
        sync(&log, "web", || rollout_point(point(0, 3)), None).await;
        // The same numbers again, nothing decided: not a new point.
        sync(&log, "web", || rollout_point(point(0, 3)), None).await;
        // A decision: a point marked with its seq, even with the same numbers.
        sync(
            &log,
            "web",
            || {
                plan("Scaled up replica set web-new from 0 to 1");
                rollout_point(point(0, 3));
            },
            None,
        )
        .await;
        sync(&log, "web", || rollout_point(point(1, 3)), None).await;
        let timeline = log.rollout(RS, &key("web"));
        let shape: Vec<(usize, Option<u64>)> = timeline
            .iter()
            .map(|p| (p.replica_sets.len(), p.decision))
            .collect();
        assert_eq!(shape, [(1, None), (1, Some(1)), (2, None)]);
        assert!(timeline[0].at_ms > 0, "stamped when noted");

        for n in 0..(MAX_ROLLOUT_POINTS as i32 + 10) {
            sync(&log, "web", || rollout_point(point(n + 2, 3)), None).await;
        }
        let timeline = log.rollout(RS, &key("web"));
        assert_eq!(timeline.len(), MAX_ROLLOUT_POINTS, "bounded");
        assert_eq!(
            timeline.last().unwrap().replica_sets[0].replicas,
            MAX_ROLLOUT_POINTS as i32 + 11,
            "the newest kept"
        );
        assert!(log.rollout(RS, &key("other")).is_empty());
    }

    #[tokio::test]
    async fn outside_a_sync_or_disabled_nothing_is_recorded() {
        plan("no draft here"); // must not panic
        let log = DecisionLog::disabled();
        let woken = Woken {
            reasons: Vec::new(),
            more: 0,
            priority: mini_kcm_workqueue::Priority::Fresh,
            waited: std::time::Duration::ZERO,
        };
        assert!(log.start(RS, &key("x"), woken).is_none());
        assert!(log.recent(&DecisionFilter::default()).is_empty());
        assert!(!recording());
    }
}
