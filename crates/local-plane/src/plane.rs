//! One local control plane: etcd, kube-apiserver, kube-scheduler, kube-controller-manager and kwok as
//! child processes on 127.0.0.1, plus simulated nodes that are Ready and schedulable.
//!
//! Start order follows the dependencies: etcd, then the apiserver (which needs etcd), then the
//! scheduler and controller-manager (which need the apiserver), then kwok and the nodes (which need the
//! node-lifecycle controller to lift the `not-ready` taint), then the optional real node
//! ([`crate::real_node`]). Stop runs in reverse.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::health::{https_ok, plain_http_get, wait_until};
use crate::kubelet_rules::KubeletRules;
use crate::pki::{self, PkiFiles};
use crate::ports::free_ports;
use crate::process::Recipe;
use crate::process::log_tail;
use crate::real_node::{self, RealNode, RealNodeInfo, RealNodeOptions};
use crate::state_dir::StateDir;
use crate::{Binaries, ManagedProcess, PlaneError, nodes};

/// Whether kube-controller-manager also runs its own Deployment, ReplicaSet and DaemonSet controllers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamWorkloadControllers {
    /// Upstream's workload controllers run too (side-by-side comparison, hand-over tests).
    Enabled,
    /// Every default controller except deployment, replicaset and daemonset.
    Disabled,
}

/// How to start a plane.
#[derive(Debug, Clone)]
pub struct PlaneOptions {
    pub binaries: Binaries,
    /// Simulated nodes to create and wait for (named `kwok-node-1` ...).
    pub nodes: usize,
    /// Where state goes; `None` picks a free slot under `<cache>/planes/`.
    pub state_dir: Option<PathBuf>,
    /// An extra copy of the admin kubeconfig.
    pub kubeconfig_out: Option<PathBuf>,
    pub upstream_workload_controllers: UpstreamWorkloadControllers,
    /// Install the `minikcm.dev` CRD copies before kube-controller-manager starts, so its garbage
    /// collector watches them from its first discovery (it only notices CRDs created later on its 30 s
    /// resync, and until then orphaning or cascading deletion of copies misbehaves).
    pub install_crds: bool,
    /// Upper bound for each start-up step.
    pub step_timeout: Duration,
    /// Also run one real node (containerd, kubelet, kube-proxy) on this host; see [`RealNodeOptions`].
    pub real_node: Option<RealNodeOptions>,
    /// The simulated kubelet's rules (unpullable images, readiness-probe delays, Ready again after a node
    /// outage); [`PlaneOptions::new`] takes them from the environment (see [`KubeletRules::from_env`]).
    pub kubelet_rules: KubeletRules,
    /// More kube-apiserver flags, after the plane's own (a later flag wins), e.g.
    /// `--feature-gates=WatchList=false` to test clients against an API server without streamed lists.
    pub extra_apiserver_args: Vec<String>,
}

impl PlaneOptions {
    pub fn new(binaries: Binaries) -> Self {
        PlaneOptions {
            binaries,
            nodes: 3,
            state_dir: None,
            kubeconfig_out: None,
            upstream_workload_controllers: UpstreamWorkloadControllers::Disabled,
            install_crds: true,
            step_timeout: Duration::from_secs(120),
            real_node: None,
            kubelet_rules: KubeletRules::from_env(),
            extra_apiserver_args: Vec::new(),
        }
    }
}

/// The components of a plane, in start order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Component {
    Etcd,
    ApiServer,
    Scheduler,
    ControllerManager,
    Kwok,
}

impl Component {
    pub const ALL: [Component; 5] = [
        Component::Etcd,
        Component::ApiServer,
        Component::Scheduler,
        Component::ControllerManager,
        Component::Kwok,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Component::Etcd => "etcd",
            Component::ApiServer => "kube-apiserver",
            Component::Scheduler => "kube-scheduler",
            Component::ControllerManager => "kube-controller-manager",
            Component::Kwok => "kwok",
        }
    }
}

