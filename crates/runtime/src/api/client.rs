//! One API client per controller, as kube-controller-manager gives each controller its own.
//!
//! Each controller's client carries, as tower layers around the transport of [`crate::api::transport`] (kube's
//! stack, with `TCP_NODELAY`), outermost first:
//! - a **rate limit** like client-go's: `--kube-api-qps` (20) with bursts of `--kube-api-burst` (30), so
//!   one busy controller cannot starve the others or flood the API server; each request reserves a token
//!   from the controller's [`RequestBudget`] and waits until the token exists. The controller's event
//!   writes draw from the same budget (as upstream's, whose event broadcaster shares the controller's
//!   client) but with lower priority ([`RequestBudget::wait_for_spare_tokens`], used by
//!   [`crate::observability::events`]);
//! - a **write fence** (leader election): while this process does not hold the lease, every mutating
//!   request fails before it is sent, so a replica that lost its lease cannot write even from a sync that
//!   was already running;
//! - **request metrics** with client-go's names (`rest_client_requests_total{code,method,host}`,
//!   `rest_client_request_duration_seconds{verb,host}`), plus a `client` label naming the controller;
//! - its own **User-Agent** (`mini-kcm/<version> (<identity>) <controller>`), so the API server's audit
//!   log and metrics tell the controllers, and the replicas, apart.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::BoxFuture;
use mini_kcm_workqueue::{BucketRateLimiter, RateLimiter};
use prometheus::{HistogramOpts, HistogramVec, IntCounterVec, Opts, Registry};
use tokio::time::Instant;
use tower::{Layer, Service};

/// Request rate limits of one controller's client.
#[derive(Debug, Clone, Copy)]
pub struct ClientRateLimit {
    /// Sustained requests per second (`--kube-api-qps`); 0 or less means no limit.
    pub qps: f32,
    /// The most requests that may go out at once: the token bucket's size (`--kube-api-burst`).
    pub burst: u32,
}

impl Default for ClientRateLimit {
    /// kube-controller-manager's defaults.
    fn default() -> Self {
        ClientRateLimit {
            qps: 20.0,
            burst: 30,
        }
    }
}

/// Everything that makes one controller's client its own.
#[derive(Clone)]
pub struct ControllerClientOptions {
    /// The controller's name, e.g. `replicaset-controller` (the `client` metrics label, the User-Agent).
    pub name: String,
    /// Who this process is: the leader-election identity (pod name plus a random suffix).
    pub identity: String,
    /// The token bucket its requests draw from (shared with the controller's event writes).
    pub budget: RequestBudget,
    /// Where the client's request metrics go; `None` records none.
    pub metrics: Option<RestClientMetrics>,
    /// With leader election: writes pass only while the lease is held.
    pub fence: Option<WriteFence>,
}

impl ControllerClientOptions {
    /// The User-Agent header: product/version, then who and which controller, as client-go formats it.
    pub(crate) fn user_agent(&self) -> String {
        format!(
            "mini-kcm/v{} ({}) {}",
            env!("CARGO_PKG_VERSION"),
            self.identity,
            self.name
        )
    }
}

/// Builds a controller's client from `config` with the layers described in the module header.
pub fn controller_client(
    mut config: kube::Config,
    options: &ControllerClientOptions,
) -> Result<kube::Client, kube::Error> {
    // A header value takes visible ASCII only; an identity (a pod or host name) has nothing else.
    let user_agent: String = options
        .user_agent()
        .chars()
        .filter(|c| c.is_ascii_graphic() || *c == ' ')
        .collect();
    if let Ok(value) = http::HeaderValue::from_str(&user_agent) {
        config.headers.push((http::header::USER_AGENT, value));
    }
    let host = config
        .cluster_url
        .authority()
        .map(|a| a.to_string())
        .unwrap_or_default();
    let builder = crate::api::transport::client_builder(config)?
        .with_layer(&RequestMetricsLayer {
            metrics: options.metrics.clone(),
            client: options.name.clone(),
            host,
        })
        .with_layer(&FenceLayer {
            fence: options.fence.clone(),
        })
        .with_layer(&RateLimitLayer::from_budget(&options.budget));
    Ok(builder.build())
}

// ---- rate limit ----

/// One controller's request budget: the token bucket its client's requests draw from (none when
/// qps <= 0). Clones share the bucket.
#[derive(Clone, Debug, Default)]
pub struct RequestBudget {
    bucket: Option<Arc<BucketRateLimiter>>,
}

impl RequestBudget {
    /// A budget of its own with `limit`'s rate and burst; unlimited when `qps <= 0`.
    pub fn new(limit: ClientRateLimit) -> Self {
        RequestBudget {
            bucket: (limit.qps > 0.0)
                .then(|| Arc::new(BucketRateLimiter::new(f64::from(limit.qps), limit.burst))),
        }
    }

