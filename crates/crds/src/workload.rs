//! What the three workload kinds share: the label selector, the pod template and the status counters,
//! with the checks apps/v1 makes on them (`pkg/apis/apps/validation` and the registry strategies of
//! kube-apiserver v1.37, unchanged for these kinds since v1.36) rewritten as OpenAPI value validations
//! and CEL rules.
//!
//! Every check here mirrors one upstream check, with upstream's message and field path where CEL allows,
//! so that a user gets the same answer from `minikcm.dev/v1` as from `apps/v1`. The cost of each CEL rule
//! is bounded by the `maxItems`/`maxProperties`/`maxLength` set here: the API server refuses a CRD whose
//! rules' *estimated* worst case exceeds its budget, and unbounded lists make that estimate explode.

use serde_json::{Value, json};

use crate::schema::{Rule, add_rule, at, require, strip_nested_descriptions};

/// A label value: at most 63 characters, alphanumeric at both ends, `-`, `_` and `.` inside
/// (`k8s.io/apimachinery/pkg/util/validation.IsValidLabelValue`).
pub(crate) const LABEL_VALUE_PATTERN: &str = "^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$";
pub(crate) const LABEL_VALUE_MAX_LENGTH: u64 = 63;

/// A label key (a qualified name): an optional DNS-subdomain prefix and `/`, then a name of at most 63
/// characters (`IsQualifiedName`). The prefix's own limit of 253 characters is left to
/// [`LABEL_KEY_MAX_LENGTH`].
pub(crate) const LABEL_KEY_PATTERN: &str = "^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9]$";
/// 253 (prefix) + 1 (`/`) + 63 (name).
pub(crate) const LABEL_KEY_MAX_LENGTH: u64 = 317;

/// A DNS-1123 label (container names): lower-case alphanumerics and '-', alphanumeric at both ends.
pub(crate) const DNS1123_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
pub(crate) const DNS1123_LABEL_MAX_LENGTH: u64 = 63;

/// The `minimum` of counts that may not be negative. A float because JSONSchemaProps holds `minimum` as
/// one: written as `0.0` here, the schema survives the trip through k8s-openapi's type unchanged.
pub(crate) const NON_NEGATIVE: f64 = 0.0;

/// Bounds that only exist so that the CEL rules over the selector have a finite estimated cost. apps/v1
/// has no such limits, but no real selector comes near them.
pub(crate) const MAX_SELECTOR_LABELS: u64 = 64;
pub(crate) const MAX_SELECTOR_EXPRESSIONS: u64 = 64;
pub(crate) const MAX_SELECTOR_VALUES: u64 = 64;

/// The validations of `spec.selector`, `spec.template` and `spec.minReadySeconds` that ReplicaSet,
/// Deployment and DaemonSet share.
///
/// - `empty_selector_word`: upstream's message names a kind ("empty selector is invalid for
///   deployment"; the ReplicaSet check says "deployment" too, a copy-paste upstream keeps).
/// - `template_owner`: "activeDeadlineSeconds in ReplicaSet is not Supported" (Deployments validate their
///   template with the ReplicaSet function, hence "ReplicaSet" for them too).
pub(crate) fn decorate_spec(schema: &mut Value, empty_selector_word: &str, template_owner: &str) {
    let spec = at(schema, "spec");
    require(spec, "selector");
    require(spec, "template");
    at(spec, "minReadySeconds")["minimum"] = json!(NON_NEGATIVE);
    decorate_selector(at(spec, "selector"), empty_selector_word);
    decorate_template(at(spec, "template"), template_owner);
    add_selector_matches_template_rules(spec);
}

