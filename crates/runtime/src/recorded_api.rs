//! A recorded API server for unit tests, as upstream's fake clientset: a `tower` service behind a real
//! [`kube::Client`], answering from the objects a test put in it and recording every request.
//!
//! A controller's sync makes the same calls against it as against kube-apiserver — the same `Api`
//! methods, the same URLs, bodies and content types — so a unit test runs a whole sync in a few
//! milliseconds and asserts what it wrote ([`RecordedApi::writes`]), which upstream's tests do with
//! `fake.Clientset` actions and `FakePodControl`. What the server does is the part a sync depends on:
//! objects kept per resource and namespace, names from `generateName`, UIDs, resourceVersions that grow
//! with every write (so read-your-own-writes can be exercised), `409 AlreadyExists` and `409 Conflict` on a
//! stale resourceVersion, `/status` writes that change only the status, merge and JSON patches (a failed
//! `test` is `422`), and a `generation` that moves with the spec. Per-verb reactors
//! ([`RecordedApi::react`]) answer chosen requests with an error instead (conflict, not found, a quota's
//! refusal, a timeout), as a fake clientset's `PrependReactor`.
//!
//! Not served: watches (unit tests fill caches with [`RecordedApi::feed`] instead of running informers),
//! label selectors on lists, server-side apply and garbage collection; a deleted pod is gone at once
//! unless [`RecordedApi::graceful_pod_deletion`] is on.
//!
//! For a simulation (the `mini-kcm-simulation` crate) it also keeps the watch events its writes made
//! ([`RecordedApi::watch_log`]), which the simulation hands to informers when it chooses; lets the
//! simulated cluster (kubelet, scheduler, users) write without a request ([`RecordedApi::put`],
//! [`RecordedApi::remove`]); and lets a simulation decide the fate of each write
//! ([`RecordedApi::intercept`]): served, refused, served but answered with an error, or the process
//! crashing right before or after it (then the API answers nothing until [`RecordedApi::bring_up`]).

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use http_body_util::{BodyExt, Full};
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::informers::Informer;

/// The verb of a request, as the API server's audit log names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verb {
    /// `GET` of one object (or of its subresource).
    Get,
    /// `GET` of a collection.
    List,
    /// `GET` with `watch=true` (answered with an error: watches are not served).
    Watch,
    /// `POST` to a collection.
    Create,
    /// `PUT` of one object or its subresource.
    Update,
    /// `PATCH` of one object or its subresource.
    Patch,
    /// `DELETE` of one object.
    Delete,
}

impl Verb {
    /// Whether the request changes an object.
    pub fn is_write(self) -> bool {
        matches!(
            self,
            Verb::Create | Verb::Update | Verb::Patch | Verb::Delete
        )
    }

    fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "get",
            Verb::List => "list",
            Verb::Watch => "watch",
            Verb::Create => "create",
            Verb::Update => "update",
            Verb::Patch => "patch",
            Verb::Delete => "delete",
        }
    }
}

/// One request the API received, whatever it was answered.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// What it did.
    pub verb: Verb,
    /// The resource's plural, with the subresource after a slash: `pods`, `replicasets/status`.
    pub resource: String,
    /// The namespace in its path; `None` for a cluster-scoped or all-namespaces request.
    pub namespace: Option<String>,
    /// The object's name (for a creation: the name it was given, also from `generateName`).
    pub name: Option<String>,
    /// The request's body (the object written, or the patch).
    pub body: Option<Value>,
}

impl RecordedRequest {
    /// The resource without its subresource (`replicasets` for `replicasets/status`).
    pub fn plural(&self) -> &str {
        self.resource.split('/').next().unwrap_or_default()
    }

    /// `verb resource name`, as upstream's tests print actions (`create pods`, `update
    /// replicasets/status rs`).
    pub fn action(&self) -> String {
        match &self.name {
            Some(name) if self.verb != Verb::Create => {
                format!("{} {} {name}", self.verb.as_str(), self.resource)
            }
            _ => format!("{} {}", self.verb.as_str(), self.resource),
        }
    }
}

impl fmt::Display for RecordedRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.action())
    }
}

/// How a reactor answers instead of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reaction {
    /// `409 Conflict`: the object was modified (a stale resourceVersion).
    Conflict,
    /// `404 NotFound`.
    NotFound,
    /// `409 AlreadyExists`.
    AlreadyExists,
    /// `422 Invalid`, as a JSON patch whose `test` failed.
    Invalid,
    /// `403 Forbidden` as a ResourceQuota refuses a creation.
    QuotaExceeded,
    /// `504 Timeout`: the server gave up on the request.
    Timeout,
    /// `503 ServiceUnavailable`: the server cannot be reached for now.
    Unavailable,
}

impl Reaction {
    fn status(&self, resource: &str, name: &str) -> (u16, &'static str, String) {
        match self {
            Reaction::Conflict => (
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {resource} \"{name}\": the object has been modified; please apply your changes to the latest version and try again"
                ),
            ),
            Reaction::NotFound => (404, "NotFound", format!("{resource} \"{name}\" not found")),
            Reaction::AlreadyExists => (
                409,
                "AlreadyExists",
                format!("{resource} \"{name}\" already exists"),
            ),
            Reaction::Invalid => (
                422,
                "Invalid",
                format!("{resource} \"{name}\" is invalid: the test operation failed"),
            ),
            Reaction::QuotaExceeded => (
                403,
                "Forbidden",
                format!(
                    "{resource} \"{name}\" is forbidden: exceeded quota: compute, requested: pods=1, used: pods=0, limited: pods=0"
                ),
            ),
            Reaction::Timeout => (
                504,
                "Timeout",
                "Timeout: request did not complete within requested timeout".to_string(),
            ),
            Reaction::Unavailable => (
                503,
                "ServiceUnavailable",
                "the server is currently unable to handle the request".to_string(),
            ),
        }
    }
}

