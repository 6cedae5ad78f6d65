//! The CRD copies on a real kube-apiserver of the pinned version (the shared test plane; upstream workload controllers
//! off, so nothing reconciles the objects created here).
//!
//! Wherever possible a case runs against apps/v1 *and* the copy with the same input, so the tests check
//! "behaves like apps/v1" against the real thing rather than against this crate's idea of it.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use mini_kcm_crds::{GROUP, VERSION};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::{Value, json};

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

/// A fresh namespace, with the CRDs installed (every test installs: installing is idempotent, and the
/// tests of one binary run in any order).
async fn namespace_with_crds(prefix: &str) -> TestNamespace {
    let ns = TestNamespace::create(plane(), prefix).await;
    mini_kcm_crds::install(&ns.client)
        .await
        .unwrap_or_else(|e| panic!("installing the CRDs: {e:?}"));
    ns
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    ReplicaSet,
    Deployment,
    DaemonSet,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::ReplicaSet => "ReplicaSet",
            Kind::Deployment => "Deployment",
            Kind::DaemonSet => "DaemonSet",
        }
    }

    fn copy_resource(self) -> ApiResource {
        let plural = match self {
            Kind::ReplicaSet => "replicasets",
            Kind::Deployment => "deployments",
            Kind::DaemonSet => "daemonsets",
        };
        ApiResource {
            group: GROUP.into(),
            version: VERSION.into(),
            api_version: format!("{GROUP}/{VERSION}"),
            kind: self.name().into(),
            plural: plural.into(),
        }
    }

    fn apps_resource(self) -> ApiResource {
        match self {
            Kind::ReplicaSet => ApiResource::erase::<ReplicaSet>(&()),
            Kind::Deployment => ApiResource::erase::<Deployment>(&()),
            Kind::DaemonSet => ApiResource::erase::<DaemonSet>(&()),
        }
    }
}

/// The same kind in both API families.
struct Families {
    kind: Kind,
    copy: Api<DynamicObject>,
    apps: Api<DynamicObject>,
}

impl Families {
    fn new(ns: &TestNamespace, kind: Kind) -> Self {
        Families {
            kind,
            copy: Api::namespaced_with(ns.client.clone(), &ns.name, &kind.copy_resource()),
            apps: Api::namespaced_with(ns.client.clone(), &ns.name, &kind.apps_resource()),
        }
    }

    fn object(&self, resource: &ApiResource, name: &str, spec: &Value) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": resource.api_version,
            "kind": resource.kind,
            "metadata": { "name": name },
            "spec": spec,
        }))
        .expect("a valid DynamicObject")
    }

    /// Creates `spec` as `name` in both families (for real, or as a server-side dry run).
    async fn create_both(
        &self,
        name: &str,
        spec: &Value,
        dry_run: bool,
    ) -> (kube::Result<DynamicObject>, kube::Result<DynamicObject>) {
        let params = PostParams {
            dry_run,
            ..Default::default()
        };
        let copy = self
            .copy
            .create(
                &params,
                &self.object(&self.kind.copy_resource(), name, spec),
            )
            .await;
        let apps = self
            .apps
            .create(
                &params,
                &self.object(&self.kind.apps_resource(), name, spec),
            )
            .await;
        (copy, apps)
    }
}

/// A minimal valid spec for `kind` selecting `app: <app>`.
fn base_spec(app: &str) -> Value {
    json!({
        "selector": { "matchLabels": { "app": app } },
        "template": {
            "metadata": { "labels": { "app": app } },
            "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10" }] },
        },
    })
}

/// RFC 7386 JSON merge patch: `null` removes, objects merge, anything else replaces.
fn merged(base: &Value, patch: &Value) -> Value {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            let mut out = base.clone();
            for (key, value) in patch {
                if value.is_null() {
                    out.remove(key);
                } else {
                    let next = merged(out.get(key).unwrap_or(&Value::Null), value);
                    out.insert(key.clone(), next);
                }
            }
            Value::Object(out)
        }
        (_, patch) => patch.clone(),
    }
}