/// Where everything of a running plane is; also written to `<state-dir>/plane.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlaneInfo {
    pub state_dir: PathBuf,
    pub kubeconfig: PathBuf,
    pub log_dir: PathBuf,
    pub bin_dir: PathBuf,
    pub server: String,
    /// Component name to pid.
    pub pids: BTreeMap<String, u32>,
    /// Port name to port (etcd-client, etcd-peer, apiserver, scheduler, controller-manager).
    pub ports: BTreeMap<String, u16>,
    pub nodes: Vec<String>,
    pub kubernetes_version: String,
    pub startup_seconds: f64,
    /// The real node, when the plane runs one.
    #[serde(default)]
    pub real_node: Option<RealNodeInfo>,
}

impl PlaneInfo {
    pub fn load(state_dir: &Path) -> Result<Self, PlaneError> {
        let path = state_dir.join("plane.json");
        let text = std::fs::read_to_string(&path)
            .map_err(|e| PlaneError::io(format!("reading {}", path.display()), e))?;
        serde_json::from_str(&text).map_err(|e| {
            PlaneError::io(
                format!("parsing {}", path.display()),
                std::io::Error::other(e),
            )
        })
    }

    pub fn log_file(&self, component: Component) -> PathBuf {
        self.log_dir.join(format!("{}.log", component.name()))
    }

    /// The API server's audit log: one JSON line per request (metadata only: verb, resource, user,
    /// user agent, response code, timestamps), so tests and benchmarks can tell who wrote what.
    pub fn audit_log(&self) -> PathBuf {
        self.log_dir.join(AUDIT_LOG_FILE)
    }

    /// The last `lines` lines of a component's log.
    pub fn log_tail(&self, component: Component, lines: usize) -> String {
        log_tail(&self.log_file(component), lines)
    }
}

/// A running local control plane. Dropping it kills every component; [`LocalPlane::stop`] stops them
/// gracefully.
#[derive(Debug)]
pub struct LocalPlane {
    /// First, so that dropping the plane removes the real node's pods while the rest still runs.
    real_node: Option<RealNode>,
    pub(crate) info: PlaneInfo,
    pub(crate) processes: Vec<ManagedProcess>,
    /// What restarting kube-controller-manager with other flags needs.
    pki: PkiFiles,
    binaries: Binaries,
    pub(crate) step_timeout: Duration,
    /// How each component was started, so that a fault hook can restart it in place.
    pub(crate) recipes: BTreeMap<Component, Recipe>,
    _state: StateDir,
}

struct Ports {
    etcd_client: u16,
    etcd_peer: u16,
    apiserver: u16,
    scheduler: u16,
    controller_manager: u16,
}

