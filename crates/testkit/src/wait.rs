//! Waiting for a condition by watching, with a failure message that explains the state of the world.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Event, Node, Pod};
use kube::api::ListParams;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use crate::{Component, TestNamespace};

impl TestNamespace {
    /// Waits until `condition` holds for the object `name` (`None` = it does not exist), re-checking on
    /// every watch event. Panics on timeout with a dump of the namespace and component logs.
    pub async fn wait_for<K>(
        &self,
        api: &Api<K>,
        name: &str,
        what: &str,
        timeout: Duration,
        condition: impl Fn(Option<&K>) -> bool,
    ) -> Option<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + serde::Serialize + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        self.wait_for_with(api, Default::default(), name, what, timeout, condition)
            .await
    }

    /// Waits until `condition` holds for the set of objects selected by `config` (a reflector keeps the
    /// set current from a watch). Returns that set. Panics on timeout with a dump.
    pub async fn wait_for_list<K>(
        &self,
        api: &Api<K>,
        config: watcher::Config,
        what: &str,
        timeout: Duration,
        condition: impl Fn(&[K]) -> bool,
    ) -> Vec<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + serde::Serialize + Send + Sync + 'static,
        K::DynamicType: Default + Eq + std::hash::Hash + Clone,
    {
        self.wait_for_list_with(api, Default::default(), config, what, timeout, condition)
            .await
    }

    /// [`TestNamespace::wait_for`] for dynamic kinds (e.g. the CRD copies), whose type information is
    /// passed in.
    pub async fn wait_for_with<K>(
        &self,
        api: &Api<K>,
        dyntype: K::DynamicType,
        name: &str,
        what: &str,
        timeout: Duration,
        condition: impl Fn(Option<&K>) -> bool,
    ) -> Option<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + serde::Serialize + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let matching = self
            .wait_for_list_with(api, dyntype, config, what, timeout, |objects: &[K]| {
                condition(objects.first())
            })
            .await;
        matching.into_iter().next()
    }

    /// [`TestNamespace::wait_for_list`] for dynamic kinds.
    pub async fn wait_for_list_with<K>(
        &self,
        api: &Api<K>,
        dyntype: K::DynamicType,
        config: watcher::Config,
        what: &str,
        timeout: Duration,
        condition: impl Fn(&[K]) -> bool,
    ) -> Vec<K>
    where
        K: Resource + Clone + Debug + DeserializeOwned + serde::Serialize + Send + Sync + 'static,
        K::DynamicType: Eq + std::hash::Hash + Clone,
    {
        let writer = reflector::store::Writer::new(dyntype);
        let reader = writer.as_reader();
        let mut events =
            std::pin::pin!(reflector(writer, watcher(api.clone(), config)).default_backoff());
        let mut last_error = None;
        let outcome = tokio::time::timeout(timeout, async {
            // Evaluate once the initial list is in the store, then again after every change.
            let mut synced = false;
            loop {
                match events.next().await {
                    Some(Ok(watcher::Event::InitDone)) => synced = true,
                    Some(Ok(watcher::Event::Init | watcher::Event::InitApply(_))) => continue,
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        last_error = Some(e.to_string());
                        continue;
                    }
                    // The backoff-wrapped watcher never ends; the timeout bounds us regardless.
                    None => std::future::pending::<()>().await,
                }
                if !synced {
                    continue;
                }
                let mut objects: Vec<K> = reader.state().iter().map(|o| (**o).clone()).collect();
                objects.sort_by_key(|o| o.meta().name.clone());
                if condition(&objects) {
                    return objects;
                }
            }
        })
        .await;
        match outcome {
            Ok(objects) => objects,
            Err(_) => {
                let seen: Vec<String> = reader
                    .state()
                    .iter()
                    .map(|o| serde_json::to_string(&summary(o.as_ref())).unwrap_or_default())
                    .collect();
                panic!(
                    "timed out after {timeout:?} waiting for {what} in namespace {ns}\n\
                     watched objects ({n}):\n{objects}\nlast watch error: {last_error:?}\n{dump}",
                    ns = self.name,
                    n = seen.len(),
                    objects = seen.join("\n"),
                    dump = self.dump().await,
                )
            }
        }
    }

    /// The workload objects, pods and events of the namespace, the nodes' taints and unhealthy conditions
    /// (why a pod stays unscheduled or is evicted) and the tails of the component logs.
    pub async fn dump(&self) -> String {
        let mut out = String::from("---- namespace dump ----\n");
        out += &self.dump_kind::<Deployment>("deployments").await;
        out += &self.dump_kind::<ReplicaSet>("replicasets").await;
        out += &self.dump_kind::<DaemonSet>("daemonsets").await;
        for plural in ["replicasets", "deployments", "daemonsets"] {
            out += &self.dump_copies(plural).await;
        }
        out += &self.dump_kind::<Pod>("pods").await;
        match self.api::<Event>().list(&ListParams::default()).await {
            Ok(events) => {
                out += "events:\n";
                for e in events.items {
                    out += &format!(
                        "  {} {} {}: {}\n",
                        e.type_.unwrap_or_default(),
                        e.involved_object.name.unwrap_or_default(),
                        e.reason.unwrap_or_default(),
                        e.message.unwrap_or_default()
                    );
                }
            }
            Err(e) => out += &format!("events: cannot list: {e}\n"),
        }
        out += &self.dump_nodes().await;
        for component in [
            Component::ControllerManager,
            Component::Scheduler,
            Component::Kwok,
        ] {
            out += &format!(
                "---- last lines of {} ----\n{}\n",
                self.plane.log_file(component).display(),
                self.plane.log_tail(component, 15)
            );
        }
        out
    }

    /// One line per node (see [`node_line`]).
    async fn dump_nodes(&self) -> String {
        let nodes: Api<Node> = Api::all(self.client.clone());
        match nodes.list(&ListParams::default()).await {
            Ok(list) => {
                let mut out = format!("nodes ({}):\n", list.items.len());
                for node in list.items {
                    out += &format!("  {}\n", node_line(node));
                }
                out
            }
            Err(e) => format!("nodes: cannot list: {e}\n"),
        }
    }

    /// The `minikcm.dev` copies of a kind (nothing if the CRDs are not installed).
    async fn dump_copies(&self, plural: &str) -> String {
        let resource = kube::discovery::ApiResource {
            group: "minikcm.dev".into(),
            version: "v1".into(),
            api_version: "minikcm.dev/v1".into(),
            kind: String::new(),
            plural: plural.into(),
        };
        let api: Api<kube::api::DynamicObject> =
            Api::namespaced_with(self.client.clone(), &self.name, &resource);
        match api.list(&ListParams::default()).await {
            Ok(list) if !list.items.is_empty() => {
                let mut s = format!("{plural}.minikcm.dev ({}):\n", list.items.len());
                for item in &list.items {
                    s += &format!(
                        "  {}\n",
                        serde_json::to_string(&summary(item)).unwrap_or_default()
                    );
                }
                s
            }
            _ => String::new(),
        }
    }

    async fn dump_kind<K>(&self, label: &str) -> String
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + serde::Serialize,
        K::DynamicType: Default,
    {
        match self.api::<K>().list(&ListParams::default()).await {
            Ok(list) => {
                let mut s = format!("{label} ({}):\n", list.items.len());
                for item in &list.items {
                    s += &format!(
                        "  {}\n",
                        serde_json::to_string(&summary(item)).unwrap_or_default()
                    );
                }
                s
            }
            Err(e) => format!("{label}: cannot list: {e}\n"),
        }
    }
}

