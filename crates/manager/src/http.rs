//! The manager's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` and `/livez` (liveness: fails
//! when this replica leads but its lease renewal is overdue), `/readyz` (readiness: the informer caches
//! have synced), and the live view's data under `/debug/controllers` (`crate::live_view`).
//!
//! They are served two ways: on the plain `--metrics-addr` (loopback by default: the local user's
//! `mini-kcm explain` and `up`), everything open; on the secure port, over TLS (`crate::serving_cert`),
//! each request checked by `crate::delegated_auth` first, as kube-controller-manager's port 10257.
//!
//! axum routes the requests; hyper serves the connections with keep-alive and a header-read timeout,
//! so an idle or slow client cannot hold a connection task forever (the TLS handshake has the same
//! bound).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use prometheus::{Encoder, Registry, TextEncoder};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_rustls::TlsAcceptor;

use mini_kcm_runtime::decisions::{Decision, DecisionFilter};
use mini_kcm_runtime::inspect::ManagerView;

use crate::delegated_auth::{DelegatedAuth, Verdict};
use crate::leader_election::LeaderState;
use crate::live_view::LiveView;
use crate::object_view::ObjectQuery;

/// How long a client may take to send a request's headers (also bounds an idle keep-alive connection).
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(30);
/// A leader whose last renewal is older than its lease duration plus this is unhealthy (upstream's
/// leader-election health check uses the same slack).
const LEASE_HEALTH_SLACK: Duration = Duration::from_secs(20);

/// What the endpoints report on.
#[derive(Clone)]
pub(crate) struct Health {
    pub registry: Registry,
    pub caches_synced: Arc<AtomicBool>,
    /// The election's state and lease duration, with leader election on.
    pub leader: Option<(watch::Receiver<LeaderState>, Duration)>,
    pub live_view: LiveView,
}

/// How a listener serves the endpoints.
pub(crate) enum Exposure {
    /// Plain HTTP, every endpoint open to whoever can connect.
    Plain,
    /// HTTPS, every request authenticated and authorized through the API server.
    Secure {
        tls: TlsAcceptor,
        auth: Arc<DelegatedAuth>,
    },
}

pub(crate) async fn serve(listener: TcpListener, health: Health, exposure: Exposure) {
    // GET routes answer HEAD too.
    let router = Router::new()
        .route("/metrics", get(metrics))
        .route("/healthz", get(live))
        .route("/livez", get(live))
        .route("/readyz", get(ready))
        .route("/debug/controllers", get(page))
        .route("/debug/controllers/state", get(live_state))
        .route("/debug/controllers/object", get(object))
        .route("/debug/controllers/decisions", get(decisions))
        .with_state(health);
    let (router, tls) = match exposure {
        Exposure::Plain => (router, None),
        Exposure::Secure { tls, auth } => (
            router.layer(middleware::from_fn_with_state(auth, authorize)),
            Some(tls),
        ),
    };
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let router = router.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            match tls {
                None => serve_connection(stream, router).await,
                Some(tls) => {
                    match tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => serve_connection(stream, router).await,
                        Ok(Err(e)) => tracing::debug!(error = %e, "TLS handshake failed"),
                        Err(_) => tracing::debug!("TLS handshake timed out"),
                    }
                }
            }
        });
    }
}

async fn serve_connection<S>(stream: S, router: Router)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT);
    let service = TowerToHyperService::new(router);
    if let Err(e) = builder
        .serve_connection(TokioIo::new(stream), service)
        .await
    {
        tracing::debug!(error = %e, "metrics connection ended with an error");
    }
}

/// The secure port's gate: every request passes `DelegatedAuth::check` before its handler runs.
async fn authorize(
    State(auth): State<Arc<DelegatedAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let authorization = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let verdict = auth
        .check(
            authorization,
            request.method().as_str(),
            request.uri().path(),
        )
        .await;
    match verdict {
        Verdict::Allowed => next.run(request).await,
        Verdict::Unauthorized(reason) => {
            tracing::debug!(%reason, path = request.uri().path(), "unauthenticated request");
            (StatusCode::UNAUTHORIZED, "Unauthorized\n").into_response()
        }
        Verdict::Forbidden(reason) => {
            (StatusCode::FORBIDDEN, format!("{reason}\n")).into_response()
        }
        Verdict::ReviewFailed(reason) => {
            tracing::warn!(%reason, path = request.uri().path(), "could not authorize a request");
            (StatusCode::INTERNAL_SERVER_ERROR, "Internal Server Error\n").into_response()
        }
    }
}

async fn metrics(State(health): State<Health>) -> Response {
    let mut body = Vec::new();
    match TextEncoder::new().encode(&health.registry.gather(), &mut body) {
        Ok(()) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        crate::live_view::PAGE,
    )
        .into_response()
}