    /// No limit (tests, and `qps <= 0`).
    pub fn unlimited() -> Self {
        RequestBudget::default()
    }

    /// Waits until a request of low priority (an event write) may take a token without holding up
    /// the controller's other requests: until the bucket is at least half full (counting the tokens
    /// already reserved), or until `deadline`, whichever comes first. Reserves nothing; the request
    /// then reserves its token as any request does.
    pub(crate) async fn wait_for_spare_tokens(&self, deadline: Instant) {
        let Some(bucket) = &self.bucket else {
            return;
        };
        let half = f64::from(bucket.burst()) / 2.0;
        loop {
            let until_half = bucket.time_until_holding(half);
            let until_deadline = deadline.saturating_duration_since(Instant::now());
            if until_half.is_zero() || until_deadline.is_zero() {
                return;
            }
            // Others may reserve meanwhile: look again after the sleep.
            tokio::time::sleep(until_half.min(until_deadline)).await;
        }
    }
}

/// A tower layer that spaces requests by a token bucket (none when qps <= 0).
#[derive(Clone)]
pub(crate) struct RateLimitLayer {
    bucket: Option<Arc<BucketRateLimiter>>,
}

impl RateLimitLayer {
    #[cfg(test)]
    pub(crate) fn new(limit: ClientRateLimit) -> Self {
        RateLimitLayer::from_budget(&RequestBudget::new(limit))
    }

    /// Requests draw from `budget` (shared with whoever else holds it).
    pub(crate) fn from_budget(budget: &RequestBudget) -> Self {
        RateLimitLayer {
            bucket: budget.bucket.clone(),
        }
    }
}

impl<S> Layer<S> for RateLimitLayer {
    type Service = RateLimited<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimited {
            inner,
            bucket: self.bucket.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The service of [`RateLimitLayer`]: `poll_ready` waits for a token, then for the inner service.
pub(crate) struct RateLimited<S> {
    inner: S,
    bucket: Option<Arc<BucketRateLimiter>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was reserved and its time has come; consumed by the next `call`.
    permitted: bool,
}

impl<S, R> Service<R> for RateLimited<S>
where
    S: Service<R>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        if let Some(bucket) = &self.bucket
            && !self.permitted
        {
            let wait = self.wait.get_or_insert_with(|| {
                let delay: Duration = RateLimiter::<()>::when(bucket.as_ref(), &());
                Box::pin(tokio::time::sleep(delay))
            });
            if wait.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.wait = None;
            self.permitted = true;
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: R) -> Self::Future {
        self.permitted = false;
        self.inner.call(request)
    }
}

// ---- write fence ----

/// Whether this process may write now. Leader election opens it until a deadline after each successful
/// renewal (the renewal's start plus the renew deadline) and closes it when leadership ends; a clone
/// shares the same state.
#[derive(Clone, Default)]
pub struct WriteFence {
    open_until: Arc<Mutex<Option<Instant>>>,
}

impl WriteFence {
    /// A closed fence.
    pub fn new() -> Self {
        WriteFence::default()
    }

    /// Writes pass until `deadline` (never moves the deadline back).
    pub fn open_until(&self, deadline: Instant) {
        let mut open_until = self
            .open_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if open_until.is_none_or(|current| current < deadline) {
            *open_until = Some(deadline);
        }
    }

    /// Writes fail from now on.
    pub fn close(&self) {
        *self
            .open_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = None;
    }

    /// Whether a write may be sent now: the fence is open and its deadline not yet passed.
    pub fn allows_writes(&self) -> bool {
        self.open_until
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .is_some_and(|deadline| Instant::now() < deadline)
    }
}

/// Why a request was not sent.
#[derive(Debug, thiserror::Error)]
#[error("not sent: this process does not hold the leader lease (write fenced)")]
pub(crate) struct Fenced;

#[derive(Clone)]
struct FenceLayer {
    fence: Option<WriteFence>,
}

impl<S> Layer<S> for FenceLayer {
    type Service = FenceService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        FenceService {
            inner,
            fence: self.fence.clone(),
        }
    }
}

struct FenceService<S> {
    inner: S,
    fence: Option<WriteFence>,
}

impl<S, B> Service<http::Request<B>> for FenceService<S>
where
    S: Service<http::Request<B>>,
    S::Response: Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let mutating = !matches!(
            *request.method(),
            http::Method::GET | http::Method::HEAD | http::Method::OPTIONS
        );
        if mutating && self.fence.as_ref().is_some_and(|f| !f.allows_writes()) {
            return Box::pin(std::future::ready(Err(Fenced.into())));
        }
        let future = self.inner.call(request);
        Box::pin(async move { future.await.map_err(Into::into) })
    }
}