/// An object without its managedFields (noise in a failure message).
fn summary<K: serde::Serialize>(object: &K) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap_or_default();
    if let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) {
        meta.remove("managedFields");
    }
    value
}

/// A node's name, taints and every condition not in its healthy state (`Ready` not `True`, a pressure or
/// unavailability condition not `False`): why a pod stays unscheduled or is evicted.
fn node_line(node: Node) -> String {
    let taints: Vec<String> = node
        .spec
        .and_then(|s| s.taints)
        .unwrap_or_default()
        .into_iter()
        .map(|t| format!("{}={}:{}", t.key, t.value.unwrap_or_default(), t.effect))
        .collect();
    let unhealthy: Vec<String> = node
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| match c.type_.as_str() {
            "Ready" => c.status != "True",
            _ => c.status != "False",
        })
        .map(|c| {
            format!(
                "{}={} ({})",
                c.type_,
                c.status,
                c.message.unwrap_or_default()
            )
        })
        .collect();
    format!(
        "{} taints {taints:?} unhealthy conditions {unhealthy:?}",
        node.metadata.name.unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(taints: serde_json::Value, conditions: serde_json::Value) -> Node {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "n1"},
            "spec": {"taints": taints},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    #[test]
    fn a_node_under_disk_pressure_says_so() {
        let line = node_line(node(
            serde_json::json!([{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}]),
            serde_json::json!([
                {"type": "Ready", "status": "True"},
                {"type": "MemoryPressure", "status": "False"},
                {"type": "DiskPressure", "status": "True", "message": "low on ephemeral-storage"},
                {"type": "PIDPressure", "status": "Unknown"},
            ]),
        ));
        assert_eq!(
            line,
            "n1 taints [\"node.kubernetes.io/disk-pressure=:NoSchedule\"] unhealthy conditions \
             [\"DiskPressure=True (low on ephemeral-storage)\", \"PIDPressure=Unknown ()\"]"
        );
    }

    #[test]
    fn a_healthy_node_lists_nothing() {
        let line = node_line(node(
            serde_json::json!([]),
            serde_json::json!([
                {"type": "Ready", "status": "True"},
                {"type": "DiskPressure", "status": "False"},
            ]),
        ));
        assert_eq!(line, "n1 taints [] unhealthy conditions []");
    }
}
