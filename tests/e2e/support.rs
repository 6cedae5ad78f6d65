//! Shared by the end-to-end tests: workload manifests, the test manager, the in-cluster manifests.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

pub mod denied_writes;
pub mod doc_runner;
pub mod in_cluster_kit;

use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use kube::api::ObjectMeta;

pub use mini_kcm_fixtures::{IMAGE, selector};

/// The end-to-end tests' template: `app=<app>`, the never-pulled [`IMAGE`].
pub fn pod_template(app: &str) -> PodTemplateSpec {
    mini_kcm_fixtures::pod_template(app, IMAGE)
}

pub fn deployment(name: &str, replicas: i32) -> Deployment {
    Deployment {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: DeploymentSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: pod_template(name),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn daemon_set(name: &str) -> DaemonSet {
    DaemonSet {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: DaemonSetSpec {
            selector: selector(name),
            template: pod_template(name),
            ..Default::default()
        },
        ..Default::default()
    }
}

pub fn app_selector(app: &str) -> String {
    format!("app={app}")
}

// ---- mini-kcm's controllers, run by a test ----

use std::net::SocketAddr;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{DeploymentStrategy, ReplicaSetSpec, RollingUpdateDeployment};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Api;
use kube::discovery::ApiResource;
use mini_kcm_manager::{Kinds, ManagerError, ManagerOptions};
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DaemonSetObject, DeploymentObject, ReplicaSetObject, WorkloadKind,
};
use mini_kcm_runtime::observability::decisions::Decision;
use mini_kcm_testkit::TestNamespace;

/// mini-kcm's controller manager, scoped to one test's namespace (so tests on a shared plane, and a
/// test that stops and restarts it, do not interfere), running in the test's runtime.
pub struct TestManager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ManagerError>>,
    pub metrics_addr: SocketAddr,
}

impl TestManager {
    /// Installs the CRD copies (idempotent) and starts the manager for `kinds` in `ns`.
    pub async fn start(ns: &TestNamespace, kinds: Kinds) -> Self {
        Self::start_with(
            ns,
            ManagerOptions {
                kinds,
                ..Default::default()
            },
        )
        .await
    }

    pub async fn start_with(ns: &TestNamespace, options: ManagerOptions) -> Self {
        Self::start_as(ns, options, None).await
    }

    /// Like [`TestManager::start_with`], with the manager's own client configuration (e.g. a service
    /// account's token) instead of the plane's admin.
    pub async fn start_as(
        ns: &TestNamespace,
        mut options: ManagerOptions,
        config: Option<kube::Config>,
    ) -> Self {
        mini_kcm_crds::install(&ns.client)
            .await
            .unwrap_or_else(|e| panic!("installing the CRD copies: {e}"));
        let config = match config {
            Some(config) => config,
            None => mini_kcm_local_plane::config_from_kubeconfig(&ns.plane.kubeconfig)
                .await
                .unwrap_or_else(|e| panic!("kube config of the plane: {e}")),
        };
        let metrics_addr = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .unwrap_or_else(|e| panic!("free port: {e}"));
        options.namespace = Some(ns.name.clone());
        options.metrics_addr = Some(metrics_addr);
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(mini_kcm_manager::run(config, options, async move {
            let _ = stopped.await;
        }));
        TestManager {
            stop,
            task,
            metrics_addr,
        }
    }

    /// Graceful stop: in-flight syncs finish.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the manager failed: {e}"),
            Err(e) => panic!("the manager panicked: {e}"),
        }
    }

    /// A crash: the manager's task is dropped wherever it is, mid-request included.
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }

    /// The value of a metric sample (`name{labels}` as in the exposition text), 0 if absent.
    pub async fn metric(&self, sample_prefix: &str) -> f64 {
        self.get("/metrics")
            .await
            .lines()
            .filter(|l| l.starts_with(sample_prefix))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }

    /// The body of a GET on the manager's HTTP address (`/metrics`, `/debug/controllers/...`).
    pub async fn get(&self, path: &str) -> String {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(self.metrics_addr)
            .await
            .unwrap_or_else(|e| panic!("connecting for {path}: {e}"));
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("requesting {path}: {e}"));
        let mut answer = String::new();
        stream
            .read_to_string(&mut answer)
            .await
            .unwrap_or_else(|e| panic!("reading {path}: {e}"));
        match answer.split_once("\r\n\r\n") {
            Some((_, body)) => body.to_string(),
            None => panic!("{path}: no HTTP answer: {answer}"),
        }
    }

    /// The decisions the manager filed about `name` in the test's namespace, newest first.
    pub async fn decisions(&self, namespace: &str, name: &str) -> Vec<Decision> {
        let body = self
            .get(&format!(
                "/debug/controllers/decisions?namespace={namespace}&name={name}&limit=1000"
            ))
            .await;
        serde_json::from_str(&body).unwrap_or_else(|e| panic!("decisions of {name}: {e}: {body}"))
    }
}