// ---- request metrics ----

/// client-go's REST client metrics, shared by every controller's client (told apart by `client`).
#[derive(Clone)]
pub struct RestClientMetrics {
    requests: IntCounterVec,
    duration: HistogramVec,
}

impl RestClientMetrics {
    /// Creates the two metrics and registers them in `registry` (fails if they are already there).
    pub fn register(registry: &Registry) -> Result<Self, prometheus::Error> {
        let requests = IntCounterVec::new(
            Opts::new(
                "rest_client_requests_total",
                "Number of HTTP requests, partitioned by status code, method, and host.",
            ),
            &["code", "method", "host", "client"],
        )?;
        let duration = HistogramVec::new(
            HistogramOpts::new(
                "rest_client_request_duration_seconds",
                "Request latency in seconds. Broken down by verb, and host.",
            )
            .buckets(vec![
                0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
            ]),
            &["verb", "host", "client"],
        )?;
        registry.register(Box::new(requests.clone()))?;
        registry.register(Box::new(duration.clone()))?;
        Ok(RestClientMetrics { requests, duration })
    }
}

#[derive(Clone)]
struct RequestMetricsLayer {
    metrics: Option<RestClientMetrics>,
    client: String,
    host: String,
}

impl<S> Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            layer: self.clone(),
        }
    }
}

struct RequestMetrics<S> {
    inner: S,
    layer: RequestMetricsLayer,
}

