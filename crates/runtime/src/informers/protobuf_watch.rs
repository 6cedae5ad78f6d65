//! Listing and watching in protobuf (`crate::protobuf`): the same events as kube's JSON watcher, for the
//! kinds that have a protobuf decoding (pods and nodes).
//!
//! Why a watcher of our own: kube's watcher decodes JSON only, and its request layer is private, so the
//! protobuf path drives the same state machine itself: a full list (streamed as a watch's initial events,
//! or in pages), `InitDone`, then a watch from the list's resourceVersion that resumes where it stopped
//! when the server ends it, and starts over with a list after a `410 Gone`. It yields kube's
//! `watcher::Event`s and `watcher::Error`s, so the informer, the backoff (`backoff`), the stream/page
//! fall-back (`list_mode`) and the JSON fall-back (`content_type`) treat both paths alike.
//!
//! Requests are kube's: the same URLs and parameters as its watcher (a list with no resourceVersion is a
//! consistent read, the streamed list too, see `list_mode`), with `Accept` set to protobuf only, so a
//! server that cannot answer in protobuf says `406 Not Acceptable` instead of silently answering JSON.

use std::collections::VecDeque;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};
use http_body_util::BodyExt;
use kube::Client;
use kube::runtime::watcher;

use crate::protobuf::messages::DecodedList;
use crate::protobuf::watch_event::{decode_status, decode_watch_event};
use crate::protobuf::{DecodeError, Frames, PROTOBUF, PROTOBUF_WATCH, ProtobufKind, WatchFrame};

use super::list_mode::{Events, ListMode, PAGE_SIZE, pages_after_a_refused_stream};

/// The server ends every watch after this long (kube's watcher asks for the same); the watch then
/// resumes from where it was.
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// How the first list is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listing {
    /// A watch with `sendInitialEvents=true`, ending with a bookmark.
    Streamed,
    /// A list in pages of [`PAGE_SIZE`], then a watch.
    Paged,
}

/// How a kind is listed and watched in protobuf; see `super::Watched::protobuf`. Only kinds with a
/// protobuf decoding (`crate::protobuf::ProtobufKind`) have one.
pub struct ProtobufDecoding<K> {
    watcher: fn(Client, String, Listing) -> Events<K>,
}

/// The protobuf list and watch of `K`.
pub(crate) fn protobuf_decoding<K: ProtobufKind + Clone + Send + 'static>() -> ProtobufDecoding<K> {
    ProtobufDecoding {
        watcher: protobuf_watcher::<K>,
    }
}

impl<K: Send + 'static> ProtobufDecoding<K> {
    /// Like `list_mode::list_and_watch`: a streamed list first unless `mode` is paged, pages after the
    /// server refused a stream.
    pub(crate) fn list_and_watch(
        &self,
        client: Client,
        url_path: String,
        kind: String,
        mode: ListMode,
    ) -> Events<K> {
        let watcher = self.watcher;
        let (paged_client, paged_url) = (client.clone(), url_path.clone());
        let paged = move || watcher(paged_client, paged_url, Listing::Paged);
        if mode.is_paged() {
            return paged();
        }
        pages_after_a_refused_stream(
            watcher(client, url_path, Listing::Streamed),
            paged,
            kind,
            mode,
        )
    }
}

/// The events of one kind's list and watch in protobuf at `url_path` (`/api/v1/pods`,
/// `/api/v1/namespaces/ns/pods`).
pub(crate) fn protobuf_watcher<K>(client: Client, url_path: String, listing: Listing) -> Events<K>
where
    K: ProtobufKind + Clone + Send + 'static,
{
    let source = Source {
        client,
        url_path,
        listing,
    };
    futures::stream::unfold((source, State::Empty), |(source, state)| async move {
        let mut state = state;
        loop {
            let (event, next) = source.step(state).await;
            state = next;
            if let Some(event) = event {
                return Some((event, (source, state)));
            }
        }
    })
    .boxed()
}

struct Source {
    client: Client,
    url_path: String,
    listing: Listing,
}