/// `?kind=&family=&namespace=&name=`: one object's tree, queue state, expectations and decisions.
async fn object(State(health): State<Health>, Query(query): Query<ObjectQuery>) -> Response {
    match health.live_view.object(&query) {
        Ok(view) => Json(view).into_response(),
        Err(e) => (StatusCode::BAD_REQUEST, e.to_string()).into_response(),
    }
}

async fn live_state(State(health): State<Health>) -> Json<ManagerView> {
    Json(health.live_view.state())
}

/// `?controller=&family=&kind=&namespace=&name=&after=&limit=`, all optional; newest first.
async fn decisions(
    State(health): State<Health>,
    Query(filter): Query<DecisionFilter>,
) -> Json<Vec<Decision>> {
    Json(health.live_view.decisions(&filter))
}

async fn live(State(health): State<Health>) -> (StatusCode, String) {
    if let Some((state, lease_duration)) = &health.leader {
        match *state.borrow() {
            LeaderState::Leading { renewed }
                if renewed.elapsed() > *lease_duration + LEASE_HEALTH_SLACK =>
            {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!(
                        "leader lease last renewed {:.0}s ago",
                        renewed.elapsed().as_secs_f64()
                    ),
                );
            }
            LeaderState::Lost => {
                return (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "lost the leader lease".into(),
                );
            }
            _ => {}
        }
    }
    (StatusCode::OK, "ok".into())
}

async fn ready(State(health): State<Health>) -> (StatusCode, &'static str) {
    if health.caches_synced.load(Ordering::Acquire) {
        (StatusCode::OK, "ok")
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "informer caches not synced",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn start(health: Health) -> std::net::SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(serve(listener, health, Exposure::Plain));
        addr
    }

    /// Sends raw HTTP/1.1 requests on one connection and returns the raw answer.
    async fn exchange(addr: std::net::SocketAddr, requests: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(requests.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.unwrap();
        String::from_utf8_lossy(&answer).into_owned()
    }

    fn health(synced: bool) -> Health {
        let registry = Registry::new();
        let counter = prometheus::IntCounter::new("demo_total", "demo").unwrap();
        counter.inc();
        registry.register(Box::new(counter)).unwrap();
        Health {
            registry,
            caches_synced: Arc::new(AtomicBool::new(synced)),
            leader: None,
            live_view: LiveView::new(mini_kcm_runtime::decisions::DecisionLog::disabled()),
        }
    }

    #[tokio::test]
    async fn keep_alive_head_and_readiness() {
        let addr = start(health(false)).await;
        let answer = exchange(
            addr,
            "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n\
             HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n\
             GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        // Three answers on one connection, in order.
        let statuses: Vec<&str> = answer
            .lines()
            .filter(|l| l.starts_with("HTTP/1.1"))
            .collect();
        assert_eq!(
            statuses,
            [
                "HTTP/1.1 200 OK",
                "HTTP/1.1 200 OK",
                "HTTP/1.1 503 Service Unavailable"
            ],
            "{answer}"
        );
        assert!(answer.contains("demo_total 1"), "{answer}");
        assert!(answer.contains("informer caches not synced"), "{answer}");
    }

    /// The page is served as HTML; the object endpoint answers JSON (before the controllers exist: an
    /// empty view) and refuses unknown kinds with a reason.
    #[tokio::test]
    async fn live_view_page_and_object_endpoint() {
        let addr = start(health(true)).await;
        let answer = exchange(
            addr,
            "GET /debug/controllers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains("text/html"), "{answer}");
        assert!(answer.contains("mini-kcm live view"), "{answer}");

        let answer = exchange(
            addr,
            "GET /debug/controllers/object?kind=deploy&namespace=ns&name=web HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        let body = answer.split("\r\n\r\n").nth(1).unwrap_or_default();
        let view: crate::object_view::ObjectView = serde_json::from_str(body).unwrap();
        assert_eq!(
            (view.kind.as_str(), view.family.as_str(), view.name.as_str()),
            ("Deployment", "apps", "web")
        );
        assert!(!view.controller_running && !view.found);

        let answer = exchange(
            addr,
            "GET /debug/controllers/object?kind=pod&name=web HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        assert!(answer.contains("unknown kind"), "{answer}");
    }

    #[tokio::test]
    async fn an_overdue_lease_fails_liveness() {
        let mut h = health(true);
        let renewed = tokio::time::Instant::now() - Duration::from_secs(60);
        let (_tx, rx) = watch::channel(LeaderState::Leading { renewed });
        h.leader = Some((rx, Duration::from_secs(15)));
        let addr = start(h).await;
        let answer = exchange(
            addr,
            "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 500 Internal Server Error"),
            "{answer}"
        );
        assert!(answer.contains("leader lease last renewed"), "{answer}");
    }
}
