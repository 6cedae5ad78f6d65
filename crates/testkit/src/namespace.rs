//! A fresh namespace per test, so tests on one shared plane cannot see each other's objects.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use mini_kcm_local_plane::{PlaneInfo, client_from_kubeconfig};

/// A namespace created for one test on the shared plane, with a client of the test's own runtime.
pub struct TestNamespace {
    pub client: Client,
    pub name: String,
    pub plane: &'static PlaneInfo,
}

impl TestNamespace {
    /// Creates `<prefix>-<random>` and waits until its `default` ServiceAccount exists (pods are
    /// rejected by the ServiceAccount admission plugin before that).
    pub async fn create(plane: &'static PlaneInfo, prefix: &str) -> Self {
        let client = client_from_kubeconfig(&plane.kubeconfig)
            .await
            .unwrap_or_else(|e| panic!("client for the shared plane: {e}"));
        let namespace = Namespace {
            metadata: ObjectMeta {
                generate_name: Some(format!("{prefix}-")),
                ..Default::default()
            },
            ..Default::default()
        };
        let created = Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating a namespace for {prefix}: {e}"));
        let name = created
            .metadata
            .name
            .unwrap_or_else(|| panic!("the API server returned a namespace without a name"));
        let ns = TestNamespace {
            client,
            name,
            plane,
        };
        let accounts: Api<ServiceAccount> = ns.api();
        ns.wait_for(
            &accounts,
            "default",
            "the namespace's default ServiceAccount",
            Duration::from_secs(60),
            |sa| sa.is_some(),
        )
        .await;
        ns
    }

    /// An API handle for a namespaced kind in this namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.name)
    }
}
