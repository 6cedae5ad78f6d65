//! The controller manager: what `mini-kcm run` (and `mini-kcm up` in-process) runs.
//!
//! It plays kube-controller-manager's role for our three controllers: one set of shared informers for
//! all controllers, one rate-limited API client per controller, `/metrics`, `/healthz` and `/readyz`,
//! and an orderly shutdown (stop handing out work, let in-flight syncs finish).

mod http;
mod options;

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use mini_kcm_daemonset::{DaemonSetController, DaemonSetOptions};
use mini_kcm_deployment::{DeploymentController, DeploymentOptions};
use mini_kcm_replicaset::{ReplicaSetController, ReplicaSetOptions};
use mini_kcm_runtime::client::{ClientRateLimit, rate_limited_client};
use mini_kcm_runtime::informers::SharedInformers;
use mini_kcm_runtime::kinds::{ApiFamily, WorkloadKind};
use mini_kcm_runtime::metrics::ControllerMetrics;
use mini_kcm_workqueue::WorkQueueMetrics;

pub use options::{
    ControllerName, DEFAULT_MIN_RESYNC_PERIOD, Kinds, ManagerOptions, parse_go_duration,
};

/// Why the manager could not run.
#[derive(Debug, thiserror::Error)]
pub enum ManagerError {
    #[error("building an API client: {0}")]
    Client(#[source] kube::Error),
    #[error(
        "the CRD copies are not installed ({resource}): install deploy/crds/ or use --kinds apps"
    )]
    MissingCrd {
        resource: String,
        #[source]
        source: kube::Error,
    },
    #[error("registering metrics: {0}")]
    Metrics(#[from] prometheus::Error),
    #[error("serving metrics on {addr}: {source}")]
    MetricsServer {
        addr: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// Runs the selected controllers against the cluster of `config` until `shutdown` completes.
pub async fn run(
    config: kube::Config,
    options: ManagerOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ManagerError> {
    let limit = ClientRateLimit {
        qps: options.kube_api_qps,
        burst: options.kube_api_burst,
    };
    let client_for =
        |_name: &str| rate_limited_client(config.clone(), limit).map_err(ManagerError::Client);
    let informer_client = client_for("shared-informers")?;
    let families = options.kinds.families();
    if families.contains(&ApiFamily::Copies) {
        check_crds(&informer_client, &options).await?;
    }

    let registry = prometheus::Registry::new();
    let queue_metrics = WorkQueueMetrics::new(&registry)?;
    let ready = Arc::new(AtomicBool::new(false));
    if let Some(addr) = options.metrics_addr {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|source| ManagerError::MetricsServer { addr, source })?;
        tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
        tokio::spawn(http::serve(listener, registry.clone(), ready.clone()));
    }

    let informers = SharedInformers::new(informer_client, options.namespace.clone())
        .with_min_resync_period(options.min_resync_period);
    let mut replica_set_controllers = Vec::new();
    if options.enabled(ControllerName::ReplicaSet) {
        let metrics = ControllerMetrics::new(
            &registry,
            "replicaset_controller",
            Some(queue_metrics.clone()),
        )?;
        for family in &families {
            let mut rs_options = ReplicaSetOptions::new(*family);
            rs_options.workers = options.concurrent_replicaset_syncs;
            replica_set_controllers.push(ReplicaSetController::new(
                &informers,
                client_for("replicaset-controller")?,
                rs_options,
                metrics.clone(),
            ));
        }
    }
    let mut deployment_controllers = Vec::new();
    if options.enabled(ControllerName::Deployment) {
        let metrics = ControllerMetrics::new(
            &registry,
            "deployment_controller",
            Some(queue_metrics.clone()),
        )?;
        for family in &families {
            let mut d_options = DeploymentOptions::new(*family);
            d_options.workers = options.concurrent_deployment_syncs;
            d_options.max_retry_delay = options.deployment_max_retry_delay;
            deployment_controllers.push(DeploymentController::new(
                &informers,
                client_for("deployment-controller")?,
                d_options,
                metrics.clone(),
            ));
        }
    }
    let mut daemon_set_controllers = Vec::new();
    if options.enabled(ControllerName::DaemonSet) {
        let metrics = ControllerMetrics::new(
            &registry,
            "daemonset_controller",
            Some(queue_metrics.clone()),
        )?;
        for family in &families {
            let mut ds_options = DaemonSetOptions::new(*family);
            ds_options.workers = options.concurrent_daemonset_syncs;
            daemon_set_controllers.push(DaemonSetController::new(
                &informers,
                client_for("daemon-set-controller")?,
                ds_options,
                metrics.clone(),
            ));
        }
    }
    tracing::info!(
        kinds = ?options.kinds,
        namespace = options.namespace.as_deref().unwrap_or("<all>"),
        "waiting for the informer caches to sync"
    );
    informers.start().await;
    ready.store(true, Ordering::Release);
    tracing::info!("caches synced; controllers running");

    // Everything the manager starts lives in JoinSets owned by this future: if it is dropped (or its
    // task aborted), every controller, worker and watch stops with it.
    let mut workers = tokio::task::JoinSet::new();
    for controller in &replica_set_controllers {
        let controller = controller.clone();
        workers.spawn(async move { controller.run().await });
    }
    for controller in &deployment_controllers {
        let controller = controller.clone();
        workers.spawn(async move { controller.run().await });
    }
    for controller in &daemon_set_controllers {
        let controller = controller.clone();
        workers.spawn(async move { controller.run().await });
    }
    shutdown.await;
    tracing::info!("shutting down: finishing in-flight syncs");
    ready.store(false, Ordering::Release);
    for controller in &replica_set_controllers {
        controller.shut_down();
    }
    for controller in &deployment_controllers {
        controller.shut_down();
    }
    for controller in &daemon_set_controllers {
        controller.shut_down();
    }
    while workers.join_next().await.is_some() {}
    tracing::info!("controllers stopped");
    Ok(())
}

/// With `--kinds copies|both`, the CRDs must exist; fail clearly rather than watch a missing resource.
async fn check_crds(client: &kube::Client, options: &ManagerOptions) -> Result<(), ManagerError> {
    for controller in options.enabled_controllers() {
        let kind = match controller {
            ControllerName::ReplicaSet => WorkloadKind::ReplicaSet,
            ControllerName::Deployment => WorkloadKind::Deployment,
            ControllerName::DaemonSet => WorkloadKind::DaemonSet,
        };
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
