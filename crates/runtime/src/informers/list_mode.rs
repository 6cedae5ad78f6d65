//! How an informer gets its full lists: streamed as a watch's initial events (KEP-3157 "watch-list",
//! `sendInitialEvents=true`) where the API server supports it, in pages of a list otherwise.
//!
//! Why stream: a paged list hands over 100 decoded objects at a time, and the API server builds each page
//! as one response; a streamed list is one watch whose first events are the objects, one at a time,
//! ending with a bookmark, and the same watch goes on with the changes. Neither way holds the whole list
//! twice on our side (the informer keeps the cached copy of every unchanged object, `informer`), but the
//! stream is what the API server is built to serve cheaply (on by default since 1.34, beta).
//!
//! Which: every informer tries the stream first. An API server with the `WatchList` feature gate off
//! refuses `sendInitialEvents` with 422 Invalid (its validation of the list options; one older than 1.27
//! refuses the `resourceVersionMatch` that comes with it the same way). On such a refusal (422, or 400)
//! the informer lists in pages from then on, for the life of the process, and says so once in the log.
//! The refusal is the answer to the stream's first request, before any event, and the paged watcher
//! starts with a full list at once, diffed against the cache as after any relist: nothing is lost, and
//! nothing loops (client-go's reflector instead falls back per attempt and tries the stream again at
//! every relist; the gate is set when the API server starts, so one refusal is enough here).
//!
//! Consistency: kube's watcher asks for the stream at `resourceVersion=0`, which the API server answers
//! from its watch cache as it stands ("any" semantics: its `getWatchCacheResourceVersion` requires
//! nothing), possibly behind a write this process already saw, which would show the past (objects
//! created since as deleted). client-go leaves the resourceVersion unset: the API server then reads
//! etcd's current revision and waits until its watch cache has caught up before it sends the initial
//! events, a consistent read like the paged list's. [`consistent_stream_client`] makes kube's request
//! that one: it drops `resourceVersion=0` from the request that carries `sendInitialEvents=true`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt};
use kube::runtime::watcher;
use kube::{Api, Client};

/// The page size of a paged list: 100 rather than kube's 500, because the watcher holds a whole page of
/// decoded objects until it has handed them all over.
pub(crate) const PAGE_SIZE: u32 = 100;

/// How an informer lists now: streamed (the start) or paged (after the API server refused a stream).
/// Clones share the state; the live view reads it.
#[derive(Debug, Clone, Default)]
pub(crate) struct ListMode {
    paged: Arc<AtomicBool>,
}

impl ListMode {
    /// `"streaming"` or `"paged"`.
    pub(crate) fn as_str(&self) -> &'static str {
        if self.is_paged() {
            "paged"
        } else {
            "streaming"
        }
    }

    /// Paged from the start (the `WatchListClient` gate off).
    pub(crate) fn paged() -> Self {
        ListMode {
            paged: Arc::new(AtomicBool::new(true)),
        }
    }

    pub(crate) fn is_paged(&self) -> bool {
        self.paged.load(Ordering::Relaxed)
    }

    fn fall_back(&self) {
        self.paged.store(true, Ordering::Relaxed);
    }
}

/// One informer's watch events, as every list-and-watch of this module yields them.
pub(crate) type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// The watch events of one informer: a streamed list and its watch, until the API server refuses the
/// stream; from then on kube's paged list and watch. `streaming` must come from a
/// [`consistent_stream_client`], `paged` from the plain one. A `mode` that is paged already (the
/// `WatchListClient` gate off) never tries the stream.
pub(crate) fn list_and_watch<K>(
    streaming: Api<K>,
    paged: Api<K>,
    kind: String,
    mode: ListMode,
) -> Events<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let paged_watch =
        move || watcher(paged, watcher::Config::default().page_size(PAGE_SIZE)).boxed();
    if mode.is_paged() {
        return paged_watch();
    }
    let streamed = watcher(streaming, watcher::Config::default().streaming_lists());
    pages_after_a_refused_stream(streamed, paged_watch, kind, mode)
}

/// `streamed` until the API server refuses the stream, then what `paged` makes, with `mode` switched
/// to paged and the switch logged once (see the module header).
pub(crate) fn pages_after_a_refused_stream<K, S>(
    streamed: S,
    paged: impl FnOnce() -> Events<K> + Send + 'static,
    kind: String,
    mode: ListMode,
) -> Events<K>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    falling_back(streamed, paged, is_refused_stream, move |error| {
        tracing::info!(%kind, %error,
            "the API server refused a streamed list (watch-list); listing in pages from now on");
        mode.fall_back();
    })
}