impl LocalPlane {
    pub async fn start(options: PlaneOptions) -> Result<Self, PlaneError> {
        let started = Instant::now();
        let state = StateDir::acquire(
            options.state_dir.as_deref(),
            &Binaries::cache_root().join("planes"),
        )?;
        let dir = state.path().to_path_buf();
        let log_dir = dir.join("logs");
        for sub in [&log_dir, &dir.join("kwok")] {
            std::fs::create_dir_all(sub)
                .map_err(|e| PlaneError::io(format!("creating {}", sub.display()), e))?;
        }
        let pki = pki::generate(&dir.join("pki"))?;
        let p = free_ports(5)?;
        let ports = Ports {
            etcd_client: p[0],
            etcd_peer: p[1],
            apiserver: p[2],
            scheduler: p[3],
            controller_manager: p[4],
        };
        let server = format!("https://127.0.0.1:{}", ports.apiserver);
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &server, &pki)?;
        if let Some(out) = &options.kubeconfig_out {
            if let Some(parent) = out.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent)
                    .map_err(|e| PlaneError::io(format!("creating {}", parent.display()), e))?;
            }
            write_kubeconfig(out, &server, &pki)?;
        }
        let stages = dir.join("kwok").join("stages.yaml");
        std::fs::write(&stages, options.kubelet_rules.stage_file()?)
            .map_err(|e| PlaneError::io("writing the kwok stage file", e))?;
        std::fs::write(dir.join(AUDIT_POLICY_FILE), AUDIT_POLICY)
            .map_err(|e| PlaneError::io("writing the audit policy", e))?;

        let mut real_node = match &options.real_node {
            Some(_) => Some(RealNode::prepare(&dir, &options.binaries)?),
            None => None,
        };

        let bin = &options.binaries;
        let log = |c: Component| log_dir.join(format!("{}.log", c.name()));
        let timeout = options.step_timeout;
        let mut processes: Vec<ManagedProcess> = Vec::new();
        let mut recipes: BTreeMap<Component, Recipe> = BTreeMap::new();
        let mut step = Instant::now();

        // etcd
        let recipe = Recipe::new(
            &bin.path("etcd"),
            etcd_args(&dir, &ports),
            &[],
            log(Component::Etcd),
        );
        processes.push(recipe.spawn(Component::Etcd.name())?);
        recipes.insert(Component::Etcd, recipe);
        wait_until("etcd /health", timeout, &mut processes, || async {
            plain_http_get(ports.etcd_client, "/health")
                .await
                .map(|body| body.contains("\"health\":\"true\""))
        })
        .await?;
        tracing::info!("etcd ready in {:.1}s", step.elapsed().as_secs_f64());

        // kube-apiserver
        step = Instant::now();
        let recipe = Recipe::new(
            &bin.path("kube-apiserver"),
            apiserver_args(&dir, &ports, &pki, real_node.is_some())
                .into_iter()
                .chain(options.extra_apiserver_args.iter().cloned())
                .collect(),
            &[],
            log(Component::ApiServer),
        );
        processes.push(recipe.spawn(Component::ApiServer.name())?);
        recipes.insert(Component::ApiServer, recipe);
        let client = client_from_kubeconfig(&kubeconfig).await?;
        wait_until("kube-apiserver /readyz", timeout, &mut processes, || {
            let client = client.clone();
            async move { https_ok(&client, "/readyz").await }
        })
        .await?;
        tracing::info!(
            "kube-apiserver ready in {:.1}s",
            step.elapsed().as_secs_f64()
        );
        if options.install_crds {
            mini_kcm_crds::install(&client).await?;
        }

        // kube-scheduler and kube-controller-manager (started together, checked one after the other)
        step = Instant::now();
        let recipe = Recipe::new(
            &bin.path("kube-scheduler"),
            scheduler_args(&kubeconfig, ports.scheduler, &pki),
            &[],
            log(Component::Scheduler),
        );
        processes.push(recipe.spawn(Component::Scheduler.name())?);
        recipes.insert(Component::Scheduler, recipe);
        let recipe = Recipe::new(
            &bin.path("kube-controller-manager"),
            controller_manager_args(
                &kubeconfig,
                ports.controller_manager,
                &pki,
                options.upstream_workload_controllers,
            ),
            &[],
            log(Component::ControllerManager),
        );
        processes.push(recipe.spawn(Component::ControllerManager.name())?);
        recipes.insert(Component::ControllerManager, recipe);
        for (component, port) in [
            (Component::Scheduler, ports.scheduler),
            (Component::ControllerManager, ports.controller_manager),
        ] {
            let health = client_for_port(&kubeconfig, port).await?;
            wait_until(
                &format!("{} /healthz", component.name()),
                timeout,
                &mut processes,
                || {
                    let health = health.clone();
                    async move { https_ok(&health, "/healthz").await }
                },
            )
            .await?;
        }
        tracing::info!(
            "kube-scheduler and kube-controller-manager healthy in {:.1}s",
            step.elapsed().as_secs_f64()
        );

        // kwok and the simulated nodes
        step = Instant::now();
        let kwok_workdir = dir.join("kwok");
        let recipe = Recipe::new(
            &bin.path("kwok"),
            kwok_args(&kubeconfig, &stages, real_node.is_some()),
            &[("KWOK_WORKDIR", kwok_workdir.as_path())],
            log(Component::Kwok),
        );
        processes.push(recipe.spawn(Component::Kwok.name())?);
        recipes.insert(Component::Kwok, recipe);
        let node_names: Vec<String> = (1..=options.nodes)
            .map(|i| format!("kwok-node-{i}"))
            .collect();
        for name in &node_names {
            nodes::create(&client, &nodes::NodeSpec::named(name)).await?;
        }
        let names = node_names.clone();
        wait_until(
            &format!("{} nodes to be Ready and schedulable", names.len()),
            timeout,
            &mut processes,
            || {
                let client = client.clone();
                let names = names.clone();
                async move { nodes::all_ready(&client, &names).await }
            },
        )
        .await?;
        tracing::info!(
            "{} simulated nodes Ready in {:.1}s",
            node_names.len(),
            step.elapsed().as_secs_f64()
        );

        let real_node_info = match (&mut real_node, &options.real_node) {
            (Some(node), Some(node_options)) => {
                step = Instant::now();
                let info = node
                    .start(node_options, &pki, &server, &client, &log_dir, timeout)
                    .await?;
                tracing::info!(
                    "real node {} Ready in {:.1}s",
                    info.name,
                    step.elapsed().as_secs_f64()
                );
                Some(info)
            }
            _ => None,
        };

        let info = PlaneInfo {
            state_dir: dir.clone(),
            kubeconfig,
            log_dir,
            bin_dir: bin.dir().to_path_buf(),
            server,
            pids: processes
                .iter()
                .map(|p| (p.name().to_string(), p.pid()))
                .collect(),
            ports: [
                ("etcd-client", ports.etcd_client),
                ("etcd-peer", ports.etcd_peer),
                ("apiserver", ports.apiserver),
                ("scheduler", ports.scheduler),
                ("controller-manager", ports.controller_manager),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
            nodes: node_names,
            kubernetes_version: bin.versions().kubernetes.clone(),
            startup_seconds: started.elapsed().as_secs_f64(),
            real_node: real_node_info,
        };
        let json = serde_json::to_string_pretty(&info)
            .map_err(|e| PlaneError::io("encoding plane.json", std::io::Error::other(e)))?;
        std::fs::write(dir.join("plane.json"), json)
            .map_err(|e| PlaneError::io("writing plane.json", e))?;
        Ok(LocalPlane {
            real_node,
            info,
            processes,
            pki,
            binaries: options.binaries.clone(),
            step_timeout: options.step_timeout,
            recipes,
            _state: state,
        })
    }

    pub fn info(&self) -> &PlaneInfo {
        &self.info
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.info.kubeconfig
    }

    /// A fresh client for the admin user.
    pub async fn client(&self) -> Result<kube::Client, PlaneError> {
        client_from_kubeconfig(&self.info.kubeconfig).await
    }

    /// An error naming the first component that has exited, if any.
    pub fn check_running(&mut self) -> Result<(), PlaneError> {
        if let Some(node) = &mut self.real_node {
            node.check_running()?;
        }
        self.processes
            .iter_mut()
            .try_for_each(ManagedProcess::check_running)
    }

    /// Restarts kube-controller-manager with or without its own Deployment, ReplicaSet and DaemonSet
    /// controllers (hand-over tests: a workload managed by upstream's controllers, then by ours, or the
    /// reverse). Waits until the new process is healthy.
    pub async fn restart_controller_manager(
        &mut self,
        upstream: UpstreamWorkloadControllers,
    ) -> Result<(), PlaneError> {
        let name = Component::ControllerManager.name();
        if let Some(index) = self.processes.iter().position(|p| p.name() == name) {
            let old = self.processes.remove(index);
            old.stop(Duration::from_secs(10)).await;
        }
        let port = self
            .info
            .ports
            .get("controller-manager")
            .copied()
            .unwrap_or_default();
        let recipe = Recipe::new(
            &self.binaries.path(name),
            controller_manager_args(&self.info.kubeconfig, port, &self.pki, upstream),
            &[],
            self.info.log_file(Component::ControllerManager),
        );
        let process = recipe.spawn(Component::ControllerManager.name())?;
        self.recipes.insert(Component::ControllerManager, recipe);
        self.info.pids.insert(name.to_string(), process.pid());
        self.processes.push(process);
        let health = client_for_port(&self.info.kubeconfig, port).await?;
        wait_until(
            &format!("{name} /healthz after a restart"),
            self.step_timeout,
            &mut self.processes,
            || {
                let health = health.clone();
                async move { https_ok(&health, "/healthz").await }
            },
        )
        .await
    }

    /// Stops the components in reverse start order (SIGTERM, then SIGKILL after 10 s); the real node
    /// first, with everything it created on the host. Returns what the real node's teardown could not
    /// remove (empty without a real node, and when the host is clean).
    pub async fn stop(mut self) -> Vec<String> {
        let mut problems = Vec::new();
        if let Some(node) = self.real_node.take() {
            problems = tokio::task::spawn_blocking(move || node.stop())
                .await
                .unwrap_or_else(|e| vec![format!("the real node's teardown panicked: {e}")]);
        }
        while let Some(process) = self.processes.pop() {
            process.stop(Duration::from_secs(10)).await;
        }
        problems
    }
}

