//! The copies' scale subresource is complete: mini-kcm's controllers write `status.selector` (upstream's
//! label selector string) for `minikcm.dev` ReplicaSets and Deployments, so the scale subresource reports
//! it, `kubectl scale` works on a copy, and a HorizontalPodAutoscaler (kube-controller-manager's HPA
//! controller, which the plane runs) targeting a copy reads its scale *and* its selector.
//!
//! The plane has no metrics API, so the HPA never gets a metric: once it has read the scale and parsed the
//! selector, its `ScalingActive` condition says `FailedGetResourceMetric`. Without a selector it stops one
//! step earlier with `InvalidSelector` (and a `SelectorRequired` event): that is what every HPA on a copy
//! did before the controllers wrote the field, and what each test checks first, before it starts the
//! manager (the state is the same: a stored status without `selector`).

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::fmt::Debug;

use k8s_openapi::api::apps::v1::{DeploymentSpec, ReplicaSetSpec};
use k8s_openapi::api::autoscaling::v2::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerCondition,
    HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget, ResourceMetricSource,
};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::Api;
use kube::api::{ObjectMeta, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use mini_kcm_e2e::{TIMEOUT, TestManager, app_selector, is_active, pod_template, selector};
use mini_kcm_manager::Kinds;
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DeploymentObject, ReplicaSetObject, StatusWithSelector, WorkloadKind,
};
use mini_kcm_runtime::api::object::Workload;
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

/// A copy of a scalable kind, as the controllers read it.
type Copy<P, S> = Workload<P, StatusWithSelector<S>>;

const INITIAL_REPLICAS: i32 = 2;
/// Within the HPA's [minReplicas, maxReplicas] = [1, 5]: the HPA clamps the target to that range before
/// it reads the selector, so a count outside it would be rescaled without proving anything.
const SCALED_REPLICAS: i32 = 4;

/// `app=<name>` plus an expression, so the string form shows upstream's ordering and set syntax.
fn label_selector(name: &str) -> LabelSelector {
    let mut selector = selector(name);
    selector.match_expressions = Some(vec![LabelSelectorRequirement {
        key: "env".into(),
        operator: "NotIn".into(),
        values: Some(vec!["prod".into(), "canary".into()]),
    }]);
    selector
}

/// What `status.selector` must say for [`label_selector`], as upstream's `LabelSelectorAsSelector(..).String()`.
fn selector_string(name: &str) -> String {
    format!("app={name},env notin (canary,prod)")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_set_copy_is_scalable_and_autoscalable() {
    let ns = TestNamespace::create(plane(), "hpa-rs").await;
    let mut rs = ReplicaSetObject::new(
        "web",
        &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies),
        ReplicaSetSpec {
            replicas: Some(INITIAL_REPLICAS),
            selector: label_selector("web"),
            template: Some(pod_template("web")),
            ..Default::default()
        },
    );
    rs.status = None;
    let settled = |rs: &ReplicaSetObject, replicas: i32| {
        rs.status.as_ref().is_some_and(|s| {
            s.observed_generation == rs.metadata.generation
                && s.replicas == replicas
                && s.available_replicas.unwrap_or(0) == replicas
        })
    };
    let manager = scale_and_autoscale(&ns, WorkloadKind::ReplicaSet, rs, settled).await;
    manager.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_copy_is_scalable_and_autoscalable() {
    let ns = TestNamespace::create(plane(), "hpa-deploy").await;
    let mut d = DeploymentObject::new(
        "web",
        &WorkloadKind::Deployment.api_resource(ApiFamily::Copies),
        DeploymentSpec {
            replicas: Some(INITIAL_REPLICAS),
            selector: label_selector("web"),
            template: pod_template("web"),
            ..Default::default()
        },
    );
    d.status = None;
    let settled = |d: &DeploymentObject, replicas: i32| {
        d.status.as_ref().is_some_and(|s| {
            s.observed_generation == d.metadata.generation
                && s.replicas.unwrap_or(0) == replicas
                && s.updated_replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
        })
    };
    let manager = scale_and_autoscale(&ns, WorkloadKind::Deployment, d, settled).await;

    // The Deployment's ReplicaSet is a copy too: its selector adds the pod-template-hash.
    let replica_sets: Api<ReplicaSetObject> = Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::ReplicaSet.api_resource(ApiFamily::Copies),
    );
    let rss = replica_sets.list(&Default::default()).await.unwrap().items;
    assert_eq!(rss.len(), 1, "one ReplicaSet: {rss:?}");
    let hash = &rss[0].metadata.labels.as_ref().unwrap()["pod-template-hash"];
    assert_eq!(
        rss[0].status.as_ref().unwrap().selector.as_deref(),
        Some(&*format!(
            "{},pod-template-hash={hash}",
            selector_string("web")
        ))
    );
    manager.stop().await;
}