pub fn family_resource(family: ApiFamily) -> ApiResource {
    WorkloadKind::ReplicaSet.api_resource(family)
}

/// The Deployments of `family` in the test's namespace.
pub fn deployments(ns: &TestNamespace, family: ApiFamily) -> Api<DeploymentObject> {
    Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::Deployment.api_resource(family),
    )
}

/// A Deployment of `family` selecting `app=<name>`.
pub fn deployment_of(name: &str, replicas: i32, family: ApiFamily) -> DeploymentObject {
    let mut d = DeploymentObject::new(
        name,
        &WorkloadKind::Deployment.api_resource(family),
        DeploymentSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: pod_template(name),
            ..Default::default()
        },
    );
    d.status = None;
    d
}

/// RollingUpdate with integer maxSurge and maxUnavailable.
pub fn rolling_update(d: &mut DeploymentObject, surge: i32, unavailable: i32) {
    d.spec.strategy = Some(DeploymentStrategy {
        type_: Some("RollingUpdate".into()),
        rolling_update: Some(RollingUpdateDeployment {
            max_surge: Some(IntOrString::Int(surge)),
            max_unavailable: Some(IntOrString::Int(unavailable)),
        }),
    });
}

/// Waits until the Deployment is complete: every replica updated and available, generation observed.
pub async fn wait_deployment_complete(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    replicas: i32,
) -> DeploymentObject {
    wait_deployment(
        ns,
        family,
        name,
        &format!("a complete rollout of {replicas} replicas"),
        |d| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation == d.metadata.generation
                && s.updated_replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
                && s.replicas.unwrap_or(0) == replicas
                && progressing_reason(d).as_deref() == Some("NewReplicaSetAvailable")
        },
    )
    .await
}

/// Waits (up to [`TIMEOUT`], with a dump on failure) until Deployment `name` exists and satisfies
/// `condition`; `what` names the awaited state in the failure's message.
pub async fn wait_deployment(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    what: &str,
    condition: impl Fn(&DeploymentObject) -> bool,
) -> DeploymentObject {
    ns.wait_for_with(
        &deployments(ns, family),
        WorkloadKind::Deployment.api_resource(family),
        name,
        what,
        TIMEOUT,
        |d| d.is_some_and(&condition),
    )
    .await
    .unwrap()
}

/// Waits until the Deployment controller has seen `name`'s current generation (a new template: the
/// rollout has started).
pub async fn wait_generation_observed(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    what: &str,
) -> DeploymentObject {
    wait_deployment(ns, family, name, what, |d| {
        d.status
            .as_ref()
            .is_some_and(|s| s.observed_generation == d.metadata.generation)
    })
    .await
}

/// Waits until `name`'s Progressing condition has `reason`.
pub async fn wait_progressing(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    reason: &str,
) -> DeploymentObject {
    wait_deployment(
        ns,
        family,
        name,
        &format!("Progressing with reason {reason}"),
        |d| progressing_reason(d).as_deref() == Some(reason),
    )
    .await
}

/// The reason of the Deployment's Progressing condition.
pub fn progressing_reason(d: &DeploymentObject) -> Option<String> {
    d.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_.as_deref() == Some("Progressing"))
        .and_then(|c| c.reason.clone())
}

/// The ReplicaSets of `family` in the test's namespace.
pub fn replica_sets(ns: &TestNamespace, family: ApiFamily) -> Api<ReplicaSetObject> {
    Api::namespaced_with(ns.client.clone(), &ns.name, &family_resource(family))
}