/// Where the list and watch are (kube's watcher has the same states).
enum State<K> {
    /// Nothing listed: start a list.
    Empty,
    /// A paged list under way: the objects of the last page not handed over yet.
    Paging {
        continue_token: Option<String>,
        objects: VecDeque<K>,
        resource_version: Option<String>,
    },
    /// A streamed list under way: the watch's events up to the bookmark that ends it.
    StreamingList { body: WatchBody },
    /// Listed up to `resource_version`; a watch from there is to be opened.
    Listed { resource_version: String },
    /// Watching from `resource_version`.
    Watching {
        resource_version: String,
        body: WatchBody,
    },
}

type Step<K> = (Option<Result<watcher::Event<K>, watcher::Error>>, State<K>);

impl Source {
    async fn step<K>(&self, state: State<K>) -> Step<K>
    where
        K: ProtobufKind + Clone + Send + 'static,
    {
        match state {
            State::Empty => match self.listing {
                Listing::Paged => (
                    Some(Ok(watcher::Event::Init)),
                    State::Paging {
                        continue_token: None,
                        objects: VecDeque::new(),
                        resource_version: None,
                    },
                ),
                Listing::Streamed => {
                    let query = format!(
                        "watch=true&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}"
                    );
                    match self.watch(&query).await {
                        Ok(body) => (
                            Some(Ok(watcher::Event::Init)),
                            State::StreamingList { body },
                        ),
                        Err(e) => (Some(Err(watcher::Error::WatchStartFailed(e))), State::Empty),
                    }
                }
            },
            State::Paging {
                continue_token,
                mut objects,
                resource_version,
            } => {
                if let Some(object) = objects.pop_front() {
                    return (
                        Some(Ok(watcher::Event::InitApply(object))),
                        State::Paging {
                            continue_token,
                            objects,
                            resource_version,
                        },
                    );
                }
                if continue_token.is_none()
                    && let Some(resource_version) = resource_version
                {
                    return (
                        Some(Ok(watcher::Event::InitDone)),
                        State::Listed { resource_version },
                    );
                }
                match self.list_page::<K>(continue_token.as_deref()).await {
                    Ok(page) => {
                        if page.resource_version.is_none() && page.continue_token.is_none() {
                            return (Some(Err(watcher::Error::NoResourceVersion)), State::Empty);
                        }
                        (
                            None,
                            State::Paging {
                                continue_token: page.continue_token,
                                objects: page.items.into(),
                                resource_version: page.resource_version,
                            },
                        )
                    }
                    Err(e) => (
                        Some(Err(watcher::Error::InitialListFailed(e))),
                        State::Empty,
                    ),
                }
            }
            State::StreamingList { mut body } => match body.next::<K>().await {
                Some(Ok(WatchFrame::Added(o) | WatchFrame::Modified(o))) => (
                    Some(Ok(watcher::Event::InitApply(o))),
                    State::StreamingList { body },
                ),
                // The API server sends no deletions in a streamed list; one would be a server bug.
                Some(Ok(WatchFrame::Deleted(_))) => (None, State::StreamingList { body }),
                Some(Ok(WatchFrame::Bookmark {
                    resource_version,
                    initial_events_end,
                })) => {
                    if initial_events_end {
                        (
                            Some(Ok(watcher::Event::InitDone)),
                            State::Watching {
                                resource_version,
                                body,
                            },
                        )
                    } else {
                        (None, State::StreamingList { body })
                    }
                }
                Some(Ok(WatchFrame::Error(status))) => {
                    let next = if status.code == 410 {
                        State::Empty
                    } else {
                        State::StreamingList { body }
                    };
                    (Some(Err(watcher::Error::WatchError(status))), next)
                }
                Some(Err(e)) => (Some(Err(watcher::Error::WatchFailed(e))), State::Empty),
                // Ended before the list did: list again.
                None => (None, State::Empty),
            },
            State::Listed { resource_version } => {
                let query = format!(
                    "watch=true&resourceVersion={resource_version}&allowWatchBookmarks=true&timeoutSeconds={WATCH_TIMEOUT_SECONDS}"
                );
                match self.watch(&query).await {
                    Ok(body) => (
                        None,
                        State::Watching {
                            resource_version,
                            body,
                        },
                    ),
                    Err(e) => (
                        Some(Err(watcher::Error::WatchStartFailed(e))),
                        State::Listed { resource_version },
                    ),
                }
            }
            State::Watching {
                resource_version,
                mut body,
            } => match body.next::<K>().await {
                Some(Ok(WatchFrame::Added(object) | WatchFrame::Modified(object))) => {
                    changed(watcher::Event::Apply, object, body)
                }
                Some(Ok(WatchFrame::Deleted(object))) => {
                    changed(watcher::Event::Delete, object, body)
                }
                Some(Ok(WatchFrame::Bookmark {
                    resource_version, ..
                })) => (
                    None,
                    State::Watching {
                        resource_version,
                        body,
                    },
                ),
                Some(Ok(WatchFrame::Error(status))) => {
                    let next = if status.code == 410 {
                        State::Empty
                    } else {
                        State::Watching {
                            resource_version,
                            body,
                        }
                    };
                    (Some(Err(watcher::Error::WatchError(status))), next)
                }
                // A broken body or an undecodable frame: the stream cannot be trusted past it; watch
                // again from the last version seen.
                Some(Err(e)) => (
                    Some(Err(watcher::Error::WatchFailed(e))),
                    State::Listed { resource_version },
                ),
                None => (None, State::Listed { resource_version }),
            },
        }
    }