/// Answers matching requests with a [`Reaction`], a number of times or for ever.
#[derive(Debug, Clone)]
struct Reactor {
    verb: Verb,
    /// A plural with its subresource, as [`RecordedRequest::resource`]; `*` for any.
    resource: String,
    /// Only requests about this object; `None`: any.
    name: Option<String>,
    reaction: Reaction,
    /// How many more requests it answers; `None`: every one.
    remaining: Option<usize>,
}

/// An object's place: group/version, plural, namespace, name.
type Place = (String, String, String, String);

/// One change the API's watches would have sent: every write served (events left out), in order.
#[derive(Debug, Clone, PartialEq)]
pub struct WatchEvent {
    /// The resource, as `apiVersion/plural` (`apps/v1/replicasets`, `v1/pods`).
    pub resource: String,
    /// A `DELETED` event (else `ADDED` or `MODIFIED`).
    pub deleted: bool,
    /// The object after the write (for a deletion: as it was, with the deletion's resourceVersion).
    pub object: Value,
}

/// What becomes of one write a client sends ([`RecordedApi::intercept`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Intercept {
    /// Served as usual.
    Serve,
    /// Not served; answered with the reaction's error.
    Refuse(Reaction),
    /// Served, but answered with the reaction's error (a timeout whose effect persisted).
    ServeThenFail(Reaction),
    /// The process crashes before the request reaches the server: not served, and the API answers
    /// nothing more until [`RecordedApi::bring_up`].
    CrashBefore,
    /// Served, then the process crashes before it reads the answer.
    CrashAfter,
}

/// The stored objects, read-only, for an interceptor deciding a write's fate.
pub struct Stored<'a>(&'a BTreeMap<Place, Value>, u64);

impl Stored<'_> {
    /// The newest resourceVersion given so far: a write served now gets the next one.
    pub fn resource_version(&self) -> u64 {
        self.1
    }

    /// Every stored object of `resource` (`apiVersion/plural`).
    pub fn list<'s>(&'s self, resource: &'s str) -> impl Iterator<Item = &'s Value> + 's {
        self.0
            .iter()
            .filter(move |((gv, plural, _, _), _)| same_resource(resource, gv, plural))
            .map(|(_, value)| value)
    }

    /// The stored object of `resource` (`apiVersion/plural`) at `namespace`/`name`.
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<&Value> {
        let (gv, plural) = resource.rsplit_once('/')?;
        self.0.get(&(
            gv.to_string(),
            plural.to_string(),
            namespace.to_string(),
            name.to_string(),
        ))
    }
}

fn same_resource(resource: &str, group_version: &str, plural: &str) -> bool {
    resource
        .rsplit_once('/')
        .is_some_and(|(gv, p)| gv == group_version && p == plural)
}

