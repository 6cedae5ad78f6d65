//! What each safety mechanism prevents, shown by switching it off (`mini_kcm_runtime::switches::safeties`, the
//! unit-level twin of `tests/e2e/breaking.rs` and docs/tour-breaking.md): whole syncs on caches filled
//! by hand and the recorded API, where "the cache lags" is simply a write not yet delivered.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::api::kinds::ApiFamily;
use mini_kcm_runtime::controller::offline::{key, offline_controller_with, sync};
use mini_kcm_runtime::controller::{ControllerOptions, SyncKeyError};
use mini_kcm_runtime::recorded_api::{Reaction, RecordedApi, Verb};
use mini_kcm_runtime::switches::safeties::{Safeties, Safety};

use super::ReplicaSetController;
use super::tests::{pod, replica_set, seed, stored_pods, with_status};

/// The controller with `off` switched off, everything else as `mini-kcm run` has it.
fn controller_without(api: &RecordedApi, off: &[Safety]) -> Arc<ReplicaSetController> {
    let mut options = ControllerOptions::new(ApiFamily::Apps, 1);
    options.safeties = Safeties::without(off.iter().copied());
    offline_controller_with(api, options)
}

/// A ReplicaSet of 3 with no pods is synced, then synced again before the pod watch has delivered the
/// 3 creations. Either mechanism alone keeps the second sync from creating: expectations (it runs and
/// waits) and read-your-own-writes (it is held back). Without both, it creates 3 duplicates.
#[tokio::test]
async fn a_second_sync_before_the_pods_reach_the_cache_duplicates_them_only_without_both_guards() {
    let cases: [(&[Safety], usize); 4] = [
        (&[], 3),
        (&[Safety::Expectations], 3),
        (&[Safety::ReadYourOwnWrites], 3),
        (&[Safety::Expectations, Safety::ReadYourOwnWrites], 6),
    ];
    for (off, pods_after) in cases {
        let api = RecordedApi::new();
        let c = controller_without(&api, off);
        seed(
            &api,
            &c,
            &[with_status(replica_set("web", "rs-uid", 3, "web"), 0)],
            &[],
        );
        let _first = sync(c.as_ref(), &key("ns/web"))
            .await
            .unwrap_or_else(|e| panic!("{off:?}: first sync: {e}"));
        assert_eq!(stored_pods(&api).len(), 3, "{off:?}: first sync");
        // Nothing delivered to the pod cache: it still shows no pod.
        let second = sync(c.as_ref(), &key("ns/web")).await;
        let held_back = matches!(second, Err(SyncKeyError::StaleCache { .. }));
        assert_eq!(
            held_back,
            !off.contains(&Safety::ReadYourOwnWrites),
            "{off:?}: {second:?}"
        );
        assert_eq!(stored_pods(&api).len(), pods_after, "{off:?}: second sync");
    }
}

/// A namespace whose quota is full refuses every creation. Slow start sends one request and stops;
/// without it a sync sends all 8.
#[tokio::test]
async fn without_slow_start_every_doomed_creation_is_sent() {
    for (off, attempts) in [(&[][..], 1), (&[Safety::SlowStart][..], 8)] {
        let api = RecordedApi::new();
        let c = controller_without(&api, off);
        seed(
            &api,
            &c,
            &[with_status(replica_set("web", "rs-uid", 8, "web"), 0)],
            &[],
        );
        api.react(Verb::Create, "pods", Reaction::QuotaExceeded);
        let result = sync(c.as_ref(), &key("ns/web")).await;
        assert!(
            result.is_err(),
            "{off:?}: the refused creations fail the sync"
        );
        let creates = api
            .calls()
            .iter()
            .filter(|c| c.as_str() == "create pods")
            .count();
        assert_eq!(creates, attempts, "{off:?}: {:?}", api.calls());
        assert!(c.expectations.satisfied_expectations(&key("ns/web")));
    }
}

/// The cache says the ReplicaSet lives, the API says it is being deleted. With the re-check the orphan
/// is left alone; without it the dying ReplicaSet adopts it (and the garbage collector will delete it
/// with its new owner).
#[tokio::test]
async fn without_the_recheck_a_replica_set_being_deleted_adopts_an_orphan() {
    for off in [&[][..], &[Safety::AdoptionRecheck][..]] {
        let api = RecordedApi::new();
        let c = controller_without(&api, off);
        let cached = with_status(replica_set("web", "rs-uid", 1, "web"), 1);
        seed(
            &api,
            &c,
            std::slice::from_ref(&cached),
            &[pod("orphan", "web", None)],
        );
        let mut deleting = cached;
        deleting.metadata.deletion_timestamp = Some(Time(Timestamp::now()));
        api.insert_with(&deleting, &c.core.resource);

        let result = sync(c.as_ref(), &key("ns/web")).await;
        let adopted = api.actions().contains(&"patch pods orphan".to_string());
        if off.is_empty() {
            assert!(result.is_err(), "adoption refused");
            assert_eq!(api.calls(), ["get replicasets web"]);
            assert!(!adopted);
        } else {
            assert!(adopted, "{:?}", api.calls());
            assert!(
                !api.calls().contains(&"get replicasets web".to_string()),
                "no re-read: {:?}",
                api.calls()
            );
        }
    }
}

/// After a sync wrote the status, a second sync on a cache that does not show that write yet: held
/// back with read-your-own-writes; without it, it writes from the stale copy, is refused with a
/// conflict, reads the ReplicaSet again and writes once more.
#[tokio::test]
async fn without_read_your_own_writes_a_stale_status_write_conflicts() {
    for off in [&[][..], &[Safety::ReadYourOwnWrites][..]] {
        let api = RecordedApi::new();
        let c = controller_without(&api, off);
        // One pod, but the stored status says none: the first sync writes the status.
        seed(
            &api,
            &c,
            &[with_status(replica_set("web", "rs-uid", 1, "web"), 0)],
            &[pod("a", "web", Some(("web", "rs-uid")))],
        );
        let _first = sync(c.as_ref(), &key("ns/web"))
            .await
            .unwrap_or_else(|e| panic!("{off:?}: first sync: {e}"));
        assert_eq!(api.calls(), ["update replicasets/status web"]);
        api.clear_requests();

        let second = sync(c.as_ref(), &key("ns/web")).await;
        if off.is_empty() {
            assert!(
                matches!(second, Err(SyncKeyError::StaleCache { .. })),
                "{second:?}"
            );
            assert_eq!(api.calls(), Vec::<String>::new());
        } else {
            assert!(second.is_ok(), "{second:?}");
            assert_eq!(
                api.calls(),
                [
                    "update replicasets/status web",
                    "get replicasets web",
                    "update replicasets/status web"
                ]
            );
        }
    }
}