/// `first` until it yields an error `refused` accepts; then `on_refusal` is told (once) and the events
/// are what `fallback` makes, the refusal itself swallowed. A refusal is the answer to the first
/// request, before any event, and the fallback starts with a full list: nothing is lost.
pub(crate) fn falling_back<K, S>(
    first: S,
    fallback: impl FnOnce() -> Events<K> + Send + 'static,
    refused: fn(&watcher::Error) -> bool,
    on_refusal: impl FnOnce(&watcher::Error) + Send + 'static,
) -> Events<K>
where
    K: Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
{
    type Switch<K> = Box<dyn FnOnce(&watcher::Error) -> Events<K> + Send>;
    let switch: Switch<K> = Box::new(move |error| {
        on_refusal(error);
        fallback()
    });
    let state = (first.boxed(), Some(switch));
    futures::stream::unfold(state, move |(mut events, mut switch)| async move {
        loop {
            let item = events.next().await?;
            if let Err(error) = &item
                && refused(error)
                && let Some(switch) = switch.take()
            {
                events = switch(error);
                continue;
            }
            return Some((item, (events, switch)));
        }
    })
    .boxed()
}

pub(crate) fn is_refused_stream(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchStartFailed(kube::Error::Api(status))
        if status.code == 422 || status.code == 400)
}

/// A client that sends every request through `client`, the streamed list's first request with its
/// resourceVersion unset instead of `0` (see the module header).
pub(crate) fn consistent_stream_client(client: Client) -> Client {
    let namespace = client.default_namespace().to_string();
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let client = client.clone();
        async move {
            if let Some(uri) = without_any_version(request.uri()) {
                *request.uri_mut() = uri;
            }
            client.send(request).await
        }
    });
    Client::new(service, namespace)
}

