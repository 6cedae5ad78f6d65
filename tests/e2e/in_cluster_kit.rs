//! Watching the in-cluster install from outside, for tests/e2e/in_cluster.rs (the image in Docker) and
//! tests/e2e/real_node.rs (the manifests as pods on the real node): building the image, who holds the
//! lease, whether two writers ever acted at once (duplicate pods, the audit log), and a copy Deployment
//! to reconcile meanwhile.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, ResourceExt};
use mini_kcm_runtime::api::kinds::{ApiFamily, DeploymentObject, ReplicaSetObject, WorkloadKind};
use mini_kcm_testkit::TestNamespace;

use crate::{
    TIMEOUT, check_every_state, controller_uid, is_active, pod_template, repo_path, selector,
};

/// The image deploy/image/build.sh builds (and saves to target/image/mini-kcm.tar).
pub const IMAGE: &str = "mini-kcm:dev";
/// Where deploy/image/build.sh saves the image.
pub const IMAGE_ARCHIVE: &str = "target/image/mini-kcm.tar";

/// Runs deploy/image/build.sh (panicking with its output when it fails); returns its size report lines.
pub fn build_image() -> Vec<String> {
    let build = std::process::Command::new("bash")
        .arg(repo_path("deploy/image/build.sh"))
        .output()
        .unwrap();
    let build_log = format!(
        "{}{}",
        String::from_utf8_lossy(&build.stdout),
        String::from_utf8_lossy(&build.stderr)
    );
    assert!(
        build.status.success(),
        "deploy/image/build.sh failed:\n{build_log}"
    );
    build_log
        .lines()
        .filter(|l| {
            l.starts_with("binary:") || l.starts_with("image:") || l.starts_with("archive:")
        })
        .map(str::to_string)
        .collect()
}

/// Runs the docker CLI; its standard output, or why it failed.
pub fn docker(args: &[&str]) -> Result<String, String> {
    let output = std::process::Command::new("docker")
        .args(args)
        .output()
        .map_err(|e| e.to_string())?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A GET on a replica's secure port over HTTPS, presenting `token` when given: the status code and the
/// body, or None while it does not answer. The serving certificate is self-signed, so it is not verified
/// (as a kubelet's probe and Prometheus with `insecure_skip_verify` do); the token is what authenticates.
pub async fn https_get(addr: SocketAddr, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let stream = tokio::net::TcpStream::connect(addr).await.ok()?;
    let mut stream = tls_connector()
        .connect(
            rustls::pki_types::ServerName::IpAddress(addr.ip().into()),
            stream,
        )
        .await
        .ok()?;
    let authorization = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n{authorization}\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = Vec::new();
    // The server may close without a TLS close_notify; what was read until then is the answer.
    let _ = stream.read_to_end(&mut response).await;
    let response = String::from_utf8_lossy(&response);
    let status = response.split(' ').nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())?;
    Some((status, body))
}

/// What a plain HTTP/1.0 GET on `addr` gets back within 5 s, as text (empty when the server closed or
/// said nothing): a TLS-only port must not answer it as HTTP.
pub async fn http_answer(addr: SocketAddr, path: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await
            .ok()?;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        Some(String::from_utf8_lossy(&answer).into_owned())
    };
    tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

fn tls_connector() -> tokio_rustls::TlsConnector {
    any_server_connector(None).0
}

/// A TLS client that accepts any server certificate (checking only that the handshake is signed by its
/// key, as a scraper with `insecure_skip_verify` does), presents `identity` when given, and records the
/// certificate the server presented last (DER).
pub fn any_server_connector(
    identity: Option<&(
        rustls::pki_types::CertificateDer<'static>,
        rustls::pki_types::PrivateKeyDer<'static>,
    )>,
) -> (tokio_rustls::TlsConnector, Arc<Mutex<Vec<u8>>>) {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, SignatureScheme};

    #[derive(Debug)]
    struct AnyServer(Arc<rustls::crypto::CryptoProvider>, Arc<Mutex<Vec<u8>>>);
    impl ServerCertVerifier for AnyServer {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            *self.1.lock().unwrap_or_else(|e| e.into_inner()) = end_entity.to_vec();
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
        }
        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            let algorithms = &self.0.signature_verification_algorithms;
            rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .expect("ring supports the default TLS versions")
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServer(provider, seen.clone())));
    let config = match identity {
        Some((cert, key)) => builder
            .with_client_auth_cert(vec![cert.clone()], key.clone_key())
            .expect("the test's client certificate and key match"),
        None => builder.with_no_client_auth(),
    };
    (tokio_rustls::TlsConnector::from(Arc::new(config)), seen)
}

