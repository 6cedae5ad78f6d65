//! `mini-kcm rollout status`: kubectl's status messages, computed from the object, and the watch that
//! prints one per change until the rollout is done.
//!
//! The messages and their order of checks are kubectl's (`polymorphichelpers/rollout_status.go`), so
//! scripts that read kubectl's output read ours. Both families share the code: the spec and status
//! types of the CRD copies are apps/v1's.

use std::fmt::Debug;
use std::time::Duration;

use anyhow::{anyhow, bail};
use futures::StreamExt;
use k8s_openapi::serde::de::DeserializeOwned;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use mini_kcm_deployment::REVISION_ANNOTATION;
use mini_kcm_runtime::api::kinds::{DaemonSetObject, DeploymentObject};

/// kubectl's `TimedOutReason`: the Progressing condition's reason once the deadline passed.
const TIMED_OUT_REASON: &str = "ProgressDeadlineExceeded";
const PROGRESSING: &str = "Progressing";
const ROLLING_UPDATE: &str = "RollingUpdate";

/// One observation of a rollout: the line to print and whether the rollout is complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Progress {
    pub message: String,
    pub done: bool,
}

impl Progress {
    fn waiting(message: String) -> Self {
        Progress {
            message,
            done: false,
        }
    }
}

/// kubectl's `DeploymentStatusViewer.Status`. `revision > 0` pins the rollout to that revision.
pub fn deployment_status(d: &DeploymentObject, revision: i64) -> anyhow::Result<Progress> {
    let name = d.metadata.name.as_deref().unwrap_or_default();
    if revision > 0 {
        let current = match d
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(REVISION_ANNOTATION))
        {
            None => 0,
            Some(v) => v
                .parse::<i64>()
                .map_err(|e| anyhow!("cannot get the revision of deployment {name:?}: {e}"))?,
        };
        if revision != current {
            bail!(
                "desired revision ({revision}) is different from the running revision ({current})"
            );
        }
    }
    let status = d.status.clone().unwrap_or_default();
    let generation = d.metadata.generation.unwrap_or(0);
    if generation > status.observed_generation.unwrap_or(0) {
        return Ok(Progress::waiting(
            "Waiting for deployment spec update to be observed...".to_string(),
        ));
    }
    let timed_out = status
        .conditions
        .iter()
        .flatten()
        .find(|c| c.type_.as_deref() == Some(PROGRESSING))
        .is_some_and(|c| c.reason.as_deref() == Some(TIMED_OUT_REASON));
    if timed_out {
        bail!("deployment {name:?} exceeded its progress deadline");
    }
    let replicas = status.replicas.unwrap_or(0);
    let updated = status.updated_replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    // An absent spec.replicas (never the case after API defaulting) skips this check, as in kubectl.
    if let Some(desired) = d.spec.replicas
        && updated < desired
    {
        return Ok(Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {updated} out of {desired} new replicas have been updated..."
        )));
    }
    if replicas > updated {
        return Ok(Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {} old replicas are pending termination...",
            replicas - updated
        )));
    }
    if available < updated {
        return Ok(Progress::waiting(format!(
            "Waiting for deployment {name:?} rollout to finish: {available} of {updated} updated replicas are available..."
        )));
    }
    Ok(Progress {
        message: format!("deployment {name:?} successfully rolled out"),
        done: true,
    })
}

/// kubectl's `DaemonSetStatusViewer.Status` (DaemonSets have no pinned revision there either).
pub fn daemon_set_status(ds: &DaemonSetObject) -> anyhow::Result<Progress> {
    let name = ds.metadata.name.as_deref().unwrap_or_default();
    // An absent strategy type is the API default, RollingUpdate (the server fills it in for apps/v1;
    // a copy written before its CRD had defaults may lack it).
    let strategy = ds
        .spec
        .update_strategy
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or(ROLLING_UPDATE);
    if strategy != ROLLING_UPDATE {
        bail!("rollout status is only available for {ROLLING_UPDATE} strategy type");
    }
    let status = ds.status.clone().unwrap_or_default();
    if ds.metadata.generation.unwrap_or(0) > status.observed_generation.unwrap_or(0) {
        return Ok(Progress::waiting(
            "Waiting for daemon set spec update to be observed...".to_string(),
        ));
    }
    let desired = status.desired_number_scheduled;
    let updated = status.updated_number_scheduled.unwrap_or(0);
    let available = status.number_available.unwrap_or(0);
    if updated < desired {
        return Ok(Progress::waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {updated} out of {desired} new pods have been updated..."
        )));
    }
    if available < desired {
        return Ok(Progress::waiting(format!(
            "Waiting for daemon set {name:?} rollout to finish: {available} of {desired} updated pods are available..."
        )));
    }
    Ok(Progress {
        message: format!("daemon set {name:?} successfully rolled out"),
        done: true,
    })
}