/// The whole story for one copy: an HPA fails on it without a selector; mini-kcm writes the selector;
/// the scale subresource and the HPA read it; a status without it is repaired although no count changed;
/// `kubectl scale` resizes it and the pods follow. Returns the running manager.
async fn scale_and_autoscale<P, S>(
    ns: &TestNamespace,
    kind: WorkloadKind,
    object: Copy<P, S>,
    settled: impl Fn(&Copy<P, S>, i32) -> bool,
) -> TestManager
where
    P: Clone + Debug + Serialize + DeserializeOwned + Send + Sync + 'static,
    S: Clone + Debug + Default + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    let resource = kind.api_resource(ApiFamily::Copies);
    let api: Api<Copy<P, S>> = Api::namespaced_with(ns.client.clone(), &ns.name, &resource);
    let name = object.metadata.name.clone().unwrap();
    let want = selector_string(&name);
    mini_kcm_crds::install(&ns.client).await.unwrap();
    api.create(&PostParams::default(), &object).await.unwrap();
    let hpas: Api<HorizontalPodAutoscaler> = ns.api();
    hpas.create(&PostParams::default(), &hpa(&name, kind))
        .await
        .unwrap();

    // No controller yet, so no status.selector (the state every copy was in before the controllers wrote
    // it): the HPA gets the scale but refuses to go on without a selector.
    let refused = wait_hpa(
        ns,
        &name,
        "ScalingActive=False/InvalidSelector",
        |conditions| {
            condition(conditions, "ScalingActive").is_some_and(|c| {
                c.status == "False" && c.reason.as_deref() == Some("InvalidSelector")
            })
        },
    )
    .await;
    assert_eq!(
        condition(&refused, "ScalingActive")
            .unwrap()
            .message
            .as_deref(),
        Some("the HPA target's scale is missing a selector")
    );

    let manager = TestManager::start(ns, Kinds::Copies).await;
    let written = ns
        .wait_for_with(
            &api,
            resource.clone(),
            &name,
            &format!("status.selector {want:?} and {INITIAL_REPLICAS} settled replicas"),
            TIMEOUT,
            |o| {
                o.is_some_and(|o| {
                    selector_of(o) == Some(want.as_str()) && settled(o, INITIAL_REPLICAS)
                })
            },
        )
        .await
        .unwrap();
    let scale = api.get_scale(&name).await.unwrap();
    assert_eq!(
        scale.status.as_ref().and_then(|s| s.selector.as_deref()),
        Some(want.as_str()),
        "the scale subresource reports the selector"
    );
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(INITIAL_REPLICAS));

    // With a selector the HPA goes on to the metrics, which this plane does not serve.
    let reading = wait_hpa(
        ns,
        &name,
        "AbleToScale=True and ScalingActive=False/FailedGetResourceMetric",
        |conditions| {
            condition(conditions, "AbleToScale").is_some_and(|c| c.status == "True")
                && condition(conditions, "ScalingActive")
                    .is_some_and(|c| c.reason.as_deref() == Some("FailedGetResourceMetric"))
        },
    )
    .await;
    assert_eq!(
        condition(&reading, "AbleToScale")
            .unwrap()
            .reason
            .as_deref(),
        Some("SucceededGetScale")
    );

    // A status without the selector (an older mini-kcm, or another writer) is repaired by the next sync,
    // although every count is current.
    let stripped = api
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"selector": null}})),
        )
        .await
        .unwrap();
    assert_eq!(selector_of(&stripped), None);
    assert!(settled(&stripped, INITIAL_REPLICAS), "no count to change");
    let repaired = ns
        .wait_for_with(
            &api,
            resource.clone(),
            &name,
            "status.selector written again",
            TIMEOUT,
            |o| o.is_some_and(|o| selector_of(o) == Some(want.as_str())),
        )
        .await
        .unwrap();
    assert_ne!(
        repaired.metadata.resource_version, stripped.metadata.resource_version,
        "a new write"
    );
    assert_eq!(
        repaired.metadata.generation, written.metadata.generation,
        "the spec did not change"
    );

    // `kubectl scale` goes through the scale subresource; the pods follow.
    let kubectl = std::process::Command::new(ns.plane.bin_dir.join("kubectl"))
        .arg("--kubeconfig")
        .arg(&ns.plane.kubeconfig)
        .args(["--namespace", &ns.name, "scale"])
        .arg(format!("{}.{}/{name}", resource.plural, resource.group))
        .arg(format!("--replicas={SCALED_REPLICAS}"))
        .output()
        .unwrap();
    assert!(
        kubectl.status.success(),
        "kubectl scale: {}",
        String::from_utf8_lossy(&kubectl.stderr)
    );
    assert!(
        String::from_utf8_lossy(&kubectl.stdout).contains("scaled"),
        "{}",
        String::from_utf8_lossy(&kubectl.stdout)
    );
    ns.wait_for_with(
        &api,
        resource.clone(),
        &name,
        &format!("{SCALED_REPLICAS} settled replicas"),
        TIMEOUT,
        |o| o.is_some_and(|o| settled(o, SCALED_REPLICAS) && selector_of(o) == Some(&want)),
    )
    .await;
    let count = usize::try_from(SCALED_REPLICAS).unwrap();
    ns.wait_for_list(
        &ns.api::<Pod>(),
        watcher::Config::default().labels(&app_selector(&name)),
        &format!("{count} active pods of {name}"),
        TIMEOUT,
        |pods| pods.iter().filter(|p| is_active(p)).count() == count,
    )
    .await;
    let scale = api.get_scale(&name).await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(SCALED_REPLICAS));
    assert_eq!(
        scale.status.map(|s| (s.replicas, s.selector)),
        Some((SCALED_REPLICAS, Some(want)))
    );
    manager
}

