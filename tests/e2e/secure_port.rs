//! The secure port, as kube-controller-manager's: the manager runs as the service account of
//! deploy/in-cluster with exactly its roles (so `tokenreviews` and `subjectaccessreviews` are proven
//! sufficient), serves HTTPS on a self-signed certificate, and the API server decides who reads what:
//! - `/healthz`, `/readyz`, `/livez` need no credentials (the always-allowed paths);
//! - no token: `system:anonymous`, 403; a token the API server rejects: 401;
//! - a service account without a role: 403; bound to `mini-kcm-metrics-reader`: `/metrics`,
//!   `/metrics/slis`, `/flagz` and `/statusz` 200, `/debug/controllers` and `/configz` 403; bound to
//!   `mini-kcm-debug-viewer`: the reverse; the plane's admin (`system:masters`): everything;
//! - a removed binding stops working within the 10 s the answers are cached;
//! - plain HTTP on the secure port gets no HTTP answer.

use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::DeleteParams;
use mini_kcm_e2e::TestManager;
use mini_kcm_e2e::in_cluster_kit::{
    DEBUG_VIEWER, METRICS_READER, https_get, service_account_with_role,
};
use mini_kcm_manager::{AlwaysAllowPaths, Kinds, ManagerOptions, SecureServing, ServingCert};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use secrecy::ExposeSecret;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_server_decides_who_reads_the_secure_port() {
    let ns = TestNamespace::create(plane(), "secure-port").await;
    mini_kcm_e2e::apply_access_objects(ns.plane, &["deploy/in-cluster"]);
    let admin = mini_kcm_local_plane::config_from_kubeconfig(&ns.plane.kubeconfig)
        .await
        .unwrap();
    let admin_token = admin
        .auth_info
        .token
        .as_ref()
        .map(|t| t.expose_secret().to_string())
        .expect("the plane's kubeconfig holds a token");
    let mut config = admin.clone();
    config.auth_info = kube::config::AuthInfo {
        token: Some(mini_kcm_e2e::service_account_token(&ns.client).await.into()),
        ..Default::default()
    };
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap();
    let manager = TestManager::start_as(
        &ns,
        ManagerOptions {
            kinds: Kinds::Copies,
            secure_serving: Some(SecureServing {
                addr,
                cert: ServingCert::SelfSigned,
                always_allow: AlwaysAllowPaths::default(),
                client_ca_file: None,
                request_header: None,
            }),
            ..Default::default()
        },
        Some(config),
    )
    .await;

    let reader = service_account_with_role(&ns, "reader", Some(METRICS_READER)).await;
    let viewer = service_account_with_role(&ns, "viewer", Some(DEBUG_VIEWER)).await;
    let nobody = service_account_with_role(&ns, "nobody", None).await;

    // Open paths first: /readyz turns 200 once the caches synced.
    wait_status(addr, "/readyz", None, 200).await;
    let cases: [(&str, Option<&str>, u16, &str); 26] = [
        ("/healthz", None, 200, "ok"),
        ("/livez", None, 200, "ok"),
        (
            "/metrics",
            None,
            403,
            "User \"system:anonymous\" cannot get path \"/metrics\"",
        ),
        ("/metrics", Some("not-a-token"), 401, "Unauthorized"),
        (
            "/metrics",
            Some(&nobody),
            403,
            ":nobody\" cannot get path \"/metrics\"",
        ),
        ("/metrics", Some(&reader), 200, "workqueue_adds_total"),
        (
            "/debug/controllers",
            Some(&reader),
            403,
            "cannot get path \"/debug/controllers\"",
        ),
        (
            "/debug/controllers/state",
            Some(&viewer),
            200,
            "\"controllers\"",
        ),
        (
            "/debug/controllers",
            Some(&viewer),
            200,
            "mini-kcm live view",
        ),
        (
            "/metrics",
            Some(&viewer),
            403,
            "cannot get path \"/metrics\"",
        ),
        ("/metrics", Some(&admin_token), 200, "workqueue_adds_total"),
        (
            "/debug/controllers/state",
            Some(&admin_token),
            200,
            "\"controllers\"",
        ),
        // kube-controller-manager's other endpoints: none of them open.
        (
            "/metrics/slis",
            None,
            403,
            "User \"system:anonymous\" cannot get path \"/metrics/slis\"",
        ),
        (
            "/flagz",
            None,
            403,
            "User \"system:anonymous\" cannot get path \"/flagz\"",
        ),
        (
            "/statusz",
            None,
            403,
            "User \"system:anonymous\" cannot get path \"/statusz\"",
        ),
        (
            "/configz",
            None,
            403,
            "User \"system:anonymous\" cannot get path \"/configz\"",
        ),
        ("/flagz", Some(&nobody), 403, "cannot get path \"/flagz\""),
        // The reader: what system:monitoring grants (the SLIs were recorded by the /readyz polls).
        (
            "/metrics/slis",
            Some(&reader),
            200,
            "kubernetes_healthcheck{name=\"informer-sync\",type=\"readyz\"} 1",
        ),
        ("/flagz", Some(&reader), 200, "mini-kcm flagz"),
        ("/statusz", Some(&reader), 200, "mini-kcm statusz"),
        (
            "/configz",
            Some(&reader),
            403,
            "cannot get path \"/configz\"",
        ),
        // The debug viewer: the configuration, not the metrics.
        ("/configz", Some(&viewer), 200, "\"ConcurrentRSSyncs\":5"),
        (
            "/statusz",
            Some(&viewer),
            403,
            "cannot get path \"/statusz\"",
        ),
        (
            "/metrics/slis",
            Some(&viewer),
            403,
            "cannot get path \"/metrics/slis\"",
        ),
        ("/flagz", Some(&admin_token), 200, "mini-kcm flagz"),
        (
            "/configz",
            Some(&admin_token),
            200,
            "kubecontrollermanager.config.k8s.io",
        ),
    ];
    for (path, token, expected, says) in cases {
        let (status, body) = https_get(addr, path, token)
            .await
            .unwrap_or_else(|| panic!("{path}: no answer on {addr}"));
        let who = match token {
            None => "no token".to_string(),
            Some(t) if t == reader => "reader".into(),
            Some(t) if t == viewer => "viewer".into(),
            Some(t) if t == nobody => "nobody".into(),
            Some(t) if t == admin_token => "admin".into(),
            Some(t) => format!("token {t:?}"),
        };
        println!("{who}: {path} -> {status}");
        assert!(
            status == expected && body.contains(says),
            "{who}: {path} answered {status}, expected {expected} saying {says:?}:\n{body}"
        );
    }

    // No plain HTTP on the secure port.
    let plain = mini_kcm_e2e::in_cluster_kit::http_answer(addr, "/healthz").await;
    assert!(
        !plain.starts_with("HTTP/"),
        "plain HTTP answered: {plain:?}"
    );

    // A revoked role: the reader is refused once the cached answer (10 s) is gone.
    let bindings: Api<ClusterRoleBinding> = Api::all(ns.client.clone());
    bindings
        .delete(&format!("{}-reader", ns.name), &DeleteParams::default())
        .await
        .unwrap();
    let revoked = Instant::now();
    wait_status(addr, "/metrics", Some(&reader), 403).await;
    println!(
        "the reader refused {:.1}s after its binding was deleted",
        revoked.elapsed().as_secs_f64()
    );
    manager.stop().await;
}

/// Polls `path` until it answers `status` (a condition the manager reaches by itself: caches synced, a
/// cached answer expired), failing after a minute.
async fn wait_status(addr: std::net::SocketAddr, path: &str, token: Option<&str>, status: u16) {
    let deadline = Instant::now() + mini_kcm_e2e::TIMEOUT;
    loop {
        let answer = https_get(addr, path, token).await;
        if answer.as_ref().is_some_and(|(s, _)| *s == status) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{path} never answered {status}; last: {answer:?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
