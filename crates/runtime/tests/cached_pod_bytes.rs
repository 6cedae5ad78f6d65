//! How many heap bytes one cached pod takes, decoded whole and as the pod cache keeps it
//! (`pods::cached`). Its own test binary because it replaces the process's allocator to count.
//!
//! The numbers are deterministic (the same JSON, the same allocations on the test's thread), so the
//! bound below is a regression guard on the cache's size, not a timing: it fails if the cache starts
//! keeping a large part of the pod again.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use mini_kcm_runtime::pods::cached::CachedPod;

/// The system allocator, counting per thread the bytes currently allocated and the allocations made.
///
/// Per thread, because the test harness's main thread is still allocating (it has just spawned the
/// test's thread) while the test measures: process-wide counters caught its allocations in about one
/// run in seven.
struct Counting;

thread_local! {
    /// Bytes allocated by this thread and not yet freed (by this thread).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// Allocations this thread made so far (the decoding work, beside what it leaves allocated).
    static ALLOCATIONS: Cell<isize> = const { Cell::new(0) };
}

/// Adds to a counter of this thread; a thread being torn down has no counters left and is not counted.
fn count(counter: &'static std::thread::LocalKey<Cell<isize>>, delta: isize) {
    let _ = counter.try_with(|c| c.set(c.get() + delta));
}

fn current(counter: &'static std::thread::LocalKey<Cell<isize>>) -> isize {
    counter.with(Cell::get)
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(&LIVE, layout.size() as isize);
        count(&ALLOCATIONS, 1);
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(&LIVE, -(layout.size() as isize));
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(&LIVE, new_size as isize - layout.size() as isize);
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A replica of a Deployment as the local plane's API server returns it (kwok node, service-account
/// token volume), managedFields included as a controller's watch receives them.
const POD_JSON: &str = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"creationTimestamp":"2026-11-24T00:02:12Z","generateName":"web-7d4b9c8f6-","generation":1,"labels":{"app":"web","pod-template-hash":"7d4b9c8f6"},"managedFields":[{"apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"47114d90-319b-4331-be78-3c6d8bc3b2bd\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}},"manager":"kube-controller-manager","operation":"Update","time":"2026-11-24T00:02:12Z"}],"name":"web-7d4b9c8f6-znlgp","namespace":"default","ownerReferences":[{"apiVersion":"apps/v1","blockOwnerDeletion":true,"controller":true,"kind":"ReplicaSet","name":"web-7d4b9c8f6","uid":"47114d90-319b-4331-be78-3c6d8bc3b2bd"}],"resourceVersion":"7709","uid":"6973d001-0054-41a7-a3fc-8d27d7a6c07f"},"spec":{"containers":[{"image":"registry.k8s.io/pause:3.10","imagePullPolicy":"IfNotPresent","name":"app","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","volumeMounts":[{"mountPath":"/var/run/secrets/kubernetes.io/serviceaccount","name":"kube-api-access-2hs9h","readOnly":true}]}],"dnsPolicy":"ClusterFirst","enableServiceLinks":true,"nodeName":"kwok-node-5","preemptionPolicy":"PreemptLowerPriority","priority":0,"restartPolicy":"Always","schedulerName":"default-scheduler","securityContext":{},"serviceAccount":"default","serviceAccountName":"default","terminationGracePeriodSeconds":0,"tolerations":[{"effect":"NoExecute","key":"node.kubernetes.io/not-ready","operator":"Exists","tolerationSeconds":300},{"effect":"NoExecute","key":"node.kubernetes.io/unreachable","operator":"Exists","tolerationSeconds":300}],"volumes":[{"name":"kube-api-access-2hs9h","projected":{"defaultMode":420,"sources":[{"serviceAccountToken":{"expirationSeconds":3607,"path":"token"}},{"configMap":{"items":[{"key":"ca.crt","path":"ca.crt"}],"name":"kube-root-ca.crt"}},{"downwardAPI":{"items":[{"fieldRef":{"apiVersion":"v1","fieldPath":"metadata.namespace"},"path":"namespace"}]}}]}}]},"status":{"conditions":[{"lastProbeTime":null,"lastTransitionTime":"2026-11-24T00:02:27Z","status":"True","type":"Initialized"},{"lastProbeTime":null,"lastTransitionTime":"2026-11-24T00:02:27Z","status":"True","type":"Ready"},{"lastProbeTime":null,"lastTransitionTime":"2026-11-24T00:02:27Z","status":"True","type":"ContainersReady"},{"lastProbeTime":null,"lastTransitionTime":"2026-11-24T00:02:27Z","status":"True","type":"PodScheduled"}],"containerStatuses":[{"image":"registry.k8s.io/pause:3.10","imageID":"","lastState":{},"name":"app","ready":true,"restartCount":0,"started":true,"state":{"running":{"startedAt":"2026-11-24T00:02:27Z"}}}],"hostIP":"127.0.0.1","hostIPs":[{"ip":"127.0.0.1"}],"phase":"Running","podIP":"10.244.3.248","podIPs":[{"ip":"10.244.3.248"}],"qosClass":"BestEffort","startTime":"2026-11-24T00:02:27Z"}}"#;

/// Heap bytes this thread still has allocated after `make` returns its value (kept alive until measured), and the
/// allocations `make` made.
fn bytes_of<T>(make: impl FnOnce() -> T) -> (isize, isize) {
    let before = current(&LIVE);
    let allocations = current(&ALLOCATIONS);
    let value = make();
    let after = current(&LIVE);
    let made = current(&ALLOCATIONS) - allocations;
    drop(value);
    (after - before, made)
}

#[test]
fn a_cached_pod_keeps_a_small_part_of_the_decoded_one() {
    let (decoded, decoding) = bytes_of(|| Arc::new(serde_json::from_str::<Pod>(POD_JSON).unwrap()));
    let (cached, trimming) = bytes_of(|| {
        let pod = serde_json::from_str::<Pod>(POD_JSON).unwrap();
        Arc::new(CachedPod::from(pod))
    });
    // What the pod watch does: decode the cached pod's fields only, then trim them.
    let (projected, projecting) = bytes_of(|| {
        let decoded = serde_json::from_str::<CachedPod>(POD_JSON).unwrap();
        Arc::new(decoded.trimmed())
    });
    println!(
        "one pod: {decoded} bytes decoded ({decoding} allocations), {cached} bytes cached ({} % kept; \
         {trimming} allocations to decode and trim), {projected} bytes projected ({projecting} \
         allocations); inline, a Pod is {} bytes and a CachedPod {}",
        cached * 100 / decoded,
        std::mem::size_of::<Pod>(),
        std::mem::size_of::<CachedPod>()
    );
    assert!(
        projecting * 2 < decoding,
        "decoding the cached fields only ({projecting} allocations) should take under half the work of \
         decoding the whole pod ({decoding})"
    );
    assert_eq!(
        projected, cached,
        "decoding the cached fields keeps what trimming a whole pod keeps"
    );
    assert!(
        cached * 10 < decoded,
        "the cached pod ({cached} bytes) should be under a tenth of the decoded one ({decoded} bytes)"
    );
}