/// A ReplicaSet of `family` selecting `app=<name>`.
/// Whether the ReplicaSet reports `replicas` pods, all available, for its current generation (apps/v1
/// omits zero counts; the CRD copies keep them).
pub fn has_available_replicas(rs: Option<&ReplicaSetObject>, replicas: i32) -> bool {
    rs.is_some_and(|rs| {
        let status = rs.status.clone().unwrap_or_default();
        status.replicas == replicas
            && status.available_replicas.unwrap_or(0) == replicas
            && status.observed_generation == rs.metadata.generation
    })
}

pub fn replica_set(name: &str, replicas: i32, family: ApiFamily) -> ReplicaSetObject {
    let mut rs = ReplicaSetObject::new(
        name,
        &family_resource(family),
        ReplicaSetSpec {
            replicas: Some(replicas),
            selector: selector(name),
            template: Some(pod_template(name)),
            ..Default::default()
        },
    );
    rs.status = None;
    rs
}

/// The DaemonSets of `family` in the test's namespace.
pub fn daemon_sets(ns: &TestNamespace, family: ApiFamily) -> Api<DaemonSetObject> {
    Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::DaemonSet.api_resource(family),
    )
}

/// The node a daemon pod was pinned to by its required node affinity (`matchFields metadata.name In`).
pub fn pinned_node(pod: &Pod) -> Option<String> {
    let terms = &pod
        .spec
        .as_ref()?
        .affinity
        .as_ref()?
        .node_affinity
        .as_ref()?
        .required_during_scheduling_ignored_during_execution
        .as_ref()?
        .node_selector_terms;
    let [term] = terms.as_slice() else {
        return None;
    };
    let [requirement] = term.match_fields.as_deref()? else {
        return None;
    };
    let values = requirement.values.as_deref()?;
    (requirement.key == "metadata.name" && requirement.operator == "In" && values.len() == 1)
        .then(|| values[0].clone())
}

/// Active = not terminating and not finished: what a ReplicaSet counts.
pub fn is_active(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && !matches!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded") | Some("Failed")
        )
}

pub fn controller_uid(pod: &Pod) -> Option<String> {
    pod.metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|r| r.controller == Some(true))
        .map(|r| r.uid.clone())
}

/// Long enough for any convergence on a loaded 2-core machine; only reached when something is wrong.
pub const TIMEOUT: Duration = Duration::from_secs(60);

/// Runs a scenario once for `apps/v1` and once for the CRD copies.
#[macro_export]
macro_rules! for_both_families {
    ($($name:ident),* $(,)?) => {
        mod apps {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(mini_kcm_runtime::api::kinds::ApiFamily::Apps).await
                }
            )*
        }
        mod copies {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name(mini_kcm_runtime::api::kinds::ApiFamily::Copies).await
                }
            )*
        }
    };
}

/// Runs `check` on the store after every watch event once the initial list is complete (during a
/// (re)list the store still shows the previous state).
pub async fn check_every_state<K>(
    stream: impl futures::Stream<
        Item = Result<kube::runtime::watcher::Event<K>, kube::runtime::watcher::Error>,
    >,
    mut check: impl FnMut(),
) {
    let mut stream = std::pin::pin!(stream);
    let mut synced = false;
    while let Some(event) = futures::StreamExt::next(&mut stream).await {
        match event {
            Ok(kube::runtime::watcher::Event::InitDone) => synced = true,
            Ok(kube::runtime::watcher::Event::Init) => synced = false,
            Ok(kube::runtime::watcher::Event::InitApply(_)) | Err(_) => continue,
            Ok(_) => {}
        }
        if synced {
            check();
        }
    }
}

// ---- the in-cluster manifests (deploy/in-cluster) ----

/// A path in the repository.
pub fn repo_path(relative: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(relative)
}

/// Runs the plane's kubectl (admin kubeconfig) with `args`, `stdin` on its standard input; panics with
/// its output when it fails. Returns its standard output and standard error.
pub fn kubectl(
    plane: &mini_kcm_testkit::PlaneInfo,
    args: &[&str],
    stdin: Option<&str>,
) -> (String, String) {
    use std::io::Write;
    let mut child = std::process::Command::new(plane.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&plane.kubeconfig)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running kubectl {args:?}: {e}"));
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        output.status.success(),
        "kubectl {args:?} failed:\n{stdout}\n{stderr}"
    );
    (stdout, stderr)
}

