//! Killing the manager in the middle of a scale-up and starting a new one never leaves more pods than
//! `spec.replicas`: the new manager learns what exists from its caches (and the expectations it starts
//! without are rebuilt from the pods it sees), for both API families.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, reflector, watcher};
use mini_kcm_e2e::{
    TIMEOUT, TestManager, app_selector, controller_uid, is_active, replica_set, replica_sets,
};
use mini_kcm_manager::{Kinds, ManagerOptions};
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_testkit::{PlaneConfig, TestNamespace, shared_plane};

const REPLICAS: usize = 40;

async fn restart_mid_scale_up(family: ApiFamily) {
    let ns = TestNamespace::create(
        shared_plane(PlaneConfig::default()),
        &format!("rs-restart-{}", family.label()),
    )
    .await;
    let kinds = match family {
        ApiFamily::Apps => Kinds::Apps,
        ApiFamily::Copies => Kinds::Copies,
    };
    // A slow client (5 requests/s) so the scale-up is still under way when the manager is killed.
    let slow = || ManagerOptions {
        kinds,
        kube_api_qps: 5.0,
        kube_api_burst: 1,
        ..Default::default()
    };

    // Watch every pod of the ReplicaSet for the whole test and remember the most ever active at once.
    let pods = ns.api::<Pod>();
    let (reader, writer) = reflector::store();
    let max_active = Arc::new(AtomicUsize::new(0));
    let observer = {
        let max_active = max_active.clone();
        let reader = reader.clone();
        let stream = reflector(
            writer,
            watcher(
                pods.clone(),
                watcher::Config::default().labels(&app_selector("web")),
            ),
        )
        .default_backoff()
        .touched_objects();
        tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {
                let active = reader.state().iter().filter(|p| is_active(p)).count();
                max_active.fetch_max(active, Ordering::SeqCst);
            }
        })
    };

    let first = TestManager::start_with(&ns, slow()).await;
    let created = replica_sets(&ns, family)
        .create(
            &PostParams::default(),
            &replica_set("web", REPLICAS as i32, family),
        )
        .await
        .unwrap();
    let uid = created.metadata.uid.clone().unwrap();
    // Kill once some, but not all, pods exist.
    ns.wait_for_list(
        &pods,
        watcher::Config::default().labels(&app_selector("web")),
        "the scale-up to be under way",
        TIMEOUT,
        |pods| pods.len() >= 5,
    )
    .await;
    first.kill().await;
    let at_kill = reader.state().len();
    assert!(
        at_kill < REPLICAS,
        "the scale-up finished before the kill ({at_kill} pods): slow the client more"
    );

    let second = TestManager::start_with(&ns, slow()).await;
    ns.wait_for_list(
        &pods,
        watcher::Config::default().labels(&app_selector("web")),
        &format!("{REPLICAS} pods owned by the ReplicaSet"),
        TIMEOUT * 2,
        |pods| {
            pods.iter()
                .filter(|p| is_active(p) && controller_uid(p).as_deref() == Some(uid.as_str()))
                .count()
                == REPLICAS
        },
    )
    .await;
    second.stop().await;
    observer.abort();
    assert_eq!(
        max_active.load(Ordering::SeqCst),
        REPLICAS,
        "never more than spec.replicas active pods (killed at {at_kill})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_restart_mid_scale_up_never_exceeds_replicas() {
    restart_mid_scale_up(ApiFamily::Apps).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_restart_mid_scale_up_never_exceeds_replicas() {
    restart_mid_scale_up(ApiFamily::Copies).await;
}