fn decorate_selector(selector: &mut Value, empty_selector_word: &str) {
    add_rule(
        selector,
        Rule {
            rule: "(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",
            message: &format!("empty selector is invalid for {empty_selector_word}"),
            field_path: None,
            reason: None,
        },
    );
    // apps/v1 refuses selector changes in every version but the long-gone betas (the registry strategy's
    // ValidateUpdate): the controllers rely on it, since a new selector would orphan every child.
    add_rule(
        selector,
        Rule {
            rule: "self == oldSelf",
            message: "field is immutable",
            field_path: None,
            reason: None,
        },
    );

    let label_value = at(selector, "matchLabels{}");
    label_value["pattern"] = json!(LABEL_VALUE_PATTERN);
    label_value["maxLength"] = json!(LABEL_VALUE_MAX_LENGTH);
    let match_labels = at(selector, "matchLabels");
    match_labels["maxProperties"] = json!(MAX_SELECTOR_LABELS);
    add_rule(
        match_labels,
        Rule {
            rule: &format!(
                "self.all(k, size(k) <= {LABEL_KEY_MAX_LENGTH} && k.matches('{LABEL_KEY_PATTERN}'))"
            ),
            message: "keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters, alphanumeric at both ends, with '-', '_' or '.' inside (e.g. 'app' or 'example.com/app')",
            field_path: None,
            reason: None,
        },
    );

    let expressions = at(selector, "matchExpressions");
    expressions["maxItems"] = json!(MAX_SELECTOR_EXPRESSIONS);
    let requirement = at(selector, "matchExpressions[]");
    let key = at(requirement, "key");
    key["pattern"] = json!(LABEL_KEY_PATTERN);
    key["maxLength"] = json!(LABEL_KEY_MAX_LENGTH);
    at(requirement, "operator")["enum"] = json!(["In", "NotIn", "Exists", "DoesNotExist"]);
    at(requirement, "values")["maxItems"] = json!(MAX_SELECTOR_VALUES);
    let value = at(requirement, "values[]");
    value["pattern"] = json!(LABEL_VALUE_PATTERN);
    value["maxLength"] = json!(LABEL_VALUE_MAX_LENGTH);
    add_rule(
        requirement,
        Rule {
            rule: "!(self.operator in ['In', 'NotIn']) || (has(self.values) && size(self.values) > 0)",
            message: "must be specified when `operator` is 'In' or 'NotIn'",
            field_path: Some(".values"),
            reason: Some("FieldValueRequired"),
        },
    );
    add_rule(
        requirement,
        Rule {
            rule: "!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || size(self.values) == 0",
            message: "may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
            field_path: Some(".values"),
            reason: Some("FieldValueForbidden"),
        },
    );
}

fn decorate_template(template: &mut Value, template_owner: &str) {
    // An absent pod spec fails upstream as "spec.template.spec.containers: Required value".
    require(template, "spec");
    // The template's documentation is the pod's (`kubectl explain pod.spec`); see
    // `strip_nested_descriptions` for why it is not repeated here.
    strip_nested_descriptions(at(template, "metadata"));
    strip_nested_descriptions(at(template, "spec"));
    at(template, "metadata")["description"] = json!(
        "Standard object's metadata of the pods created from this template (see `kubectl explain pod.metadata`)."
    );
    at(template, "spec")["description"] = json!(
        "Specification of the desired behavior of the pods created from this template (see `kubectl explain pod.spec`; field documentation is omitted here to keep this CRD small)."
    );

    let labels = at(template, "metadata.labels{}");
    labels["pattern"] = json!(LABEL_VALUE_PATTERN);
    labels["maxLength"] = json!(LABEL_VALUE_MAX_LENGTH);

    let pod_spec = at(template, "spec");
    at(pod_spec, "containers")["minItems"] = json!(1);
    // What apps/v1's pod validation checks and a schema can say as well (same meaning, the schema's
    // wording): container names are DNS-1123 labels, operators are from their closed sets.
    for containers in ["containers", "initContainers", "ephemeralContainers"] {
        let name = at(pod_spec, &format!("{containers}[].name"));
        name["pattern"] = json!(DNS1123_LABEL_PATTERN);
        name["maxLength"] = json!(DNS1123_LABEL_MAX_LENGTH);
    }
    // "" means Equal (the API default).
    at(pod_spec, "tolerations[].operator")["enum"] = json!(["", "Equal", "Exists"]);
    let node_operators = json!(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]);
    for path in [
        "affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[]",
        "affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[].preference",
    ] {
        for requirements in ["matchExpressions", "matchFields"] {
            at(pod_spec, &format!("{path}.{requirements}[].operator"))["enum"] =
                node_operators.clone();
        }
    }
    // Upstream: NotSupported(restartPolicy, supported values: "Always"); an enum says exactly that.
    at(pod_spec, "restartPolicy")["enum"] = json!(["Always"]);
    add_rule(
        pod_spec,
        Rule {
            rule: "!has(self.activeDeadlineSeconds)",
            message: &format!("activeDeadlineSeconds in {template_owner} is not Supported"),
            field_path: Some(".activeDeadlineSeconds"),
            reason: Some("FieldValueForbidden"),
        },
    );
}