fn spec_without_template(object: &DynamicObject) -> Value {
    let mut spec = object.data["spec"].clone();
    spec.as_object_mut()
        .expect("spec is an object")
        .remove("template");
    spec
}

/// The message of a refusal. 422 Invalid, or 400 Bad Request when apps/v1 cannot even decode the input
/// (a malformed quantity).
fn invalid_message(result: kube::Result<DynamicObject>, what: &str) -> String {
    match result {
        Err(kube::Error::Api(status)) => {
            assert!(matches!(status.code, 400 | 422), "{what}: {status:?}");
            status.message.clone()
        }
        Err(other) => panic!("{what}: expected 422 Invalid, got {other}"),
        Ok(object) => panic!("{what}: accepted: {:?}", object.data["spec"]),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_is_idempotent_and_serves_the_three_kinds() {
    let ns = TestNamespace::create(plane(), "crds-install").await;
    mini_kcm_crds::install(&ns.client).await.unwrap();
    mini_kcm_crds::install(&ns.client).await.unwrap();

    let crds: Api<CustomResourceDefinition> = Api::all(ns.client.clone());
    for generated in mini_kcm_crds::all() {
        let name = generated.metadata.name.clone().unwrap();
        let stored = crds.get(&name).await.unwrap();
        let conditions = stored.status.clone().unwrap().conditions.unwrap();
        for wanted in ["NamesAccepted", "Established"] {
            assert!(
                conditions
                    .iter()
                    .any(|c| c.type_ == wanted && c.status == "True"),
                "{name}: {conditions:?}"
            );
        }
        let managers: Vec<_> = stored
            .metadata
            .managed_fields
            .iter()
            .flatten()
            .filter_map(|m| m.manager.as_deref())
            .collect();
        assert!(
            managers.contains(&mini_kcm_crds::FIELD_MANAGER),
            "{managers:?}"
        );
        // etcd's limit is 1.5 MiB per object; the stored CRD (with status and managedFields) is far below.
        let stored_size = serde_json::to_vec(&stored).unwrap().len();
        eprintln!("{name}: {stored_size} bytes as stored");
        assert!(stored_size < 256 * 1024, "{name}: {stored_size} bytes");
    }

    let resources = ns
        .client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
        .unwrap();
    let served: BTreeSet<&str> = resources
        .resources
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    let expected: BTreeSet<&str> = [
        "replicasets",
        "replicasets/status",
        "replicasets/scale",
        "deployments",
        "deployments/status",
        "deployments/scale",
        "daemonsets",
        "daemonsets/status",
    ]
    .into();
    assert_eq!(served, expected);
    let short_names: BTreeSet<String> = resources
        .resources
        .iter()
        .flat_map(|r| r.short_names.clone().unwrap_or_default())
        .collect();
    assert_eq!(
        short_names,
        ["mds", "mdeploy", "mrs"].map(String::from).into()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn defaults_are_those_of_apps_v1() {
    let ns = namespace_with_crds("crds-defaults").await;

    // The requested values, spelled out once for the plainest objects.
    let rs = Families::new(&ns, Kind::ReplicaSet);
    let (copy, apps) = rs.create_both("plain", &base_spec("plain"), false).await;
    let (copy, apps) = (copy.unwrap(), apps.unwrap());
    assert_eq!(copy.data["spec"]["replicas"], 1);
    assert_eq!(spec_without_template(&copy), spec_without_template(&apps));

    let deployments = Families::new(&ns, Kind::Deployment);
    let (copy, _) = deployments
        .create_both("plain", &base_spec("plain"), false)
        .await;
    let spec = &copy.unwrap().data["spec"];
    assert_eq!(spec["replicas"], 1);
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(spec["progressDeadlineSeconds"], 600);
    assert_eq!(
        spec["strategy"],
        json!({ "type": "RollingUpdate", "rollingUpdate": { "maxSurge": "25%", "maxUnavailable": "25%" } })
    );

    let daemon_sets = Families::new(&ns, Kind::DaemonSet);
    let (copy, _) = daemon_sets
        .create_both("plain", &base_spec("plain"), false)
        .await;
    let spec = &copy.unwrap().data["spec"];
    assert_eq!(spec["revisionHistoryLimit"], 10);
    assert_eq!(
        spec["updateStrategy"],
        json!({ "type": "RollingUpdate", "rollingUpdate": { "maxUnavailable": 1, "maxSurge": 0 } })
    );

    // Every way of leaving something out comes out of both families alike, but for the one a structural
    // schema cannot express (a default that depends on the strategy type): the copy then carries an
    // inert rollingUpdate with the default values.
    let strategy_cases = [
        ("absent", json!({}), None),
        ("empty", json!({ "strategy": {} }), None),
        (
            "type-only",
            json!({ "strategy": { "type": "RollingUpdate" } }),
            None,
        ),
        (
            "surge-only",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": 1 } } }),
            None,
        ),
        (
            "percent-unavailable",
            json!({ "strategy": { "rollingUpdate": { "maxUnavailable": "10%" } }, "replicas": 0 }),
            None,
        ),
        (
            "recreate",
            json!({ "strategy": { "type": "Recreate" } }),
            Some(json!({ "maxSurge": "25%", "maxUnavailable": "25%" })),
        ),
    ];
    for (name, patch, copy_only_rolling_update) in strategy_cases {
        let spec = merged(&base_spec(name), &patch);
        let (copy, apps) = deployments.create_both(name, &spec, false).await;
        let (copy, apps) = (copy.unwrap(), apps.unwrap());
        let mut expected = spec_without_template(&apps);
        if let Some(rolling_update) = copy_only_rolling_update {
            expected["strategy"]["rollingUpdate"] = rolling_update;
        }
        assert_eq!(spec_without_template(&copy), expected, "Deployment {name}");
    }

    let update_strategy_cases = [
        ("absent", json!({}), None),
        ("empty", json!({ "updateStrategy": {} }), None),
        (
            "surge",
            json!({ "updateStrategy": { "rollingUpdate": { "maxSurge": "10%", "maxUnavailable": 0 } } }),
            None,
        ),
        (
            "on-delete",
            json!({ "updateStrategy": { "type": "OnDelete" } }),
            Some(json!({ "maxUnavailable": 1, "maxSurge": 0 })),
        ),
    ];
    for (name, patch, copy_only_rolling_update) in update_strategy_cases {
        let spec = merged(&base_spec(name), &patch);
        let (copy, apps) = daemon_sets.create_both(name, &spec, false).await;
        let (copy, apps) = (copy.unwrap(), apps.unwrap());
        let mut expected = spec_without_template(&apps);
        if let Some(rolling_update) = copy_only_rolling_update {
            expected["updateStrategy"]["rollingUpdate"] = rolling_update;
        }
        assert_eq!(spec_without_template(&copy), expected, "DaemonSet {name}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_rejected_as_apps_v1_rejects_them() {
    let ns = namespace_with_crds("crds-invalid").await;
    use Kind::*;
    let cases: &[(Kind, &str, Value, &str)] = &[
        (
            ReplicaSet,
            "negative replicas",
            json!({ "replicas": -1 }),
            "greater than or equal to 0",
        ),
        (
            Deployment,
            "negative replicas",
            json!({ "replicas": -1 }),
            "greater than or equal to 0",
        ),
        (
            ReplicaSet,
            "selector not matching the labels",
            json!({ "template": { "metadata": { "labels": { "app": "other" } } } }),
            "`selector` does not match template `labels`",
        ),
        (
            Deployment,
            "template without labels",
            json!({ "template": { "metadata": null } }),
            "`selector` does not match template `labels`",
        ),
        (
            DaemonSet,
            "NotIn excluding the template's value",
            json!({ "selector": { "matchLabels": null, "matchExpressions": [{ "key": "app", "operator": "NotIn", "values": ["v"] }] },
                    "template": { "metadata": { "labels": { "app": "v" } } } }),
            "`selector` does not match template `labels`",
        ),
        (
            ReplicaSet,
            "Exists on a missing label",
            json!({ "selector": { "matchExpressions": [{ "key": "tier", "operator": "Exists" }] } }),
            "`selector` does not match template `labels`",
        ),
        (
            ReplicaSet,
            "empty selector",
            json!({ "selector": { "matchLabels": null } }),
            "empty selector is invalid for deployment",
        ),
        (
            Deployment,
            "empty selector",
            json!({ "selector": { "matchLabels": null, "matchExpressions": [] } }),
            "empty selector is invalid for deployment",
        ),
        (
            DaemonSet,
            "empty selector",
            json!({ "selector": { "matchLabels": null } }),
            "empty selector is invalid for daemonset",
        ),
        (
            ReplicaSet,
            "no selector",
            json!({ "selector": null }),
            "spec.selector: Required value",
        ),
        (
            ReplicaSet,
            "In without values",
            json!({ "selector": { "matchExpressions": [{ "key": "app", "operator": "In" }] } }),
            "must be specified when `operator` is 'In' or 'NotIn'",
        ),
        (
            ReplicaSet,
            "operator Gt",
            json!({ "selector": { "matchExpressions": [{ "key": "app", "operator": "Gt", "values": ["1"] }] } }),
            "Unsupported value: \"Gt\"",
        ),
        (
            Deployment,
            "label value with a space",
            json!({ "selector": { "matchLabels": { "app": "a b" } }, "template": { "metadata": { "labels": { "app": "a b" } } } }),
            "should match",
        ),
        (
            ReplicaSet,
            "negative minReadySeconds",
            json!({ "minReadySeconds": -1 }),
            "greater than or equal to 0",
        ),
        (
            Deployment,
            "restartPolicy Never",
            json!({ "template": { "spec": { "restartPolicy": "Never" } } }),
            "Unsupported value: \"Never\"",
        ),
        (
            ReplicaSet,
            "activeDeadlineSeconds",
            json!({ "template": { "spec": { "activeDeadlineSeconds": 30 } } }),
            "activeDeadlineSeconds in ReplicaSet is not Supported",
        ),
        (
            DaemonSet,
            "activeDeadlineSeconds",
            json!({ "template": { "spec": { "activeDeadlineSeconds": 30 } } }),
            "activeDeadlineSeconds in DaemonSet is not Supported",
        ),
        (
            Deployment,
            "no containers",
            json!({ "template": { "spec": { "containers": [] } } }),
            "spec.template.spec.containers",
        ),
        (
            ReplicaSet,
            "duplicate container names",
            json!({ "template": { "spec": { "containers": [
                { "name": "c", "image": "registry.k8s.io/pause:3.10" },
                { "name": "c", "image": "registry.k8s.io/pause:3.10" }] } } }),
            "Duplicate value",
        ),
        (
            Deployment,
            "malformed quantity",
            json!({ "template": { "spec": { "containers": [
                { "name": "c", "image": "registry.k8s.io/pause:3.10", "resources": { "limits": { "cpu": "lots" } } }] } } }),
            "spec.template.spec.containers[0].resources.limits.cpu",
        ),
        (
            Deployment,
            "maxSurge and maxUnavailable both 0",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": 0, "maxUnavailable": "0%" } } }),
            "may not be 0 when `maxSurge` is 0",
        ),
        (
            Deployment,
            "maxUnavailable over 100%",
            json!({ "strategy": { "rollingUpdate": { "maxUnavailable": "101%" } } }),
            "must not be greater than 100%",
        ),
        (
            Deployment,
            "maxSurge a bare number string",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": "5" } } }),
            "valid percent string",
        ),
        (
            Deployment,
            "negative maxSurge",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": -1 } } }),
            "spec.strategy.rollingUpdate.maxSurge",
        ),
        (
            Deployment,
            "Recreate with rollingUpdate",
            json!({ "strategy": { "type": "Recreate", "rollingUpdate": { "maxSurge": 1 } } }),
            "may not be specified when strategy `type` is 'Recreate'",
        ),
        (
            Deployment,
            "unknown strategy",
            json!({ "strategy": { "type": "BlueGreen" } }),
            "Unsupported value: \"BlueGreen\"",
        ),
        (
            Deployment,
            "progressDeadlineSeconds not above minReadySeconds",
            json!({ "progressDeadlineSeconds": 10, "minReadySeconds": 10 }),
            "must be greater than minReadySeconds",
        ),
        (
            Deployment,
            "negative revisionHistoryLimit",
            json!({ "revisionHistoryLimit": -1 }),
            "greater than or equal to 0",
        ),
        (
            DaemonSet,
            "maxSurge with non-zero maxUnavailable",
            json!({ "updateStrategy": { "rollingUpdate": { "maxSurge": 1 } } }),
            "may not be set when maxUnavailable is non-zero",
        ),
        (
            DaemonSet,
            "maxUnavailable 0 without surge",
            json!({ "updateStrategy": { "rollingUpdate": { "maxUnavailable": 0 } } }),
            "cannot be 0 when maxSurge is 0",
        ),
        (
            DaemonSet,
            "maxSurge over 100%",
            json!({ "updateStrategy": { "rollingUpdate": { "maxUnavailable": 0, "maxSurge": "150%" } } }),
            "must not be greater than 100%",
        ),
        (
            DaemonSet,
            "unknown update strategy",
            json!({ "updateStrategy": { "type": "Sometimes" } }),
            "Unsupported value: \"Sometimes\"",
        ),
        (
            ReplicaSet,
            "an invalid container name",
            json!({ "template": { "spec": { "containers": [
                { "name": "Not_A_Label", "image": "registry.k8s.io/pause:3.10" }] } } }),
            "containers[0].name",
        ),
        (
            DaemonSet,
            "an unknown toleration operator",
            json!({ "template": { "spec": { "tolerations": [
                { "key": "k", "operator": "Above", "value": "v" }] } } }),
            "Unsupported value: \"Above\"",
        ),
        (
            DaemonSet,
            "an unknown node affinity operator",
            json!({ "template": { "spec": { "affinity": { "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": { "nodeSelectorTerms": [
                    { "matchExpressions": [{ "key": "k", "operator": "Near", "values": ["v"] }] }] } } } } } }),
            "Unsupported value: \"Near\"",
        ),
    ];
    for (kind, what, patch, copy_message) in cases {
        let families = Families::new(&ns, *kind);
        let spec = merged(&base_spec("x"), patch);
        let (copy, apps) = families.create_both("x", &spec, true).await;
        let what = format!("{} with {what}", kind.name());
        let apps_message = invalid_message(apps, &format!("apps/v1 {what}"));
        let message = invalid_message(copy, &format!("copy {what}"));
        assert!(
            message.contains(copy_message),
            "copy {what}: {message:?} lacks {copy_message:?} (apps/v1 said {apps_message:?})"
        );
    }

    // And edge cases that both accept.
    let accepted: &[(Kind, &str, Value)] = &[
        (
            ReplicaSet,
            "NotIn on another value, DoesNotExist on an absent key",
            json!({ "selector": { "matchExpressions": [
                { "key": "app", "operator": "NotIn", "values": ["y"] },
                { "key": "tier", "operator": "DoesNotExist" }] } }),
        ),
        (
            ReplicaSet,
            "zero replicas, quantities as ints and strings, creationTimestamp null",
            json!({ "replicas": 0, "template": {
                "metadata": { "creationTimestamp": null },
                "spec": { "containers": [{ "name": "c", "image": "registry.k8s.io/pause:3.10",
                    "resources": { "requests": { "cpu": "500m", "memory": 1_073_741_824 } } }] } } }),
        ),
        (
            Deployment,
            "maxSurge 0 with the default maxUnavailable, maxSurge over 100% allowed",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": 0 } } }),
        ),
        (
            Deployment,
            "maxSurge 200%",
            json!({ "strategy": { "rollingUpdate": { "maxSurge": "200%" } } }),
        ),
        (
            DaemonSet,
            "surge instead of unavailability",
            json!({ "updateStrategy": { "rollingUpdate": { "maxUnavailable": 0, "maxSurge": "100%" } } }),
        ),
        (
            DaemonSet,
            "OnDelete",
            json!({ "updateStrategy": { "type": "OnDelete" } }),
        ),
    ];
    for (kind, what, patch) in accepted {
        let families = Families::new(&ns, *kind);
        let spec = merged(&base_spec("x"), patch);
        let (copy, apps) = families.create_both("x", &spec, true).await;
        if let Err(e) = apps {
            panic!("apps/v1 {} with {what}: {e}", kind.name());
        }
        if let Err(e) = copy {
            panic!("copy {} with {what}: {e}", kind.name());
        }
    }

    // A deliberate difference: apps/v1 accepts a Deployment selecting on pod-template-hash (and its
    // controllers then create ReplicaSets without bound); the copy refuses it.
    let families = Families::new(&ns, Deployment);
    let spec = merged(
        &base_spec("x"),
        &json!({
            "selector": { "matchLabels": { "pod-template-hash": "x" } },
            "template": { "metadata": { "labels": { "pod-template-hash": "x" } } },
        }),
    );
    let (copy, apps) = families.create_both("x", &spec, true).await;
    if let Err(e) = apps {
        panic!("apps/v1 Deployment selecting on pod-template-hash: {e}");
    }
    let message = invalid_message(copy, "copy Deployment selecting on pod-template-hash");
    assert!(message.contains("pod-template-hash"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selector_is_immutable_and_other_updates_pass() {
    let ns = namespace_with_crds("crds-immutable").await;
    for kind in [Kind::ReplicaSet, Kind::Deployment, Kind::DaemonSet] {
        let families = Families::new(&ns, kind);
        let (copy, apps) = families.create_both("app", &base_spec("app"), false).await;
        copy.unwrap();
        apps.unwrap();
        let new_selector = Patch::Merge(json!({ "spec": {
            "selector": { "matchLabels": { "app": "app", "tier": "web" } },
            "template": { "metadata": { "labels": { "tier": "web" } } },
        } }));
        for (family, api) in [("apps/v1", &families.apps), ("copy", &families.copy)] {
            let result = api
                .patch("app", &PatchParams::default(), &new_selector)
                .await;
            let message = invalid_message(result, &format!("{family} {kind:?} selector change"));
            assert!(message.contains("field is immutable"), "{message}");
            let other = Patch::Merge(json!({ "spec": { "minReadySeconds": 5,
                "template": { "metadata": { "labels": { "tier": "web" } } } } }));
            let updated = api
                .patch("app", &PatchParams::default(), &other)
                .await
                .unwrap();
            assert_eq!(updated.data["spec"]["minReadySeconds"], 5);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_and_scale_subresources_work() {
    let ns = namespace_with_crds("crds-subresources").await;
    let params = PatchParams::default();

    for kind in [Kind::ReplicaSet, Kind::Deployment] {
        let api = Families::new(&ns, kind).copy;
        let what = kind.name();
        api.create(
            &PostParams::default(),
            &Families::new(&ns, kind).object(&kind.copy_resource(), "web", &base_spec("web")),
        )
        .await
        .unwrap();

        let status = json!({ "status": {
            "observedGeneration": 1, "replicas": 2, "readyReplicas": 2, "availableReplicas": 1,
            "selector": "app=web",
        } });
        let patched = api
            .patch_status("web", &params, &Patch::Merge(&status))
            .await
            .unwrap();
        assert_eq!(patched.data["status"]["readyReplicas"], 2, "{what}");
        assert_eq!(patched.data["spec"]["replicas"], 1, "{what}");

        // The main endpoint ignores status, as for apps/v1.
        let ignored = api
            .patch(
                "web",
                &params,
                &Patch::Merge(json!({ "status": { "replicas": 7 } })),
            )
            .await
            .unwrap();
        assert_eq!(ignored.data["status"]["replicas"], 2, "{what}");

        // Status validation: more ready than existing pods is refused, as by apps/v1.
        let too_many = api
            .patch_status(
                "web",
                &params,
                &Patch::Merge(json!({ "status": { "readyReplicas": 3 } })),
            )
            .await;
        let message = invalid_message(too_many, &format!("{what} status"));
        assert!(
            message.contains("cannot be greater than status.replicas"),
            "{message}"
        );

        let scale = api.get_scale("web").await.unwrap();
        assert_eq!(scale.spec.and_then(|s| s.replicas), Some(1), "{what}");
        let scale_status = scale.status.unwrap();
        assert_eq!(scale_status.replicas, 2, "{what}");
        assert_eq!(scale_status.selector.as_deref(), Some("app=web"), "{what}");

        if kind == Kind::ReplicaSet {
            // Deployments find their scaled-down ReplicaSets with this field selector (apps/v1 offers it).
            let listed = api
                .list(&ListParams::default().fields("status.replicas=2"))
                .await
                .unwrap();
            assert_eq!(listed.items.len(), 1, "{what}");
        }

        // What `kubectl scale` does.
        api.patch_scale(
            "web",
            &params,
            &Patch::Merge(json!({ "spec": { "replicas": 3 } })),
        )
        .await
        .unwrap();
        let scaled = api.get("web").await.unwrap();
        assert_eq!(scaled.data["spec"]["replicas"], 3, "{what}");
    }

    // collisionCount may not go down.
    let deployments = Families::new(&ns, Kind::Deployment).copy;
    deployments
        .patch_status(
            "web",
            &params,
            &Patch::Merge(json!({ "status": { "collisionCount": 2 } })),
        )
        .await
        .unwrap();
    let decremented = deployments
        .patch_status(
            "web",
            &params,
            &Patch::Merge(json!({ "status": { "collisionCount": 1 } })),
        )
        .await;
    let message = invalid_message(decremented, "collisionCount decrement");
    assert!(message.contains("cannot be decremented"), "{message}");

    // DaemonSets have a status subresource and no scale, as in apps/v1.
    let daemon_sets = Families::new(&ns, Kind::DaemonSet);
    daemon_sets
        .copy
        .create(
            &PostParams::default(),
            &daemon_sets.object(
                &Kind::DaemonSet.copy_resource(),
                "agent",
                &base_spec("agent"),
            ),
        )
        .await
        .unwrap();
    let status = json!({ "status": {
        "currentNumberScheduled": 3, "numberMisscheduled": 0, "desiredNumberScheduled": 3, "numberReady": 3,
    } });
    let patched = daemon_sets
        .copy
        .patch_status("agent", &params, &Patch::Merge(&status))
        .await
        .unwrap();
    assert_eq!(patched.data["status"]["numberReady"], 3);
    let negative = daemon_sets
        .copy
        .patch_status(
            "agent",
            &params,
            &Patch::Merge(json!({ "status": { "numberReady": -1 } })),
        )
        .await;
    invalid_message(negative, "negative numberReady");
    match daemon_sets.copy.get_scale("agent").await {
        Err(kube::Error::Api(status)) => assert_eq!(status.code, 404),
        other => panic!("DaemonSet scale: {other:?}"),
    }
}

/// Resolves upstream OpenAPI v3 `$ref`s (bare or wrapped in a one-element `allOf`).
fn resolve<'a>(node: &'a Value, schemas: &'a Value) -> &'a Value {
    let reference = node["$ref"]
        .as_str()
        .or_else(|| node["allOf"][0]["$ref"].as_str());
    match reference {
        Some(reference) => {
            let name = reference.trim_start_matches("#/components/schemas/");
            resolve(&schemas[name], schemas)
        }
        None => node,
    }
}

/// Differences between upstream's schema and ours, below `path`: field names, types, list semantics.
fn compare(path: &str, upstream: &Value, ours: &Value, schemas: &Value, out: &mut Vec<String>) {
    let upstream = resolve(upstream, schemas);
    if path.matches('.').count() > 40 {
        out.push(format!("{path}: too deep"));
        return;
    }
    if let (Some(theirs), Some(mine)) = (upstream["type"].as_str(), ours["type"].as_str())
        && theirs != mine
    {
        out.push(format!("{path}: type {theirs} upstream, {mine} here"));
    }
    // Upstream's IntOrString and Quantity are `oneOf` int|string and string|number; a structural schema
    // has only int-or-string for both.
    if upstream.get("oneOf").is_some() != (ours["x-kubernetes-int-or-string"] == true) {
        out.push(format!("{path}: int-or-string differs"));
    }
    if ours["x-kubernetes-list-type"] == "map"
        && (upstream["x-kubernetes-list-type"] != "map"
            || upstream["x-kubernetes-list-map-keys"] != ours["x-kubernetes-list-map-keys"])
    {
        out.push(format!("{path}: list-map keys differ from upstream"));
    }
    let empty = serde_json::Map::new();
    let theirs = upstream["properties"].as_object().unwrap_or(&empty);
    let mine = ours["properties"].as_object().unwrap_or(&empty);
    for name in theirs.keys().filter(|name| !mine.contains_key(*name)) {
        out.push(format!("{path}.{name}: missing here"));
    }
    for name in mine.keys().filter(|name| !theirs.contains_key(*name)) {
        out.push(format!("{path}.{name}: not upstream"));
    }
    for (name, their_child) in theirs {
        if let Some(my_child) = mine.get(name) {
            compare(
                &format!("{path}.{name}"),
                their_child,
                my_child,
                schemas,
                out,
            );
        }
    }
    for key in ["items", "additionalProperties"] {
        match (upstream.get(key), ours.get(key)) {
            (Some(theirs), Some(mine)) if theirs.is_object() => {
                let step = if key == "items" { "[]" } else { "{}" };
                compare(&format!("{path}{step}"), theirs, mine, schemas, out)
            }
            (None, None) => {}
            (Some(_), Some(_)) => {}
            _ => out.push(format!("{path}: {key} differs")),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemas_have_exactly_the_fields_of_apps_v1() {
    // Upstream's own OpenAPI document for apps/v1, from the very API server under test.
    let client: Client = TestNamespace::create(plane(), "crds-openapi").await.client;
    let request = http::Request::get("/openapi/v3/apis/apps/v1")
        .body(Vec::new())
        .unwrap();
    let document: Value = client.request(request).await.unwrap();
    let schemas = &document["components"]["schemas"];

    for crd in mini_kcm_crds::all() {
        let kind = &crd.spec.names.kind;
        let ours = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        let mut differences = Vec::new();
        for part in ["Spec", "Status"] {
            let upstream = &schemas[format!("io.k8s.api.apps.v1.{kind}{part}")];
            assert!(upstream.is_object(), "no upstream {kind}{part}");
            let field = part.to_lowercase();
            compare(
                &field,
                upstream,
                &ours["properties"][&field],
                schemas,
                &mut differences,
            );
        }
        // The one addition, on purpose: the selector string the scale subresource reads (which also
        // shows that the comparison sees the fields).
        let selector_added = "status.selector: not upstream".to_string();
        assert_eq!(
            differences.contains(&selector_added),
            kind != "DaemonSet",
            "{kind}: {differences:#?}"
        );
        differences.retain(|d| *d != selector_added);
        assert!(differences.is_empty(), "{kind}: {differences:#?}");
    }
}
