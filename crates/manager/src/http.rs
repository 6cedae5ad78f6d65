//! The manager's HTTP endpoints: `/metrics` (Prometheus text), `/healthz` and `/livez` (liveness: fails
//! when this replica leads but its lease renewal is overdue), `/readyz` (readiness: the informer caches
//! have synced), `/metrics/slis` (the health checks' results, `crate::slis`), kube-controller-manager's
//! z-pages `/flagz`, `/statusz` and `/configz` (`crate::zpages`), and the live view's data under
//! `/debug/controllers` (`crate::live_view`).
//!
//! They are served two ways: on the plain `--metrics-addr` (loopback by default: the local user's
//! `mini-kcm explain` and `up`), everything open; on the secure port, over TLS (`crate::serving_cert`),
//! each request checked by `crate::secure_serving` first, as kube-controller-manager's port 10257. A
//! connection's client certificate is judged once after the handshake and handed to each of its
//! requests as an extension.
//!
//! axum routes the requests; hyper serves the connections with keep-alive and a header-read timeout,
//! so an idle or slow client cannot hold a connection task forever (the TLS handshake has the same
//! bound).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::Extension;
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, StatusCode, Uri, header};
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

use mini_kcm_runtime::observability::decisions::{Decision, DecisionFilter};
use mini_kcm_runtime::observability::inspect::ManagerView;

use crate::leader_election::LeaderState;
use crate::live_view::LiveView;
use crate::object_view::ObjectQuery;
use crate::secure_serving::{DelegatedAuth, PeerIdentity, SecurePort, Verdict};
use crate::slis::HealthSlis;
use crate::zpages::Zpages;

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
    pub zpages: Arc<Zpages>,
    pub slis: HealthSlis,
}

/// The paths `serve` routes (what `/statusz` lists, by first segment).
pub(crate) const PATHS: [&str; 12] = [
    "/metrics",
    "/metrics/slis",
    "/healthz",
    "/livez",
    "/readyz",
    "/flagz",
    "/statusz",
    "/configz",
    "/debug/controllers",
    "/debug/controllers/state",
    "/debug/controllers/object",
    "/debug/controllers/decisions",
];

/// How a listener serves the endpoints.
pub(crate) enum Exposure {
    /// Plain HTTP, every endpoint open to whoever can connect.
    Plain,
    /// HTTPS, every request authenticated and authorized through the API server.
    Secure(SecurePort),
}

