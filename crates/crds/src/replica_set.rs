//! `replicasets.minikcm.dev`: the copy of apps/v1 ReplicaSet.
//!
//! Defaults as upstream's `SetDefaults_ReplicaSet` (replicas 1); validations as
//! `ValidateReplicaSetSpec`/`ValidateReplicaSetStatus` (see [`crate::workload`] for the shared ones).

use k8s_openapi::api::apps::v1::{ReplicaSetSpec, ReplicaSetStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use crate::crd::{CrdParts, age_column, build, column, wide_template_columns};
use crate::schema::{at, object_schema};
use crate::workload;

pub(crate) const KIND: &str = "ReplicaSet";
pub(crate) const PLURAL: &str = "replicasets";
pub const SHORT_NAME: &str = "mrs";

/// The ReplicaSet copy's CustomResourceDefinition.
pub(crate) fn replica_set() -> CustomResourceDefinition {
    let mut columns = vec![
        column(
            "Desired",
            "integer",
            ".spec.replicas",
            false,
            "Number of desired pods",
        ),
        column(
            "Current",
            "integer",
            ".status.replicas",
            false,
            "Number of pods the ReplicaSet owns",
        ),
        column(
            "Ready",
            "integer",
            ".status.readyReplicas",
            false,
            "Number of ready pods",
        ),
        age_column(),
    ];
    columns.extend(wide_template_columns(workload::STATUS_SELECTOR_PATH));
    build(CrdParts {
        kind: KIND,
        plural: PLURAL,
        short_name: SHORT_NAME,
        description: "A copy of apps/v1 ReplicaSet reconciled by mini-kcm. ReplicaSet ensures that a specified number of pod replicas are running at any given time.",
        schema: schema(),
        printer_columns: columns,
        scale: true,
        // apps/v1 ReplicaSets accept `--field-selector status.replicas=0`, which Deployments use.
        selectable_fields: &[".status.replicas"],
    })
}

pub(crate) fn schema() -> Value {
    let mut schema = object_schema::<ReplicaSetSpec, ReplicaSetStatus>();
    workload::decorate_spec(&mut schema, "deployment", "ReplicaSet");
    let replicas = at(&mut schema, "spec.replicas");
    replicas["default"] = json!(1);
    replicas["minimum"] = json!(workload::NON_NEGATIVE);

    workload::non_negative_status_counters(&mut schema);
    for field in ["fullyLabeledReplicas", "readyReplicas", "availableReplicas"] {
        workload::status_at_most(
            &mut schema,
            field,
            "replicas",
            "cannot be greater than status.replicas",
        );
    }
    workload::status_at_most(
        &mut schema,
        "availableReplicas",
        "readyReplicas",
        "cannot be greater than readyReplicas",
    );
    workload::add_status_selector(&mut schema);
    schema
}