fn selector_of<P: Clone, S: Clone>(object: &Copy<P, S>) -> Option<&str> {
    object.status.as_ref()?.selector.as_deref()
}

/// An autoscaling/v2 HPA on the copy `name`: 1 to 5 replicas, 50 % CPU.
fn hpa(name: &str, kind: WorkloadKind) -> HorizontalPodAutoscaler {
    HorizontalPodAutoscaler {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: HorizontalPodAutoscalerSpec {
            scale_target_ref: CrossVersionObjectReference {
                api_version: Some(kind.api_resource(ApiFamily::Copies).api_version),
                kind: kind.kind().into(),
                name: name.into(),
            },
            min_replicas: Some(1),
            max_replicas: 5,
            metrics: Some(vec![MetricSpec {
                type_: "Resource".into(),
                resource: Some(ResourceMetricSource {
                    name: "cpu".into(),
                    target: MetricTarget {
                        type_: "Utilization".into(),
                        average_utilization: Some(50),
                        ..Default::default()
                    },
                }),
                ..Default::default()
            }]),
            ..Default::default()
        },
        status: None,
    }
}

fn condition<'a>(
    conditions: &'a [HorizontalPodAutoscalerCondition],
    type_: &str,
) -> Option<&'a HorizontalPodAutoscalerCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Waits until the HPA's conditions satisfy `check`; returns them.
async fn wait_hpa(
    ns: &TestNamespace,
    name: &str,
    what: &str,
    check: impl Fn(&[HorizontalPodAutoscalerCondition]) -> bool,
) -> Vec<HorizontalPodAutoscalerCondition> {
    let conditions = |h: &HorizontalPodAutoscaler| {
        h.status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default()
    };
    let hpa = ns
        .wait_for(&ns.api(), name, what, TIMEOUT, |h| {
            h.is_some_and(|h| check(&conditions(h)))
        })
        .await
        .unwrap();
    conditions(&hpa)
}
