//! Fault hooks on the test binary's shared plane ([`crate::shared_plane`]): restart a component in place
//! and force every watch to expire. The plane lives on its own thread; these send it a request and wait
//! for the answer, so a test can call them from any runtime.

use std::sync::{Mutex, OnceLock};

use mini_kcm_local_plane::{Component, LocalPlane};
use tokio::sync::{mpsc, oneshot};

/// A fault the plane thread applies to its plane.
pub(crate) enum Fault {
    Restart(Component),
    ExpireWatches,
}

pub(crate) type Request = (Fault, oneshot::Sender<Result<FaultDone, String>>);

/// What a fault left behind.
#[derive(Debug, Clone, Copy)]
pub struct FaultDone {
    /// The pid of the component that was (re)started.
    pub pid: u32,
    /// For [`expire_watches`]: the etcd revision everything before which is compacted away.
    pub compacted_revision: Option<i64>,
}

static REQUESTS: OnceLock<mpsc::UnboundedSender<Request>> = OnceLock::new();
/// Component name to its current pid (the shared `PlaneInfo` keeps the pids of the first start).
static PIDS: Mutex<Vec<(String, u32)>> = Mutex::new(Vec::new());

pub(crate) fn install(requests: mpsc::UnboundedSender<Request>, plane: &LocalPlane) {
    let _ = REQUESTS.set(requests);
    remember_pids(plane);
}

fn remember_pids(plane: &LocalPlane) {
    if let Ok(mut pids) = PIDS.lock() {
        *pids = plane
            .info()
            .pids
            .iter()
            .map(|(k, v)| (k.clone(), *v))
            .collect();
    }
}

/// Serves fault requests on the plane thread, for as long as the binary runs.
pub(crate) async fn serve(mut plane: LocalPlane, mut requests: mpsc::UnboundedReceiver<Request>) {
    while let Some((fault, answer)) = requests.recv().await {
        let done = match fault {
            Fault::Restart(component) => plane.restart(component).await.map(|()| FaultDone {
                pid: plane
                    .info()
                    .pids
                    .get(component.name())
                    .copied()
                    .unwrap_or(0),
                compacted_revision: None,
            }),
            Fault::ExpireWatches => plane.expire_watches().await.map(|revision| FaultDone {
                pid: plane
                    .info()
                    .pids
                    .get(Component::ApiServer.name())
                    .copied()
                    .unwrap_or(0),
                compacted_revision: Some(revision),
            }),
        };
        remember_pids(&plane);
        let _ = answer.send(done.map_err(|e| e.to_string()));
    }
    // Nobody can ask any more; keep the plane until the binary exits.
    std::future::pending::<()>().await;
}

async fn request(fault: Fault) -> Result<FaultDone, String> {
    let requests = REQUESTS
        .get()
        .ok_or("no shared plane in this test binary (call shared_plane first)")?;
    let (tx, rx) = oneshot::channel();
    requests
        .send((fault, tx))
        .map_err(|_| "the plane thread is gone".to_string())?;
    rx.await
        .map_err(|_| "the plane thread dropped the request".to_string())?
}

/// Restarts `component` of the shared plane in place (same ports and data) and waits until it is healthy.
pub async fn restart_component(component: Component) -> Result<FaultDone, String> {
    request(Fault::Restart(component)).await
}

/// Makes every watch on the shared plane expire (etcd compacted to its current revision, then the API
/// server restarted): watchers resuming from an older resourceVersion get 410 Gone and must relist.
pub async fn expire_watches() -> Result<FaultDone, String> {
    request(Fault::ExpireWatches).await
}

/// The current pid of `component` on the shared plane (it changes when the component is restarted).
pub fn component_pid(component: Component) -> Option<u32> {
    PIDS.lock()
        .ok()?
        .iter()
        .find(|(name, _)| name == component.name())
        .map(|(_, pid)| *pid)
}
