//! The secure port's certificates, as kube-controller-manager's:
//! - the serving pair is reloaded when its files change, through a Secret volume's `..data` symlink
//!   swap and by an in-place rewrite: new handshakes present the new certificate while a keep-alive
//!   connection made before keeps working, and no request fails meanwhile;
//! - `--client-ca-file`: a client certificate signed by the CA is its CN (bound by RBAC like any user)
//!   with its O's as groups (`system:masters` skips the review); one of an unknown CA passes the
//!   handshake but is refused (401) unless a valid token comes with it, as upstream.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::Api;
use kube::api::{ObjectMeta, PostParams};
use mini_kcm_e2e::TestManager;
use mini_kcm_e2e::in_cluster_kit::{METRICS_READER, any_server_connector};
use mini_kcm_manager::{AlwaysAllowPaths, Kinds, ManagerOptions, SecureServing, ServingCert};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use secrecy::ExposeSecret;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

type Tls = BufReader<tokio_rustls::client::TlsStream<tokio::net::TcpStream>>;

/// A new TLS connection, and the DER of the certificate the server presented on it.
async fn connect(
    addr: SocketAddr,
    identity: Option<&(CertificateDer<'static>, PrivateKeyDer<'static>)>,
) -> Result<(Tls, Vec<u8>), String> {
    let (connector, seen) = any_server_connector(identity);
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let tls = connector
        .connect(ServerName::IpAddress(addr.ip().into()), tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let presented = seen.lock().unwrap().clone();
    Ok((BufReader::new(tls), presented))
}

/// One HTTP/1.1 exchange on an open connection (kept open unless `close`): status and body.
async fn exchange(
    stream: &mut Tls,
    path: &str,
    token: Option<&str>,
    close: bool,
) -> Result<(u16, String), String> {
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    let connection = if close { "Connection: close\r\n" } else { "" };
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\n{authorization}{connection}\r\n");
    let io = |e: std::io::Error| format!("{path}: {e}");
    stream
        .get_mut()
        .write_all(request.as_bytes())
        .await
        .map_err(io)?;
    let mut status_line = String::new();
    stream.read_line(&mut status_line).await.map_err(io)?;
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("{path}: no status in {status_line:?}"))?;
    let mut length = 0;
    loop {
        let mut line = String::new();
        stream.read_line(&mut line).await.map_err(io)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value
                .trim()
                .parse()
                .map_err(|_| format!("{path}: {line}"))?;
        }
    }
    let mut body = vec![0; length];
    stream.read_exact(&mut body).await.map_err(io)?;
    Ok((status, String::from_utf8_lossy(&body).into_owned()))
}

/// A GET on a new connection: status and body.
async fn get(
    addr: SocketAddr,
    identity: Option<&(CertificateDer<'static>, PrivateKeyDer<'static>)>,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String), String> {
    let (mut stream, _) = connect(addr, identity).await?;
    exchange(&mut stream, path, token, true).await
}

async fn admin_token(plane: &PlaneInfo) -> String {
    let config = mini_kcm_local_plane::config_from_kubeconfig(&plane.kubeconfig)
        .await
        .unwrap();
    config
        .auth_info
        .token
        .as_ref()
        .map(|t| t.expose_secret().to_string())
        .expect("the plane's kubeconfig holds a token")
}

fn free_addr() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
}

