//! The controller manager: what `mini-kcm run` (and `mini-kcm up` in-process) runs.
//!
//! It plays kube-controller-manager's role for our three controllers: one set of shared informers for
//! all controllers, one API client per controller (rate limit, User-Agent, request metrics, write
//! fence), leader election, `/metrics`, `/healthz`, `/readyz` and kube-controller-manager's other
//! endpoints (`/metrics/slis`, `/flagz`, `/statusz`, `/configz`), and an orderly shutdown (stop handing
//! out work, let in-flight syncs finish, release the lease).
//!
//! Where to start reading: [`run`] (this file) builds the informers, clients and controllers from the
//! descriptor table `CONTROLLERS`, serves `/metrics` (`http.rs`), and runs the controllers under
//! leader election (`leader_election.rs`); `secure_serving/` secures the HTTPS port (certificates,
//! authentication, authorization) behind one constructor; `live_view.rs` and `object_view.rs` are what the live view and
//! `mini-kcm explain` show. The API is [`run`] with its [`ManagerOptions`], and the view types `mini-kcm
//! explain` reads; everything else is private.

// The public surface is the list of `pub use` below; this keeps every other `pub` from claiming more.
#![warn(unreachable_pub)]

mod http;
mod leader_election;
mod live_view;
mod object_view;
mod options;
mod secure_serving;
mod slis;
mod version;
mod zpages;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mini_kcm_runtime::api::client::{
    ClientRateLimit, ControllerClientOptions, RequestBudget, RestClientMetrics, WriteFence,
    controller_client,
};
use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_runtime::controller::{Controller, ControllerOptions, NewController};
use mini_kcm_runtime::informers::SharedInformers;
use mini_kcm_runtime::observability::decisions::{DecisionLimits, DecisionLog};
use mini_kcm_runtime::observability::metrics::ControllerMetrics;
use mini_kcm_runtime::switches::features::Feature;
use mini_kcm_workqueue::WorkQueueMetrics;

use leader_election::{ApiLeaseStore, LeaderElector, LeaderState};
pub use leader_election::{LeaderElectionConfig, LeaderElectionError};
use live_view::{LiveView, Running};
pub use mini_kcm_runtime::informers::ContentType;
pub use mini_kcm_runtime::switches::features::{FeatureGates, feature_gates_help};
pub use object_view::{
    ConditionEntry, KeyQueueState, ObjectView, PodEntry, ReplicaSetEntry, ViewedKind,
};
pub use options::{ControllerName, Kinds, ManagerOptions};
use secure_serving::SecurePort;
pub use secure_serving::{
    AlwaysAllowPaths, ClientCaError, RequestHeaderAuth, SecurePortError, SecureServing,
    ServingCert, ServingCertError,
};
pub use version::{VERSION, Version};