/// The objects a kustomization (a folder of the repository) builds, by the plane's `kubectl kustomize`.
pub fn kustomize(
    plane: &mini_kcm_testkit::PlaneInfo,
    kustomization: &str,
) -> Vec<serde_json::Value> {
    let dir = repo_path(kustomization);
    let (yaml, _) = kubectl(plane, &["kustomize", &dir.to_string_lossy()], None);
    serde_norway::Deserializer::from_str(&yaml)
        .map(|doc| <serde_json::Value as serde::Deserialize>::deserialize(doc).unwrap())
        .filter(|object| !object.is_null())
        .collect()
}

/// The kinds that make up the service account's identity and permissions.
const ACCESS_KINDS: [&str; 6] = [
    "Namespace",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
];

/// Applies only the namespace, service account and RBAC objects of the kustomizations (not the
/// Deployment: tests run the manager themselves), exactly as the manifests define them.
pub fn apply_access_objects(plane: &mini_kcm_testkit::PlaneInfo, kustomizations: &[&str]) {
    let items: Vec<serde_json::Value> = kustomizations
        .iter()
        .flat_map(|k| kustomize(plane, k))
        .filter(|o| {
            o["kind"]
                .as_str()
                .is_some_and(|kind| ACCESS_KINDS.contains(&kind))
        })
        .collect();
    assert!(
        items.iter().any(|o| o["kind"] == "ClusterRole"),
        "no ClusterRole in {kustomizations:?}"
    );
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    kubectl(plane, &["apply", "-f", "-"], Some(&list.to_string()));
}

/// A token of the service account mini-kcm-system/mini-kcm (a TokenRequest, valid for an hour).
pub async fn service_account_token(client: &kube::Client) -> String {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "mini-kcm-system");
    accounts
        .create_token_request(
            "mini-kcm",
            &kube::api::PostParams::default(),
            &TokenRequest {
                spec: Some(TokenRequestSpec {
                    expiration_seconds: Some(3600),
                    ..Default::default()
                }),
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .status
        .unwrap()
        .token
        .unwrap()
}

/// The mini-kcm binary of this test's target folder (`<target>/<profile>/mini-kcm`), built when it is
/// missing or older than a source file. `cargo test --workspace` has just built it (for the mini-kcm
/// package's own tests), so CI reuses it; a nested `cargo build -p mini-kcm` would resolve features for
/// that package alone and recompile much of the dependency tree.
pub fn mini_kcm_binary() -> std::path::PathBuf {
    // This test runs from <target>/<profile>/deps/.
    let profile_dir = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .to_path_buf();
    let binary = profile_dir.join("mini-kcm");
    let built = std::fs::metadata(&binary).and_then(|m| m.modified()).ok();
    if built.is_some_and(|built| newest_source().is_some_and(|source| source <= built)) {
        return binary;
    }
    let mut build =
        std::process::Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    build
        .args(["build", "-p", "mini-kcm", "--manifest-path"])
        .arg(repo_path("Cargo.toml"));
    if profile_dir
        .file_name()
        .is_some_and(|name| name == "release")
    {
        build.arg("--release");
    }
    // Build scripts (ring's, through cc) rerun when these differ from the last build, and cargo test
    // sets them to this test package's values: without them the build matches a build from a shell.
    for (key, _) in std::env::vars() {
        if set_by_cargo_test(&key) {
            build.env_remove(key);
        }
    }
    let status = build.status().unwrap();
    assert!(status.success(), "cargo build -p mini-kcm failed");
    assert!(binary.exists(), "no binary at {}", binary.display());
    binary
}

/// Whether `cargo test` sets `key` for this test package (not a shell's variable).
fn set_by_cargo_test(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_MANIFEST_")
        || ["CARGO_CRATE_NAME", "CARGO_PRIMARY_PACKAGE", "OUT_DIR"].contains(&key)
}

/// The modification time of the newest file the binary is built from: the crates, the files of
/// `deploy/` they include, and the lock file.
fn newest_source() -> Option<std::time::SystemTime> {
    fn walk(dir: &std::path::Path, newest: &mut Option<std::time::SystemTime>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, newest);
            } else if let Ok(modified) = entry.metadata().and_then(|m| m.modified()) {
                *newest = (*newest).max(Some(modified));
            }
        }
    }
    let mut newest = std::fs::metadata(repo_path("Cargo.lock"))
        .and_then(|m| m.modified())
        .ok();
    for dir in [
        "crates",
        "deploy/crds",
        "deploy/control-plane",
        "deploy/kwok",
    ] {
        walk(&repo_path(dir), &mut newest);
    }
    newest
}