    async fn list_page<K: ProtobufKind>(
        &self,
        continue_token: Option<&str>,
    ) -> Result<DecodedList<K>, kube::Error> {
        let mut query = format!("limit={PAGE_SIZE}");
        if let Some(token) = continue_token {
            query.push_str("&continue=");
            query.push_str(&encode_query_value(token));
        }
        let response = self.get(&query, PROTOBUF).await?;
        let body = read_body(response.into_body()).await?;
        K::decode_list(body).map_err(invalid_data)
    }

    async fn watch(&self, query: &str) -> Result<WatchBody, kube::Error> {
        let response = self.get(query, PROTOBUF_WATCH).await?;
        Ok(WatchBody {
            chunks: response.into_body().into_data_stream().boxed(),
            frames: Frames::default(),
        })
    }

    /// A GET of `url_path?query` accepting only `accept`; an error status, or an answer in another
    /// content type, is an `Api` error (406 for the latter: the server does not speak protobuf here).
    async fn get(
        &self,
        query: &str,
        accept: &str,
    ) -> Result<http::Response<kube::client::Body>, kube::Error> {
        let request = http::Request::get(format!("{}?{query}", self.url_path))
            .header(http::header::ACCEPT, accept)
            .body(kube::client::Body::empty())
            .map_err(kube::Error::HttpError)?;
        let response = self.client.send(request).await?;
        let status = response.status();
        if !status.is_success() {
            let body = read_body(response.into_body()).await.unwrap_or_default();
            return Err(kube::Error::Api(Box::new(error_status(status, body))));
        }
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !content_type.starts_with(PROTOBUF) {
            let message = format!("asked for {accept}, the server answered {content_type:?}");
            return Err(kube::Error::Api(Box::new(
                kube::core::Status::failure(&message, "NotAcceptable").with_code(406),
            )));
        }
        Ok(response)
    }
}

/// A watch's change as the event `event` makes of it, the watch going on from the object's
/// resourceVersion (an object without one cannot be resumed from: list again).
fn changed<K: ProtobufKind>(
    event: fn(K) -> watcher::Event<K>,
    object: K,
    body: WatchBody,
) -> Step<K> {
    match object.meta().resource_version.clone() {
        Some(resource_version) => (
            Some(Ok(event(object))),
            State::Watching {
                resource_version,
                body,
            },
        ),
        None => (Some(Err(watcher::Error::NoResourceVersion)), State::Empty),
    }
}