type Interceptor = Arc<dyn Fn(&RecordedRequest, &Stored<'_>) -> Intercept + Send + Sync>;

#[derive(Default)]
struct State {
    objects: BTreeMap<Place, Value>,
    /// Objects deleted through the API, as they were at their deletion (for [`RecordedApi::feed`]); a
    /// name created again leaves this list.
    deleted: BTreeMap<Place, Value>,
    last_resource_version: u64,
    /// Counts generated names and UIDs, so both are the same in every run of a test.
    last_serial: u64,
    requests: Vec<RecordedRequest>,
    reactors: Vec<Reactor>,
    /// Every change served, in order (`RecordedApi::watch_log`).
    log: Vec<WatchEvent>,
    interceptor: Option<Interceptor>,
    /// The client's process crashed (`Intercept::CrashBefore`/`CrashAfter`): nothing is answered.
    down: bool,
    /// A pod's deletion only marks it (`RecordedApi::graceful_pod_deletion`).
    graceful_pods: bool,
    /// The time written into objects (`RecordedApi::set_time`); the wall clock if unset.
    time: Option<String>,
}

impl State {
    /// Now, to the second, as the API server writes times (or the simulation's time).
    fn now(&self) -> String {
        self.time.clone().unwrap_or_else(|| {
            k8s_openapi::jiff::Timestamp::now()
                .round(k8s_openapi::jiff::Unit::Second)
                .map(|t| t.to_string())
                .unwrap_or_default()
        })
    }

    fn next_resource_version(&mut self) -> String {
        self.last_resource_version += 1;
        self.last_resource_version.to_string()
    }

    fn next_serial(&mut self) -> u64 {
        self.last_serial += 1;
        self.last_serial
    }
}

/// The recorded API (module header). Clones share the same server.
#[derive(Clone, Default)]
pub struct RecordedApi {
    state: Arc<Mutex<State>>,
}

impl RecordedApi {
    /// An empty server: no objects, no reactors, no requests.
    pub fn new() -> Self {
        RecordedApi::default()
    }

    /// A client whose every request this API answers.
    pub fn client(&self) -> kube::Client {
        kube::Client::new(self.clone(), "default")
    }

    /// Stores `object` (of a kind with a static type, e.g. `Pod`) as if it had been created: a missing
    /// UID and resourceVersion are filled in.
    pub fn insert<K>(&self, object: &K)
    where
        K: Resource<DynamicType = ()> + Serialize,
    {
        self.insert_with(object, &());
    }

    /// [`RecordedApi::insert`] for a kind whose type is known at run time (`ReplicaSetObject` & co.).
    pub fn insert_with<K>(&self, object: &K, dt: &K::DynamicType)
    where
        K: Resource + Serialize,
    {
        let Ok(mut value) = serde_json::to_value(object) else {
            return;
        };
        let namespace = object.meta().namespace.clone().unwrap_or_default();
        let name = object.meta().name.clone().unwrap_or_default();
        let mut state = self.lock();
        if value.pointer("/metadata/uid").is_none_or(Value::is_null) {
            let uid = format!("uid-{}", state.next_serial());
            value["metadata"]["uid"] = json!(uid);
        }
        if value
            .pointer("/metadata/resourceVersion")
            .is_none_or(Value::is_null)
        {
            value["metadata"]["resourceVersion"] = json!(state.next_resource_version());
        } else if let Some(rv) = value
            .pointer("/metadata/resourceVersion")
            .and_then(Value::as_str)
            .and_then(|rv| rv.parse::<u64>().ok())
        {
            // Later writes must come after every version a test gave its objects.
            state.last_resource_version = state.last_resource_version.max(rv);
        }
        value["apiVersion"] = json!(K::api_version(dt));
        value["kind"] = json!(K::kind(dt));
        state
            .objects
            .insert(place_of::<K>(dt, &namespace, &name), value);
    }

    /// The stored object of that kind, namespace and name.
    pub fn get<K>(&self, dt: &K::DynamicType, namespace: &str, name: &str) -> Option<K>
    where
        K: Resource + DeserializeOwned,
    {
        let state = self.lock();
        let value = state.objects.get(&place_of::<K>(dt, namespace, name))?;
        serde_json::from_value(value.clone()).ok()
    }

    /// Every stored object of that kind, by namespace and name.
    pub fn list<K>(&self, dt: &K::DynamicType) -> Vec<K>
    where
        K: Resource + DeserializeOwned,
    {
        let (group_version, plural) = (group_version::<K>(dt), K::plural(dt).to_string());
        let state = self.lock();
        state
            .objects
            .iter()
            .filter(|((gv, p, _, _), _)| *gv == group_version && *p == plural)
            .filter_map(|(_, value)| serde_json::from_value(value.clone()).ok())
            .collect()
    }

    /// Brings `informer`'s cache up to date with the API for its kind, as its watch would have: objects
    /// deleted through the API leave it, every stored one is put in it. The cache then shows every write
    /// made so far, also for read-your-own-writes.
    pub fn feed<K>(&self, informer: &Informer<K>, dt: &K::DynamicType)
    where
        K: Resource + Clone + fmt::Debug + DeserializeOwned + Send + Sync + 'static,
    {
        let (group_version, plural) = (group_version::<K>(dt), K::plural(dt).to_string());
        let deleted: Vec<K> = self
            .lock()
            .deleted
            .iter()
            .filter(|((gv, p, _, _), _)| *gv == group_version && *p == plural)
            .filter_map(|(_, value)| serde_json::from_value(value.clone()).ok())
            .collect();
        for object in &deleted {
            informer.cache_delete(object);
        }
        for object in self.list::<K>(dt) {
            informer.cache_insert(object);
        }
    }

    /// Answers every `verb` request on `resource` (`pods`, `replicasets/status`, `*` for any) with
    /// `reaction`, before the store sees it.
    pub fn react(&self, verb: Verb, resource: &str, reaction: Reaction) {
        self.add_reactor(verb, resource, reaction, None);
    }

    /// [`RecordedApi::react`] for the next `times` matching requests only.
    pub fn react_times(&self, times: usize, verb: Verb, resource: &str, reaction: Reaction) {
        self.add_reactor(verb, resource, reaction, Some(times));
    }

    /// [`RecordedApi::react`] for the requests about the object `name` only.
    pub fn react_to(&self, verb: Verb, resource: &str, name: &str, reaction: Reaction) {
        self.lock().reactors.push(Reactor {
            verb,
            resource: resource.to_string(),
            name: Some(name.to_string()),
            reaction,
            remaining: None,
        });
    }

    fn add_reactor(&self, verb: Verb, resource: &str, reaction: Reaction, times: Option<usize>) {
        self.lock().reactors.push(Reactor {
            verb,
            resource: resource.to_string(),
            name: None,
            reaction,
            remaining: times,
        });
    }

    /// The newest resourceVersion the API has given (its last write's), without a request.
    pub fn resource_version(&self) -> u64 {
        self.lock().last_resource_version
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// The requests that change objects, events left out (they are the recorder's, written in the
    /// background: see [`RecordedApi::events`]).
    pub fn writes(&self) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.verb.is_write() && r.plural() != "events")
            .collect()
    }

    /// [`RecordedApi::writes`] as upstream's tests print actions, e.g. `["create pods", "update
    /// replicasets/status rs"]`.
    pub fn actions(&self) -> Vec<String> {
        self.writes().iter().map(RecordedRequest::action).collect()
    }

    /// Every request but the event recorder's (reads included), as `verb resource name`: the API calls
    /// a sync made.
    pub fn calls(&self) -> Vec<String> {
        self.requests()
            .iter()
            .filter(|r| r.plural() != "events")
            .map(RecordedRequest::action)
            .collect()
    }

    /// The reasons of the events written so far (the recorder writes in the background: wait for them
    /// first).
    pub fn events(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| r.plural() == "events" && r.verb == Verb::Create)
            .filter_map(|r| {
                r.body
                    .as_ref()
                    .and_then(|b| b.get("reason"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .collect()
    }

    /// The watch events of every change since the `from`-th (0: all), in order.
    pub fn watch_log(&self, from: usize) -> Vec<WatchEvent> {
        self.lock()
            .log
            .get(from..)
            .map(<[_]>::to_vec)
            .unwrap_or_default()
    }

    /// How many watch events there have been.
    pub fn watch_log_len(&self) -> usize {
        self.lock().log.len()
    }

    /// Decides the fate of every later write a client sends (events excepted) with `interceptor`,
    /// which sees the request and the stored objects before the write is served.
    pub fn intercept(
        &self,
        interceptor: impl Fn(&RecordedRequest, &Stored<'_>) -> Intercept + Send + Sync + 'static,
    ) {
        self.lock().interceptor = Some(Arc::new(interceptor));
    }

    /// Whether the client's process has crashed ([`Intercept::CrashBefore`], [`Intercept::CrashAfter`]).
    pub fn is_down(&self) -> bool {
        self.lock().down
    }

    /// Answers requests again, for the process that replaces the crashed one.
    pub fn bring_up(&self) {
        self.lock().down = false;
    }

    /// A pod's deletion through the API marks it (`deletionTimestamp`, a grace period of 30 s) as
    /// kube-apiserver does; the simulated kubelet removes it later with [`RecordedApi::remove`].
    pub fn graceful_pod_deletion(&self) {
        self.lock().graceful_pods = true;
    }

    /// Writes `time` (RFC 3339) wherever the server writes the time (creation and deletion
    /// timestamps), instead of the wall clock, so the times the server writes are the same in every
    /// run of a simulation (the controllers' own, in conditions, are still the wall clock's).
    pub fn set_time(&self, time: String) {
        self.lock().time = Some(time);
    }

    /// Stores `object` as a user's or another component's write would, without a request: a new
    /// resourceVersion, a UID and creation time if it has none, the generation moved if the spec
    /// changed, and a watch event. Returns the stored object.
    pub fn put(&self, mut object: Value) -> Value {
        let mut state = self.lock();
        let Some(place) = place_in(&object) else {
            return object;
        };
        let stored = state.objects.get(&place).cloned();
        if object.pointer("/metadata/uid").is_none_or(Value::is_null) {
            let uid = match stored.as_ref().and_then(|s| s.pointer("/metadata/uid")) {
                Some(uid) => uid.clone(),
                None => json!(format!("uid-{}", state.next_serial())),
            };
            object["metadata"]["uid"] = uid;
        }
        if object
            .pointer("/metadata/creationTimestamp")
            .is_none_or(Value::is_null)
        {
            object["metadata"]["creationTimestamp"] = match stored
                .as_ref()
                .and_then(|s| s.pointer("/metadata/creationTimestamp"))
            {
                Some(time) => time.clone(),
                None => json!(state.now()),
            };
        }
        let generation = match &stored {
            None => 1,
            Some(stored) => {
                let before = stored
                    .pointer("/metadata/generation")
                    .and_then(Value::as_i64)
                    .unwrap_or(1);
                if stored.get("spec") == object.get("spec") {
                    before
                } else {
                    before.saturating_add(1)
                }
            }
        };
        object["metadata"]["generation"] = json!(generation);
        object["metadata"]["resourceVersion"] = json!(state.next_resource_version());
        state.deleted.remove(&place);
        state.objects.insert(place.clone(), object.clone());
        state.log.push(WatchEvent {
            resource: format!("{}/{}", place.0, place.1),
            deleted: false,
            object: object.clone(),
        });
        object
    }

    /// Removes the object of `resource` (`apiVersion/plural`) at `namespace`/`name` without a request
    /// (a kubelet finishing a pod's termination, a garbage collector), with a watch event. Returns it.
    pub fn remove(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let (gv, plural) = resource.rsplit_once('/')?;
        let place = (
            gv.to_string(),
            plural.to_string(),
            namespace.to_string(),
            name.to_string(),
        );
        let mut state = self.lock();
        let mut object = state.objects.remove(&place)?;
        object["metadata"]["resourceVersion"] = json!(state.next_resource_version());
        state.deleted.insert(place, object.clone());
        state.log.push(WatchEvent {
            resource: resource.to_string(),
            deleted: true,
            object: object.clone(),
        });
        Some(object)
    }

    /// The stored object of `resource` (`apiVersion/plural`) at `namespace`/`name`, as JSON.
    pub fn object(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let state = self.lock();
        Stored(&state.objects, 0)
            .get(resource, namespace, name)
            .cloned()
    }

    /// Every stored object of `resource` (`apiVersion/plural`), as JSON, by namespace and name.
    pub fn objects(&self, resource: &str) -> Vec<Value> {
        let state = self.lock();
        Stored(&state.objects, 0).list(resource).cloned().collect()
    }

    /// Forgets the requests received so far (the objects stay).
    pub fn clear_requests(&self) {
        self.lock().requests.clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Answers one request: records it, asks the reactors, then the store.
    fn answer(&self, request: ParsedRequest) -> (u16, Value) {
        let mut state = self.lock();
        if state.down {
            let (code, reason, message) = Reaction::Unavailable.status(&request.plural, "");
            return failure(code, reason, message);
        }
        let mut recorded = RecordedRequest {
            verb: request.verb,
            resource: request.resource(),
            namespace: (!request.namespace.is_empty()).then(|| request.namespace.clone()),
            name: request.name.clone(),
            body: request.body.clone(),
        };
        let reactor = state.reactors.iter_mut().find(|r| {
            r.verb == request.verb
                && (r.resource == "*" || r.resource == recorded.resource)
                && (r.name.is_none() || r.name == request.name)
                && r.remaining != Some(0)
        });
        let reaction = reactor.map(|r| {
            if let Some(remaining) = r.remaining.as_mut() {
                *remaining -= 1;
            }
            r.reaction.clone()
        });
        let intercept = match (&state.interceptor, reaction.is_some()) {
            (Some(interceptor), false) if request.verb.is_write() && request.plural != "events" => {
                interceptor(
                    &recorded,
                    &Stored(&state.objects, state.last_resource_version),
                )
            }
            _ => Intercept::Serve,
        };
        let name = request.name.clone().unwrap_or_default();
        let refused = |reaction: &Reaction| {
            let (code, reason, message) = reaction.status(&request.plural, &name);
            failure(code, reason, message)
        };
        let answer = match (reaction.as_ref(), &intercept) {
            (Some(reaction), _) | (None, Intercept::Refuse(reaction)) => refused(reaction),
            (None, Intercept::CrashBefore) => {
                state.down = true;
                refused(&Reaction::Unavailable)
            }
            (None, Intercept::Serve | Intercept::ServeThenFail(_) | Intercept::CrashAfter) => {
                let version_before = state.last_resource_version;
                let answer = serve(&mut state, &request);
                // A write that changed nothing (deleting a pod already being deleted) sends no event.
                if request.verb.is_write()
                    && answer.0 < 300
                    && request.plural != "events"
                    && state.last_resource_version > version_before
                {
                    let deleted = request.verb == Verb::Delete
                        && !state
                            .objects
                            .contains_key(&request.place(&answer_name(&answer.1, &name)));
                    state.log.push(WatchEvent {
                        resource: format!("{}/{}", request.group_version, request.plural),
                        deleted,
                        object: answer.1.clone(),
                    });
                }
                match &intercept {
                    Intercept::ServeThenFail(reaction) => refused(reaction),
                    Intercept::CrashAfter => {
                        state.down = true;
                        refused(&Reaction::Unavailable)
                    }
                    _ => answer,
                }
            }
        };
        if request.verb == Verb::Create && recorded.name.is_none() {
            recorded.name = answer
                .1
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        state.requests.push(recorded);
        answer
    }
}

/// A request as the store reads it.
struct ParsedRequest {
    verb: Verb,
    group_version: String,
    plural: String,
    namespace: String,
    name: Option<String>,
    subresource: Option<String>,
    content_type: String,
    body: Option<Value>,
}

impl ParsedRequest {
    fn resource(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.plural),
            None => self.plural.clone(),
        }
    }

    fn place(&self, name: &str) -> Place {
        (
            self.group_version.clone(),
            self.plural.clone(),
            self.namespace.clone(),
            name.to_string(),
        )
    }
}

/// Reads method, path, query and body the way kube-apiserver routes them.
fn parse(
    method: &http::Method,
    uri: &http::Uri,
    content_type: &str,
    body: &[u8],
) -> Result<ParsedRequest, String> {
    let segments: Vec<&str> = uri.path().split('/').filter(|s| !s.is_empty()).collect();
    let (group_version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ((*version).to_string(), rest),
        ["apis", group, version, rest @ ..] => (format!("{group}/{version}"), rest),
        _ => return Err(format!("no API under {}", uri.path())),
    };
    let (namespace, rest) = match rest {
        ["namespaces", namespace, rest @ ..] if !rest.is_empty() => {
            ((*namespace).to_string(), rest)
        }
        _ => (String::new(), rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some((*name).to_string()), None),
        [plural, name, sub] => (*plural, Some((*name).to_string()), Some((*sub).to_string())),
        _ => return Err(format!("no resource at {}", uri.path())),
    };
    let watch = uri
        .query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"));
    let verb = match (method.as_str(), &name) {
        ("GET", _) if watch => Verb::Watch,
        ("GET", Some(_)) => Verb::Get,
        ("GET", None) => Verb::List,
        ("POST", None) => Verb::Create,
        ("PUT", Some(_)) => Verb::Update,
        ("PATCH", Some(_)) => Verb::Patch,
        ("DELETE", Some(_)) => Verb::Delete,
        (method, _) => return Err(format!("{method} {} is not served", uri.path())),
    };
    let body = (!body.is_empty())
        .then(|| serde_json::from_slice(body))
        .transpose()
        .map_err(|e| format!("the body is not JSON: {e}"))?;
    Ok(ParsedRequest {
        verb,
        group_version,
        plural: plural.to_string(),
        namespace,
        name,
        subresource,
        content_type: content_type.to_string(),
        body,
    })
}

/// The store's answer to a request no reactor took.
fn serve(state: &mut State, request: &ParsedRequest) -> (u16, Value) {
    let name = request.name.clone().unwrap_or_default();
    let not_found = || {
        failure(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", request.plural),
        )
    };
    match request.verb {
        Verb::Get => match state.objects.get(&request.place(&name)) {
            Some(object) => (200, object.clone()),
            None => not_found(),
        },
        Verb::List => list(state, request),
        Verb::Watch => failure(
            405,
            "MethodNotAllowed",
            "the recorded API serves no watches: fill caches with RecordedApi::feed".into(),
        ),
        Verb::Create => create(state, request),
        Verb::Update | Verb::Patch => {
            let Some(stored) = state.objects.get(&request.place(&name)).cloned() else {
                return not_found();
            };
            let written = if request.verb == Verb::Update {
                request.body.clone().unwrap_or(Value::Null)
            } else {
                match patched(&stored, request) {
                    Ok(written) => written,
                    Err(answer) => return answer,
                }
            };
            update(state, request, stored, written)
        }
        Verb::Delete
            if state.graceful_pods && request.group_version == "v1" && request.plural == "pods" =>
        {
            let Some(stored) = state.objects.get(&request.place(&name)).cloned() else {
                return not_found();
            };
            if stored
                .pointer("/metadata/deletionTimestamp")
                .is_some_and(|t| !t.is_null())
            {
                return (200, stored);
            }
            let mut marked = stored;
            marked["metadata"]["deletionTimestamp"] = json!(state.now());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(30);
            marked["metadata"]["resourceVersion"] = json!(state.next_resource_version());
            state.objects.insert(request.place(&name), marked.clone());
            (200, marked)
        }
        Verb::Delete => match state.objects.remove(&request.place(&name)) {
            Some(mut object) => {
                object["metadata"]["resourceVersion"] = json!(state.next_resource_version());
                state.deleted.insert(request.place(&name), object.clone());
                (200, object)
            }
            None => not_found(),
        },
    }
}

fn list(state: &State, request: &ParsedRequest) -> (u16, Value) {
    let items: Vec<Value> = state
        .objects
        .iter()
        .filter(|((gv, plural, namespace, _), _)| {
            *gv == request.group_version
                && *plural == request.plural
                && (request.namespace.is_empty() || *namespace == request.namespace)
        })
        .map(|(_, object)| object.clone())
        .collect();
    let kind = items
        .first()
        .and_then(|o| o.get("kind"))
        .and_then(Value::as_str)
        .map_or_else(|| "List".to_string(), |k| format!("{k}List"));
    (
        200,
        json!({
            "apiVersion": request.group_version,
            "kind": kind,
            "metadata": {"resourceVersion": state.last_resource_version.to_string()},
            "items": items,
        }),
    )
}

/// Characters of generated name suffixes, as the API server's.
const SUFFIX_ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";

fn create(state: &mut State, request: &ParsedRequest) -> (u16, Value) {
    let Some(mut object) = request.body.clone().filter(Value::is_object) else {
        return failure(400, "BadRequest", "the body is not an object".into());
    };
    let given = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .map(str::to_string);
    let name = match given {
        Some(name) => name,
        None => {
            let Some(prefix) = object
                .pointer("/metadata/generateName")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                return failure(
                    422,
                    "Invalid",
                    format!(
                        "{} is invalid: metadata.name: Required value: name or generateName is required",
                        request.plural
                    ),
                );
            };
            let mut serial = state.next_serial();
            let suffix: String = (0..5)
                .map(|_| {
                    let len = SUFFIX_ALPHABET.len() as u64;
                    let c = SUFFIX_ALPHABET[usize::try_from(serial % len).unwrap_or(0)];
                    serial /= len;
                    char::from(c)
                })
                .collect();
            format!("{prefix}{suffix}")
        }
    };
    let place = request.place(&name);
    if state.objects.contains_key(&place) {
        return failure(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", request.plural),
        );
    }
    let uid = format!("uid-{}", state.next_serial());
    let rv = state.next_resource_version();
    let metadata = &mut object["metadata"];
    metadata["name"] = json!(name);
    if !request.namespace.is_empty() {
        metadata["namespace"] = json!(request.namespace);
    }
    metadata["uid"] = json!(uid);
    metadata["resourceVersion"] = json!(rv);
    metadata["generation"] = json!(1);
    if metadata.get("creationTimestamp").is_none_or(Value::is_null) {
        metadata["creationTimestamp"] = json!(state.now());
    }
    state.deleted.remove(&place);
    state.objects.insert(place, object.clone());
    (201, object)
}

/// A PUT or PATCH of `stored` that asks for `written`: a stale resourceVersion conflicts; any write but
/// a status write keeps the status; `generation` moves with the spec. A status write keeps all but the
/// status, except for the `apps` kinds, whose status strategy keeps only the spec (and a Deployment's
/// labels): their controllers write annotations with the status, as upstream's does.
fn update(
    state: &mut State,
    request: &ParsedRequest,
    stored: Value,
    mut written: Value,
) -> (u16, Value) {
    let name = request.name.clone().unwrap_or_default();
    if !written.is_object() {
        return failure(400, "BadRequest", "the body is not an object".into());
    }
    let stored_rv = stored.pointer("/metadata/resourceVersion").cloned();
    match written.pointer("/metadata/resourceVersion") {
        Some(Value::String(rv)) if !rv.is_empty() && Some(&json!(rv)) != stored_rv.as_ref() => {
            let (code, reason, message) = Reaction::Conflict.status(&request.plural, &name);
            return failure(code, reason, message);
        }
        _ => {}
    }
    let status_write = request.subresource.as_deref() == Some("status");
    let mut result = if status_write && request.group_version.starts_with("apps/") {
        let mut result = written;
        result["spec"] = stored.get("spec").cloned().unwrap_or(Value::Null);
        if request.plural == "deployments" {
            result["metadata"]["labels"] = stored
                .pointer("/metadata/labels")
                .cloned()
                .unwrap_or(Value::Null);
        }
        result
    } else if status_write {
        let mut result = stored.clone();
        result["status"] = written.get("status").cloned().unwrap_or(Value::Null);
        result
    } else {
        if let Some(status) = stored.get("status") {
            written["status"] = status.clone();
        }
        written
    };
    // What the server owns stays the server's.
    for field in [
        "uid",
        "creationTimestamp",
        "namespace",
        "name",
        "generation",
    ] {
        match stored.pointer(&format!("/metadata/{field}")) {
            Some(value) => result["metadata"][field] = value.clone(),
            None => {
                if let Some(metadata) = result["metadata"].as_object_mut() {
                    metadata.remove(field);
                }
            }
        }
    }
    if !status_write && stored.get("spec") != result.get("spec") {
        let generation = stored
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        result["metadata"]["generation"] = json!(generation.saturating_add(1));
    }
    result["metadata"]["resourceVersion"] = json!(state.next_resource_version());
    state.objects.insert(request.place(&name), result.clone());
    (200, result)
}

/// `stored` with the request's patch applied, or the answer refusing it.
fn patched(stored: &Value, request: &ParsedRequest) -> Result<Value, (u16, Value)> {
    let patch = request.body.clone().unwrap_or(Value::Null);
    let mut result = stored.clone();
    if request
        .content_type
        .starts_with("application/json-patch+json")
    {
        let patch: json_patch::Patch = serde_json::from_value(patch)
            .map_err(|e| failure(400, "BadRequest", format!("not a JSON patch: {e}")))?;
        json_patch::patch(&mut result, &patch)
            .map_err(|e| failure(422, "Invalid", format!("the JSON patch failed: {e}")))?;
    } else if request
        .content_type
        .starts_with("application/merge-patch+json")
        || request
            .content_type
            .starts_with("application/strategic-merge-patch+json")
    {
        // Strategic merges of the fields controllers patch (metadata, annotations) are merges.
        json_patch::merge(&mut result, &patch);
    } else {
        return Err(failure(
            415,
            "UnsupportedMediaType",
            format!(
                "the recorded API does not serve {} patches",
                request.content_type
            ),
        ));
    }
    Ok(result)
}

/// The name in an answer (a creation's generated one), else the request's.
fn answer_name(answer: &Value, requested: &str) -> String {
    answer
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or(requested)
        .to_string()
}

/// Where a JSON object belongs, from its `apiVersion`, `kind` (as its plural) and metadata.
fn place_in(object: &Value) -> Option<Place> {
    let api_version = object.get("apiVersion")?.as_str()?;
    let kind = object.get("kind")?.as_str()?;
    let name = object.pointer("/metadata/name")?.as_str()?;
    let namespace = object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    Some((
        api_version.to_string(),
        plural_of(kind),
        namespace.to_string(),
        name.to_string(),
    ))
}

/// A kind's plural, as the API names resources (the workload kinds and the kinds around them).
fn plural_of(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// A `Status` failure as the API server writes it.
fn failure(code: u16, reason: &str, message: String) -> (u16, Value) {
    (
        code,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": message, "reason": reason, "code": code,
        }),
    )
}

fn group_version<K: Resource>(dt: &K::DynamicType) -> String {
    K::api_version(dt).to_string()
}

fn place_of<K: Resource>(dt: &K::DynamicType, namespace: &str, name: &str) -> Place {
    (
        group_version::<K>(dt),
        K::plural(dt).to_string(),
        namespace.to_string(),
        name.to_string(),
    )
}

impl tower::Service<http::Request<kube::client::Body>> for RecordedApi {
    type Response = http::Response<Full<bytes::Bytes>>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Self::Response, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let api = self.clone();
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let content_type = parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            let (code, answer) = match body.collect().await {
                Ok(bytes) => {
                    match parse(&parts.method, &parts.uri, &content_type, &bytes.to_bytes()) {
                        Ok(request) => api.answer(request),
                        Err(message) => failure(400, "BadRequest", message),
                    }
                }
                Err(e) => failure(400, "BadRequest", format!("unreadable body: {e}")),
            };
            let body = serde_json::to_vec(&answer).unwrap_or_default();
            let mut response = http::Response::new(Full::new(bytes::Bytes::from(body)));
            *response.status_mut() =
                http::StatusCode::from_u16(code).unwrap_or(http::StatusCode::INTERNAL_SERVER_ERROR);
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static("application/json"),
            );
            Ok(response)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::api_errors::{is_already_exists, is_conflict, is_not_found};
    use k8s_openapi::api::core::v1::{ConfigMap, Pod};
    use kube::Api;
    use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams, PostParams};

    fn config_map(name: &str, data: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            data: Some(BTreeMap::from([("k".to_string(), data.to_string())])),
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn serves_and_records_every_verb() {
        let recorded = RecordedApi::new();
        recorded.insert(&config_map("a", "1"));
        let api: Api<ConfigMap> = Api::namespaced(recorded.client(), "ns");

        let a = api.get("a").await.unwrap();
        assert_eq!(a.metadata.resource_version.as_deref(), Some("1"));
        assert_eq!(api.list(&Default::default()).await.unwrap().items.len(), 1);

        let mut b = config_map("", "2");
        b.metadata.generate_name = Some("b-".into());
        let b = api.create(&PostParams::default(), &b).await.unwrap();
        let b_name = b.metadata.name.clone().unwrap();
        assert!(b_name.starts_with("b-") && b_name.len() == 7, "{b_name}");
        assert_eq!(b.metadata.resource_version.as_deref(), Some("2"));

        let patched = api
            .patch(
                "a",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"k": "3"}})),
            )
            .await
            .unwrap();
        assert_eq!(patched.data.unwrap()["k"], "3");

        // The copy read before the patch is stale now.
        let stale = api.replace("a", &PostParams::default(), &a).await;
        assert!(is_conflict(stale.as_ref().unwrap_err()));
        let exists = api
            .create(&PostParams::default(), &config_map("a", "4"))
            .await;
        let exists = exists.unwrap_err();
        assert!(is_already_exists(&exists) && !is_conflict(&exists));

        api.delete("a", &DeleteParams::default()).await.unwrap();
        assert!(is_not_found(&api.get("a").await.unwrap_err()));

        assert_eq!(
            recorded.actions(),
            vec![
                "create configmaps",
                "patch configmaps a",
                "update configmaps a",
                "create configmaps",
                "delete configmaps a",
            ]
        );
        let creation = &recorded.writes()[0];
        assert_eq!(creation.name.as_deref(), Some(b_name.as_str()));
        assert_eq!(creation.body.as_ref().unwrap()["data"]["k"], "2");
        assert_eq!(recorded.requests().len(), 8, "reads are recorded too");
    }

    #[tokio::test]
    async fn status_writes_change_the_status_only_and_spec_writes_the_generation() {
        let recorded = RecordedApi::new();
        let mut pod = Pod::default();
        pod.metadata.name = Some("p".into());
        pod.metadata.namespace = Some("ns".into());
        pod.metadata.generation = Some(1);
        recorded.insert(&pod);
        let api: Api<Pod> = Api::namespaced(recorded.client(), "ns");

        let mut written = api.get("p").await.unwrap();
        written.status = Some(Default::default());
        written.status.as_mut().unwrap().phase = Some("Running".into());
        written.metadata.labels = Some(BTreeMap::from([("ignored".into(), "yes".into())]));
        let stored = api
            .replace_status("p", &PostParams::default(), &written)
            .await
            .unwrap();
        assert_eq!(stored.status.unwrap().phase.as_deref(), Some("Running"));
        assert_eq!(stored.metadata.labels, None);
        assert_eq!(stored.metadata.generation, Some(1));

        let mut respec = api.get("p").await.unwrap();
        respec.spec = Some(Default::default());
        respec.status = None;
        let stored = api
            .replace("p", &PostParams::default(), &respec)
            .await
            .unwrap();
        assert_eq!(stored.metadata.generation, Some(2));
        assert!(stored.status.is_some(), "a spec write keeps the status");
    }

    #[tokio::test]
    async fn reactors_answer_before_the_store_and_a_failed_test_op_is_invalid() {
        let recorded = RecordedApi::new();
        recorded.insert(&config_map("a", "1"));
        recorded.react_times(1, Verb::Create, "configmaps", Reaction::QuotaExceeded);
        recorded.react(Verb::Get, "*", Reaction::Timeout);
        let api: Api<ConfigMap> = Api::namespaced(recorded.client(), "ns");

        let refused = api
            .create(&PostParams::default(), &config_map("b", "1"))
            .await
            .unwrap_err();
        assert!(
            matches!(&refused, kube::Error::Api(s) if s.code == 403 && s.message.contains("exceeded quota"))
        );
        api.create(&PostParams::default(), &config_map("b", "1"))
            .await
            .expect("the reactor answered once");
        let timed_out = api.get("a").await.unwrap_err();
        assert!(matches!(&timed_out, kube::Error::Api(s) if s.code == 504));

        let failed_test = api
            .patch(
                "a",
                &PatchParams::default(),
                &Patch::<()>::Json(
                    serde_json::from_value(
                        json!([{"op": "test", "path": "/data/k", "value": "other"}]),
                    )
                    .unwrap(),
                ),
            )
            .await
            .unwrap_err();
        assert!(matches!(&failed_test, kube::Error::Api(s) if s.code == 422));
    }

    #[tokio::test]
    async fn an_apps_status_write_keeps_its_metadata_but_not_its_spec() {
        use k8s_openapi::api::apps::v1::Deployment;
        let recorded = RecordedApi::new();
        let mut d = Deployment::default();
        d.metadata.name = Some("web".into());
        d.metadata.namespace = Some("ns".into());
        d.metadata.labels = Some(BTreeMap::from([("app".into(), "web".into())]));
        recorded.insert(&d);
        let api: Api<Deployment> = Api::namespaced(recorded.client(), "ns");

        let mut written = api.get("web").await.unwrap();
        written.metadata.annotations = Some(BTreeMap::from([("revision".into(), "2".into())]));
        written.metadata.labels = None;
        written.spec.replicas = Some(7);
        written.status = Some(Default::default());
        let stored = api
            .replace_status("web", &PostParams::default(), &written)
            .await
            .unwrap();
        assert_eq!(stored.metadata.annotations.unwrap()["revision"], "2");
        assert_eq!(
            stored.metadata.labels.unwrap()["app"],
            "web",
            "a Deployment's labels stay"
        );
        assert_eq!(stored.spec.replicas, None, "the spec stays");
        assert!(stored.status.is_some());
    }

    #[tokio::test]
    async fn feeding_a_cache_brings_deletions_and_named_reactors_answer_for_one_object() {
        use crate::informers::SharedInformers;
        let recorded = RecordedApi::new();
        for name in ["a", "b"] {
            let mut pod = Pod::default();
            pod.metadata.name = Some(name.into());
            pod.metadata.namespace = Some("ns".into());
            recorded.insert(&pod);
        }
        recorded.react_to(Verb::Delete, "pods", "b", Reaction::Conflict);
        let informers = SharedInformers::new(recorded.client(), None);
        let cache = crate::api::kinds::pod_informer(&informers);
        recorded.feed(&cache, &());
        assert_eq!(cache.list().len(), 2);

        let api: Api<Pod> = Api::namespaced(recorded.client(), "ns");
        api.delete("a", &DeleteParams::default()).await.unwrap();
        api.delete("b", &DeleteParams::default())
            .await
            .expect_err("the reactor refuses b only");
        assert_eq!(
            recorded.resource_version(),
            3,
            "two insertions, one deletion"
        );
        recorded.feed(&cache, &());
        let names: Vec<_> = cache
            .list()
            .iter()
            .map(|p| p.metadata.name.clone())
            .collect();
        assert_eq!(names, [Some("b".to_string())]);
        assert_eq!(
            cache.observed_resource_version(),
            3,
            "the deletion is observed"
        );
    }

    #[tokio::test]
    async fn a_simulation_sees_every_change_and_decides_each_writes_fate() {
        let recorded = RecordedApi::new();
        recorded.graceful_pod_deletion();
        recorded.set_time("2030-01-01T00:00:00Z".into());
        let stored = recorded.put(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "a", "namespace": "ns"}, "spec": {"x": 1},
        }));
        assert_eq!(stored["metadata"]["generation"], 1);
        assert_eq!(
            stored["metadata"]["creationTimestamp"],
            "2030-01-01T00:00:00Z"
        );
        let api: Api<Pod> = Api::namespaced(recorded.client(), "ns");

        // A graceful deletion marks the pod (a MODIFIED event); removing it is the DELETED one.
        api.delete("a", &DeleteParams::default()).await.unwrap();
        let marked = recorded.object("v1/pods", "ns", "a").unwrap();
        assert_eq!(
            marked["metadata"]["deletionTimestamp"],
            "2030-01-01T00:00:00Z"
        );
        recorded.remove("v1/pods", "ns", "a");
        let log = recorded.watch_log(0);
        assert_eq!(
            log.iter()
                .map(|e| (e.resource.as_str(), e.deleted))
                .collect::<Vec<_>>(),
            [("v1/pods", false), ("v1/pods", false), ("v1/pods", true)]
        );
        assert_eq!(recorded.watch_log(2).len(), 1);

        // The interceptor sees each write before it is served, and may crash the process after it.
        recorded.intercept(|request, stored| {
            assert_eq!(stored.list("v1/pods").count(), 0);
            match request.verb {
                Verb::Create => Intercept::CrashAfter,
                _ => Intercept::Serve,
            }
        });
        let mut pod = Pod::default();
        pod.metadata.name = Some("b".into());
        let answer = api.create(&PostParams::default(), &pod).await;
        assert!(
            answer.is_err(),
            "the process crashed before it read the answer"
        );
        assert!(
            recorded.object("v1/pods", "ns", "b").is_some(),
            "but the write was applied"
        );
        assert!(recorded.is_down());
        assert!(
            api.get("b").await.is_err(),
            "a crashed process gets no answers"
        );
        recorded.bring_up();
        assert!(api.get("b").await.is_ok());
    }
}