// ---- running a document's commands (tests/e2e/tour.rs, readme.rs) ----

/// A process started in a process group of its own (`process_group(0)`), such as `mini-kcm up` with
/// the plane it runs: stopped with its whole group (SIGTERM) when dropped, unless it has exited already.
pub struct ProcessGroup(pub std::process::Child);

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            // `--`: procps' kill otherwise reads `-PGID` as an option and signals nothing (then `wait`
            // below blocks forever).
            let _ = std::process::Command::new("kill")
                .args(["-TERM", "--", &format!("-{}", self.0.id())])
                .status();
            let _ = self.0.wait();
        }
    }
}

/// `text` as one single-quoted bash word.
pub fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The docs' set-up line (README's usage and both parts of the tour): `mini-kcm env` prints the exports
/// that put `mini-kcm` and the running plane's `kubectl` on `PATH` and set `KUBECONFIG`.
pub const SETUP_LINE: &str = r#"eval "$(cargo run -q -p mini-kcm -- env)""#;

/// [`SETUP_LINE`] as the docs say to type it for an `up --state-dir DIR`: with the same `--state-dir`.
/// (A test keeps its plane in a folder of its own: the default, the first running plane slot, may be
/// another test's.)
pub fn setup_line_with_state_dir(state_dir: &std::path::Path) -> String {
    let with = format!(
        " -- env --state-dir {})",
        shell_quote(&state_dir.display().to_string())
    );
    SETUP_LINE.replace(" -- env)", &with)
}

/// Makes `command` a shell as a user's: without the variables `cargo test` sets for this test package
/// (so a `cargo run` in it builds as from a shell) and without `KUBECONFIG` or `MINI_KCM_MANAGER_ADDR`
/// from the test's environment (only the docs' set-up line may set them).
pub fn as_a_users_shell(command: &mut std::process::Command) -> &mut std::process::Command {
    for (key, _) in std::env::vars() {
        if set_by_cargo_test(&key) {
            command.env_remove(key);
        }
    }
    command
        .env_remove("KUBECONFIG")
        .env_remove("MINI_KCM_MANAGER_ADDR")
}

/// The start of a bash script that runs a document's commands: `set -euo pipefail`, and `<name>_check`,
/// which retries a bash condition every half second until it holds, or fails the script after `timeout`
/// showing the condition traced.
pub fn check_script_prelude(name: &str, timeout: Duration) -> String {
    let failed = name.to_uppercase();
    let timeout = timeout.as_secs();
    format!(
        r#"set -euo pipefail
# Retries a condition until it holds, for at most {timeout} s.
{name}_check() {{
  local deadline=$((SECONDS + {timeout}))
  until bash -c "set -o pipefail; $1" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      echo "{failed} CHECK FAILED: $1" >&2
      bash -c "set -x; $1" >&2 || true
      exit 1
    fi
    sleep 0.5
  done
  echo "   check ok: $1"
}}
"#
    )
}

/// Whether a test that needs something this machine may lack runs here. `missing` says what is missing,
/// if anything: then the test fails where `require_var` is set (.ci/run sets it after installing what the
/// test needs) and otherwise skips, saying why.
pub fn runs_here(require_var: &str, missing: Option<String>) -> bool {
    let Some(missing) = missing else {
        return true;
    };
    assert!(
        std::env::var_os(require_var).is_none(),
        "{require_var} asks for this test, but {missing}"
    );
    println!("SKIPPED: {missing}");
    false
}

/// Creates a ResourceQuota `name` allowing `pods` pods in `ns`, and waits until the quota controller
/// has computed its usage (before that the API server refuses every pod of the namespace).
pub async fn pod_quota(ns: &TestNamespace, name: &str, pods: u32) {
    use k8s_openapi::api::core::v1::ResourceQuota;
    let quotas = ns.api::<ResourceQuota>();
    let quota: ResourceQuota = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"hard": {"pods": pods.to_string()}},
    }))
    .expect("a ResourceQuota");
    quotas
        .create(&Default::default(), &quota)
        .await
        .expect("creating the quota");
    ns.wait_for(
        &quotas,
        name,
        "the quota controller to compute usage",
        TIMEOUT,
        |q| {
            q.and_then(|q| q.status.as_ref())
                .and_then(|s| s.used.as_ref())
                .is_some()
        },
    )
    .await;
}