/// A kube client for the admin user of the kubeconfig at `path`.
pub async fn client_from_kubeconfig(path: &Path) -> Result<kube::Client, PlaneError> {
    let config = config_from_kubeconfig(path).await?;
    kube::Client::try_from(config).map_err(PlaneError::Client)
}

/// The kube client configuration of the kubeconfig at `path`.
pub async fn config_from_kubeconfig(path: &Path) -> Result<kube::Config, PlaneError> {
    let kubeconfig =
        kube::config::Kubeconfig::read_from(path).map_err(|source| PlaneError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| PlaneError::Kubeconfig {
            path: path.to_path_buf(),
            source,
        })
}

/// A client for a component's own HTTPS port (its serving cert is signed by the plane CA).
pub(crate) async fn client_for_port(
    kubeconfig: &Path,
    port: u16,
) -> Result<kube::Client, PlaneError> {
    let mut config = config_from_kubeconfig(kubeconfig).await?;
    config.cluster_url = format!("https://127.0.0.1:{port}")
        .parse()
        .map_err(|e| PlaneError::io("building a health URL", std::io::Error::other(e)))?;
    kube::Client::try_from(config).map_err(PlaneError::Client)
}

fn write_kubeconfig(path: &Path, server: &str, pki: &PkiFiles) -> Result<(), PlaneError> {
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: mini-kcm\n  cluster:\n    server: {server}\n    \
         certificate-authority: {ca}\nusers:\n- name: admin\n  user:\n    token: {token}\ncontexts:\n\
         - name: mini-kcm\n  context:\n    cluster: mini-kcm\n    user: admin\ncurrent-context: mini-kcm\n",
        ca = pki.ca_cert.display(),
        token = pki.admin_token,
    );
    std::fs::write(path, text)
        .map_err(|e| PlaneError::io(format!("writing kubeconfig {}", path.display()), e))
}