/// The CEL form of `labels.Selector.Matches(template.labels)` for the requirement operators a
/// LabelSelector allows, split in two rules (matchLabels, matchExpressions) to keep each one's cost
/// estimate small. Reported, as upstream does, on `spec.template.metadata.labels`.
fn add_selector_matches_template_rules(spec: &mut Value) {
    const HAS_LABELS: &str = "(has(self.template.metadata) && has(self.template.metadata.labels))";
    const LABELS: &str = "self.template.metadata.labels";
    const MESSAGE: &str = "`selector` does not match template `labels`";
    add_rule(
        spec,
        Rule {
            rule: &format!(
                "!has(self.selector.matchLabels) || self.selector.matchLabels.all(k, {HAS_LABELS} && k in {LABELS} && {LABELS}[k] == self.selector.matchLabels[k])"
            ),
            message: MESSAGE,
            field_path: Some(".template.metadata.labels"),
            reason: None,
        },
    );
    let has_key = format!("({HAS_LABELS} && e.key in {LABELS})");
    let value_in = format!("({LABELS}[e.key] in e.values)");
    add_rule(
        spec,
        Rule {
            rule: &format!(
                "!has(self.selector.matchExpressions) || self.selector.matchExpressions.all(e, \
                 (e.operator == 'In' && has(e.values) && {has_key} && {value_in}) || \
                 (e.operator == 'NotIn' && (!has(e.values) || !{has_key} || !{value_in})) || \
                 (e.operator == 'Exists' && {has_key}) || \
                 (e.operator == 'DoesNotExist' && !{has_key}))"
            ),
            message: MESSAGE,
            field_path: Some(".template.metadata.labels"),
            reason: None,
        },
    );
}

/// Every counter of a workload status is non-negative (upstream's ValidateNonnegativeField on each).
pub(crate) fn non_negative_status_counters(schema: &mut Value) {
    let Some(Value::Object(properties)) = at(schema, "status").get_mut("properties") else {
        panic!("status has properties");
    };
    for property in properties.values_mut() {
        if property["type"] == "integer" {
            property["minimum"] = json!(NON_NEGATIVE);
        }
    }
}

/// `status.collisionCount` may not go down (upstream's IsDecremented check on status updates); going
/// from set to unset counts as down.
pub(crate) fn collision_count_never_decrements(schema: &mut Value) {
    add_rule(
        at(schema, "status"),
        Rule {
            rule: "!has(oldSelf.collisionCount) || (has(self.collisionCount) && self.collisionCount >= oldSelf.collisionCount)",
            message: "cannot be decremented",
            field_path: Some(".collisionCount"),
            reason: None,
        },
    );
}

/// `status.<field> <= status.<limit>` as upstream checks it, absent counters being 0.
pub(crate) fn status_at_most(schema: &mut Value, field: &str, limit: &str, message: &str) {
    add_rule(
        at(schema, "status"),
        Rule {
            rule: &format!("{} <= {}", or_zero(field), or_zero(limit)),
            message,
            field_path: Some(&format!(".{field}")),
            reason: None,
        },
    );
}

