//! The manager's writes refused: a ValidatingAdmissionPolicy that denies every write of one user to the
//! workload objects and pods of one namespace, for faults where the API server is up but the manager's
//! requests fail (as with a broken admission webhook or an RBAC mistake). The manager runs as that user
//! (the admin impersonating it), so only its writes are refused; the test's own go through.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use mini_kcm_runtime::api::kinds::{ApiFamily, ReplicaSetObject, WorkloadKind};
use mini_kcm_testkit::TestNamespace;
use serde_json::json;

use crate::{TIMEOUT, replica_set};

/// The message of the policy's denials.
const DENIED: &str = "the test denies the manager's writes";

/// The user a manager of `ns` runs as, whose writes [`DeniedWrites`] refuses.
pub fn manager_user(ns: &TestNamespace) -> String {
    format!("mini-kcm-{}", ns.name)
}

/// The plane's admin configuration, impersonating [`manager_user`] (with the admin's group, so the
/// manager may do everything else).
pub async fn manager_config(ns: &TestNamespace) -> kube::Config {
    let mut config = mini_kcm_local_plane::config_from_kubeconfig(&ns.plane.kubeconfig)
        .await
        .unwrap();
    config.auth_info.impersonate = Some(manager_user(ns));
    config.auth_info.impersonate_groups = Some(vec!["system:masters".to_string()]);
    config
}

/// A policy in force: [`manager_user`]'s creates, updates and deletes of Deployments, ReplicaSets (and
/// their status and scale) of both families, and of pods, in `ns` are refused until [`DeniedWrites::allow`].
pub struct DeniedWrites {
    client: kube::Client,
    name: String,
}

impl DeniedWrites {
    /// Installs the policy and waits until it refuses a dry-run create of a ReplicaSet of `family` by
    /// the manager's user (a policy takes effect a moment after it is created).
    pub async fn deny(ns: &TestNamespace, family: ApiFamily) -> Self {
        let name = format!("deny-{}", ns.name);
        let user = manager_user(ns);
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(ns.client.clone());
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(ns.client.clone());
        let policy = json!({
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [
                    {
                        "apiGroups": ["apps", "minikcm.dev"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["deployments", "deployments/status", "replicasets",
                                      "replicasets/status", "replicasets/scale"],
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE", "DELETE"],
                        "resources": ["pods"],
                    },
                ]},
                "validations": [{
                    "expression": format!("request.userInfo.username != '{user}'"),
                    "message": DENIED,
                }],
            },
        });
        policies
            .create(
                &PostParams::default(),
                &serde_json::from_value(policy).unwrap(),
            )
            .await
            .unwrap();
        let binding = json!({
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": ns.name},
                }},
            },
        });
        bindings
            .create(
                &PostParams::default(),
                &serde_json::from_value(binding).unwrap(),
            )
            .await
            .unwrap();
        let denied = Self {
            client: ns.client.clone(),
            name,
        };
        denied.wait_until_denied(ns, family).await;
        denied
    }

    /// Removes the policy: the manager's writes go through again.
    pub async fn allow(self) {
        let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(self.client.clone());
        let policies: Api<ValidatingAdmissionPolicy> = Api::all(self.client);
        bindings
            .delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
        policies
            .delete(&self.name, &DeleteParams::default())
            .await
            .unwrap();
    }

    /// A dry-run create as the manager's user every 200 ms until the policy refuses it: the API server
    /// offers nothing to watch for a policy becoming active.
    async fn wait_until_denied(&self, ns: &TestNamespace, family: ApiFamily) {
        let as_manager = kube::Client::try_from(manager_config(ns).await).unwrap();
        let api: Api<ReplicaSetObject> = Api::namespaced_with(
            as_manager,
            &ns.name,
            &WorkloadKind::ReplicaSet.api_resource(family),
        );
        let probe = replica_set("probe", 0, family);
        let dry_run = PostParams {
            dry_run: true,
            ..Default::default()
        };
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        loop {
            match api.create(&dry_run, &probe).await {
                Err(kube::Error::Api(e)) if e.message.contains(DENIED) => return,
                Ok(_) | Err(_) if tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                other => panic!("the admission policy never denied the manager: {other:?}"),
            }
        }
    }
}