/// Watches the object `name` and prints `status` of every version seen (the listed one first), like
/// kubectl's `UntilWithSync`, until the rollout is done, `status` fails, the object is deleted, or
/// `timeout` passes. With `watch == false` only the first version is printed.
pub async fn watch_until_done<K>(
    api: &Api<K>,
    name: &str,
    watch: bool,
    timeout: Option<Duration>,
    status: impl Fn(&K) -> anyhow::Result<Progress>,
) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let until_done = async {
        let mut events = std::pin::pin!(watcher(api.clone(), config).default_backoff());
        // Whether the object was in the current (re)list: a relist without it means it was deleted
        // while the watch was down, which a watch alone never reports.
        let mut listed = false;
        let mut seen = false;
        while let Some(event) = events.next().await {
            let object = match event {
                Ok(watcher::Event::Init) => {
                    listed = false;
                    continue;
                }
                Ok(watcher::Event::InitDone) => {
                    if seen && !listed {
                        bail!("object has been deleted");
                    }
                    continue;
                }
                Ok(watcher::Event::InitApply(object)) => {
                    listed = true;
                    object
                }
                Ok(watcher::Event::Apply(object)) => object,
                // Abort rather than follow a re-created object with the same name.
                Ok(watcher::Event::Delete(_)) => bail!("object has been deleted"),
                Err(e) => {
                    // The backoff retries; kubectl's reflector does the same on watch errors.
                    tracing::warn!(error = %e, "watching the rollout failed; retrying");
                    continue;
                }
            };
            seen = true;
            let progress = status(&object)?;
            println!("{}", progress.message);
            if progress.done || !watch {
                return Ok(());
            }
        }
        bail!("the watch ended before the rollout finished")
    };
    match timeout {
        Some(timeout) => tokio::time::timeout(timeout, until_done)
            .await
            .map_err(|_| anyhow!("timed out waiting for the condition"))?,
        None => until_done.await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{
        DaemonSetSpec, DaemonSetStatus, DaemonSetUpdateStrategy, DeploymentCondition,
        DeploymentSpec, DeploymentStatus,
    };
    use mini_kcm_runtime::api::kinds::{ApiFamily, WorkloadKind};

    fn deployment(
        generation: i64,
        spec_replicas: i32,
        status: DeploymentStatus,
    ) -> DeploymentObject {
        let mut d = DeploymentObject::new(
            "foo",
            &WorkloadKind::Deployment.api_resource(ApiFamily::Copies),
            DeploymentSpec {
                replicas: Some(spec_replicas),
                ..Default::default()
            },
        );
        d.metadata.namespace = Some("bar".into());
        d.metadata.generation = Some(generation);
        d.status = Some(status.into());
        d
    }

    fn d_status(observed: i64, replicas: i32, updated: i32, available: i32) -> DeploymentStatus {
        DeploymentStatus {
            observed_generation: Some(observed),
            replicas: Some(replicas),
            updated_replicas: Some(updated),
            available_replicas: Some(available),
            unavailable_replicas: Some(replicas - available),
            ..Default::default()
        }
    }

    /// kubectl's `TestDeploymentStatusViewerStatus` table.
    #[test]
    fn deployment_messages_match_kubectl() {
        let cases = [
            (
                0,
                1,
                d_status(1, 1, 0, 1),
                "Waiting for deployment \"foo\" rollout to finish: 0 out of 1 new replicas have been updated...",
                false,
            ),
            (
                1,
                1,
                d_status(1, 2, 1, 2),
                "Waiting for deployment \"foo\" rollout to finish: 1 old replicas are pending termination...",
                false,
            ),
            (
                1,
                2,
                d_status(1, 2, 2, 1),
                "Waiting for deployment \"foo\" rollout to finish: 1 of 2 updated replicas are available...",
                false,
            ),
            (
                1,
                2,
                d_status(1, 2, 2, 2),
                "deployment \"foo\" successfully rolled out",
                true,
            ),
            (
                2,
                2,
                d_status(1, 2, 2, 2),
                "Waiting for deployment spec update to be observed...",
                false,
            ),
        ];
        for (i, (generation, replicas, status, message, done)) in cases.into_iter().enumerate() {
            let got = deployment_status(&deployment(generation, replicas, status), 0)
                .unwrap_or_else(|e| panic!("case {}: {e}", i + 1));
            assert_eq!(
                got,
                Progress {
                    message: message.to_string(),
                    done
                },
                "case {}",
                i + 1
            );
        }
    }

    #[test]
    fn an_empty_status_waits_for_the_spec_to_be_observed() {
        let mut d = deployment(1, 3, DeploymentStatus::default());
        d.status = None;
        let got = deployment_status(&d, 0).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got.message,
            "Waiting for deployment spec update to be observed..."
        );
        assert!(!got.done);
    }

    #[test]
    fn progress_deadline_exceeded_is_an_error_once_observed() {
        let mut status = d_status(1, 3, 1, 0);
        status.conditions = Some(vec![DeploymentCondition {
            type_: Some(PROGRESSING.into()),
            status: Some("False".into()),
            reason: Some(TIMED_OUT_REASON.into()),
            ..Default::default()
        }]);
        let d = deployment(1, 3, status.clone());
        match deployment_status(&d, 0) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => assert_eq!(
                e.to_string(),
                "deployment \"foo\" exceeded its progress deadline"
            ),
        }
        // Not yet observed: kubectl waits for the observation before judging the condition.
        let d = deployment(2, 3, status);
        assert!(deployment_status(&d, 0).is_ok_and(|p| !p.done));
    }

    #[test]
    fn a_pinned_revision_must_be_the_running_one() {
        let mut d = deployment(1, 2, d_status(1, 2, 2, 2));
        d.metadata.annotations = Some([(REVISION_ANNOTATION.to_string(), "3".to_string())].into());
        assert!(deployment_status(&d, 3).is_ok_and(|p| p.done));
        match deployment_status(&d, 2) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => assert_eq!(
                e.to_string(),
                "desired revision (2) is different from the running revision (3)"
            ),
        }
    }

    fn daemon_set(generation: i64, status: DaemonSetStatus) -> DaemonSetObject {
        let mut ds = DaemonSetObject::new(
            "foo",
            &WorkloadKind::DaemonSet.api_resource(ApiFamily::Apps),
            DaemonSetSpec {
                update_strategy: Some(DaemonSetUpdateStrategy {
                    type_: Some(ROLLING_UPDATE.into()),
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        ds.metadata.generation = Some(generation);
        ds.status = Some(status);
        ds
    }

    fn ds_status(observed: i64, updated: i32, desired: i32, available: i32) -> DaemonSetStatus {
        DaemonSetStatus {
            observed_generation: Some(observed),
            updated_number_scheduled: Some(updated),
            desired_number_scheduled: desired,
            number_available: Some(available),
            ..Default::default()
        }
    }

    /// kubectl's `TestDaemonSetStatusViewerStatus` table.
    #[test]
    fn daemon_set_messages_match_kubectl() {
        let cases = [
            (
                0,
                ds_status(1, 0, 1, 0),
                "Waiting for daemon set \"foo\" rollout to finish: 0 out of 1 new pods have been updated...",
                false,
            ),
            (
                1,
                ds_status(1, 2, 2, 1),
                "Waiting for daemon set \"foo\" rollout to finish: 1 of 2 updated pods are available...",
                false,
            ),
            (
                1,
                ds_status(1, 2, 2, 2),
                "daemon set \"foo\" successfully rolled out",
                true,
            ),
            (
                2,
                ds_status(1, 2, 2, 2),
                "Waiting for daemon set spec update to be observed...",
                false,
            ),
        ];
        for (i, (generation, status, message, done)) in cases.into_iter().enumerate() {
            let got = daemon_set_status(&daemon_set(generation, status))
                .unwrap_or_else(|e| panic!("case {}: {e}", i + 1));
            assert_eq!(
                got,
                Progress {
                    message: message.to_string(),
                    done
                },
                "case {}",
                i + 1
            );
        }
    }

    #[test]
    fn daemon_set_on_delete_has_no_rollout_status() {
        let mut ds = daemon_set(1, ds_status(1, 2, 2, 2));
        ds.spec.update_strategy = Some(DaemonSetUpdateStrategy {
            type_: Some("OnDelete".into()),
            ..Default::default()
        });
        match daemon_set_status(&ds) {
            Ok(p) => panic!("expected an error, got {p:?}"),
            Err(e) => assert_eq!(
                e.to_string(),
                "rollout status is only available for RollingUpdate strategy type"
            ),
        }
        // The default strategy is RollingUpdate.
        ds.spec.update_strategy = None;
        assert!(daemon_set_status(&ds).is_ok_and(|p| p.done));
    }
}
