//! `deployments.minikcm.dev`: the copy of apps/v1 Deployment.
//!
//! Defaults as upstream's `SetDefaults_Deployment`: replicas 1, revisionHistoryLimit 10,
//! progressDeadlineSeconds 600, strategy RollingUpdate with maxSurge and maxUnavailable 25%.
//!
//! A structural schema cannot default conditionally ("rollingUpdate only when type is RollingUpdate"), so
//! `strategy.rollingUpdate` defaults to `{maxSurge: 25%, maxUnavailable: 25%}` whenever `strategy`
//! exists, whatever its type. Then every input apps/v1 would fill in (`strategy` absent, `{}`,
//! `{type: RollingUpdate}`, `{rollingUpdate: {maxSurge: 1}}`) comes out exactly as from apps/v1, which
//! the rolling-update code relies on. The price: a `Recreate` Deployment carries an inert
//! `rollingUpdate` with those default values, and the upstream check "rollingUpdate may not be specified
//! when strategy type is Recreate" can only reject values other than the defaults.

use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use crate::crd::{CrdParts, age_column, build, column, wide_template_columns};
use crate::schema::{Rule, add_rule, at, object_schema};
use crate::workload::{self, int_or_percent};

pub(crate) const KIND: &str = "Deployment";
pub(crate) const PLURAL: &str = "deployments";
pub const SHORT_NAME: &str = "mdeploy";

/// apps/v1's default for both maxSurge and maxUnavailable.
pub(crate) const DEFAULT_MAX_SURGE_AND_UNAVAILABLE: &str = "25%";

/// The Deployment copy's CustomResourceDefinition.
///
/// Defaults are apps/v1's, with one unavoidable difference: a structural schema cannot default
/// `strategy.rollingUpdate` only for type RollingUpdate, so it is defaulted (25%/25%) for every type.
/// Everything apps/v1 defaults comes out the same; a `Recreate` Deployment additionally carries an inert
/// `rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}`, and "rollingUpdate may not be specified for
/// Recreate" can only refuse values other than those.
pub(crate) fn deployment() -> CustomResourceDefinition {
    let mut columns = vec![
        column(
            "Desired",
            "integer",
            ".spec.replicas",
            false,
            "Number of desired pods",
        ),
        column(
            "Ready",
            "integer",
            ".status.readyReplicas",
            false,
            "Number of ready pods",
        ),
        column(
            "Up-To-Date",
            "integer",
            ".status.updatedReplicas",
            false,
            "Number of pods of the current pod template",
        ),
        column(
            "Available",
            "integer",
            ".status.availableReplicas",
            false,
            "Number of pods ready for at least minReadySeconds",
        ),
        age_column(),
    ];
    columns.extend(wide_template_columns(workload::STATUS_SELECTOR_PATH));
    build(CrdParts {
        kind: KIND,
        plural: PLURAL,
        short_name: SHORT_NAME,
        description: "A copy of apps/v1 Deployment reconciled by mini-kcm. Deployment enables declarative updates for Pods and ReplicaSets (here: the ReplicaSet copies of minikcm.dev).",
        schema: schema(),
        printer_columns: columns,
        scale: true,
        selectable_fields: &[],
    })
}

pub(crate) fn schema() -> Value {
    let mut schema = object_schema::<DeploymentSpec, DeploymentStatus>();
    workload::decorate_spec(&mut schema, "deployment", "ReplicaSet");
    let spec = at(&mut schema, "spec");
    for (field, default) in [
        ("replicas", 1),
        ("revisionHistoryLimit", 10),
        ("progressDeadlineSeconds", 600),
    ] {
        let property = at(spec, field);
        property["default"] = json!(default);
        property["minimum"] = json!(workload::NON_NEGATIVE);
    }
    add_rule(
        spec,
        Rule {
            rule: "!has(self.progressDeadlineSeconds) || self.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",
            message: "must be greater than minReadySeconds",
            field_path: Some(".progressDeadlineSeconds"),
            reason: None,
        },
    );
    decorate_strategy(at(spec, "strategy"));
    // A deliberate difference from apps/v1, which accepts it: the controller labels each ReplicaSet and
    // its pods with its own `pod-template-hash`, so a selector on that key stops matching what the
    // Deployment creates, and it creates ReplicaSets without bound.
    add_rule(
        at(spec, "selector"),
        Rule {
            rule: "(!has(self.matchLabels) || !('pod-template-hash' in self.matchLabels)) && (!has(self.matchExpressions) || self.matchExpressions.all(e, e.key != 'pod-template-hash'))",
            message: "may not use the label key 'pod-template-hash': the Deployment controller sets it on every ReplicaSet and pod it creates",
            field_path: None,
            reason: None,
        },
    );

    workload::non_negative_status_counters(&mut schema);
    for field in ["updatedReplicas", "readyReplicas", "availableReplicas"] {
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
    workload::collision_count_never_decrements(&mut schema);
    workload::add_status_selector(&mut schema);
    schema
}

fn decorate_strategy(strategy: &mut Value) {
    // `{}` so that an absent strategy is created and then filled by the defaults below.
    strategy["default"] = json!({});
    let type_ = at(strategy, "type");
    type_["enum"] = json!(["Recreate", "RollingUpdate"]);
    type_["default"] = json!("RollingUpdate");
    at(strategy, "rollingUpdate")["default"] = json!({});
    for field in ["maxSurge", "maxUnavailable"] {
        at(strategy, &format!("rollingUpdate.{field}"))["default"] =
            json!(DEFAULT_MAX_SURGE_AND_UNAVAILABLE);
    }

    add_rule(
        strategy,
        Rule {
            rule: &format!(
                "self.type != 'Recreate' || !has(self.rollingUpdate) || \
                 ((!has(self.rollingUpdate.maxSurge) || self.rollingUpdate.maxSurge == '{d}') && \
                 (!has(self.rollingUpdate.maxUnavailable) || self.rollingUpdate.maxUnavailable == '{d}'))",
                d = DEFAULT_MAX_SURGE_AND_UNAVAILABLE
            ),
            message: "may not be specified when strategy `type` is 'Recreate'",
            field_path: Some(".rollingUpdate"),
            reason: Some("FieldValueForbidden"),
        },
    );
    use int_or_percent::{ROLLING, SURGE, UNAVAILABLE};
    int_or_percent::add_value_rules(strategy, &[UNAVAILABLE]);
    add_rule(
        strategy,
        Rule {
            rule: &format!(
                "{ROLLING}!has({UNAVAILABLE}) || !has({SURGE}) || !({} && {})",
                int_or_percent::is_zero(UNAVAILABLE),
                int_or_percent::is_zero(SURGE)
            ),
            message: "may not be 0 when `maxSurge` is 0",
            field_path: Some(".rollingUpdate.maxUnavailable"),
            reason: None,
        },
    );
}
