//! `daemonsets.minikcm.dev`: the copy of apps/v1 DaemonSet.
//!
//! Defaults as upstream's `SetDefaults_DaemonSet`: revisionHistoryLimit 10, updateStrategy RollingUpdate
//! with maxUnavailable 1 and maxSurge 0. As for Deployments (see [`crate::deployment`]), a structural
//! schema cannot default conditionally, so `updateStrategy.rollingUpdate` is defaulted whenever
//! `updateStrategy` exists: an `OnDelete` DaemonSet carries an inert `rollingUpdate: {maxUnavailable: 1,
//! maxSurge: 0}`, which apps/v1 also accepts (it ignores rollingUpdate for OnDelete). No scale
//! subresource: apps/v1 DaemonSets have none.

use k8s_openapi::api::apps::v1::{DaemonSetSpec, DaemonSetStatus};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use crate::crd::{CrdParts, age_column, build, column, wide_template_columns};
use crate::schema::{Rule, add_rule, at, object_schema};
use crate::workload::{self, int_or_percent};

pub(crate) const KIND: &str = "DaemonSet";
pub(crate) const PLURAL: &str = "daemonsets";
pub const SHORT_NAME: &str = "mds";

/// The DaemonSet copy's CustomResourceDefinition (no scale subresource, as apps/v1).
///
/// Defaults are apps/v1's, except that `updateStrategy.rollingUpdate` (maxUnavailable 1, maxSurge 0) is
/// defaulted for `OnDelete` too: a structural schema cannot default by type. apps/v1 accepts and ignores
/// a rollingUpdate on OnDelete DaemonSets, and so does mini-kcm.
pub(crate) fn daemon_set() -> CustomResourceDefinition {
    let mut columns = vec![
        column(
            "Desired",
            "integer",
            ".status.desiredNumberScheduled",
            false,
            "Number of nodes that should run the daemon pod",
        ),
        column(
            "Current",
            "integer",
            ".status.currentNumberScheduled",
            false,
            "Number of nodes running at least one daemon pod that should",
        ),
        column(
            "Ready",
            "integer",
            ".status.numberReady",
            false,
            "Number of nodes whose daemon pod is ready",
        ),
        column(
            "Up-To-Date",
            "integer",
            ".status.updatedNumberScheduled",
            false,
            "Number of nodes running the current pod template",
        ),
        column(
            "Available",
            "integer",
            ".status.numberAvailable",
            false,
            "Number of nodes whose daemon pod is available",
        ),
        column(
            "Node Selector",
            "string",
            ".spec.template.spec.nodeSelector",
            false,
            "The node selector of the pod template",
        ),
        age_column(),
    ];
    columns.extend(wide_template_columns(".spec.selector"));
    build(CrdParts {
        kind: KIND,
        plural: PLURAL,
        short_name: SHORT_NAME,
        description: "A copy of apps/v1 DaemonSet reconciled by mini-kcm. DaemonSet represents the configuration of a daemon set.",
        schema: schema(),
        printer_columns: columns,
        scale: false,
        selectable_fields: &[],
    })
}

pub(crate) fn schema() -> Value {
    let mut schema = object_schema::<DaemonSetSpec, DaemonSetStatus>();
    workload::decorate_spec(&mut schema, "daemonset", "DaemonSet");
    let spec = at(&mut schema, "spec");
    let history = at(spec, "revisionHistoryLimit");
    history["default"] = json!(10);
    history["minimum"] = json!(workload::NON_NEGATIVE);
    decorate_update_strategy(at(spec, "updateStrategy"));

    workload::non_negative_status_counters(&mut schema);
    workload::collision_count_never_decrements(&mut schema);
    schema
}

fn decorate_update_strategy(strategy: &mut Value) {
    strategy["default"] = json!({});
    let type_ = at(strategy, "type");
    type_["enum"] = json!(["RollingUpdate", "OnDelete"]);
    type_["default"] = json!("RollingUpdate");
    at(strategy, "rollingUpdate")["default"] = json!({});
    at(strategy, "rollingUpdate.maxUnavailable")["default"] = json!(1);
    at(strategy, "rollingUpdate.maxSurge")["default"] = json!(0);

    use int_or_percent::{ROLLING, SURGE, UNAVAILABLE};
    int_or_percent::add_value_rules(strategy, &[SURGE, UNAVAILABLE]);
    // Exactly one of the two is non-zero.
    let both_set = format!("!has({UNAVAILABLE}) || !has({SURGE}) || ");
    add_rule(
        strategy,
        Rule {
            rule: &format!(
                "{ROLLING}{both_set}{} || {}",
                int_or_percent::is_zero(UNAVAILABLE),
                int_or_percent::is_zero(SURGE)
            ),
            message: "may not be set when maxUnavailable is non-zero",
            field_path: Some(".rollingUpdate.maxSurge"),
            reason: None,
        },
    );
    add_rule(
        strategy,
        Rule {
            rule: &format!(
                "{ROLLING}{both_set}!({} && {})",
                int_or_percent::is_zero(UNAVAILABLE),
                int_or_percent::is_zero(SURGE)
            ),
            message: "cannot be 0 when maxSurge is 0",
            field_path: Some(".rollingUpdate.maxUnavailable"),
            reason: Some("FieldValueRequired"),
        },
    );
}