/// A watch response's body, read frame by frame.
struct WatchBody {
    chunks: BoxStream<'static, Result<Bytes, kube::Error>>,
    frames: Frames,
}

impl WatchBody {
    /// The next event; `None` when the server ended the watch.
    async fn next<K: ProtobufKind>(&mut self) -> Option<Result<WatchFrame<K>, kube::Error>> {
        loop {
            match self.frames.next_frame() {
                Some(Ok(frame)) => return Some(decode_watch_event(frame).map_err(invalid_data)),
                Some(Err(e)) => return Some(Err(invalid_data(e))),
                None => {}
            }
            match self.chunks.try_next().await {
                Ok(Some(chunk)) => self.frames.push(&chunk),
                Ok(None) => {
                    if self.frames.pending() > 0 {
                        tracing::debug!(
                            bytes = self.frames.pending(),
                            "a protobuf watch ended inside a frame; watching again"
                        );
                    }
                    return None;
                }
                Err(e) => return Some(Err(e)),
            }
        }
    }
}

async fn read_body(body: kube::client::Body) -> Result<Bytes, kube::Error> {
    Ok(body.collect().await?.to_bytes())
}

/// An error response as kube reports it: the `Status` the server sent (protobuf, or JSON from a server
/// or proxy that answered in JSON), else one made of the HTTP status.
fn error_status(code: http::StatusCode, body: Bytes) -> kube::core::Status {
    if let Ok(status) = decode_status(body.clone()) {
        return status;
    }
    if let Ok(status) = serde_json::from_slice::<kube::core::Status>(&body)
        && status.code != 0
    {
        return status;
    }
    let text = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
    kube::core::Status::failure(&text, code.canonical_reason().unwrap_or_default())
        .with_code(code.as_u16())
}

