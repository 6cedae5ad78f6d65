//! The HTTP transport under every controller's client: HTTP/2 over TLS (one multiplexed connection per
//! client, as client-go), `TCP_NODELAY`, and a bound on every request that is not a watch.
//!
//! Why not kube's `ClientBuilder::try_from(Config)` as it is: it speaks only HTTP/1.1 and dials with a
//! connector that leaves Nagle's algorithm on.
//! - **HTTP/2** (offered by ALPN, so a server without it still gets HTTP/1.1): every request of a client
//!   shares one connection, so a slow-start batch of pod creations leaves at once instead of opening a
//!   TLS connection per request in flight. Measured A/B against HTTP/1.1 in one benchmark run: 0.91–0.94×
//!   the CPU (fewer TLS records and system calls), 0.83–0.93× the anonymous memory, the same times and
//!   writes ([performance.md](../../../docs/performance.md#the-transport-lever-by-lever)). Pings after 30 s
//!   without a frame, given up 15 s later (client-go's `ReadIdleTimeout` and `PingTimeout`), find a
//!   connection that died silently; its requests and watches then fail and are retried on a new one.
//! - **GOAWAY**: an API server closing a connection gracefully (a restart, `--goaway-chance`) sends
//!   GOAWAY; hyper fails the streams the server did not take and new requests go to a new connection.
//!   hyper's HTTP/2 client has had requests that hung around GOAWAY (hyperium/hyper#2500), so no request
//!   other than a watch waits more than [`REQUEST_TIMEOUT`] for its response ([`NonWatchTimeout`]);
//!   a watch is bounded by its own `timeoutSeconds` and the pings. tests/e2e/relist.rs runs the
//!   controllers against an API server that sends GOAWAY at random and is restarted mid-rollout.
//! - **`TCP_NODELAY`**, as Go sets it: on a new connection the first request's bytes would otherwise
//!   follow the TLS handshake's last small write and wait for its acknowledgement, which the API server
//!   delays by about 40 ms (Linux's shortest delayed ACK).
//!
//! kube offers no hook for either, so this module assembles the stack kube would (TLS from the config,
//! its connect/read/write timeouts, base URI, authentication, extra headers such as the User-Agent and
//! impersonation, kube's retry of 429/5xx when the config asks for it) over a connector of its own. What
//! kube's stack has and this one leaves out: its `tracing` span per request at debug level (the request
//! metrics of [`crate::api::client`] count and time every request) and gzip (not enabled in this build).
//!
//! Three kinds of config keep kube's own builder (HTTP/1.1): a proxy (which this build's kube rejects:
//! neither its `http-proxy` nor its `socks5` feature is on), credentials from an exec plugin (kube
//! records the expiry of a client certificate from the plugin as the client's `valid_until`, through a
//! helper it does not export), and a fixed TLS server name. mini-kcm's deployments use none of them (a
//! service-account token in the cluster, a kubeconfig with a client certificate on the local plane).
//!
//! One change to kube's retry of 429/5xx ([`CappedRetry`]): no single wait longer than 2 s, the server's
//! `Retry-After` included. A restarting API server answers requests for custom resources with 503
//! "retry after 5 s" until its handlers are installed, and then 429 "retry after 1 s" while their storage
//! starts; honoured in full, the informers of the `minikcm.dev` copies resumed 5–6 s after the API
//! server was ready. A handful of requests a second (the watches' own retries are bounded per process,
//! `informers::RetryBudget`) does not load it.

use http::{Request, Response};
use hyper_timeout::TimeoutConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use std::time::Duration;
use tower::retry::{Policy, RetryLayer};
use tower::util::BoxService;
use tower::{BoxError, Service, ServiceBuilder, ServiceExt};

/// A client's whole service stack, boxed (the same type kube's own builder produces).
pub(crate) type TransportService = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// A [`ClientBuilder`] over the transport described in the module header, ready for more layers.
pub(crate) fn client_builder(
    config: kube::Config,
) -> Result<ClientBuilder<TransportService>, kube::Error> {
    if config.proxy_url.is_some()
        || config.auth_info.exec.is_some()
        || config.tls_server_name.is_some()
    {
        return ClientBuilder::try_from(config);
    }
    let default_namespace = config.default_namespace.clone();
    let auth = config.auth_layer()?;

    // rustls's crypto provider: ring, chosen by this build's features (kube installs one itself only
    // with its `aws-lc-rs` feature, not enabled here).
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(http_connector());
    let mut connector = TimeoutConnector::new(tls);
    connector.set_connect_timeout(config.connect_timeout);
    connector.set_read_timeout(config.read_timeout);
    connector.set_write_timeout(config.write_timeout);
    connector.set_reset_reader_on_write(config.reset_reader_on_write);
    let http: hyper_util::client::legacy::Client<_, Body> =
        hyper_util::client::legacy::Builder::new(TokioExecutor::new())
            .timer(TokioTimer::new())
            .http2_keep_alive_interval(PING_AFTER_IDLE)
            .http2_keep_alive_timeout(PING_TIMEOUT)
            .build(connector);

    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| RetryLayer::new(CappedRetry(RetryPolicy::server_retry()))),
        )
        .option_layer(auth)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .layer_fn(|inner| NonWatchTimeout { inner })
        .service(http)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        });
    Ok(ClientBuilder::new(
        BoxService::new(service),
        default_namespace,
    ))
}