/// The ClusterRoles of deploy/in-cluster that open the secure port's endpoints.
pub const METRICS_READER: &str = "mini-kcm-metrics-reader";
pub const DEBUG_VIEWER: &str = "mini-kcm-debug-viewer";

/// A token of a new service account `name` in the test's namespace, bound to `cluster_role` when given
/// (the ClusterRoles must exist: `apply_access_objects` of deploy/in-cluster).
pub async fn service_account_with_role(
    ns: &TestNamespace,
    name: &str,
    cluster_role: Option<&str>,
) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
    use kube::api::{ObjectMeta, PostParams};
    let accounts = ns.api::<ServiceAccount>();
    let account = ServiceAccount {
        metadata: ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    accounts
        .create(&PostParams::default(), &account)
        .await
        .unwrap_or_else(|e| panic!("creating service account {name}: {e}"));
    if let Some(role) = cluster_role {
        let binding = ClusterRoleBinding {
            metadata: ObjectMeta {
                name: Some(format!("{}-{name}", ns.name)),
                ..Default::default()
            },
            role_ref: RoleRef {
                api_group: Some("rbac.authorization.k8s.io".into()),
                kind: "ClusterRole".into(),
                name: role.to_string(),
            },
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".into(),
                name: name.to_string(),
                namespace: Some(ns.name.clone()),
                ..Default::default()
            }]),
        };
        Api::<ClusterRoleBinding>::all(ns.client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .unwrap_or_else(|e| panic!("binding {name} to {role}: {e}"));
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .unwrap_or_else(|e| panic!("a token for service account {name}: {e}"))
        .status
        .and_then(|s| s.token)
        .unwrap_or_else(|| panic!("no token for service account {name}"))
}

/// Running and Ready, not terminating.
pub fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// The node the pod is bound to ("" when none).
pub fn node_of(pod: &Pod) -> String {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.clone())
        .unwrap_or_default()
}

/// The pod whose name the lease identity (`$POD_NAME_<random>`) starts with.
pub fn pod_of_identity<'a>(pods: &'a [Pod], identity: &str) -> &'a Pod {
    pods.iter()
        .find(|p| identity.starts_with(&format!("{}_", p.name_any())))
        .unwrap_or_else(|| panic!("the lease holder {identity} is none of the replicas"))
}

/// Who holds the lease, if anyone.
pub fn holder(lease: Option<&Lease>) -> Option<String> {
    lease?.spec.as_ref()?.holder_identity.clone()
}

/// A copy (minikcm.dev) Deployment of `replicas` pods, rolling one pod at a time.
pub fn copy_deployment(name: &str, replicas: i32) -> DeploymentObject {
    let mut d = DeploymentObject::new(
        name,
        &WorkloadKind::Deployment.api_resource(ApiFamily::Copies),
        DeploymentSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: pod_template(name),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(1)),
                }),
            }),
            ..Default::default()
        },
    );
    d.status = None;
    d
}

/// Waits until the copy Deployment's revision `revision` is complete: every replica updated and available.
pub async fn wait_complete(
    ns: &TestNamespace,
    deployments: &Api<DeploymentObject>,
    name: &str,
    replicas: i32,
    revision: &str,
) {
    wait_complete_in(ApiFamily::Copies, ns, deployments, name, replicas, revision).await;
}