fn etcd_args(dir: &Path, ports: &Ports) -> Vec<String> {
    let client = format!("http://127.0.0.1:{}", ports.etcd_client);
    let peer = format!("http://127.0.0.1:{}", ports.etcd_peer);
    vec![
        "--name=node0".into(),
        format!("--data-dir={}", dir.join("etcd").display()),
        format!("--listen-client-urls={client}"),
        format!("--advertise-client-urls={client}"),
        format!("--listen-peer-urls={peer}"),
        format!("--initial-advertise-peer-urls={peer}"),
        format!("--initial-cluster=node0={peer}"),
        // A throw-away cluster: durability is not worth the fsync latency.
        "--unsafe-no-fsync".into(),
        "--auto-compaction-retention=1".into(),
        "--quota-backend-bytes=8589934592".into(),
        "--log-level=warn".into(),
    ]
}

fn apiserver_args(dir: &Path, ports: &Ports, pki: &PkiFiles, real_node: bool) -> Vec<String> {
    let mut args = vec![
        format!("--etcd-servers=http://127.0.0.1:{}", ports.etcd_client),
        format!("--secure-port={}", ports.apiserver),
        format!("--cert-dir={}", dir.join("pki").display()),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        format!("--client-ca-file={}", pki.ca_cert.display()),
        format!("--token-auth-file={}", pki.token_file.display()),
        "--authorization-mode=Node,RBAC".into(),
        // Added to the default plugins. Only a user outside `system:masters` is checked (the plane's
        // components and the admin token are in it), so it tests exactly a manager run with the
        // manifests' roles: setting an owner reference with `blockOwnerDeletion` needs `update` on the
        // owner's `finalizers` subresource, as on clusters that enable it (OpenShift does).
        "--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into(),
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
        format!(
            "--service-account-key-file={}",
            pki.service_account_public_key.display()
        ),
        format!(
            "--service-account-signing-key-file={}",
            pki.service_account_key.display()
        ),
        "--service-cluster-ip-range=10.0.0.0/24".into(),
        "--allow-privileged=true".into(),
        "--profiling=false".into(),
        format!(
            "--audit-policy-file={}",
            dir.join(AUDIT_POLICY_FILE).display()
        ),
        format!(
            "--audit-log-path={}",
            dir.join("logs").join(AUDIT_LOG_FILE).display()
        ),
        "--audit-log-format=json".into(),
        // Bounded on disk: one rotation of 200 MB.
        "--audit-log-maxsize=200".into(),
        "--audit-log-maxbackup=1".into(),
        // `kubectl logs` and `exec` on the real node: the kubelet accepts clients of the plane CA, at the
        // node's address (its host name means nothing to DNS).
        "--kubelet-preferred-address-types=InternalIP".into(),
        format!(
            "--kubelet-client-certificate={}",
            pki.apiserver_kubelet_client.cert.display()
        ),
        format!(
            "--kubelet-client-key={}",
            pki.apiserver_kubelet_client.key.display()
        ),
    ];
    if real_node {
        // Pods reach the API server through the `kubernetes` Service, which leads to the advertised
        // address: the real node's bridge. So the API server listens there too (on all addresses; the
        // kubeconfig still uses 127.0.0.1) and keeps that Service's endpoints itself.
        args.extend([
            "--bind-address=0.0.0.0".into(),
            format!("--advertise-address={}", real_node::GATEWAY),
            "--endpoint-reconciler-type=lease".into(),
        ]);
    } else {
        args.extend([
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            // The `kubernetes` Service would point at 127.0.0.1, which Endpoints reject.
            "--endpoint-reconciler-type=none".into(),
        ]);
    }
    args
}