/// After this long without a frame from the server, the client pings the connection.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);
/// A ping unanswered for this long closes the connection (and fails the requests on it).
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// The longest a request other than a watch waits for its response (see the module header): well
/// above any list page or write the API server answers, well below a worker waiting forever.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Fails a request that is not a watch after [`REQUEST_TIMEOUT`] without a response.
#[derive(Clone)]
struct NonWatchTimeout<S> {
    inner: S,
}

/// A request whose response streams for as long as the server keeps it open (`?watch=true`, also the
/// streamed list's).
fn is_watch(uri: &http::Uri) -> bool {
    uri.query()
        .is_some_and(|q| q.split('&').any(|p| p == "watch=true" || p == "watch=1"))
}

impl<S, B> Service<Request<B>> for NonWatchTimeout<S>
where
    S: Service<Request<B>>,
    S::Error: Into<BoxError>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = futures::future::BoxFuture<'static, Result<S::Response, BoxError>>;

    fn poll_ready(
        &mut self,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let watch = is_watch(request.uri());
        let response = self.inner.call(request);
        Box::pin(async move {
            if watch {
                return response.await.map_err(Into::into);
            }
            match tokio::time::timeout(REQUEST_TIMEOUT, response).await {
                Ok(result) => result.map_err(Into::into),
                Err(_) => Err(format!(
                    "no response within {}s (the connection may have gone away)",
                    REQUEST_TIMEOUT.as_secs()
                )
                .into()),
            }
        })
    }
}

/// The longest wait before a retry inside one request (see the module header).
pub(crate) const RETRY_WAIT_CAP: Duration = Duration::from_secs(2);

/// kube's retry policy (429, 503 and 504, up to 15 times, exponential from 5 ms or the server's
/// `Retry-After`) with every wait cut to [`RETRY_WAIT_CAP`].
#[derive(Clone)]
pub(crate) struct CappedRetry(pub RetryPolicy);

impl<Res> Policy<Request<Body>, Response<Res>, BoxError> for CappedRetry {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let wait = self.0.retry(request, result)?;
        let latest = tokio::time::Instant::now() + RETRY_WAIT_CAP;
        Some(tokio::time::sleep_until(wait.deadline().min(latest)))
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        <RetryPolicy as Policy<Request<Body>, Response<Res>, BoxError>>::clone_request(
            &mut self.0,
            request,
        )
    }
}

/// The TCP connector: any scheme (TLS wraps it), `TCP_NODELAY` on.
fn http_connector() -> HttpConnector {
    let mut connector = HttpConnector::new();
    connector.enforce_http(false);
    connector.set_nodelay(true);
    connector
}

#[cfg(test)]
mod tests {
    use super::*;

    /// How long the retry of a response waits (`None`: no retry), on paused time.
    fn retry_wait(status: u16, retry_after: Option<&str>) -> Option<Duration> {
        let mut policy = CappedRetry(RetryPolicy::server_retry());
        let mut response = Response::builder().status(status);
        if let Some(seconds) = retry_after {
            response = response.header("Retry-After", seconds);
        }
        let mut result: Result<Response<()>, BoxError> = Ok(response.body(()).unwrap());
        let mut request = Request::new(Body::empty());
        let wait = policy.retry(&mut request, &mut result)?;
        Some(wait.deadline() - tokio::time::Instant::now())
    }

    #[tokio::test(start_paused = true)]
    async fn the_servers_retry_after_is_followed_up_to_2s() {
        // A restarting API server's 503 for custom resources: "retry after 5 s".
        assert_eq!(retry_wait(503, Some("5")), Some(RETRY_WAIT_CAP));
        // "storage is (re)initializing": 429, retry after 1 s, followed as it is.
        assert_eq!(retry_wait(429, Some("1")), Some(Duration::from_secs(1)));
        // Without a hint, kube's exponential backoff, from 5 ms (jittered).
        assert!(retry_wait(503, None).is_some_and(|w| w < Duration::from_millis(100)));
        assert_eq!(retry_wait(200, None), None);
        assert_eq!(retry_wait(404, Some("5")), None);
    }