/// Waits until the Deployment's (of `family`) revision `revision` is complete: every replica updated and
/// available.
pub async fn wait_complete_in(
    family: ApiFamily,
    ns: &TestNamespace,
    deployments: &Api<DeploymentObject>,
    name: &str,
    replicas: i32,
    revision: &str,
) {
    ns.wait_for_with(
        deployments,
        WorkloadKind::Deployment.api_resource(family),
        name,
        &format!("revision {revision} complete with {replicas} replicas"),
        TIMEOUT,
        |d| {
            d.is_some_and(|d| {
                let s = d.status.clone().unwrap_or_default();
                let rev = d
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("deployment.kubernetes.io/revision"));
                rev.map(String::as_str) == Some(revision)
                    && s.observed_generation == d.metadata.generation
                    && s.updated_replicas == Some(replicas)
                    && s.available_replicas == Some(replicas)
                    && s.replicas == Some(replicas)
            })
        },
    )
    .await;
}

/// Records, on every watched state, how many active pods each ReplicaSet owns and the largest
/// `spec.replicas` each ReplicaSet ever had. Two writers would show as a ReplicaSet owning more pods than
/// it ever asked for.
pub struct DuplicateWatch {
    most_owned: Arc<Mutex<BTreeMap<String, usize>>>,
    most_wanted: Arc<Mutex<BTreeMap<String, i32>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl DuplicateWatch {
    /// Watches the pods and the copy ReplicaSets of `ns`.
    pub async fn start(ns: &TestNamespace) -> Self {
        Self::start_in(ApiFamily::Copies, ns).await
    }

    /// Watches the pods and the ReplicaSets of `family` in `ns`.
    pub async fn start_in(family: ApiFamily, ns: &TestNamespace) -> Self {
        let most_owned = Arc::new(Mutex::new(BTreeMap::<String, usize>::new()));
        let most_wanted = Arc::new(Mutex::new(BTreeMap::<String, i32>::new()));
        let (pods, writer) = reflector::store();
        let pod_watch = {
            let most_owned = most_owned.clone();
            let reader = pods.clone();
            let stream = reflector(writer, watcher(ns.api::<Pod>(), watcher::Config::default()))
                .default_backoff();
            tokio::spawn(check_every_state(stream, move || {
                let mut owned = BTreeMap::<String, usize>::new();
                for pod in reader.state().iter().filter(|p| is_active(p)) {
                    if let Some(uid) = controller_uid(pod) {
                        *owned.entry(uid).or_default() += 1;
                    }
                }
                let mut most = most_owned.lock().unwrap();
                for (uid, count) in owned {
                    let entry = most.entry(uid).or_default();
                    *entry = (*entry).max(count);
                }
            }))
        };
        let rs_api: Api<ReplicaSetObject> = Api::namespaced_with(
            ns.client.clone(),
            &ns.name,
            &WorkloadKind::ReplicaSet.api_resource(family),
        );
        let writer = reflector::store::Writer::new(WorkloadKind::ReplicaSet.api_resource(family));
        let replica_sets = writer.as_reader();
        let rs_watch = {
            let most_wanted = most_wanted.clone();
            let reader = replica_sets.clone();
            let stream =
                reflector(writer, watcher(rs_api, watcher::Config::default())).default_backoff();
            tokio::spawn(check_every_state(stream, move || {
                let mut most = most_wanted.lock().unwrap();
                for rs in reader.state() {
                    let uid = rs.metadata.uid.clone().unwrap_or_default();
                    let entry = most.entry(uid).or_default();
                    *entry = (*entry).max(rs.spec.replicas.unwrap_or(1));
                }
            }))
        };
        pods.wait_until_ready().await.unwrap();
        replica_sets.wait_until_ready().await.unwrap();
        DuplicateWatch {
            most_owned,
            most_wanted,
            tasks: vec![pod_watch, rs_watch],
        }
    }

    pub fn assert_none(self) {
        for task in &self.tasks {
            task.abort();
        }
        let owned = self.most_owned.lock().unwrap().clone();
        let wanted = self.most_wanted.lock().unwrap().clone();
        assert!(
            wanted.len() >= 2,
            "expected the old and the new ReplicaSet, saw {wanted:?}"
        );
        for (uid, count) in &owned {
            let allowed = wanted.get(uid).copied().unwrap_or(0);
            assert!(
                *count as i64 <= i64::from(allowed),
                "ReplicaSet {uid} owned {count} active pods at once, its spec never asked for more than {allowed} (owned {owned:?}, wanted {wanted:?})"
            );
        }
    }
}

/// A create, update, patch or delete by one of mini-kcm's controllers (leases excluded: taking and renewing
/// the lease is how a replica becomes and stays the leader).
#[derive(Debug)]
#[allow(dead_code)] // read by the failure messages
pub struct AuditedWrite {
    pub user_agent: String,
    pub verb: String,
    pub resource: String,
    pub name: String,
    pub received: Timestamp,
}

/// Every write of a mini-kcm controller in the audit log: not the election's Lease, and not the
/// TokenReviews and SubjectAccessReviews of the secure port (questions that store nothing, which a
/// standby asks too when it is scraped).
pub fn mini_kcm_writes(audit_log: &Path) -> Vec<AuditedWrite> {
    let text = std::fs::read_to_string(audit_log)
        .unwrap_or_else(|e| panic!("reading the audit log {}: {e}", audit_log.display()));
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|event| event["stage"] == "ResponseComplete")
        .filter(|event| {
            matches!(
                event["verb"].as_str(),
                Some("create" | "update" | "patch" | "delete" | "deletecollection")
            )
        })
        .filter(|event| {
            !matches!(
                event["objectRef"]["resource"].as_str(),
                Some("leases" | "tokenreviews" | "subjectaccessreviews")
            )
        })
        .filter_map(|event| {
            let user_agent = event["userAgent"].as_str()?;
            if !user_agent.starts_with("mini-kcm/") {
                return None;
            }
            Some(AuditedWrite {
                user_agent: user_agent.to_string(),
                verb: event["verb"].as_str().unwrap_or_default().to_string(),
                resource: format!(
                    "{}/{}",
                    event["objectRef"]["resource"].as_str().unwrap_or_default(),
                    event["objectRef"]["subresource"]
                        .as_str()
                        .unwrap_or_default()
                ),
                name: event["objectRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                received: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
            })
        })
        .collect()
}

/// The namespace of mini-kcm's in-cluster install (deploy/in-cluster), its lease and its pods' label.
pub const SYSTEM_NAMESPACE: &str = "mini-kcm-system";
pub const LEASE: &str = "mini-kcm";
pub const APP_LABEL: &str = "app.kubernetes.io/name=mini-kcm";

/// `kubectl logs` of a mini-kcm pod: one JSON object per line, no colour codes.
pub fn assert_json_logs(plane: &mini_kcm_testkit::PlaneInfo, pod: &str) {
    let (logs, _) = crate::kubectl(plane, &["logs", "--namespace", SYSTEM_NAMESPACE, pod], None);
    assert!(
        !logs.contains('\u{1b}'),
        "colour codes in the logs:\n{logs}"
    );
    let lines: Vec<&str> = logs.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(!lines.is_empty(), "{pod} logged nothing");
    for line in &lines {
        let parsed: Result<serde_json::Value, _> = serde_json::from_str(line);
        assert!(
            parsed.as_ref().is_ok_and(serde_json::Value::is_object),
            "not a JSON object: {line}"
        );
    }
}

/// Waits until a replica other than `first_holder` holds the lease, after the leader pod was deleted at
/// `deleted` (`deleted_at` on the wall clock); fails past `bound`. Returns when the new holder acquired it.
pub async fn wait_takeover(
    ns: &TestNamespace,
    first_holder: &str,
    deleted: std::time::Instant,
    deleted_at: Timestamp,
    bound: std::time::Duration,
) -> Timestamp {
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let lease = ns
        .wait_for(
            &leases,
            LEASE,
            "another replica holding the lease",
            bound + TIMEOUT,
            |l| holder(l).is_some_and(|h| h != first_holder),
        )
        .await
        .unwrap();
    let takeover = deleted.elapsed();
    let acquired = lease
        .spec
        .as_ref()
        .and_then(|s| s.acquire_time.as_ref())
        .map(|t| t.0)
        .unwrap();
    println!(
        "takeover by {}: {:.1}s after the leader pod's deletion (bound {}s)",
        holder(Some(&lease)).unwrap_or_default(),
        takeover.as_secs_f64(),
        bound.as_secs()
    );
    assert!(
        takeover <= bound,
        "the takeover took {takeover:?} (bound {bound:?})"
    );
    assert!(
        acquired >= deleted_at,
        "acquired {acquired} before the deletion"
    );
    acquired
}

/// No write of the pod `old_leader` in the audit log after `acquired` (when the next leader took over).
pub fn assert_no_write_after(audit_log: &Path, old_leader: &str, acquired: Timestamp) {
    let writes = mini_kcm_writes(audit_log);
    // Else the check below would hold for an audit log that records nothing of mini-kcm.
    assert!(
        !writes.is_empty(),
        "the audit log {} shows no write of mini-kcm at all",
        audit_log.display()
    );
    let late: Vec<_> = writes
        .into_iter()
        .filter(|w| w.user_agent.contains(&format!("({old_leader}_")))
        .filter(|w| w.received > acquired)
        .collect();
    assert!(
        late.is_empty(),
        "writes of the old leader after the hand-over: {late:#?}"
    );
}

/// Starts a rolling update of mini-kcm's own Deployment to `image`.
pub async fn start_own_rollout(ns: &TestNamespace, image: &str) {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    deployments
        .patch(
            "mini-kcm",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Strategic(
                serde_json::json!({"spec": {"template": {"spec": {"containers": [
                    {"name": "mini-kcm", "image": image}
                ]}}}}),
            ),
        )
        .await
        .unwrap();
}

/// Waits until mini-kcm's own rolling update to `image` is complete (2 replicas of it available) and a pod
/// of that image holds the lease (the last old pod releases it on SIGTERM; a new one acquires it).
pub async fn wait_own_rollout(
    ns: &TestNamespace,
    image: &str,
    pod_timeout: std::time::Duration,
    lease_bound: std::time::Duration,
) {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    ns.wait_for(
        &deployments,
        "mini-kcm",
        "mini-kcm's rolling update complete",
        pod_timeout,
        |d| {
            d.is_some_and(|d| {
                let status = d.status.clone().unwrap_or_default();
                status.observed_generation == d.metadata.generation
                    && status.updated_replicas == Some(2)
                    && status.available_replicas == Some(2)
                    && status.replicas == Some(2)
            })
        },
    )
    .await;
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let rolled: Vec<String> = pods
        .list(&kube::api::ListParams::default().labels(APP_LABEL))
        .await
        .unwrap()
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            p.spec
                .as_ref()
                .is_some_and(|s| s.containers[0].image.as_deref() == Some(image))
        })
        .map(ResourceExt::name_any)
        .collect();
    assert_eq!(rolled.len(), 2, "pods of the new image: {rolled:?}");
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let lease = ns
        .wait_for(
            &leases,
            LEASE,
            "a pod of the new image holding the lease",
            lease_bound + TIMEOUT,
            |l| holder(l).is_some_and(|h| rolled.iter().any(|p| h.starts_with(&format!("{p}_")))),
        )
        .await
        .unwrap();
    println!(
        "after mini-kcm's own rollout the lease is held by {}",
        holder(Some(&lease)).unwrap_or_default()
    );
}