fn secure(addr: SocketAddr, cert: ServingCert, client_ca_file: Option<PathBuf>) -> ManagerOptions {
    ManagerOptions {
        kinds: Kinds::Copies,
        secure_serving: Some(SecureServing {
            addr,
            cert,
            always_allow: AlwaysAllowPaths::default(),
            client_ca_file,
            request_header: None,
        }),
        ..Default::default()
    }
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("mini-kcm-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A new self-signed serving pair: PEM certificate, PEM key, and the certificate's DER.
fn serving_pair() -> (String, String, Vec<u8>) {
    let generated =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap();
    (
        generated.cert.pem(),
        generated.signing_key.serialize_pem(),
        generated.cert.der().to_vec(),
    )
}

/// The files as a Secret volume lays them out: `tls.crt -> ..data/tls.crt`, `..data -> ..<version>`.
fn secret_volume_update(dir: &Path, version: &str, cert: &str, key: &str) {
    let versioned = dir.join(format!("..{version}"));
    std::fs::create_dir_all(&versioned).unwrap();
    std::fs::write(versioned.join("tls.crt"), cert).unwrap();
    std::fs::write(versioned.join("tls.key"), key).unwrap();
    let staged = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&staged);
    std::os::unix::fs::symlink(format!("..{version}"), &staged).unwrap();
    // The swap the kubelet makes: one rename, both files change at once.
    std::fs::rename(&staged, dir.join("..data")).unwrap();
    for file in ["tls.crt", "tls.key"] {
        if !dir.join(file).exists() {
            std::os::unix::fs::symlink(format!("..data/{file}"), dir.join(file)).unwrap();
        }
    }
}

/// What the scraping client saw.
#[derive(Default)]
struct Scrapes {
    failures: Vec<String>,
    keep_alive_requests: usize,
    new_connections: usize,
    /// The certificate the latest new connection was given.
    presented: Vec<u8>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_serving_certificate_is_reloaded_without_dropping_connections() {
    let ns = TestNamespace::create(plane(), "cert-rotation").await;
    let token = admin_token(ns.plane).await;
    let dir = TempDir::new("cert-rotation");
    let (first_cert, first_key, first_der) = serving_pair();
    secret_volume_update(&dir.0, "v1", &first_cert, &first_key);
    let addr = free_addr();
    let cert = ServingCert::Files {
        cert: dir.0.join("tls.crt"),
        key: dir.0.join("tls.key"),
    };
    let manager = TestManager::start_as(&ns, secure(addr, cert, None), None).await;
    wait_until("the secure port answers /readyz", || async {
        matches!(get(addr, None, "/readyz", None).await, Ok((200, _)))
    })
    .await;

    // The scraper: one keep-alive connection scraping /metrics with the admin token, and a new
    // connection to /healthz each round, until told to stop.
    let (mut keep_alive, presented) = connect(addr, None).await.unwrap();
    assert_eq!(presented, first_der, "the first pair is served");
    let scrapes = Arc::new(Mutex::new(Scrapes::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let scraper = tokio::spawn({
        let (scrapes, stop, token) = (scrapes.clone(), stop.clone(), token.clone());
        async move {
            while !stop.load(Ordering::Relaxed) {
                let kept = exchange(&mut keep_alive, "/metrics", Some(&token), false).await;
                let fresh = match connect(addr, None).await {
                    Ok((mut stream, presented)) => Ok((
                        exchange(&mut stream, "/healthz", None, true).await,
                        presented,
                    )),
                    Err(e) => Err(e),
                };
                record(&scrapes, kept, fresh);
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            keep_alive
        }
    });

    // A Secret volume update: the `..data` symlink swapped to a new pair.
    let (second_cert, second_key, second_der) = serving_pair();
    wait_until("the scraper has made a few rounds", || async {
        scrapes.lock().unwrap().new_connections >= 5
    })
    .await;
    let before = scrapes.lock().unwrap().keep_alive_requests;
    let swapped = Instant::now();
    secret_volume_update(&dir.0, "v2", &second_cert, &second_key);
    wait_presented(&scrapes, &second_der).await;
    println!(
        "symlink swap: new handshakes present the new certificate after {:.1}s",
        swapped.elapsed().as_secs_f64()
    );

    let after_swap = scrapes.lock().unwrap().keep_alive_requests;

    // cert-manager style: the files rewritten in place (here through the symlink), key first.
    let (third_cert, third_key, third_der) = serving_pair();
    let rewritten = Instant::now();
    std::fs::write(dir.0.join("tls.key"), &third_key).unwrap();
    std::fs::write(dir.0.join("tls.crt"), &third_cert).unwrap();
    wait_presented(&scrapes, &third_der).await;
    println!(
        "in-place rewrite: new handshakes present the new certificate after {:.1}s",
        rewritten.elapsed().as_secs_f64()
    );

    // A broken pair is not served: the third stays.
    std::fs::write(dir.0.join("tls.crt"), "not a certificate").unwrap();
    let broken = Instant::now();
    let rounds = scrapes.lock().unwrap().new_connections;
    // More than a reload period (5 s) of new connections, all still given the third pair.
    wait_until("a reload period passes", || async {
        broken.elapsed() > Duration::from_secs(7)
    })
    .await;
    assert_eq!(scrapes.lock().unwrap().presented, third_der);
    assert!(scrapes.lock().unwrap().new_connections > rounds);

    stop.store(true, Ordering::Relaxed);
    let mut keep_alive = scraper.await.unwrap();
    let scrapes = std::mem::take(&mut *scrapes.lock().unwrap());
    println!(
        "{} keep-alive scrapes ({before} before the rotations, {after_swap} until the swapped pair was \
         served), {} new connections",
        scrapes.keep_alive_requests, scrapes.new_connections
    );
    assert!(
        scrapes.failures.is_empty(),
        "requests failed during rotation: {:?}",
        scrapes.failures
    );
    // The keep-alive connection kept scraping through both rotations.
    assert!(before > 0 && after_swap > before && scrapes.keep_alive_requests > after_swap);
    // The connection made on the first pair still answers.
    let answer = exchange(&mut keep_alive, "/healthz", None, true).await;
    assert_eq!(answer.map(|(s, _)| s), Ok(200));
    manager.stop().await;
}

type Answer = Result<(u16, String), String>;

/// One round of the scraper: the keep-alive scrape and the new connection's answer and certificate.
fn record(scrapes: &Mutex<Scrapes>, kept: Answer, fresh: Result<(Answer, Vec<u8>), String>) {
    let mut scrapes = scrapes.lock().unwrap();
    match kept {
        Ok((200, body)) if body.contains("workqueue_adds_total") => {
            scrapes.keep_alive_requests += 1
        }
        other => scrapes
            .failures
            .push(format!("keep-alive /metrics: {other:?}")),
    }
    match fresh {
        Ok((Ok((200, _)), presented)) => {
            scrapes.new_connections += 1;
            scrapes.presented = presented;
        }
        Ok((answer, _)) => scrapes
            .failures
            .push(format!("new connection /healthz: {answer:?}")),
        Err(e) => scrapes.failures.push(format!("new connection: {e}")),
    }
}

/// Waits (bounded) until a new connection of the scraper is given the certificate `der`.
async fn wait_presented(scrapes: &Mutex<Scrapes>, der: &[u8]) {
    wait_until("new handshakes present the new certificate", || async {
        scrapes.lock().unwrap().presented == der
    })
    .await;
}

async fn wait_until<F, Fut>(what: &str, mut done: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + mini_kcm_e2e::TIMEOUT;
    while !done().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A CA, as rcgen issues with it, and its PEM.
fn certificate_authority(name: &str) -> (Issuer<'static, KeyPair>, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (Issuer::new(params, key), pem)
}

/// A client certificate signed by `ca`, and its key.
fn client_identity(
    ca: &Issuer<'static, KeyPair>,
    cn: &str,
    orgs: &[&str],
) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, cn);
    for org in orgs {
        params
            .distinguished_name
            .push(DnType::OrganizationName, *org);
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, ca).unwrap();
    (
        cert.der().clone(),
        PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_of_the_client_ca_name_the_user() {
    let ns = TestNamespace::create(plane(), "client-ca").await;
    mini_kcm_e2e::apply_access_objects(ns.plane, &["deploy/in-cluster"]);
    let token = admin_token(ns.plane).await;
    let dir = TempDir::new("client-ca");
    let (ca, ca_pem) = certificate_authority("mini-kcm e2e client CA");
    std::fs::write(dir.0.join("ca.crt"), ca_pem).unwrap();
    let (stranger_ca, _) = certificate_authority("someone else");

    let user = format!("{}-cert-reader", ns.name);
    let binding = ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(user.clone()),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "ClusterRole".into(),
            name: METRICS_READER.into(),
        },
        subjects: Some(vec![Subject {
            kind: "User".into(),
            name: user.clone(),
            api_group: Some("rbac.authorization.k8s.io".into()),
            ..Default::default()
        }]),
    };
    Api::<ClusterRoleBinding>::all(ns.client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();

    let addr = free_addr();
    let options = secure(addr, ServingCert::SelfSigned, Some(dir.0.join("ca.crt")));
    let manager = TestManager::start_as(&ns, options, None).await;
    wait_until("the secure port answers /readyz", || async {
        matches!(get(addr, None, "/readyz", None).await, Ok((200, _)))
    })
    .await;

    let reader = client_identity(&ca, &user, &["e2e"]);
    let master = client_identity(&ca, "cert-admin", &["system:masters"]);
    let stranger = client_identity(&stranger_ca, &user, &[]);
    type Case<'a> = (
        &'a str,
        Option<&'a (CertificateDer<'static>, PrivateKeyDer<'static>)>,
        Option<&'a str>,
        &'a str,
        u16,
        String,
    );
    let cases: Vec<Case<'_>> = vec![
        (
            "reader",
            Some(&reader),
            None,
            "/metrics",
            200,
            "workqueue_adds_total".into(),
        ),
        (
            "reader",
            Some(&reader),
            None,
            "/debug/controllers",
            403,
            format!("User \"{user}\" cannot get path \"/debug/controllers\""),
        ),
        (
            "system:masters certificate",
            Some(&master),
            None,
            "/debug/controllers/state",
            200,
            "\"controllers\"".into(),
        ),
        (
            "unknown CA",
            Some(&stranger),
            None,
            "/metrics",
            401,
            "Unauthorized".into(),
        ),
        (
            "unknown CA with the admin token",
            Some(&stranger),
            Some(&token),
            "/metrics",
            200,
            "workqueue_adds_total".into(),
        ),
        (
            "no certificate",
            None,
            None,
            "/metrics",
            403,
            "User \"system:anonymous\" cannot get path \"/metrics\"".into(),
        ),
        (
            "unknown CA",
            Some(&stranger),
            None,
            "/healthz",
            200,
            "ok".into(),
        ),
    ];
    for (who, identity, token, path, expected, says) in cases {
        let answer = get(addr, identity, path, token).await;
        println!("{who}: {path} -> {:?}", answer.as_ref().map(|(s, _)| s));
        let (status, body) = answer.unwrap_or_else(|e| panic!("{who}: {path}: {e}"));
        assert!(
            status == expected && body.contains(&says),
            "{who}: {path} answered {status}, expected {expected} saying {says:?}:\n{body}"
        );
    }
    Api::<ClusterRoleBinding>::all(ns.client.clone())
        .delete(&user, &Default::default())
        .await
        .unwrap();
    manager.stop().await;
}