    /// A server that never answers: a list or write fails after [`REQUEST_TIMEOUT`], a watch (also a
    /// streamed list) waits for as long as the server keeps it open.
    #[tokio::test(start_paused = true)]
    async fn only_watches_may_wait_longer_than_the_request_timeout() {
        let never = tower::service_fn(|_: Request<()>| {
            futures::future::pending::<Result<Response<()>, BoxError>>()
        });
        let mut service = NonWatchTimeout { inner: never };
        let request = |uri: &str| Request::get(uri).body(()).unwrap();
        let list = service.call(request("/api/v1/pods?limit=500"));
        let started = tokio::time::Instant::now();
        let error = list.await.unwrap_err();
        assert_eq!(started.elapsed(), REQUEST_TIMEOUT);
        assert!(
            error.to_string().contains("no response within 60s"),
            "{error}"
        );
        for watch in [
            "/api/v1/pods?watch=true&resourceVersion=5",
            "/apis/apps/v1/replicasets?sendInitialEvents=true&watch=1",
        ] {
            let pending = service.call(request(watch));
            let waited =
                tokio::time::timeout(REQUEST_TIMEOUT + Duration::from_secs(600), pending).await;
            assert!(waited.is_err(), "{watch} was cut short");
        }
        assert!(!is_watch(
            &"/api/v1/pods?fieldSelector=watch%3Dtrue".parse().unwrap()
        ));
        assert!(!is_watch(&"/api/v1/watchers".parse().unwrap()));
    }

    /// The connector `client_builder` dials with opens sockets with Nagle's algorithm off (fails if
    /// `set_nodelay` is dropped from it).
    #[tokio::test]
    async fn connections_are_made_with_tcp_nodelay() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let uri: http::Uri = format!("http://{}", listener.local_addr().unwrap())
            .parse()
            .unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|(s, _)| s) });
        let stream = http_connector().oneshot(uri).await.unwrap();
        assert!(stream.inner().nodelay().unwrap());
        accept.await.unwrap().unwrap();
    }

    /// A whole request through the stack: the base URI, the extra headers, the bearer token and the
    /// default namespace are applied as kube applies them, and the response body comes back.
    #[tokio::test]
    async fn requests_go_through_the_stack() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};

        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut config = kube::Config::new(
            format!("http://{}/base", listener.local_addr().unwrap())
                .parse()
                .unwrap(),
        );
        config.default_namespace = "ns".into();
        config.auth_info.token = Some("secret-token".to_string().into());
        config.headers.push((
            http::header::USER_AGENT,
            http::HeaderValue::from_static("mini-kcm-test"),
        ));
        let server = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 4096];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = socket.read(&mut buf).await.unwrap();
                assert_ne!(n, 0, "connection closed before the request ended");
                request.extend_from_slice(&buf[..n]);
            }
            let body = br#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#;
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                body.len()
            );
            socket.write_all(head.as_bytes()).await.unwrap();
            socket.write_all(body).await.unwrap();
            String::from_utf8(request).unwrap()
        });

        let client = client_builder(config).unwrap().build();
        assert_eq!(client.default_namespace(), "ns");
        let request = http::Request::get("/api/v1/namespaces/ns/pods/p")
            .body(Vec::new())
            .unwrap();
        let text = tokio::time::timeout(Duration::from_secs(30), client.request_text(request))
            .await
            .expect("no response within 30 s")
            .unwrap();
        assert!(text.contains("Success"), "{text}");

        let seen = server.await.unwrap().to_lowercase();
        assert!(
            seen.starts_with("get /base/api/v1/namespaces/ns/pods/p http/1.1"),
            "{seen}"
        );
        assert!(seen.contains("user-agent: mini-kcm-test"), "{seen}");
        assert!(
            seen.contains("authorization: bearer secret-token"),
            "{seen}"
        );
    }

    /// Configs this stack does not handle keep kube's builder: a proxy gets kube's error, as before.
    /// (The exec-plugin branch has no test: it needs a plugin to run.)
    #[test]
    fn a_proxy_keeps_kubes_own_builder() {
        let mut config = kube::Config::new(http::Uri::from_static("http://127.0.0.1:9"));
        config.proxy_url = Some(http::Uri::from_static("ftp://127.0.0.1:21"));
        assert!(matches!(
            client_builder(config),
            Err(kube::Error::ProxyProtocolUnsupported { .. })
        ));
    }
}