/// Why the manager could not run, or stopped.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("building an API client")]
    Client(#[source] kube::Error),
    #[error(
        "the CRD copies are not installed ({resource}): install deploy/crds/ or use --kinds apps"
    )]
    MissingCrd {
        resource: String,
        #[source]
        source: kube::Error,
    },
    #[error("registering metrics")]
    Metrics(#[from] prometheus::Error),
    #[error("serving the endpoints on {addr}")]
    MetricsServer {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    SecurePort(#[from] SecurePortError),
    #[error("leader election")]
    LeaderElection(#[from] LeaderElectionError),
}

/// One controller the manager can run (upstream's controller descriptors): adding a controller is one
/// entry in [`CONTROLLERS`].
struct ControllerDescriptor {
    name: ControllerName,
    /// The kind it manages (its CRD copy must be installed to run for the copies).
    kind: WorkloadKind,
    /// Its API client's name: the end of its User-Agent and the `client` label of the request metrics.
    client: &'static str,
    /// The prefix of its metrics (`<subsystem>_sync_panics_total`, ...), as upstream's.
    metrics_subsystem: &'static str,
    /// Its settings from the manager's flags (`--concurrent-<kind>-syncs`, ...).
    settings: fn(&ManagerOptions, &mut ControllerOptions),
    /// It ranks pods to delete, and exports upstream's `<subsystem>_sorting_deletion_age_ratio`.
    ranks_deletions: bool,
    /// Builds one instance for one API family on the shared informers, with its own client.
    build: NewController,
}

const CONTROLLERS: [ControllerDescriptor; 3] = [
    ControllerDescriptor {
        name: ControllerName::ReplicaSet,
        kind: WorkloadKind::ReplicaSet,
        client: "replicaset-controller",
        metrics_subsystem: "replicaset_controller",
        settings: replica_set_settings,
        ranks_deletions: true,
        build: mini_kcm_replicaset::NEW_CONTROLLER,
    },
    ControllerDescriptor {
        name: ControllerName::Deployment,
        kind: WorkloadKind::Deployment,
        client: "deployment-controller",
        metrics_subsystem: "deployment_controller",
        settings: deployment_settings,
        ranks_deletions: false,
        build: mini_kcm_deployment::NEW_CONTROLLER,
    },
    ControllerDescriptor {
        name: ControllerName::DaemonSet,
        kind: WorkloadKind::DaemonSet,
        client: "daemon-set-controller",
        metrics_subsystem: "daemonset_controller",
        settings: daemon_set_settings,
        ranks_deletions: false,
        build: mini_kcm_daemonset::NEW_CONTROLLER,
    },
];

fn replica_set_settings(options: &ManagerOptions, controller: &mut ControllerOptions) {
    controller.workers = options.concurrent_replicaset_syncs;
}

fn deployment_settings(options: &ManagerOptions, controller: &mut ControllerOptions) {
    controller.workers = options.concurrent_deployment_syncs;
    controller.max_retry_delay = options.deployment_max_retry_delay;
}

fn daemon_set_settings(options: &ManagerOptions, controller: &mut ControllerOptions) {
    controller.workers = options.concurrent_daemonset_syncs;
}

/// Runs the selected controllers against the cluster of `config` until `shutdown` completes: the
/// clients, the CRD check, the endpoints, the controllers on the shared informers, the caches' first
/// sync, then (with leader election) the wait for the lease, the workers, and the orderly stop.
pub async fn run(
    config: kube::Config,
    mut options: ManagerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ManagerError> {
    let registry = prometheus::Registry::new();
    version::register_process_and_build_info(&registry)?;
    log_feature_gates(&options.feature_gates);
    warn_of_switched_off_safeties(&options);
    let clients = Clients::new(config, &options, &registry)?;
    let informer_client = clients.unfenced("shared-informers")?;
    adapt_gates_to_server(&informer_client, &mut options.feature_gates).await;
    if options.kinds.families().contains(&ApiFamily::Copies) {
        check_crds(&informer_client, &options).await?;
    }
    let mut elector = match (&options.leader_election, &clients.fence) {
        (Some(election), Some(fence)) => {
            let store = ApiLeaseStore::new(clients.unfenced("leader-election")?, election);
            let elector = LeaderElector::new(election.clone(), store, fence.clone())?;
            leader_metric(&registry, &election.lease_name, elector.subscribe())?;
            Some(elector)
        }
        _ => None,
    };
    let decisions = if options.decision_log {
        DecisionLog::new(DecisionLimits::default())
    } else {
        DecisionLog::disabled()
    };
    let live_view = LiveView::new(decisions.clone(), &options.safeties, options.watch_delay);
    let ready = Arc::new(AtomicBool::new(false));
    let started = version::process_start_time(&registry);
    let health = http::Health {
        registry: registry.clone(),
        caches_synced: ready.clone(),
        leader: elector
            .as_ref()
            .zip(options.leader_election.as_ref())
            .map(|(e, c)| (e.subscribe(), c.lease_duration)),
        live_view: live_view.clone(),
        zpages: Arc::new(zpages::Zpages::new(&options, started, &http::PATHS)),
        slis: slis::HealthSlis::new(started)?,
    };
    serve_endpoints(&options, &clients, health).await?;

    let informers = SharedInformers::new(informer_client, options.namespace.clone())
        .with_min_resync_period(options.min_resync_period)
        .with_streamed_lists(options.feature_gates.enabled(Feature::WatchListClient))
        .with_content_type(options.kube_api_content_type)
        .with_watch_delay(options.watch_delay);
    let controllers = build_controllers(&options, &clients, &informers, &registry, &decisions)?;
    tracing::info!(
        kinds = ?options.kinds,
        namespace = options.namespace.as_deref().unwrap_or("<all>"),
        "waiting for the informer caches to sync"
    );
    live_view.attach(Running {
        controllers: controllers.clone(),
        informers: informers.clone(),
    });
    informers.start().await;
    ready.store(true, Ordering::Release);
    tracing::info!("caches synced");
    tokio::pin!(shutdown);

    // A standby keeps its caches warm and writes nothing until it holds the lease.
    let (stop_election, election_stopped) = tokio::sync::oneshot::channel::<()>();
    let mut election = tokio::task::JoinSet::new();
    if let Some(mut elector) = elector.take() {
        let mut state = elector.subscribe();
        election.spawn(async move {
            elector
                .run(async {
                    let _ = election_stopped.await;
                })
                .await
        });
        let leading = async move {
            state
                .wait_for(|s| matches!(s, LeaderState::Leading { .. }))
                .await
                .map(|_| ())
        };
        tokio::select! {
            leading = leading => {
                if leading.is_err() {
                    return finish_election(&mut election).await;
                }
            }
            () = &mut shutdown => {
                tracing::info!("shutting down before this replica became the leader");
                drop(stop_election);
                return finish_election(&mut election).await;
            }
        }
    }
    tracing::info!("controllers running");

    // Everything the manager starts lives in JoinSets owned by this future: if it is dropped (or its
    // task aborted), every controller, worker and watch stops with it.
    let mut workers = tokio::task::JoinSet::new();
    for controller in &controllers {
        workers.spawn(controller.run());
    }
    tokio::select! {
        () = &mut shutdown => {}
        lost = election.join_next(), if !election.is_empty() => {
            // The elector ends on its own only when the lease is lost: its fence is already closed;
            // stop every worker now (in-flight requests are dropped), as upstream exits at once.
            workers.abort_all();
            return match lost {
                Some(Ok(Err(e))) => Err(e.into()),
                _ => Ok(()),
            };
        }
    }
    tracing::info!("shutting down: finishing in-flight syncs");
    ready.store(false, Ordering::Release);
    for controller in &controllers {
        controller.shut_down();
    }
    while workers.join_next().await.is_some() {}
    tracing::info!("controllers stopped");
    // Only now give the lease up: the in-flight syncs above still needed the open fence.
    drop(stop_election);
    finish_election(&mut election).await
}

/// Reads the API server's version: warns when it is older than the oldest supported minor (the
/// controllers still run: nothing they read or write is missing there, but no test proves it), and turns
/// off the gates whose fields the API server would drop (an older minor whose own gate for the field is
/// off), so syncs do not write statuses that change nothing. Without the server's version the gates stay
/// as given.
async fn adapt_gates_to_server(client: &kube::Client, gates: &mut FeatureGates) {
    let info = match client.apiserver_version().await {
        Ok(info) => info,
        Err(e) => {
            tracing::warn!(error = %e, "could not read the API server's version; feature gates as given");
            return;
        }
    };
    let Some(minor) = server_minor(&info.minor) else {
        tracing::warn!(version = %info.git_version, "unrecognised API server version; feature gates as given");
        return;
    };
    if let Some(warning) = unsupported_server(minor, version::oldest_supported_minor()) {
        tracing::warn!(server = %info.git_version, "{warning}");
    }
    let turned_off = gates.for_server_minor(minor);
    if !turned_off.is_empty() {
        tracing::info!(
            server = %info.git_version,
            gates = turned_off.join(","),
            "the API server drops the fields of these gates: off by default against it"
        );
    }
}

/// The minor of `/version`'s `minor` field, which may carry a suffix (`34+` on some distributions).
fn server_minor(minor: &str) -> Option<u32> {
    let digits: String = minor.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// The warning for an API server older than the oldest supported minor, if it is.
fn unsupported_server(minor: u32, oldest: Option<u32>) -> Option<String> {
    let oldest = oldest?;
    (minor < oldest).then(|| {
        format!(
            "UNSUPPORTED API SERVER: Kubernetes 1.{minor} is older than the oldest supported minor, \
             1.{oldest}; the controllers run as they would against 1.{oldest}, unproven (upgrade the \
             cluster or run a mini-kcm release of that time)"
        )
    })
}

/// One loud warning per safety mechanism a learner switched off, and for caches made to lag: this
/// manager misbehaves on purpose (docs/tour-breaking.md).
fn warn_of_switched_off_safeties(options: &ManagerOptions) {
    for safety in options.safeties.switched_off() {
        tracing::warn!(
            mechanism = safety.name(),
            "SAFETY MECHANISM SWITCHED OFF (for learning only): {}",
            safety.risk()
        );
    }
    if !options.watch_delay.is_zero() {
        tracing::warn!(
            delay = ?options.watch_delay,
            "WATCH DELAY (for learning only): every watch event reaches the caches this late"
        );
    }
}

/// Says which gates differ from their defaults, and which given gates no controller here consults.
fn log_feature_gates(gates: &FeatureGates) {
    let changed = gates.changed();
    if !changed.is_empty() {
        tracing::info!(
            gates = changed.join(","),
            "feature gates set away from their defaults"
        );
    }
    if !gates.ignored().is_empty() {
        tracing::warn!(
            gates = gates.ignored().join(","),
            "feature gates that mini-kcm's controllers do not consult; ignored"
        );
    }
}

/// The manager's API clients: each with a budget of its own, as each of kube-controller-manager's
/// clients has, and the controllers' behind the leader's write fence.
struct Clients {
    config: kube::Config,
    identity: String,
    limit: ClientRateLimit,
    metrics: RestClientMetrics,
    /// With leader election, the controllers' writes pass only while the lease is held.
    fence: Option<WriteFence>,
}

impl Clients {
    fn new(
        config: kube::Config,
        options: &ManagerOptions,
        registry: &prometheus::Registry,
    ) -> Result<Self, ManagerError> {
        Ok(Clients {
            config,
            identity: options.identity.clone(),
            limit: ClientRateLimit {
                qps: options.kube_api_qps,
                burst: options.kube_api_burst,
            },
            metrics: RestClientMetrics::register(registry)?,
            fence: options.leader_election.as_ref().map(|_| WriteFence::new()),
        })
    }

    fn build(
        &self,
        name: &str,
        fence: Option<WriteFence>,
    ) -> Result<(kube::Client, RequestBudget), ManagerError> {
        let settings = ControllerClientOptions {
            name: name.to_string(),
            identity: self.identity.clone(),
            budget: RequestBudget::new(self.limit),
            metrics: Some(self.metrics.clone()),
            fence,
        };
        controller_client(self.config.clone(), &settings)
            .map(|client| (client, settings.budget))
            .map_err(ManagerError::Client)
    }

    /// A controller's client (behind the fence), and the budget it draws from.
    fn fenced(&self, name: &str) -> Result<(kube::Client, RequestBudget), ManagerError> {
        self.build(name, self.fence.clone())
    }

    /// A client that reads or asks, never writes as a controller (informers, the lease, reviews).
    fn unfenced(&self, name: &str) -> Result<kube::Client, ManagerError> {
        self.build(name, None).map(|(client, _)| client)
    }
}

/// Starts the endpoints: the plain listener (`--metrics-addr`) and the secure port.
async fn serve_endpoints(
    options: &ManagerOptions,
    clients: &Clients,
    health: http::Health,
) -> Result<(), ManagerError> {
    if let Some(addr) = options.metrics_addr {
        let listener = bind(addr).await?;
        tracing::info!(%addr, "serving /metrics, /healthz, /readyz, /flagz, /statusz, /configz and /debug/controllers (plain HTTP, open)");
        tokio::spawn(http::serve(listener, health.clone(), http::Exposure::Plain));
    }
    if let Some(secure) = &options.secure_serving {
        let port = SecurePort::new(secure, clients.unfenced("delegated-auth")?)?;
        let listener = bind(secure.addr).await?;
        tracing::info!(addr = %secure.addr, "serving the endpoints over HTTPS, authorized through the API server");
        tokio::spawn(http::serve(listener, health, http::Exposure::Secure(port)));
    }
    Ok(())
}

/// One instance of each enabled controller per API family, from [`CONTROLLERS`], on the shared
/// informers; the instances of one controller share its client and metrics.
fn build_controllers(
    options: &ManagerOptions,
    clients: &Clients,
    informers: &SharedInformers,
    registry: &prometheus::Registry,
    decisions: &DecisionLog,
) -> Result<Vec<Arc<dyn Controller>>, ManagerError> {
    let queue_metrics = WorkQueueMetrics::new(registry)?;
    let mut controllers: Vec<Arc<dyn Controller>> = Vec::new();
    for descriptor in CONTROLLERS.iter().filter(|d| options.enabled(d.name)) {
        let mut metrics = ControllerMetrics::new(
            registry,
            descriptor.metrics_subsystem,
            Some(queue_metrics.clone()),
        )?;
        if descriptor.ranks_deletions {
            metrics =
                metrics.with_sorting_deletion_age_ratio(registry, descriptor.metrics_subsystem)?;
        }
        let (client, budget) = clients.fenced(descriptor.client)?;
        for family in options.kinds.families() {
            let mut settings = ControllerOptions::new(family, 1);
            settings.decisions = decisions.clone();
            settings.priorities = options.priorities();
            settings.budget = budget.clone();
            settings.features = options.feature_gates.clone();
            settings.safeties = options.safeties.clone();
            (descriptor.settings)(options, &mut settings);
            let controller =
                (descriptor.build)(informers, client.clone(), settings, metrics.clone());
            controllers.push(controller);
        }
    }
    Ok(controllers)
}

async fn finish_election(
    election: &mut tokio::task::JoinSet<Result<(), LeaderElectionError>>,
) -> Result<(), ManagerError> {
    match election.join_next().await {
        Some(Ok(Err(e))) => Err(e.into()),
        _ => Ok(()),
    }
}

/// `leader_election_master_status{name}`: 1 while this replica leads (client-go's metric).
fn leader_metric(
    registry: &prometheus::Registry,
    lease_name: &str,
    mut state: tokio::sync::watch::Receiver<LeaderState>,
) -> Result<(), prometheus::Error> {
    let gauge = prometheus::IntGaugeVec::new(
        prometheus::Opts::new(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
        ),
        &["name"],
    )?;
    registry.register(Box::new(gauge.clone()))?;
    let gauge = gauge.with_label_values(&[lease_name]);
    gauge.set(0);
    tokio::spawn(async move {
        loop {
            let leading = matches!(*state.borrow_and_update(), LeaderState::Leading { .. });
            gauge.set(i64::from(leading));
            if state.changed().await.is_err() {
                gauge.set(0);
                return;
            }
        }
    });
    Ok(())
}

/// With `--kinds copies|both`, the CRDs must exist; fail clearly rather than watch a missing resource.
async fn check_crds(client: &kube::Client, options: &ManagerOptions) -> Result<(), ManagerError> {
    for descriptor in CONTROLLERS.iter().filter(|d| options.enabled(d.name)) {
        let kind = descriptor.kind;
        let resource = kind.api_resource(ApiFamily::Copies);
        let api: kube::Api<kube::api::DynamicObject> =
            kube::Api::all_with(client.clone(), &resource);
        if let Err(source) = api
            .list_metadata(&kube::api::ListParams::default().limit(1))
            .await
        {
            return Err(ManagerError::MissingCrd {
                resource: format!("{}.{}", resource.plural, resource.group),
                source,
            });
        }
    }
    Ok(())
}

async fn bind(addr: std::net::SocketAddr) -> Result<tokio::net::TcpListener, ManagerError> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| ManagerError::MetricsServer { addr, source })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_minor_is_read_with_or_without_a_suffix() {
        assert_eq!(server_minor("37"), Some(37));
        assert_eq!(server_minor("34+"), Some(34));
        assert_eq!(server_minor(""), None);
        assert_eq!(server_minor("x"), None);
    }

    #[test]
    fn a_server_older_than_the_oldest_supported_minor_is_warned_of() {
        let oldest = version::oldest_supported_minor();
        assert_eq!(oldest, Some(35), "versions.env's OLDEST_SUPPORTED_MINOR");
        let warning = unsupported_server(34, oldest).expect("1.34 is out of support");
        assert!(
            warning.contains("Kubernetes 1.34 is older than the oldest supported minor, 1.35"),
            "{warning}"
        );
        for supported in [35, 36, 37, 38] {
            assert_eq!(unsupported_server(supported, oldest), None, "1.{supported}");
        }
        assert_eq!(unsupported_server(20, None), None, "no range known");
    }
}