impl<S, B, R> Service<http::Request<B>> for RequestMetrics<S>
where
    S: Service<http::Request<B>, Response = http::Response<R>>,
    S::Future: Send + 'static,
    S::Error: Into<tower::BoxError>,
{
    type Response = S::Response;
    type Error = tower::BoxError;
    type Future = BoxFuture<'static, Result<S::Response, tower::BoxError>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_string();
        let future = self.inner.call(request);
        let Some(metrics) = self.layer.metrics.clone() else {
            return Box::pin(async move { future.await.map_err(Into::into) });
        };
        let (client, host) = (self.layer.client.clone(), self.layer.host.clone());
        Box::pin(async move {
            let started = Instant::now();
            let result = future.await.map_err(Into::into);
            // Like client-go: latency until the response head, `<error>` when there was no response.
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_string(),
            };
            metrics
                .duration
                .with_label_values(&[method.as_str(), host.as_str(), client.as_str()])
                .observe(started.elapsed().as_secs_f64());
            metrics
                .requests
                .with_label_values(&[
                    code.as_str(),
                    method.as_str(),
                    host.as_str(),
                    client.as_str(),
                ])
                .inc();
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::Encoder;
    use std::convert::Infallible;
    use tower::ServiceExt;

    #[derive(Clone)]
    struct Echo;

    impl Service<u32> for Echo {
        type Response = u32;
        type Error = Infallible;
        type Future = std::future::Ready<Result<u32, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, r: u32) -> Self::Future {
            std::future::ready(Ok(r))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn requests_beyond_the_burst_are_spaced_by_qps() {
        let mut service = RateLimitLayer::new(ClientRateLimit {
            qps: 10.0,
            burst: 3,
        })
        .layer(Echo);
        let start = tokio::time::Instant::now();
        for i in 0..5 {
            service.ready().await.unwrap();
            assert_eq!(service.call(i).await.unwrap(), i);
        }
        // 3 free (burst), then 2 more at 100 ms each.
        assert_eq!(start.elapsed(), Duration::from_millis(200));
    }

    /// Spends `n` tokens as the controller's requests would.
    fn spend(budget: &RequestBudget, n: usize) {
        let bucket = budget.bucket.as_ref().unwrap();
        for _ in 0..n {
            RateLimiter::<()>::when(bucket.as_ref(), &());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_requests_wait_until_the_bucket_is_half_full_again() {
        let budget = RequestBudget::new(ClientRateLimit {
            qps: 10.0,
            burst: 10,
        });
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        // A full bucket: no wait.
        budget.wait_for_spare_tokens(far).await;
        assert_eq!(start.elapsed(), Duration::ZERO);
        // The controller leaves 2 tokens: 3 more (300 ms) make half of 10.
        spend(&budget, 8);
        budget.wait_for_spare_tokens(far).await;
        assert_eq!(start.elapsed(), Duration::from_millis(300));
    }

    #[tokio::test(start_paused = true)]
    async fn tokens_reserved_during_the_wait_prolong_it() {
        let budget = RequestBudget::new(ClientRateLimit {
            qps: 10.0,
            burst: 10,
        });
        spend(&budget, 10);
        let start = Instant::now();
        let waiting = budget.clone();
        let waiter = tokio::spawn(async move {
            waiting
                .wait_for_spare_tokens(Instant::now() + Duration::from_secs(60))
                .await;
            Instant::now()
        });
        // 200 ms in, the controller takes the 2 tokens that came back: half is 700 ms away then.
        tokio::time::sleep(Duration::from_millis(200)).await;
        spend(&budget, 2);
        let done = waiter.await.unwrap();
        assert_eq!(done - start, Duration::from_millis(700));
    }

    #[tokio::test(start_paused = true)]
    async fn low_priority_requests_wait_no_longer_than_their_deadline() {
        let budget = RequestBudget::new(ClientRateLimit {
            qps: 10.0,
            burst: 10,
        });
        // 30 tokens of debt: half a bucket is 3.5 s away.
        spend(&budget, 40);
        let start = Instant::now();
        budget
            .wait_for_spare_tokens(start + Duration::from_secs(1))
            .await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        // A deadline already past: no wait at all.
        budget.wait_for_spare_tokens(start).await;
        assert_eq!(start.elapsed(), Duration::from_secs(1));
    }

    #[tokio::test(start_paused = true)]
    async fn an_unlimited_budget_never_makes_anyone_wait() {
        let start = Instant::now();
        let far = start + Duration::from_secs(60);
        RequestBudget::unlimited().wait_for_spare_tokens(far).await;
        RequestBudget::new(ClientRateLimit { qps: 0.0, burst: 0 })
            .wait_for_spare_tokens(far)
            .await;
        assert_eq!(start.elapsed(), Duration::ZERO);
    }

    #[derive(Clone)]
    struct Ok200;

    impl Service<http::Request<()>> for Ok200 {
        type Response = http::Response<()>;
        type Error = Infallible;
        type Future = std::future::Ready<Result<http::Response<()>, Infallible>>;
        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
            Poll::Ready(Ok(()))
        }
        fn call(&mut self, _: http::Request<()>) -> Self::Future {
            std::future::ready(Ok(http::Response::new(())))
        }
    }

    fn request(method: http::Method) -> http::Request<()> {
        http::Request::builder()
            .method(method)
            .uri("/api/v1/pods")
            .body(())
            .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn a_closed_fence_stops_writes_but_not_reads() {
        let fence = WriteFence::new();
        let mut service = FenceLayer {
            fence: Some(fence.clone()),
        }
        .layer(Ok200);
        // Closed at first: reads pass, writes fail before they are sent.
        assert!(service.call(request(http::Method::GET)).await.is_ok());
        let err = service.call(request(http::Method::POST)).await.unwrap_err();
        assert!(err.is::<Fenced>());
        // Open until a deadline: writes pass until then, not after.
        fence.open_until(Instant::now() + Duration::from_secs(10));
        assert!(service.call(request(http::Method::PATCH)).await.is_ok());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(service.call(request(http::Method::DELETE)).await.is_err());
        // An older deadline never reopens a later one's gap; close() shuts at once.
        fence.open_until(Instant::now() + Duration::from_secs(5));
        fence.open_until(Instant::now() + Duration::from_secs(1));
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(service.call(request(http::Method::PUT)).await.is_ok());
        fence.close();
        assert!(service.call(request(http::Method::PUT)).await.is_err());
    }

    #[tokio::test]
    async fn requests_are_counted_by_code_method_and_client() {
        let registry = Registry::new();
        let metrics = RestClientMetrics::register(&registry).unwrap();
        let mut service = RequestMetricsLayer {
            metrics: Some(metrics),
            client: "replicaset-controller".into(),
            host: "127.0.0.1:6443".into(),
        }
        .layer(Ok200);
        service.call(request(http::Method::GET)).await.unwrap();
        service.call(request(http::Method::GET)).await.unwrap();
        service.call(request(http::Method::POST)).await.unwrap();
        let mut text = Vec::new();
        prometheus::TextEncoder::new()
            .encode(&registry.gather(), &mut text)
            .unwrap();
        let text = String::from_utf8(text).unwrap();
        let line = |code: &str, method: &str| {
            format!(
                "rest_client_requests_total{{client=\"replicaset-controller\",code=\"{code}\",host=\"127.0.0.1:6443\",method=\"{method}\"}}"
            )
        };
        assert!(
            text.contains(&format!("{} 2", line("200", "GET"))),
            "{text}"
        );
        assert!(
            text.contains(&format!("{} 1", line("200", "POST"))),
            "{text}"
        );
        assert!(text.contains("rest_client_request_duration_seconds_count{client=\"replicaset-controller\",host=\"127.0.0.1:6443\",verb=\"GET\"} 2"), "{text}");
    }
}
