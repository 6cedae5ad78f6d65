//! Fault hooks on a running plane, for tests and by hand: restart one component in place (same ports,
//! same data) and force every watch to expire so that clients must relist.
//!
//! Watch expiry is produced as a real cluster produces it after a long disconnection: while the API
//! server is down, etcd moves past every revision a client has seen and is compacted; when the API
//! server is back, a watcher resuming from its older resourceVersion gets `410 Gone` ("too old resource
//! version") whether the API server answers from its rebuilt watch cache or from etcd. (Compacting
//! alone expires nothing: a client that has seen the newest revision resumes fine.)

use std::time::Duration;

use crate::PlaneError;
use crate::health::{https_ok, plain_http_get, plain_http_post, wait_until};
use crate::plane::{Component, LocalPlane, client_for_port, client_from_kubeconfig};

/// How long a restarted component gets to stop before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);

impl LocalPlane {
    /// Stops `component` (SIGTERM, SIGKILL after 10 s) and starts it again with the same arguments, ports
    /// and data; waits until it is healthy again (kwok has no health port: it only has to keep running).
    /// The new pid is in [`LocalPlane::info`].
    pub async fn restart(&mut self, component: Component) -> Result<(), PlaneError> {
        let at = self.stop_component(component).await;
        if component == Component::Kwok {
            self.release_kwok_node_leases().await?;
        }
        self.start_component(component, at).await
    }

    /// Deletes the node leases the stopped kwok held. A restarted kubelet renews its node's lease under
    /// the same holder (the node's name); a new kwok process is a new holder (host name + a random id)
    /// and would leave each node alone until the old holder's lease expired (40 s here), not starting
    /// the pods bound to it meanwhile. Leases held under their node's name (a real node's kubelet) stay.
    async fn release_kwok_node_leases(&self) -> Result<(), PlaneError> {
        use k8s_openapi::api::coordination::v1::Lease;
        let client = client_from_kubeconfig(&self.info.kubeconfig).await?;
        let leases: kube::Api<Lease> = kube::Api::namespaced(client, "kube-node-lease");
        let failed =
            |what: &str, e: kube::Error| PlaneError::io(what.to_string(), std::io::Error::other(e));
        let list = leases
            .list(&Default::default())
            .await
            .map_err(|e| failed("listing the node leases", e))?;
        for lease in list {
            let name = lease.metadata.name.clone().unwrap_or_default();
            let holder = lease
                .spec
                .as_ref()
                .and_then(|s| s.holder_identity.as_deref());
            if holder.is_none_or(|h| h == name) {
                continue;
            }
            match leases.delete(&name, &Default::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.is_not_found() => {}
                Err(e) => return Err(failed("deleting a node lease of the old kwok", e)),
            }
        }
        Ok(())
    }

    /// Stops `component`; returns where it was in the start order.
    async fn stop_component(&mut self, component: Component) -> Option<usize> {
        let index = self
            .processes
            .iter()
            .position(|p| p.name() == component.name());
        if let Some(index) = index {
            let old = self.processes.remove(index);
            old.stop(STOP_GRACE).await;
        }
        index
    }

    async fn start_component(
        &mut self,
        component: Component,
        at: Option<usize>,
    ) -> Result<(), PlaneError> {
        let recipe = self.recipes.get(&component).cloned().ok_or_else(|| {
            PlaneError::io(
                format!("starting {} again", component.name()),
                std::io::Error::other("this plane did not start it"),
            )
        })?;
        let process = recipe.spawn(component.name())?;
        self.info
            .pids
            .insert(component.name().to_string(), process.pid());
        // Keep the start order, which `stop` reverses.
        let at = at.unwrap_or(self.processes.len()).min(self.processes.len());
        self.processes.insert(at, process);
        self.wait_healthy(component).await
    }

    async fn wait_healthy(&mut self, component: Component) -> Result<(), PlaneError> {
        let port = |name: &str| self.info.ports.get(name).copied().unwrap_or_default();
        let what = format!("{} healthy after a restart", component.name());
        let timeout = self.step_timeout;
        match component {
            Component::Etcd => {
                let port = port("etcd-client");
                wait_until(&what, timeout, &mut self.processes, || async move {
                    plain_http_get(port, "/health")
                        .await
                        .map(|body| body.contains("\"health\":\"true\""))
                })
                .await
            }
            Component::ApiServer => {
                let client = client_from_kubeconfig(&self.info.kubeconfig).await?;
                wait_until(&what, timeout, &mut self.processes, || {
                    let client = client.clone();
                    async move { https_ok(&client, "/readyz").await }
                })
                .await
            }
            Component::Scheduler | Component::ControllerManager => {
                let name = if component == Component::Scheduler {
                    "scheduler"
                } else {
                    "controller-manager"
                };
                let health = client_for_port(&self.info.kubeconfig, port(name)).await?;
                wait_until(&what, timeout, &mut self.processes, || {
                    let health = health.clone();
                    async move { https_ok(&health, "/healthz").await }
                })
                .await
            }
            Component::Kwok => self.check_running(),
        }
    }

    /// Writes a marker key to etcd (so that its revision moves past anything a client has seen), then
    /// compacts etcd to that revision and returns it: every older revision is gone.
    pub(crate) async fn compact_etcd(&self) -> Result<i64, PlaneError> {
        let port = self
            .info
            .ports
            .get("etcd-client")
            .copied()
            .unwrap_or_default();
        let failed =
            |what: &str, e: String| PlaneError::io(what.to_string(), std::io::Error::other(e));
        // Key `/mini-kcm-fault/expiry`, value `x`, base64 as etcd's JSON gateway wants them; the answer's
        // header carries the revision of the write.
        let body = plain_http_post(
            port,
            "/v3/kv/put",
            r#"{"key":"L21pbmkta2NtLWZhdWx0L2V4cGlyeQ==","value":"eA=="}"#,
        )
        .await
        .map_err(|e| failed("writing etcd's fault marker", e))?;
        let revision = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| {
                let r = v.pointer("/header/revision")?.clone();
                r.as_str()
                    .and_then(|s| s.parse::<i64>().ok())
                    .or(r.as_i64())
            })
            .ok_or_else(|| {
                failed(
                    "reading etcd's revision",
                    format!("unexpected answer {body}"),
                )
            })?;
        plain_http_post(
            port,
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )
        .await
        .map_err(|e| failed("compacting etcd", e))?;
        Ok(revision)
    }

    /// Makes every watch on the plane expire: the API server stops (clients stop seeing changes), etcd
    /// moves one revision on and is compacted to it, and the API server starts again (its watch cache
    /// starts from a fresh list). A client resuming its watch from the resourceVersion it had gets
    /// `410 Gone` and must relist. Returns the compacted revision.
    pub async fn expire_watches(&mut self) -> Result<i64, PlaneError> {
        let at = self.stop_component(Component::ApiServer).await;
        let compacted = self.compact_etcd().await;
        // Start the API server again even if the compaction failed: the plane must stay usable.
        let started = self.start_component(Component::ApiServer, at).await;
        let revision = compacted?;
        started?;
        Ok(revision)
    }
}
