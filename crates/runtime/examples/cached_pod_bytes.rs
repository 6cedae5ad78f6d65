//! Measures the heap bytes one cached pod costs: decodes N copies of a pod as the API server and kwok
//! return it (API defaults filled in, kwok's status) and counts the bytes allocated and still held,
//! as stored (managedFields stripped, like the informer) and, for comparison, with the spec's
//! container details dropped as well. Run: `cargo run --release -p mini-kcm-runtime --example
//! cached_pod_bytes`.

#![allow(clippy::unwrap_used, clippy::print_stdout)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use k8s_openapi::api::core::v1::Pod;

/// Counts the bytes currently allocated.
struct Counting;
static HELD: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        HELD.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

const PODS: usize = 10_000;

fn pod_json(i: usize) -> String {
    format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"web-7d4b9c8f6d-{i:05}","generateName":"web-7d4b9c8f6d-","namespace":"bench-steady","uid":"0b6c2a9e-4f1d-4c55-9d0e-{i:012}","resourceVersion":"{rv}","creationTimestamp":"2026-11-23T18:00:00Z","labels":{{"app":"web","pod-template-hash":"7d4b9c8f6d"}},"ownerReferences":[{{"apiVersion":"apps/v1","kind":"ReplicaSet","name":"web-7d4b9c8f6d","uid":"5e0f1c3a-2b7d-4e8f-9a6b-1c2d3e4f5a6b","controller":true,"blockOwnerDeletion":true}}],"managedFields":[{{"manager":"replicaset-controller","operation":"Update","apiVersion":"v1","time":"2026-11-23T18:00:00Z","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:generateName":{{}},"f:labels":{{".":{{}},"f:app":{{}},"f:pod-template-hash":{{}}}}}},"f:spec":{{"f:containers":{{"k:{{\"name\":\"app\"}}":{{".":{{}},"f:image":{{}},"f:name":{{}}}}}}}}}}}},{{"manager":"kwok","operation":"Update","apiVersion":"v1","time":"2026-11-23T18:00:01Z","fieldsType":"FieldsV1","subresource":"status","fieldsV1":{{"f:status":{{"f:conditions":{{}},"f:containerStatuses":{{}},"f:hostIP":{{}},"f:phase":{{}},"f:podIP":{{}},"f:podIPs":{{}},"f:startTime":{{}}}}}}}}]}},"spec":{{"containers":[{{"name":"app","image":"registry.k8s.io/pause:3.10","resources":{{}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"IfNotPresent"}}],"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","serviceAccountName":"default","serviceAccount":"default","nodeName":"kwok-node-{node}","securityContext":{{}},"schedulerName":"default-scheduler","tolerations":[{{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}},{{"key":"node.kubernetes.io/unreachable","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}}],"priority":0,"enableServiceLinks":true,"preemptionPolicy":"PreemptLowerPriority"}},"status":{{"phase":"Running","conditions":[{{"type":"Initialized","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-23T18:00:01Z"}},{{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-23T18:00:01Z"}},{{"type":"ContainersReady","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-23T18:00:01Z"}},{{"type":"PodScheduled","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-23T18:00:00Z"}}],"hostIP":"10.0.0.{node}","hostIPs":[{{"ip":"10.0.0.{node}"}}],"podIP":"10.244.{a}.{b}","podIPs":[{{"ip":"10.244.{a}.{b}"}}],"startTime":"2026-11-23T18:00:01Z","containerStatuses":[{{"name":"app","state":{{"running":{{"startedAt":"2026-11-23T18:00:01Z"}}}},"lastState":{{}},"ready":true,"restartCount":0,"image":"registry.k8s.io/pause:3.10","imageID":"","started":true}}],"qosClass":"BestEffort"}}}}"#,
        rv = 1000 + i,
        node = i % 20,
        a = i / 250,
        b = i % 250,
    )
}

fn measure(label: &str, transform: impl Fn(Pod) -> Pod) {
    let before = HELD.load(Ordering::Relaxed);
    let mut cache = Vec::with_capacity(PODS);
    for i in 0..PODS {
        let pod: Pod = serde_json::from_str(&pod_json(i)).unwrap();
        cache.push(std::sync::Arc::new(transform(pod)));
    }
    let held = HELD.load(Ordering::Relaxed) - before;
    println!("{label}: {} bytes per pod", held / PODS as isize);
    drop(cache);
}

fn main() {
    println!("size_of::<Pod>() = {}", std::mem::size_of::<Pod>());
    measure("as decoded", |p| p);
    measure("managedFields stripped (the informer today)", |mut p| {
        p.metadata.managed_fields = None;
        p
    });
    measure(
        "only what the controllers read (a candidate transform, not applied)",
        controller_fields,
    );
}

/// The candidate transform: metadata without managedFields; of the spec, nodeName, affinity,
/// tolerations, nodeSelector and the containers' names (init containers also their restartPolicy); of
/// the status, phase, conditions and the container statuses' name, ready and restartCount.
fn controller_fields(pod: Pod) -> Pod {
    use k8s_openapi::api::core::v1::{Container, ContainerStatus, PodSpec, PodStatus};
    let mut metadata = pod.metadata;
    metadata.managed_fields = None;
    let names = |cs: Vec<Container>| -> Vec<Container> {
        cs.into_iter()
            .map(|c| Container {
                name: c.name,
                restart_policy: c.restart_policy,
                ..Container::default()
            })
            .collect()
    };
    let statuses = |cs: Vec<ContainerStatus>| -> Vec<ContainerStatus> {
        cs.into_iter()
            .map(|c| ContainerStatus {
                name: c.name,
                ready: c.ready,
                restart_count: c.restart_count,
                ..ContainerStatus::default()
            })
            .collect()
    };
    let spec = pod.spec.map(|s| PodSpec {
        node_name: s.node_name,
        affinity: s.affinity,
        tolerations: s.tolerations,
        node_selector: s.node_selector,
        containers: names(s.containers),
        init_containers: s.init_containers.map(names),
        ..PodSpec::default()
    });
    let status = pod.status.map(|s| PodStatus {
        phase: s.phase,
        conditions: s.conditions,
        container_statuses: s.container_statuses.map(statuses),
        init_container_statuses: s.init_container_statuses.map(statuses),
        ..PodStatus::default()
    });
    Pod {
        metadata,
        spec,
        status,
    }
}
