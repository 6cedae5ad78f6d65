//! The connection to the API server: HTTP/2 over TLS, one connection per client, as client-go uses.
//!
//! Why: kube's default client speaks HTTP/1.1, where each request in flight needs a connection of its
//! own. A controller that creates a batch of pods at once (slow start: 1, 2, 4, 8, … in parallel) then
//! opens a TLS connection per pod of the batch the first time, each a full handshake (key exchange,
//! certificate verification) before the request can leave, and on one thread the handshakes queue up:
//! measured on the DaemonSet benchmark, a batch of 8 creations reached the API server spread over
//! 60 ms against 3 ms for kube-controller-manager, whose client multiplexes every request of a
//! controller over one HTTP/2 connection. With HTTP/2 (offered by ALPN, so a server without it still
//! gets HTTP/1.1) the requests of a client share one connection, and a batch leaves at once.
//!
//! Dead connections: HTTP/2 pings after 30 s without a frame and gives up 15 s later, client-go's
//! `ReadIdleTimeout` and `PingTimeout`; a watch on a connection that died silently then fails and the
//! informer restarts it on a new connection.
//!
//! What kube's builder does and this one does not: proxies (`proxy_url`), a fixed TLS server name
//! (`tls_server_name`), credentials from an exec plugin (whose certificates expire), and a read
//! timeout. A configuration with any of them gets kube's own HTTP/1.1 stack instead
//! ([`kube_builder`]), so nothing a kubeconfig can say is ignored. kube's write timeout (on by default)
//! has no counterpart here: on one shared connection the pings above find a connection that stopped
//! moving, as they do for client-go.

use std::time::Duration;

use http::{Request, Response};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use kube::client::retry::RetryPolicy;
use kube::client::{Body, ClientBuilder, ConfigExt, DynBody};
use tower::util::BoxService;
use tower::{BoxError, ServiceBuilder, ServiceExt};

/// The service kube's [`ClientBuilder`] wraps: requests in, boxed bodies out.
pub type Transport = BoxService<Request<Body>, Response<Box<DynBody>>, BoxError>;

/// After this long without a frame from the server, the client pings the connection.
const PING_AFTER_IDLE: Duration = Duration::from_secs(30);
/// A ping unanswered for this long closes the connection (and fails the requests on it).
const PING_TIMEOUT: Duration = Duration::from_secs(15);

/// Whether `config` needs something only kube's own builder does (see the module header).
pub fn needs_kube_builder(config: &kube::Config) -> bool {
    config.proxy_url.is_some()
        || config.tls_server_name.is_some()
        || config.auth_info.exec.is_some()
        || config.read_timeout.is_some()
}

/// A client builder whose requests go over HTTP/2 when the server offers it (the module header), or
/// kube's own builder when the configuration needs it.
pub fn client_builder(config: kube::Config) -> Result<ClientBuilder<Transport>, kube::Error> {
    if needs_kube_builder(&config) {
        return kube_builder(config);
    }
    let default_namespace = config.default_namespace.clone();
    let mut tcp = HttpConnector::new();
    tcp.enforce_http(false);
    tcp.set_connect_timeout(config.connect_timeout);
    tcp.set_nodelay(true);
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(config.rustls_client_config()?)
        .https_or_http()
        .enable_all_versions()
        .wrap_connector(tcp);
    let http = hyper_util::client::legacy::Builder::new(TokioExecutor::new())
        .timer(TokioTimer::new())
        .pool_timer(TokioTimer::new())
        .http2_keep_alive_interval(PING_AFTER_IDLE)
        .http2_keep_alive_timeout(PING_TIMEOUT)
        .http2_keep_alive_while_idle(true)
        .build::<_, Body>(connector);
    let service = ServiceBuilder::new()
        .layer(config.base_uri_layer())
        .option_layer(
            config
                .default_retry
                .then(|| tower::retry::RetryLayer::new(RetryPolicy::server_retry())),
        )
        .option_layer(config.auth_layer()?)
        .layer(config.extra_headers_layer()?)
        .map_err(BoxError::from)
        .service(http)
        .map_response(|response| {
            response.map(|body| {
                Box::new(http_body_util::BodyExt::map_err(body, BoxError::from)) as Box<DynBody>
            })
        })
        .boxed();
    Ok(ClientBuilder::new(service, default_namespace))
}

/// kube's own HTTP/1.1 stack, boxed to the same type.
pub fn kube_builder(config: kube::Config) -> Result<ClientBuilder<Transport>, kube::Error> {
    ClientBuilder::try_from(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> kube::Config {
        kube::Config::new(http::Uri::from_static("https://127.0.0.1:6443"))
    }

    #[test]
    fn a_plain_configuration_gets_the_http2_transport() {
        let config = config();
        // kube sets a write timeout by default; the pings stand in for it.
        assert!(config.write_timeout.is_some());
        assert!(!needs_kube_builder(&config));
    }

    #[test]
    fn proxies_server_names_exec_credentials_and_a_read_timeout_get_kubes_builder() {
        let mut proxied = config();
        proxied.proxy_url = Some(http::Uri::from_static("http://proxy:3128"));
        let mut named = config();
        named.tls_server_name = Some("kubernetes".into());
        let mut exec = config();
        exec.auth_info.exec = Some(kube::config::ExecConfig {
            command: Some("credentials".into()),
            ..Default::default()
        });
        let mut timed = config();
        timed.read_timeout = Some(Duration::from_secs(5));
        for config in [proxied, named, exec, timed] {
            assert!(needs_kube_builder(&config));
        }
    }
}