const AUDIT_POLICY_FILE: &str = "audit-policy.yaml";
const AUDIT_LOG_FILE: &str = "audit.log";
/// Every request at metadata level, logged once when its response is complete (watches: when they
/// start too), so the log says who sent what without request or response bodies.
const AUDIT_POLICY: &str = "apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
";

/// Flags shared by kube-scheduler and kube-controller-manager: admin kubeconfig, no leader election,
/// an HTTPS health port on 127.0.0.1 with the plane's serving cert.
fn component_args(kubeconfig: &Path, port: u16, pki: &PkiFiles) -> Vec<String> {
    let kc = kubeconfig.display();
    vec![
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        "--leader-elect=false".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={port}"),
        format!("--tls-cert-file={}", pki.serving_cert.display()),
        format!("--tls-private-key-file={}", pki.serving_key.display()),
        "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics".into(),
        "--profiling=false".into(),
    ]
}

/// kube-scheduler with its client unthrottled. At its default (50 requests/s, burst 100) it binds at
/// most 50 pods a second, and that, not the workload controllers, set when every unthrottled rollout
/// of hundreds of pods on this plane was done. kwokctl's `--disable-qps-limits` raises it the same way.
fn scheduler_args(kubeconfig: &Path, port: u16, pki: &PkiFiles) -> Vec<String> {
    let mut args = component_args(kubeconfig, port, pki);
    args.extend([
        format!("--kube-api-qps={SCHEDULER_QPS}"),
        format!("--kube-api-burst={SCHEDULER_BURST}"),
    ]);
    args
}

/// The scheduler client's rate limit: high enough never to be reached on this plane.
const SCHEDULER_QPS: u32 = 5000;
const SCHEDULER_BURST: u32 = 10000;

