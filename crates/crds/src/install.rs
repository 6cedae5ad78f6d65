//! Installing the CRDs into a cluster: server-side apply, then wait until the API server serves them.
//!
//! Server-side apply (not create-or-replace) makes installing idempotent and lets a newer mini-kcm
//! update the schemas in place; `force` takes over fields last written by someone else (say a
//! `kubectl apply -f deploy/crds`), because mini-kcm's generator is the source of truth for them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Api, Client};

use crate::{FIELD_MANAGER, all};

/// How long [`install`] waits for each CRD to become Established (the API server needs well under a
/// second; a name conflict with another CRD would make it wait forever).
pub(crate) const ESTABLISHED_TIMEOUT: Duration = Duration::from_secs(60);

/// What can go wrong while installing the CRDs.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("applying CustomResourceDefinition {name}")]
    Apply {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("watching CustomResourceDefinition {name} until it is Established")]
    Watch {
        name: String,
        #[source]
        source: kube::runtime::wait::Error,
    },
    #[error(
        "CustomResourceDefinition {name} was not Established within {timeout:?}; its conditions: {conditions}"
    )]
    NotEstablished {
        name: String,
        timeout: Duration,
        conditions: String,
    },
    #[error("rendering CustomResourceDefinition {name} as YAML")]
    Render {
        name: String,
        #[source]
        source: serde_norway::Error,
    },
}

/// Server-side applies the three CRDs (field manager `mini-kcm`) and waits until the API server reports
/// each one Established, i.e. serving its REST endpoints. Safe to call any number of times.
pub async fn install(client: &Client) -> Result<(), Error> {
    install_with_timeout(client, ESTABLISHED_TIMEOUT).await
}

/// [`install`] with another bound on the wait for each CRD.
pub(crate) async fn install_with_timeout(client: &Client, timeout: Duration) -> Result<(), Error> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let crds = all();
    for crd in &crds {
        let name = crd_name(crd);
        api.patch(&name, &params, &Patch::Apply(crd))
            .await
            .map_err(|source| Error::Apply {
                name: name.clone(),
                source,
            })?;
        tracing::debug!(crd = %name, "applied");
    }
    // All three are applied before waiting for any, so the API server establishes them in parallel.
    for crd in &crds {
        let name = crd_name(crd);
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(timeout, established).await {
            Ok(Ok(_)) => tracing::info!(crd = %name, "established"),
            Ok(Err(source)) => return Err(Error::Watch { name, source }),
            Err(_elapsed) => {
                let conditions = describe_conditions(&api, &name).await;
                return Err(Error::NotEstablished {
                    name,
                    timeout,
                    conditions,
                });
            }
        }
    }
    Ok(())
}

fn crd_name(crd: &CustomResourceDefinition) -> String {
    crd.metadata.name.clone().unwrap_or_default()
}

/// The CRD's conditions in one line, to explain a timeout (e.g. `NamesAccepted=False (...)`).
async fn describe_conditions(api: &Api<CustomResourceDefinition>, name: &str) -> String {
    match api.get(name).await {
        Ok(crd) => {
            let conditions = crd
                .status
                .and_then(|status| status.conditions)
                .unwrap_or_default();
            if conditions.is_empty() {
                return "none".into();
            }
            conditions
                .iter()
                .map(|c| {
                    format!(
                        "{}={} ({}: {})",
                        c.type_,
                        c.status,
                        c.reason.as_deref().unwrap_or(""),
                        c.message.as_deref().unwrap_or("")
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
        Err(e) => format!("unknown (reading the CRD failed: {e})"),
    }
}