/// Waits until both replicas of mini-kcm's install are Running and Ready (`placed` also holds for each)
/// and one holds the lease; returns the replicas, the lease holder's identity and its pod.
pub async fn wait_replicas_and_leader(
    ns: &TestNamespace,
    what: &str,
    timeout: std::time::Duration,
    placed: impl Fn(&Pod) -> bool,
) -> (Vec<Pod>, String, Pod) {
    let pods: Api<Pod> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let replicas = ns
        .wait_for_list(
            &pods,
            watcher::Config::default().labels(APP_LABEL),
            what,
            timeout,
            |pods| pods.len() == 2 && pods.iter().all(|p| is_ready(p) && placed(p)),
        )
        .await;
    let names: Vec<String> = replicas.iter().map(ResourceExt::name_any).collect();
    println!("replicas: {names:?}");
    let leases: Api<Lease> = Api::namespaced(ns.client.clone(), SYSTEM_NAMESPACE);
    let lease = ns
        .wait_for(&leases, LEASE, "a holder of the lease", TIMEOUT, |l| {
            holder(l).is_some()
        })
        .await;
    let first_holder = holder(lease.as_ref()).unwrap();
    let leader = pod_of_identity(&replicas, &first_holder).clone();
    (replicas, first_holder, leader)
}