/// The names kube-controller-manager knows our three controllers by.
pub const REPLACED_CONTROLLERS: [&str; 3] = [
    "deployment-controller",
    "replicaset-controller",
    "daemonset-controller",
];

fn controller_manager_args(
    kubeconfig: &Path,
    port: u16,
    pki: &PkiFiles,
    upstream: UpstreamWorkloadControllers,
) -> Vec<String> {
    let mut args = component_args(kubeconfig, port, pki);
    let controllers = match upstream {
        UpstreamWorkloadControllers::Enabled => "*".to_string(),
        UpstreamWorkloadControllers::Disabled => std::iter::once("*".to_string())
            .chain(REPLACED_CONTROLLERS.iter().map(|c| format!("-{c}")))
            .collect::<Vec<_>>()
            .join(","),
    };
    args.push(format!("--controllers={controllers}"));
    args.push(format!("--root-ca-file={}", pki.ca_cert.display()));
    args.push(format!(
        "--service-account-private-key-file={}",
        pki.service_account_key.display()
    ));
    args
}

fn kwok_args(kubeconfig: &Path, stages: &Path, real_node: bool) -> Vec<String> {
    // kwok must leave the real node (and its pods) to the kubelet.
    let manage = if real_node {
        format!(
            "--manage-nodes-with-label-selector=!{}",
            real_node::REAL_NODE_TAINT.0
        )
    } else {
        "--manage-all-nodes=true".to_string()
    };
    vec![
        format!("--kubeconfig={}", kubeconfig.display()),
        format!("--config={}", stages.display()),
        manage,
        "--cidr=10.244.0.0/16".into(),
        "--node-ip=127.0.0.1".into(),
        "--node-lease-duration-seconds=40".into(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pki() -> PkiFiles {
        PkiFiles {
            ca_cert: "ca".into(),
            serving_cert: "c".into(),
            serving_key: "k".into(),
            service_account_key: "sa".into(),
            service_account_public_key: "sa.pub".into(),
            token_file: "t".into(),
            admin_token: "x".into(),
            kubelet_client: crate::pki::ClientCert {
                cert: "k".into(),
                key: "k".into(),
            },
            kube_proxy_client: crate::pki::ClientCert {
                cert: "p".into(),
                key: "p".into(),
            },
            apiserver_kubelet_client: crate::pki::ClientCert {
                cert: "a".into(),
                key: "a".into(),
            },
        }
    }

    #[test]
    fn controller_manager_runs_everything_but_ours_unless_asked() {
        let pki = pki();
        let without = controller_manager_args(
            Path::new("kc"),
            1,
            &pki,
            UpstreamWorkloadControllers::Disabled,
        );
        assert!(without.contains(
            &"--controllers=*,-deployment-controller,-replicaset-controller,-daemonset-controller"
                .to_string()
        ));
        let with = controller_manager_args(
            Path::new("kc"),
            1,
            &pki,
            UpstreamWorkloadControllers::Enabled,
        );
        assert!(with.contains(&"--controllers=*".to_string()));
    }

    #[test]
    fn owner_references_are_permission_checked() {
        let ports = Ports {
            etcd_client: 1,
            etcd_peer: 2,
            apiserver: 3,
            scheduler: 4,
            controller_manager: 5,
        };
        let args = apiserver_args(Path::new("d"), &ports, &pki(), false);
        assert!(
            args.contains(
                &"--enable-admission-plugins=OwnerReferencesPermissionEnforcement".into()
            )
        );
    }

    #[test]
    fn only_the_scheduler_client_is_unthrottled() {
        let scheduler = scheduler_args(Path::new("kc"), 1, &pki());
        assert!(scheduler.contains(&"--kube-api-qps=5000".to_string()));
        assert!(scheduler.contains(&"--kube-api-burst=10000".to_string()));
        // The plane's kube-controller-manager keeps its defaults, like any cluster's.
        let manager = controller_manager_args(
            Path::new("kc"),
            1,
            &pki(),
            UpstreamWorkloadControllers::Disabled,
        );
        assert!(!manager.iter().any(|a| a.starts_with("--kube-api-")));
    }
}