fn or_zero(field: &str) -> String {
    format!("(has(self.{field}) ? self.{field} : 0)")
}

/// Where the scalable kinds keep their selector in string form: the scale subresource's
/// `labelSelectorPath`, and the printer column `Selector`.
pub(crate) const STATUS_SELECTOR_PATH: &str = ".status.selector";

/// The status field `selector` the scale subresource reads (see the crate documentation): not part of
/// apps/v1's status, whose scale endpoint computes it; a CRD can only point at a string field.
pub(crate) fn add_status_selector(schema: &mut Value) {
    at(schema, "status")["properties"]["selector"] = json!({
        "description": "mini-kcm extension, not in apps/v1: spec.selector in label selector string form (as `kubectl get -l` takes it, e.g. `app=web,tier in (fe,be)`), written by the controller with every status update so that the scale subresource can report it (apps/v1 computes it in its scale endpoint; a CRD can only point at a string field). Needed by HorizontalPodAutoscalers, not by `kubectl scale`.",
        "type": "string",
    });
}

/// CEL helpers for the IntOrString fields `maxSurge` and `maxUnavailable`, given the CEL expression of
/// the value (a dyn: int or string).
pub(crate) mod int_or_percent {
    /// upstream ValidatePositiveIntOrPercent: a non-negative int, or digits followed by `%`.
    pub(crate) fn is_valid(value: &str) -> String {
        format!("(type({value}) == int ? {value} >= 0 : {value}.matches('^[0-9]+%$'))")
    }

    /// upstream getIntOrPercentValue(value) == 0, for valid values.
    pub(crate) fn is_zero(value: &str) -> String {
        format!("(type({value}) == int ? {value} == 0 : {value}.matches('^0+%$'))")
    }

    /// upstream IsNotMoreThan100Percent: ints and malformed strings pass (the latter fail `is_valid`).
    pub(crate) fn is_at_most_100_percent(value: &str) -> String {
        format!(
            "(type({value}) == int || !{value}.matches('^[0-9]+%$') || {value}.matches('^0*(100|[0-9]?[0-9])%$'))"
        )
    }

    /// Guard of every rolling-update rule: upstream validates `rollingUpdate` only for that strategy type.
    pub(crate) const ROLLING: &str = "self.type != 'RollingUpdate' || !has(self.rollingUpdate) || ";
    pub(crate) const SURGE: &str = "self.rollingUpdate.maxSurge";
    pub(crate) const UNAVAILABLE: &str = "self.rollingUpdate.maxUnavailable";

    /// The rules shared by Deployment and DaemonSet strategies: `maxSurge` and `maxUnavailable` are valid
    /// ints or percents, and those in `at_most_100` are at most 100%.
    pub(crate) fn add_value_rules(strategy: &mut serde_json::Value, at_most_100: &[&str]) {
        use crate::schema::{Rule, add_rule};
        for value in [SURGE, UNAVAILABLE] {
            let field = value.trim_start_matches("self");
            add_rule(
                strategy,
                Rule {
                    rule: &format!("{ROLLING}!has({value}) || {}", is_valid(value)),
                    message: INVALID_MESSAGE,
                    field_path: Some(field),
                    reason: None,
                },
            );
            if at_most_100.contains(&value) {
                add_rule(
                    strategy,
                    Rule {
                        rule: &format!(
                            "{ROLLING}!has({value}) || {}",
                            is_at_most_100_percent(value)
                        ),
                        message: OVER_100_MESSAGE,
                        field_path: Some(field),
                        reason: None,
                    },
                );
            }
        }
    }

    pub(crate) const INVALID_MESSAGE: &str = "must be a non-negative integer or a valid percent string: a numeric string followed by an ending '%' (e.g. '1%', or '93%')";
    pub(crate) const OVER_100_MESSAGE: &str = "must not be greater than 100%";
}