pub(crate) async fn serve(listener: TcpListener, health: Health, exposure: Exposure) {
    // GET routes answer HEAD too.
    let mut router = Router::new();
    // As upstream, a z-page whose feature gate is off is not installed at all.
    if health.zpages.flagz_on {
        router = router.route("/flagz", get(flagz));
    }
    if health.zpages.statusz_on {
        router = router.route("/statusz", get(statusz));
    }
    let router = router
        .route("/metrics", get(metrics))
        .route("/metrics/slis", get(slis).delete(reset_slis))
        .route("/healthz", get(healthz))
        .route("/livez", get(livez))
        .route("/readyz", get(ready))
        .route("/configz", get(configz))
        .route("/debug/controllers", get(page))
        .route("/debug/controllers/state", get(live_state))
        .route("/debug/controllers/object", get(object))
        .route("/debug/controllers/decisions", get(decisions))
        .with_state(health);
    let (router, tls) = match exposure {
        Exposure::Plain => (router, None),
        Exposure::Secure(SecurePort { tls, auth }) => (
            router.layer(middleware::from_fn_with_state(auth.clone(), authorize)),
            Some((tls, auth)),
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
                Some((tls, auth)) => {
                    match tokio::time::timeout(HEADER_READ_TIMEOUT, tls.accept(stream)).await {
                        Ok(Ok(stream)) => {
                            let peer = auth.identify_peer(stream.get_ref().1.peer_certificates());
                            let router = router.layer(Extension(Arc::new(peer)));
                            serve_connection(stream, router).await
                        }
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
    let peer = request
        .extensions()
        .get::<Arc<PeerIdentity>>()
        .cloned()
        .unwrap_or_default();
    let verdict = auth
        .check(
            &peer,
            request.headers(),
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
    encode(&health.registry)
}

fn encode(registry: &Registry) -> Response {
    let mut body = Vec::new();
    match TextEncoder::new().encode(&registry.gather(), &mut body) {
        Ok(()) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn slis(State(health): State<Health>) -> Response {
    encode(&health.slis.registry)
}

async fn reset_slis(State(health): State<Health>) -> &'static str {
    health.slis.reset();
    "metrics reset\n"
}

async fn flagz(State(health): State<Health>, headers: HeaderMap, uri: Uri) -> Response {
    health.zpages.flagz(&headers, uri.query())
}

async fn statusz(State(health): State<Health>, headers: HeaderMap, uri: Uri) -> Response {
    health.zpages.statusz(&headers, uri.query())
}

async fn configz(State(health): State<Health>) -> Response {
    health.zpages.configz()
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

async fn healthz(State(health): State<Health>) -> (StatusCode, String) {
    liveness(&health, "healthz")
}

async fn livez(State(health): State<Health>) -> (StatusCode, String) {
    liveness(&health, "livez")
}

/// The liveness checks, each recorded for `/metrics/slis` under upstream's check names (`ping`, and
/// `leaderElection` with leader election on).
fn liveness(health: &Health, endpoint: &str) -> (StatusCode, String) {
    health.slis.observe("ping", endpoint, true);
    if let Some((state, lease_duration)) = &health.leader {
        let failure = match *state.borrow() {
            LeaderState::Leading { renewed }
                if renewed.elapsed() > *lease_duration + LEASE_HEALTH_SLACK =>
            {
                Some(format!(
                    "leader lease last renewed {:.0}s ago",
                    renewed.elapsed().as_secs_f64()
                ))
            }
            LeaderState::Lost => Some("lost the leader lease".into()),
            _ => None,
        };
        health
            .slis
            .observe("leaderElection", endpoint, failure.is_none());
        if let Some(failure) = failure {
            return (StatusCode::INTERNAL_SERVER_ERROR, failure);
        }
    }
    (StatusCode::OK, "ok".into())
}

/// Readiness: `ping` and `informer-sync` (upstream's name for the caches' check).
async fn ready(State(health): State<Health>) -> (StatusCode, &'static str) {
    health.slis.observe("ping", "readyz", true);
    let synced = health.caches_synced.load(Ordering::Acquire);
    health.slis.observe("informer-sync", "readyz", synced);
    if synced {
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
    use mini_kcm_runtime::switches::safeties::{Safeties, Safety};
    use std::time::SystemTime;
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

    fn options() -> crate::ManagerOptions {
        crate::ManagerOptions {
            flags: [("concurrent-deployment-syncs", "5"), ("kinds", "copies")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into(),
            ..Default::default()
        }
    }

    /// One request on its own connection: the status line, the headers (lower case names) and the body.
    async fn get(
        addr: std::net::SocketAddr,
        method: &str,
        path: &str,
        accept: Option<&str>,
    ) -> (String, String, String) {
        let accept = accept
            .map(|a| format!("Accept: {a}\r\n"))
            .unwrap_or_default();
        let answer = exchange(
            addr,
            &format!("{method} {path} HTTP/1.1\r\nHost: x\r\n{accept}Connection: close\r\n\r\n"),
        )
        .await;
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
        let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
        (status.to_string(), headers.to_lowercase(), body.to_string())
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
            live_view: LiveView::new(
                mini_kcm_runtime::observability::decisions::DecisionLog::disabled(),
                &Safeties::all_on(),
                Duration::ZERO,
            ),
            zpages: Arc::new(Zpages::new(&options(), SystemTime::now(), &PATHS)),
            slis: HealthSlis::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000))
                .unwrap(),
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

    /// A manager with safety mechanisms switched off says so in its state, which the page shows as a
    /// banner; an ordinary one lists none.
    #[tokio::test]
    async fn the_state_lists_the_safety_mechanisms_switched_off() {
        let state = |health: Health| async move {
            let addr = start(health).await;
            let answer = exchange(
                addr,
                "GET /debug/controllers/state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            .await;
            let body = answer
                .split("\r\n\r\n")
                .nth(1)
                .unwrap_or_default()
                .to_string();
            serde_json::from_str::<ManagerView>(&body).unwrap()
        };
        let ordinary = state(health(true)).await;
        assert!(ordinary.switched_off.is_empty() && ordinary.watch_delay_ms == 0);

        let mut broken = health(true);
        broken.live_view = LiveView::new(
            mini_kcm_runtime::observability::decisions::DecisionLog::disabled(),
            &Safeties::without([Safety::SlowStart, Safety::Expectations]),
            Duration::from_secs(2),
        );
        let view = state(broken).await;
        let names: Vec<&str> = view
            .switched_off
            .iter()
            .map(|s| s.mechanism.as_str())
            .collect();
        assert_eq!(names, ["expectations", "slow-start"]);
        assert!(view.switched_off[0].risk.contains("duplicate pods"));
        assert_eq!(view.watch_delay_ms, 2000);
        assert!(crate::live_view::PAGE.contains("switched-off"));
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

    const FLAGZ_V1BETA1: &str = "application/json;as=Flagz;g=config.k8s.io;v=v1beta1";

    /// With `ComponentFlagz` / `ComponentStatusz` off, as upstream, the paths are not served.
    #[tokio::test]
    async fn z_pages_whose_gate_is_off_are_not_found() {
        use mini_kcm_runtime::switches::features::{Feature, FeatureGates};
        let mut h = health(true);
        let gates = FeatureGates::default()
            .with(Feature::ComponentFlagz, false)
            .with(Feature::ComponentStatusz, false);
        let options = crate::ManagerOptions {
            feature_gates: gates,
            ..options()
        };
        h.zpages = Arc::new(Zpages::new(&options, SystemTime::now(), &PATHS));
        let addr = start(h).await;
        assert_eq!(
            get(addr, "GET", "/flagz", None).await.0,
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            get(addr, "GET", "/statusz", None).await.0,
            "HTTP/1.1 404 Not Found"
        );
        assert_eq!(
            get(addr, "GET", "/configz", None).await.0,
            "HTTP/1.1 200 OK"
        );
    }

    /// `/flagz`: upstream's text by default (title, warning, one sorted `name<delimiter>value` line per
    /// flag), the `config.k8s.io` object when asked for, 406 with a `Status` for anything else.
    #[tokio::test]
    async fn flagz_text_by_default_and_the_object_on_request() {
        let addr = start(health(true)).await;
        let (status, headers, body) = get(addr, "GET", "/flagz", None).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: text/plain; charset=utf-8"),
            "{headers}"
        );
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines[..2], ["", "mini-kcm flagz"], "{body}");
        assert!(
            lines[2].starts_with("Warning: This endpoint is not meant to be machine parseable")
        );
        // One delimiter of upstream's four, the same on every line; flags sorted by name.
        let delimiter = lines[3]
            .strip_prefix("concurrent-deployment-syncs")
            .and_then(|rest| rest.strip_suffix('5'))
            .unwrap_or_else(|| panic!("{body}"));
        assert!([":", ": ", "=", " "].contains(&delimiter), "{delimiter:?}");
        assert_eq!(lines[4], format!("kinds{delimiter}copies"));
        assert_eq!(lines.len(), 5, "{body}");
        // Upstream keeps its first text answer.
        assert_eq!(get(addr, "GET", "/flagz", Some("text/plain")).await.2, body);

        let (status, headers, body) = get(addr, "GET", "/flagz", Some(FLAGZ_V1BETA1)).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: application/json\r\n"),
            "{headers}"
        );
        assert!(!headers.contains("warning:"), "{headers}");
        let object: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(
            object,
            serde_json::json!({
                "kind": "Flagz",
                "apiVersion": "config.k8s.io/v1beta1",
                "metadata": {"name": "mini-kcm"},
                "flags": {"concurrent-deployment-syncs": "5", "kinds": "copies"},
            })
        );

        let (status, headers, body) = get(
            addr,
            "GET",
            "/flagz",
            Some("application/yaml;as=Flagz;g=config.k8s.io;v=v1alpha1"),
        )
        .await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: application/yaml"),
            "{headers}"
        );
        assert!(
            headers.contains("warning: 299 - \"this version of the flagz endpoint is deprecated"),
            "{headers}"
        );
        assert!(
            body.contains("kind: Flagz") && body.contains("apiVersion: config.k8s.io/v1alpha1"),
            "{body}"
        );

        for refused in [
            "application/json",
            "text/html",
            "application/json;as=Flagz;g=config.k8s.io;v=v2",
        ] {
            let (status, headers, body) = get(addr, "GET", "/flagz", Some(refused)).await;
            assert_eq!(status, "HTTP/1.1 406 Not Acceptable", "{refused}");
            assert!(
                headers.contains("content-type: application/json"),
                "{headers}"
            );
            let object: serde_json::Value = serde_json::from_str(&body).unwrap();
            assert_eq!(object["kind"], "Status");
            assert_eq!(object["reason"], "NotAcceptable");
            assert_eq!(object["code"], 406);
            assert_eq!(
                object["message"],
                "only the following media types are accepted: application/json, application/yaml, text/plain"
            );
        }
    }

    /// `/statusz`: the same negotiation; start, uptime, versions and the served paths' first segments.
    #[tokio::test]
    async fn statusz_text_by_default_and_the_object_on_request() {
        let addr = start(health(true)).await;
        let (status, headers, body) = get(addr, "GET", "/statusz", None).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: text/plain; charset=utf-8"),
            "{headers}"
        );
        assert!(body.starts_with("\nmini-kcm statusz\nWarning: "), "{body}");
        for label in [
            "Started",
            "Up",
            "Rust version",
            "Binary version",
            "Emulation version",
            "Paths",
        ] {
            assert!(
                body.lines().any(|l| l.starts_with(label)),
                "{label}: {body}"
            );
        }
        assert!(
            body.contains("/configz /debug /flagz /healthz /livez /metrics /readyz /statusz\n"),
            "{body}"
        );
        assert!(body.contains(" 0 hr 00 min 0"), "{body}");

        let (status, headers, body) = get(
            addr,
            "GET",
            "/statusz",
            Some("application/json;as=Statusz;g=config.k8s.io;v=v1beta1"),
        )
        .await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: application/json"),
            "{headers}"
        );
        let object: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(object["kind"], "Statusz");
        assert_eq!(object["apiVersion"], "config.k8s.io/v1beta1");
        assert_eq!(object["metadata"]["name"], "mini-kcm");
        assert_eq!(object["binaryVersion"], crate::VERSION.version);
        assert!(
            object["goVersion"].as_str().unwrap().starts_with("rustc "),
            "{body}"
        );
        assert!(object["uptimeSeconds"].as_u64().unwrap() < 60, "{body}");
        let started = object["startTime"].as_str().unwrap();
        assert!(
            started.parse::<k8s_openapi::jiff::Timestamp>().is_ok() && started.ends_with('Z'),
            "{started}"
        );
        assert_eq!(
            object["paths"],
            serde_json::json!([
                "/configz", "/debug", "/flagz", "/healthz", "/livez", "/metrics", "/readyz",
                "/statusz"
            ])
        );
        // The flagz object is not a statusz answer.
        let (status, ..) = get(addr, "GET", "/statusz", Some(FLAGZ_V1BETA1)).await;
        assert_eq!(status, "HTTP/1.1 406 Not Acceptable");
    }

    /// `/configz`: JSON under kube-controller-manager's key, upstream's field names.
    #[tokio::test]
    async fn configz_is_the_component_config_as_json() {
        let addr = start(health(true)).await;
        let (status, headers, body) = get(addr, "GET", "/configz", Some("text/plain")).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: application/json"),
            "{headers}"
        );
        let object: serde_json::Value = serde_json::from_str(&body).unwrap();
        let kcm = &object["kubecontrollermanager.config.k8s.io"];
        assert_eq!(kcm["kind"], "KubeControllerManagerConfiguration");
        assert_eq!(kcm["DeploymentController"]["ConcurrentDeploymentSyncs"], 5);
        assert_eq!(kcm["ReplicaSetController"]["ConcurrentRSSyncs"], 5);
        assert_eq!(kcm["DaemonSetController"]["ConcurrentDaemonSetSyncs"], 2);
        assert_eq!(kcm["Generic"]["MinResyncPeriod"], "12h0m0s");
        assert_eq!(kcm["Generic"]["Controllers"], serde_json::json!(["*"]));
        assert_eq!(kcm["Generic"]["ClientConnection"]["burst"], 30);
        assert_eq!(kcm["Generic"]["LeaderElection"]["leaderElect"], false);
        assert_eq!(object["minikcm.dev"]["workQueuePriorities"], true);
    }

    /// Each health evaluation records its checks on `/metrics/slis` (not on `/metrics`); DELETE resets.
    #[tokio::test]
    async fn health_checks_feed_the_sli_metrics() {
        let mut h = health(false);
        let (_tx, rx) = watch::channel(LeaderState::Lost);
        h.leader = Some((rx, Duration::from_secs(15)));
        let addr = start(h).await;
        assert_eq!(
            get(addr, "GET", "/readyz", None).await.0,
            "HTTP/1.1 503 Service Unavailable"
        );
        assert_eq!(
            get(addr, "GET", "/readyz", None).await.0,
            "HTTP/1.1 503 Service Unavailable"
        );
        assert_eq!(
            get(addr, "GET", "/livez", None).await.0,
            "HTTP/1.1 500 Internal Server Error"
        );
        let (status, headers, body) = get(addr, "GET", "/metrics/slis", None).await;
        assert_eq!(status, "HTTP/1.1 200 OK");
        assert!(
            headers.contains("content-type: text/plain; version=0.0.4"),
            "{headers}"
        );
        for series in [
            "kubernetes_healthcheck{name=\"informer-sync\",type=\"readyz\"} 0",
            "kubernetes_healthcheck{name=\"ping\",type=\"readyz\"} 1",
            "kubernetes_healthcheck{name=\"leaderElection\",type=\"livez\"} 0",
            "kubernetes_healthchecks_total{name=\"informer-sync\",status=\"error\",type=\"readyz\"} 2",
            "kubernetes_healthchecks_total{name=\"ping\",status=\"success\",type=\"livez\"} 1",
            "# TYPE kubernetes_healthcheck gauge",
            "# TYPE kubernetes_healthchecks_total counter",
            "process_start_time_seconds 1700000000",
        ] {
            assert!(body.contains(series), "{series}:\n{body}");
        }
        assert!(!body.contains("type=\"healthz\""), "{body}");
        assert!(
            !get(addr, "GET", "/metrics", None)
                .await
                .2
                .contains("kubernetes_healthcheck")
        );

        let (status, _, body) = get(addr, "DELETE", "/metrics/slis", None).await;
        assert_eq!(
            (status.as_str(), body.as_str()),
            ("HTTP/1.1 200 OK", "metrics reset\n")
        );
        let body = get(addr, "GET", "/metrics/slis", None).await.2;
        assert!(!body.contains("kubernetes_healthcheck"), "{body}");
    }
}