fn invalid_data(e: DecodeError) -> kube::Error {
    kube::Error::ReadEvents(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
}

/// A continue token as a query value (tokens are base64: `+`, `/` and `=` need escaping).
fn encode_query_value(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pods::cached::CachedPod;
    use crate::protobuf::messages::encode::{bookmark, pod, pod_list};
    use crate::protobuf::watch_event::encode::{frame, status};
    use std::sync::{Arc, Mutex};

    /// What a fake API server answers: status, content type, body.
    type Answer = (u16, &'static str, Vec<u8>);

    /// A client over `answer`, recording each request as `"<Accept> <path and query>"`.
    fn fake_server(answer: fn(&str) -> Answer) -> (Client, Arc<Mutex<Vec<String>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let service = tower::service_fn(move |request: http::Request<kube::client::Body>| {
            let uri = request.uri().to_string();
            let accept = request
                .headers()
                .get(http::header::ACCEPT)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_string();
            log.lock().unwrap().push(format!("{accept} {uri}"));
            let (code, content_type, body) = answer(&uri);
            async move {
                http::Response::builder()
                    .status(code)
                    .header(http::header::CONTENT_TYPE, content_type)
                    .body(kube::client::Body::from(body))
                    .map_err(|e| Box::new(e) as tower::BoxError)
            }
        });
        (Client::new(service, "default"), seen)
    }

    fn watch_body(frames: &[Vec<u8>]) -> Vec<u8> {
        frames.concat()
    }

    /// The events as words: `init`, `apply a`, `done`, `apply b`, `delete b`, `error 410`, ...
    async fn events(mut stream: Events<CachedPod>, n: usize) -> Vec<String> {
        let mut seen = Vec::new();
        while seen.len() < n {
            let Some(event) = stream.next().await else {
                break;
            };
            let name = |p: &CachedPod| p.metadata.name.clone().unwrap_or_default();
            seen.push(match event {
                Ok(watcher::Event::Init) => "init".to_string(),
                Ok(watcher::Event::InitApply(p)) => format!("apply {}", name(&p)),
                Ok(watcher::Event::InitDone) => "done".to_string(),
                Ok(watcher::Event::Apply(p)) => format!("apply {}", name(&p)),
                Ok(watcher::Event::Delete(p)) => format!("delete {}", name(&p)),
                Err(watcher::Error::WatchError(s)) => format!("error {}", s.code),
                Err(e) => format!("failed: {e}"),
            });
        }
        seen
    }

    /// Streams the list (two pods, a plain bookmark, the end bookmark), then a watch with a change, a
    /// deletion, and a 410.
    fn streaming_server(uri: &str) -> Answer {
        if uri.contains("sendInitialEvents=true") {
            let body = watch_body(&[
                frame("ADDED", pod("a", "5")),
                frame("BOOKMARK", bookmark("6", false)),
                frame("ADDED", pod("b", "6")),
                frame("BOOKMARK", bookmark("7", true)),
                frame("MODIFIED", pod("a", "8")),
                frame("DELETED", pod("b", "9")),
                frame("ERROR", status(410, "Expired", "too old resource version")),
            ]);
            (200, PROTOBUF_WATCH, body)
        } else {
            (500, "text/plain", b"unexpected".to_vec())
        }
    }

    #[tokio::test]
    async fn a_streamed_list_then_changes_then_a_410_that_lists_again() {
        let (client, requests) = fake_server(streaming_server);
        let stream =
            protobuf_watcher::<CachedPod>(client, "/api/v1/pods".into(), Listing::Streamed);
        let seen = events(stream, 9).await;
        assert_eq!(
            seen,
            [
                "init",
                "apply a",
                "apply b",
                "done",
                "apply a",
                "delete b",
                "error 410",
                "init",
                "apply a"
            ]
        );
        let requests = requests.lock().unwrap();
        assert_eq!(
            requests.len(),
            2,
            "the 410 started a new list: {requests:?}"
        );
        assert!(requests.iter().all(|r| r.starts_with(PROTOBUF_WATCH)));
        assert!(
            !requests[0].contains("resourceVersion="),
            "a streamed list is a consistent read: {}",
            requests[0]
        );
    }

    /// Pages of one pod each (the second with a continue token that needs escaping), then a watch.
    fn paging_server(uri: &str) -> Answer {
        if uri.contains("watch=true") {
            (
                200,
                PROTOBUF_WATCH,
                watch_body(&[frame("ADDED", pod("c", "12"))]),
            )
        } else if uri.contains("continue=t%2B1") {
            (200, PROTOBUF, pod_list(&[("b", "6")], "10", "").to_vec())
        } else {
            (200, PROTOBUF, pod_list(&[("a", "5")], "10", "t+1").to_vec())
        }
    }

    #[tokio::test]
    async fn a_paged_list_follows_its_continue_tokens_then_watches_from_its_version() {
        let (client, requests) = fake_server(paging_server);
        let stream = protobuf_watcher::<CachedPod>(client, "/api/v1/pods".into(), Listing::Paged);
        assert_eq!(
            events(stream, 5).await,
            ["init", "apply a", "apply b", "done", "apply c"]
        );
        let requests = requests.lock().unwrap();
        assert_eq!(requests[0], format!("{PROTOBUF} /api/v1/pods?limit=100"));
        assert_eq!(
            requests[1],
            format!("{PROTOBUF} /api/v1/pods?limit=100&continue=t%2B1")
        );
        assert!(
            requests[2].starts_with(&format!(
                "{PROTOBUF_WATCH} /api/v1/pods?watch=true&resourceVersion=10&"
            )),
            "{}",
            requests[2]
        );
    }

    /// Refuses streamed lists as an API server with the WatchList gate off does (422), in protobuf.
    fn server_without_watch_list(uri: &str) -> Answer {
        if uri.contains("sendInitialEvents") {
            (
                422,
                PROTOBUF,
                status(422, "Invalid", "sendInitialEvents is forbidden").to_vec(),
            )
        } else {
            paging_server(uri)
        }
    }

    #[tokio::test]
    async fn a_refused_stream_is_listed_in_pages_from_then_on() {
        let (client, requests) = fake_server(server_without_watch_list);
        let mode = ListMode::default();
        let stream = protobuf_decoding::<CachedPod>().list_and_watch(
            client,
            "/api/v1/pods".into(),
            "Pod".into(),
            mode.clone(),
        );
        assert_eq!(
            events(stream, 5).await,
            ["init", "apply a", "apply b", "done", "apply c"]
        );
        assert_eq!(mode.as_str(), "paged");
        assert_eq!(
            requests.lock().unwrap().len(),
            4,
            "one refused stream, two pages, one watch"
        );
    }

    /// Answers protobuf requests with 406, as a server without protobuf for the resource does.
    fn server_without_protobuf(_: &str) -> Answer {
        (406, "application/json", br#"{"kind":"Status","code":406,"reason":"NotAcceptable","message":"only application/json"}"#.to_vec())
    }

    /// Answers 200 in JSON although asked for protobuf only.
    fn server_answering_json(_: &str) -> Answer {
        (
            200,
            "application/json",
            br#"{"kind":"PodList","items":[]}"#.to_vec(),
        )
    }

    #[tokio::test]
    async fn a_406_or_an_answer_in_json_is_an_api_error_the_fallback_recognises() {
        for server in [
            server_without_protobuf as fn(&str) -> Answer,
            server_answering_json,
        ] {
            let (client, _) = fake_server(server);
            let mut stream =
                protobuf_watcher::<CachedPod>(client, "/api/v1/pods".into(), Listing::Streamed);
            match stream.next().await {
                Some(Err(watcher::Error::WatchStartFailed(kube::Error::Api(s)))) => {
                    assert_eq!(s.code, 406, "{s:?}");
                }
                other => panic!("expected a 406, got {other:?}"),
            }
        }
    }

    #[tokio::test]
    async fn an_undecodable_frame_fails_the_watch_and_it_resumes_from_the_last_version() {
        fn server(uri: &str) -> Answer {
            if uri.contains("sendInitialEvents=true") {
                let mut body = watch_body(&[
                    frame("ADDED", pod("a", "5")),
                    frame("BOOKMARK", bookmark("7", true)),
                    frame("MODIFIED", pod("a", "8")),
                ]);
                body.extend(frame("MODIFIED", Bytes::from_static(b"k8s\0\xff\xff")));
                (200, PROTOBUF_WATCH, body)
            } else {
                (
                    200,
                    PROTOBUF_WATCH,
                    watch_body(&[frame("DELETED", pod("a", "9"))]),
                )
            }
        }
        let (client, requests) = fake_server(server);
        let stream =
            protobuf_watcher::<CachedPod>(client, "/api/v1/pods".into(), Listing::Streamed);
        let seen = events(stream, 6).await;
        assert_eq!(seen[..4], ["init", "apply a", "done", "apply a"]);
        assert!(seen[4].starts_with("failed: "), "{seen:?}");
        assert_eq!(seen[5], "delete a");
        let requests = requests.lock().unwrap();
        assert!(requests[1].contains("resourceVersion=8"), "{requests:?}");
    }

    #[test]
    fn continue_tokens_are_escaped() {
        assert_eq!(encode_query_value("eyJ2Ijoi+/="), "eyJ2Ijoi%2B%2F%3D");
    }

    #[test]
    fn an_error_without_a_status_body_keeps_its_http_code() {
        let status = error_status(
            http::StatusCode::NOT_ACCEPTABLE,
            Bytes::from_static(b"nope"),
        );
        assert_eq!(status.code, 406);
        assert_eq!(status.message, "nope");
        let json = br#"{"kind":"Status","code":415,"reason":"UnsupportedMediaType","message":"m"}"#;
        let status = error_status(
            http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Bytes::from_static(json),
        );
        assert_eq!(
            (status.code, status.reason.as_str()),
            (415, "UnsupportedMediaType")
        );
        let status = error_status(http::StatusCode::GONE, status_bytes());
        assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    }

    fn status_bytes() -> Bytes {
        status(410, "Expired", "too old")
    }
}