/// `uri` without `resourceVersion=0` when it opens a streamed list (`sendInitialEvents=true`); `None`
/// when there is nothing to drop.
fn without_any_version(uri: &http::Uri) -> Option<http::Uri> {
    let query = uri.query()?;
    let pairs: Vec<&str> = query.split('&').collect();
    if !pairs.contains(&"sendInitialEvents=true") || !pairs.contains(&"resourceVersion=0") {
        return None;
    }
    let kept: Vec<&str> = pairs
        .into_iter()
        .filter(|p| *p != "resourceVersion=0")
        .collect();
    let path_and_query = format!("{}?{}", uri.path(), kept.join("&"));
    let mut parts = uri.clone().into_parts();
    parts.path_and_query = Some(path_and_query.parse().ok()?);
    http::Uri::from_parts(parts).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::Pod;

    #[test]
    fn only_the_streamed_lists_version_0_is_dropped() {
        let streamed: http::Uri = "/api/v1/pods?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0".parse().unwrap();
        assert_eq!(
            without_any_version(&streamed).unwrap().to_string(),
            "/api/v1/pods?watch=true&timeoutSeconds=290&allowWatchBookmarks=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        );
        // A resumed watch, a watch from a later version, a list: untouched.
        for uri in [
            "/api/v1/pods?watch=true&allowWatchBookmarks=true&resourceVersion=0",
            "/api/v1/pods?watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=10",
            "/api/v1/pods?limit=100",
            "/api/v1/pods",
        ] {
            assert_eq!(without_any_version(&uri.parse().unwrap()), None, "{uri}");
        }
    }

    /// A client over `answer`, recording every request's path and query.
    fn recording_client(answer: fn(&str) -> (u16, String)) -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let uri = request.uri().to_string();
            log.lock().unwrap().push(uri.clone());
            let (status, body) = answer(&uri);
            async move {
                http::Response::builder()
                    .status(status)
                    .body(kube::client::Body::from(body.into_bytes()))
                    .map_err(|e| Box::new(e) as tower::BoxError)
            }
        });
        (Client::new(service, "default"), seen)
    }

    fn pod_json(name: &str, rv: &str) -> String {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"namespace":"ns","name":"{name}","resourceVersion":"{rv}"}}}}"#
        )
    }

    /// An API server with the `WatchList` gate off: it refuses `sendInitialEvents`, lists in pages, and
    /// then holds the watch open without events.
    fn without_watch_list(uri: &str) -> (u16, String) {
        if uri.contains("sendInitialEvents") {
            let status = r#"{"kind":"Status","apiVersion":"v1","status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: sendInitialEvents: Forbidden: sendInitialEvents is forbidden for watch unless the WatchList feature gate is enabled","reason":"Invalid","code":422}"#;
            (422, status.to_string())
        } else if uri.contains("watch=true") {
            (200, String::new())
        } else {
            let list = format!(
                r#"{{"apiVersion":"v1","kind":"PodList","metadata":{{"resourceVersion":"7"}},"items":[{},{}]}}"#,
                pod_json("a", "5"),
                pod_json("b", "6")
            );
            (200, list)
        }
    }

    /// An API server that streams lists: the initial events, then the bookmark that ends them.
    fn with_watch_list(uri: &str) -> (u16, String) {
        if uri.contains("sendInitialEvents=true") {
            let events = [
                format!(r#"{{"type":"ADDED","object":{}}}"#, pod_json("a", "5")),
                format!(r#"{{"type":"ADDED","object":{}}}"#, pod_json("b", "6")),
                r#"{"type":"BOOKMARK","object":{"apiVersion":"v1","kind":"Pod","metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}"#.to_string(),
            ];
            (200, events.join("\n") + "\n")
        } else if uri.contains("watch=true") {
            (200, String::new())
        } else {
            (500, String::new())
        }
    }

    type Names = Vec<String>;

    /// The events up to the first `InitDone`, as `init`, `apply <name>` and `done`.
    async fn first_list(client: Client, paged: Client, mode: ListMode) -> Names {
        let mut events =
            list_and_watch::<Pod>(Api::all(client), Api::all(paged), "Pod".into(), mode);
        let mut seen = Vec::new();
        while let Some(event) = events.next().await {
            match event {
                Ok(watcher::Event::Init) => seen.push("init".to_string()),
                Ok(watcher::Event::InitApply(p)) => {
                    seen.push(format!("apply {}", p.metadata.name.unwrap_or_default()));
                }
                Ok(watcher::Event::InitDone) => {
                    seen.push("done".to_string());
                    return seen;
                }
                Ok(other) => panic!("unexpected {other:?}"),
                Err(e) => panic!("unexpected error {e}"),
            }
        }
        panic!("the watch ended before its first list: {seen:?}");
    }

    #[tokio::test]
    async fn a_server_with_watch_list_streams_the_list_as_a_consistent_read() {
        let (client, requests) = recording_client(with_watch_list);
        let mode = ListMode::default();
        let seen = first_list(
            consistent_stream_client(client.clone()),
            client,
            mode.clone(),
        )
        .await;
        assert_eq!(seen, ["init", "apply a", "apply b", "done"]);
        assert_eq!(mode.as_str(), "streaming");
        let requests = requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 1, "one watch, no list: {requests:?}");
        assert!(
            requests[0].contains("sendInitialEvents=true"),
            "{requests:?}"
        );
        assert!(
            !requests[0].contains("resourceVersion="),
            "a consistent read leaves the version unset: {requests:?}"
        );
    }

    #[tokio::test]
    async fn a_server_without_watch_list_is_listed_in_pages_after_one_refusal() {
        let (client, requests) = recording_client(without_watch_list);
        let mode = ListMode::default();
        let seen = first_list(
            consistent_stream_client(client.clone()),
            client,
            mode.clone(),
        )
        .await;
        // The refusal is not passed on: the informer sees one clean list.
        assert_eq!(seen, ["init", "apply a", "apply b", "done"]);
        assert_eq!(mode.as_str(), "paged");
        let requests = requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 2, "{requests:?}");
        assert!(requests[0].contains("sendInitialEvents=true"));
        assert!(requests[1].contains("limit=100") && !requests[1].contains("watch"));
    }

    #[tokio::test]
    async fn with_the_watch_list_client_gate_off_only_pages_are_asked_for() {
        // The server would refuse a stream: not one is asked for.
        let (client, requests) = recording_client(without_watch_list);
        let mode = ListMode::paged();
        let seen = first_list(
            consistent_stream_client(client.clone()),
            client,
            mode.clone(),
        )
        .await;
        assert_eq!(seen, ["init", "apply a", "apply b", "done"]);
        assert_eq!(mode.as_str(), "paged");
        let requests = requests.lock().unwrap().clone();
        assert_eq!(requests.len(), 1, "{requests:?}");
        assert!(requests[0].contains("limit=100") && !requests[0].contains("sendInitialEvents"));
    }

    #[tokio::test]
    async fn other_errors_are_passed_on_and_keep_the_stream() {
        let (client, requests) = recording_client(|_| (503, String::new()));
        let mode = ListMode::default();
        let mut events = list_and_watch::<Pod>(
            Api::all(consistent_stream_client(client.clone())),
            Api::all(client),
            "Pod".into(),
            mode.clone(),
        );
        for _ in 0..3 {
            let event = events.next().await.expect("the watcher goes on");
            assert!(
                matches!(event, Err(watcher::Error::WatchStartFailed(_))),
                "{event:?}"
            );
        }
        assert_eq!(mode.as_str(), "streaming");
        let requests = requests.lock().unwrap().clone();
        assert!(
            requests
                .iter()
                .all(|r| r.contains("sendInitialEvents=true"))
        );
    }
}
