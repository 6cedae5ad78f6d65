//! Which nodes a DaemonSet's pod belongs on (upstream `NodeShouldRunDaemonPod` and the scheduling helpers it
//! calls: `nodeaffinity.GetRequiredNodeAffinity`, `FindMatchingUntoleratedTaint`, `Toleration.ToleratesTaint`,
//! `AddOrUpdateDaemonPodTolerations`).
//!
//! The answer for a node is a pair: `should_run` (a pod should be created there if none exists) and
//! `should_continue_running` (an existing pod may stay). The controller asks this for every node in every
//! sync, for status, and for every node event, so the template is parsed once into a [`DaemonPlacement`]
//! (node selector, required node affinity, tolerations including the daemon defaults) and each node is then
//! judged without allocating. Upstream v1.37 does the same once per sync (`daemonPodTolerations` and
//! `NewRequiredNodeAffinity` hoisted out of the per-node loops); here the parse is cached per DaemonSet
//! generation, across syncs and node events.
//!
//! What counts, as upstream: the template's `nodeName`, `nodeSelector`, required node affinity, and taints
//! with effect `NoSchedule`/`NoExecute` against the pod's tolerations. What does not: `PreferNoSchedule`
//! taints, `spec.unschedulable` itself (only its taint, which daemon pods tolerate), resources, host ports and
//! node conditions — the scheduler deals with those.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Node, NodeSelector, NodeSelectorRequirement, PodSpec, PodTemplateSpec, Taint, Toleration,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use mini_kcm_runtime::api::selector::Selector;

use crate::DaemonSetObject;

/// Taint put on nodes whose Ready condition is False.
pub(crate) const TAINT_NODE_NOT_READY: &str = "node.kubernetes.io/not-ready";
/// Taint put on nodes whose Ready condition is Unknown.
pub(crate) const TAINT_NODE_UNREACHABLE: &str = "node.kubernetes.io/unreachable";
/// Taint put on nodes under disk pressure.
pub(crate) const TAINT_NODE_DISK_PRESSURE: &str = "node.kubernetes.io/disk-pressure";
/// Taint put on nodes under memory pressure.
pub(crate) const TAINT_NODE_MEMORY_PRESSURE: &str = "node.kubernetes.io/memory-pressure";
/// Taint put on nodes under PID pressure.
pub(crate) const TAINT_NODE_PID_PRESSURE: &str = "node.kubernetes.io/pid-pressure";
/// Taint put on cordoned nodes.
pub(crate) const TAINT_NODE_UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// Taint put on nodes whose network is not configured.
pub(crate) const TAINT_NODE_NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

const NO_SCHEDULE: &str = "NoSchedule";
const NO_EXECUTE: &str = "NoExecute";
/// The only field a node selector's `matchFields` can name.
const OBJECT_NAME_FIELD: &str = "metadata.name";

/// The verdict for one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct NodeDecision {
    /// A daemon pod should be created on the node if it has none.
    pub should_run: bool,
    /// A daemon pod already on the node may stay.
    pub should_continue_running: bool,
}

impl NodeDecision {
    const NO: Self = Self {
        should_run: false,
        should_continue_running: false,
    };
    const YES: Self = Self {
        should_run: true,
        should_continue_running: true,
    };
}

/// The first placement check a node fails, with what it found.
#[derive(Debug, Clone, Copy)]
enum NotPlaced<'a> {
    /// The template's `spec.nodeName` names another node.
    OtherNodeName(&'a str),
    /// `spec.nodeSelector` or the required node affinity does not match the node's labels.
    Affinity,
    /// A NoSchedule or NoExecute taint no toleration tolerates; `evicts` when an untolerated NoExecute
    /// taint (this one or another) would evict a pod already there.
    Untolerated { taint: &'a Taint, evicts: bool },
}

impl std::fmt::Display for NotPlaced<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NotPlaced::OtherNodeName(wanted) => write!(f, "the template's nodeName is {wanted}"),
            NotPlaced::Affinity => f.write_str(
                "nodeSelector or required node affinity does not match the node's labels",
            ),
            NotPlaced::Untolerated { taint, .. } => {
                write!(f, "node does not tolerate taint {}", taint.key)?;
                if let Some(value) = &taint.value {
                    write!(f, "={value}")?;
                }
                write!(f, ":{}", taint.effect)
            }
        }
    }
}

#[cfg(test)]
/// Upstream `NodeShouldRunDaemonPod` for a single question: `(should_run, should_continue_running)`.
/// Parses the template each time; a sync judging many nodes should build one [`DaemonPlacement`].
pub(crate) fn node_should_run_daemon_pod(node: &Node, ds: &DaemonSetObject) -> (bool, bool) {
    let decision = DaemonPlacement::new(ds).evaluate(node);
    (decision.should_run, decision.should_continue_running)
}

/// A DaemonSet template's placement rules, parsed once and then evaluated per node.
#[derive(Debug, Clone)]
pub(crate) struct DaemonPlacement {
    /// The template's `spec.nodeName`, when set: only that node qualifies.
    node_name: Option<String>,
    /// `spec.nodeSelector` as an equality selector; `None` when empty (no constraint).
    node_selector: Option<Selector>,
    /// Required node affinity terms (ORed); `None` when the template has no required node affinity. Empty
    /// terms are dropped, so `Some(vec![])` matches no node, as upstream.
    required_terms: Option<Vec<NodeSelectorTermMatcher>>,
    /// The template's tolerations plus the daemon defaults, exactly as a created pod carries them.
    tolerations: Vec<Toleration>,
    /// Feature gate `TaintTolerationComparisonOperators` (alpha in 1.35-1.37, off by default): whether
    /// tolerations with `Gt`/`Lt` operators can tolerate anything.
    comparison_operators: bool,
}

impl DaemonPlacement {
    /// Parses `ds`'s pod template with default feature gates.
    pub(crate) fn new(ds: &DaemonSetObject) -> Self {
        Self::from_template(&ds.spec.template)
    }

    /// Parses a pod template with default feature gates.
    pub(crate) fn from_template(template: &PodTemplateSpec) -> Self {
        let empty = PodSpec::default();
        let spec = template.spec.as_ref().unwrap_or(&empty);
        let node_name = spec.node_name.clone().filter(|n| !n.is_empty());
        let node_selector = spec
            .node_selector
            .as_ref()
            .filter(|s| !s.is_empty())
            .map(Selector::from_map);
        let required_terms = spec
            .affinity
            .as_ref()
            .and_then(|a| a.node_affinity.as_ref())
            .and_then(|na| {
                na.required_during_scheduling_ignored_during_execution
                    .as_ref()
            })
            .map(parse_node_selector);
        let mut with_defaults = spec.clone();
        add_or_update_daemon_pod_tolerations(&mut with_defaults);
        Self {
            node_name,
            node_selector,
            required_terms,
            tolerations: with_defaults.tolerations.unwrap_or_default(),
            comparison_operators: false,
        }
    }

    /// Sets the `TaintTolerationComparisonOperators` feature gate (default off, as in v1.37).
    #[must_use]
    pub(crate) fn with_comparison_operators(mut self, enabled: bool) -> Self {
        self.comparison_operators = enabled;
        self
    }

    /// Judges one node.
    ///
    /// upstream: NodeShouldRunDaemonPod
    pub(crate) fn evaluate(&self, node: &Node) -> NodeDecision {
        match self.check(node) {
            Ok(()) => NodeDecision::YES,
            // Cannot be placed; an existing pod stays unless a NoExecute taint would evict it anyway.
            Err(NotPlaced::Untolerated { evicts, .. }) => NodeDecision {
                should_run: false,
                should_continue_running: !evicts,
            },
            Err(_) => NodeDecision::NO,
        }
    }

    /// Why the DaemonSet's pod does not belong on `node` (`None` when it does), for the decision log's
    /// node map: the check of [`DaemonPlacement::evaluate`] that failed, named.
    pub(crate) fn why_not(&self, node: &Node) -> Option<String> {
        self.check(node).err().map(|not| not.to_string())
    }

    /// The checks of [`DaemonPlacement::evaluate`], in upstream's order: the first that fails.
    fn check<'a>(&'a self, node: &'a Node) -> Result<(), NotPlaced<'a>> {
        let node_name = node.metadata.name.as_deref().unwrap_or_default();
        if let Some(wanted) = self.node_name.as_deref().filter(|n| *n != node_name) {
            return Err(NotPlaced::OtherNodeName(wanted));
        }
        if !self.matches_required_affinity(node) {
            return Err(NotPlaced::Affinity);
        }
        let taints = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_deref())
            .unwrap_or_default();
        let blocking = |t: &Taint| t.effect == NO_SCHEDULE || t.effect == NO_EXECUTE;
        let Some(taint) = self.find_untolerated(taints, blocking) else {
            return Ok(());
        };
        let evicting = |t: &Taint| t.effect == NO_EXECUTE;
        Err(NotPlaced::Untolerated {
            taint,
            evicts: self.find_untolerated(taints, evicting).is_some(),
        })
    }

    /// The first taint passing `filter` that no toleration tolerates.
    fn find_untolerated<'t>(
        &self,
        taints: &'t [Taint],
        filter: impl Fn(&Taint) -> bool,
    ) -> Option<&'t Taint> {
        taints.iter().filter(|t| filter(t)).find(|taint| {
            !self
                .tolerations
                .iter()
                .any(|t| toleration_tolerates_taint(t, taint, self.comparison_operators))
        })
    }

    /// `spec.nodeSelector` AND the required node affinity (upstream `RequiredNodeAffinity.Match`).
    fn matches_required_affinity(&self, node: &Node) -> bool {
        static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
        let labels = node.metadata.labels.as_ref().unwrap_or(&NO_LABELS);
        if self
            .node_selector
            .as_ref()
            .is_some_and(|s| !s.matches(labels))
        {
            return false;
        }
        let Some(terms) = &self.required_terms else {
            return true;
        };
        let name = node.metadata.name.as_deref().unwrap_or_default();
        terms.iter().any(|term| term.matches(labels, name))
    }
}

/// One parsed `nodeSelectorTerm`. A term that failed to parse never matches; upstream reports its errors only
/// when no other term matches, and the DaemonSet controller ignores them ("for backwards compatibility").
#[derive(Debug, Clone)]
enum NodeSelectorTermMatcher {
    Invalid,
    Valid {
        /// `matchExpressions`; `None` when the term has none.
        labels: Option<LabelMatcher>,
        /// `matchFields`; `None` when the term has none.
        fields: Option<Vec<FieldRequirement>>,
    },
}

#[derive(Debug, Clone)]
struct LabelMatcher {
    /// The In/NotIn/Exists/DoesNotExist expressions, validated and matched by the shared selector code.
    set_based: Selector,
    /// The Gt/Lt expressions, which label selectors proper do not have.
    numeric: Vec<NumericRequirement>,
}

#[derive(Debug, Clone)]
struct NumericRequirement {
    key: String,
    greater_than: bool,
    bound: i64,
}

#[derive(Debug, Clone)]
struct FieldRequirement {
    key: String,
    equal: bool,
    value: String,
}

impl NodeSelectorTermMatcher {
    fn matches(&self, labels: &BTreeMap<String, String>, node_name: &str) -> bool {
        let Self::Valid {
            labels: label_matcher,
            fields,
        } = self
        else {
            return false;
        };
        if label_matcher.as_ref().is_some_and(|m| !m.matches(labels)) {
            return false;
        }
        // A node's only field is its name; a nameless node has no fields, and upstream then skips the
        // field requirements entirely rather than failing them.
        if let Some(fields) = fields
            && !node_name.is_empty()
            && !fields.iter().all(|f| f.matches(node_name))
        {
            return false;
        }
        true
    }
}

impl LabelMatcher {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.set_based.matches(labels) && self.numeric.iter().all(|r| r.matches(labels))
    }
}

impl NumericRequirement {
    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let Some(value) = labels.get(&self.key).and_then(|v| v.parse::<i64>().ok()) else {
            return false;
        };
        if self.greater_than {
            value > self.bound
        } else {
            value < self.bound
        }
    }
}

impl FieldRequirement {
    fn matches(&self, node_name: &str) -> bool {
        // Any field other than metadata.name reads as the empty string.
        let actual = if self.key == OBJECT_NAME_FIELD {
            node_name
        } else {
            ""
        };
        (actual == self.value) == self.equal
    }
}

fn parse_node_selector(selector: &NodeSelector) -> Vec<NodeSelectorTermMatcher> {
    selector
        .node_selector_terms
        .iter()
        .filter(|t| {
            !(t.match_expressions.as_ref().is_none_or(Vec::is_empty)
                && t.match_fields.as_ref().is_none_or(Vec::is_empty))
        })
        .map(|t| {
            let labels = match t.match_expressions.as_deref() {
                None | Some([]) => Ok(None),
                Some(exprs) => parse_label_requirements(exprs).map(Some),
            };
            let fields = match t.match_fields.as_deref() {
                None | Some([]) => Ok(None),
                Some(exprs) => parse_field_requirements(exprs).map(Some),
            };
            match (labels, fields) {
                (Ok(labels), Ok(fields)) => NodeSelectorTermMatcher::Valid { labels, fields },
                _ => NodeSelectorTermMatcher::Invalid,
            }
        })
        .collect()
}

/// Upstream `nodeSelectorRequirementsAsSelector`: any invalid expression invalidates the whole term.
fn parse_label_requirements(exprs: &[NodeSelectorRequirement]) -> Result<LabelMatcher, ()> {
    let mut set_based = Vec::new();
    let mut numeric = Vec::new();
    for expr in exprs {
        let values = expr.values.clone().unwrap_or_default();
        match expr.operator.as_str() {
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {
                set_based.push(LabelSelectorRequirement {
                    key: expr.key.clone(),
                    operator: expr.operator.clone(),
                    values: Some(values),
                });
            }
            op @ ("Gt" | "Lt") => {
                // Validate key and value shape the way a label requirement does (the value must also be a
                // valid label value, so e.g. "-1" is rejected even though it parses), via a probe selector.
                let probe = LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: expr.key.clone(),
                        operator: "In".to_owned(),
                        values: Some(values.clone()),
                    }]),
                    match_labels: None,
                };
                let [value] = values.as_slice() else {
                    return Err(());
                };
                let bound = value.parse::<i64>().map_err(|_| ())?;
                Selector::from_label_selector(&probe).map_err(|_| ())?;
                numeric.push(NumericRequirement {
                    key: expr.key.clone(),
                    greater_than: op == "Gt",
                    bound,
                });
            }
            _ => return Err(()),
        }
    }
    let set_based = Selector::from_label_selector(&LabelSelector {
        match_expressions: Some(set_based),
        match_labels: None,
    })
    .map_err(|_| ())?;
    Ok(LabelMatcher { set_based, numeric })
}

/// Upstream `nodeSelectorRequirementsAsFieldSelector`: only In/NotIn with exactly one value.
fn parse_field_requirements(
    exprs: &[NodeSelectorRequirement],
) -> Result<Vec<FieldRequirement>, ()> {
    exprs
        .iter()
        .map(|expr| {
            let equal = match expr.operator.as_str() {
                "In" => true,
                "NotIn" => false,
                _ => return Err(()),
            };
            match expr.values.as_deref() {
                Some([value]) => Ok(FieldRequirement {
                    key: expr.key.clone(),
                    equal,
                    value: value.clone(),
                }),
                _ => Err(()),
            }
        })
        .collect()
}

/// Upstream `Toleration.ToleratesTaint`: effect (empty = any), key (empty = any, needs `Exists`), then the
/// operator: empty/`Equal` compares values, `Exists` matches any value, `Gt`/`Lt` compare canonical decimal
/// integers (taint value vs toleration value) and only when the comparison-operators gate is on.
pub(crate) fn toleration_tolerates_taint(
    toleration: &Toleration,
    taint: &Taint,
    comparison_operators: bool,
) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or_default();
    if !key.is_empty() && key != taint.key {
        return false;
    }
    let toleration_value = toleration.value.as_deref().unwrap_or_default();
    let taint_value = taint.value.as_deref().unwrap_or_default();
    match toleration.operator.as_deref().unwrap_or_default() {
        "" | "Equal" => toleration_value == taint_value,
        "Exists" => true,
        op @ ("Lt" | "Gt") if comparison_operators => {
            let (Some(bound), Some(actual)) = (
                canonical_decimal(toleration_value),
                canonical_decimal(taint_value),
            ) else {
                return false;
            };
            if op == "Lt" {
                actual < bound
            } else {
                actual > bound
            }
        }
        _ => false,
    }
}

/// An int64 written in canonical form (no sign but a leading `-`, no leading zeros, no `-0`), as upstream's
/// `IsDecimalInteger` requires before comparing taint values.
fn canonical_decimal(value: &str) -> Option<i64> {
    let digits = value.strip_prefix('-').unwrap_or(value);
    let canonical = match digits.as_bytes() {
        [] => false,
        [b'0'] => digits.len() == value.len(),
        [first, rest @ ..] => (b'1'..=b'9').contains(first) && rest.iter().all(u8::is_ascii_digit),
    };
    if canonical { value.parse().ok() } else { None }
}

/// The tolerations every daemon pod gets (upstream `AddOrUpdateDaemonPodTolerations`), in upstream's order:
/// survive not-ready/unreachable eviction, and ignore the pressure, unschedulable and (for host-network pods)
/// network-unavailable taints.
fn default_daemon_tolerations(host_network: bool) -> Vec<Toleration> {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.to_owned()),
        operator: Some("Exists".to_owned()),
        effect: Some(effect.to_owned()),
        value: None,
        toleration_seconds: None,
    };
    let mut defaults = vec![
        exists(TAINT_NODE_NOT_READY, NO_EXECUTE),
        exists(TAINT_NODE_UNREACHABLE, NO_EXECUTE),
        exists(TAINT_NODE_DISK_PRESSURE, NO_SCHEDULE),
        exists(TAINT_NODE_MEMORY_PRESSURE, NO_SCHEDULE),
        exists(TAINT_NODE_PID_PRESSURE, NO_SCHEDULE),
        exists(TAINT_NODE_UNSCHEDULABLE, NO_SCHEDULE),
    ];
    if host_network {
        defaults.push(exists(TAINT_NODE_NETWORK_UNAVAILABLE, NO_SCHEDULE));
    }
    defaults
}

/// Adds the daemon default tolerations to a pod spec. A template toleration with the same key, operator,
/// value and effect is replaced in place (dropping e.g. its `tolerationSeconds`, so the pod is never
/// evicted for these taints); otherwise the default is appended.
pub(crate) fn add_or_update_daemon_pod_tolerations(spec: &mut PodSpec) {
    let host_network = spec.host_network == Some(true);
    let tolerations = spec.tolerations.get_or_insert_with(Vec::new);
    for default in default_daemon_tolerations(host_network) {
        let mut replaced = false;
        for existing in tolerations.iter_mut() {
            if same_toleration_identity(existing, &default) {
                *existing = default.clone();
                replaced = true;
            }
        }
        if !replaced {
            tolerations.push(default);
        }
    }
}

/// Upstream `Toleration.MatchToleration`: tolerations are identified by key, operator, value and effect.
fn same_toleration_identity(a: &Toleration, b: &Toleration) -> bool {
    let s = |v: &Option<String>| v.as_deref().unwrap_or_default().to_owned();
    s(&a.key) == s(&b.key)
        && s(&a.operator) == s(&b.operator)
        && s(&a.value) == s(&b.value)
        && s(&a.effect) == s(&b.effect)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_fixtures::{
        labels, new_ds, new_node, simple_ds_labels, taint, tainted, toleration,
    };
    use k8s_openapi::api::core::v1::{Affinity, NodeAffinity, NodeSelectorTerm, NodeSpec};

    fn spec_mut(ds: &mut DaemonSetObject) -> &mut PodSpec {
        ds.spec.template.spec.get_or_insert_with(PodSpec::default)
    }

    fn with_spec(f: impl FnOnce(&mut PodSpec)) -> DaemonSetObject {
        let mut ds = new_ds("ds");
        f(spec_mut(&mut ds));
        ds
    }

    fn required_affinity(terms: Vec<NodeSelectorTerm>) -> Option<Affinity> {
        Some(Affinity {
            node_affinity: Some(NodeAffinity {
                required_during_scheduling_ignored_during_execution: Some(NodeSelector {
                    node_selector_terms: terms,
                }),
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    fn req(key: &str, op: &str, values: &[&str]) -> NodeSelectorRequirement {
        NodeSelectorRequirement {
            key: key.into(),
            operator: op.into(),
            values: (!values.is_empty()).then(|| values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn expressions(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: Some(reqs),
            match_fields: None,
        }
    }

    fn fields(reqs: Vec<NodeSelectorRequirement>) -> NodeSelectorTerm {
        NodeSelectorTerm {
            match_expressions: None,
            match_fields: Some(reqs),
        }
    }

    /// Mirrors upstream `TestNodeShouldRunDaemonPod` (resource and host-port cases included: neither is
    /// checked any more, so they all run).
    #[test]
    fn node_should_run_daemon_pod_table() {
        let affinity_type =
            |value: &str| required_affinity(vec![expressions(vec![req("type", "In", &[value])])]);
        let cases: Vec<(&str, DaemonSetObject, bool, (bool, bool))> = vec![
            ("ShouldRunDaemonPod", new_ds("a"), false, (true, true)),
            (
                "ErrPodNotMatchHostName",
                with_spec(|s| s.node_name = Some("other-node".into())),
                false,
                (false, false),
            ),
            (
                "MatchingHostName",
                with_spec(|s| s.node_name = Some("test-node".into())),
                false,
                (true, true),
            ),
            (
                "ErrNodeSelectorNotMatch",
                with_spec(|s| {
                    s.node_selector = Some(labels(&[("name", "simple-daemon"), ("type", "test")]))
                }),
                false,
                (false, false),
            ),
            (
                "ShouldRunDaemonPod (node selector)",
                with_spec(|s| s.node_selector = Some(simple_ds_labels())),
                false,
                (true, true),
            ),
            (
                "ErrPodAffinityNotMatch",
                with_spec(|s| s.affinity = affinity_type("test")),
                false,
                (false, false),
            ),
            (
                "ShouldRunDaemonPod (affinity)",
                with_spec(|s| s.affinity = affinity_type("production")),
                false,
                (true, true),
            ),
            (
                "ShouldRunDaemonPodOnUnschedulableNode",
                new_ds("b"),
                true,
                (true, true),
            ),
        ];
        for (name, ds, unschedulable, expected) in cases {
            let mut node = new_node("test-node", Some(simple_ds_labels()));
            node.spec = Some(NodeSpec {
                unschedulable: Some(unschedulable),
                ..Default::default()
            });
            assert_eq!(node_should_run_daemon_pod(&node, &ds), expected, "{name}");
        }
    }

    #[test]
    fn required_node_affinity_operators() {
        let node = new_node(
            "node-1",
            Some(labels(&[("zone", "a"), ("cpus", "8"), ("bad", "x")])),
        );
        let run = |terms: Vec<NodeSelectorTerm>| {
            let ds = with_spec(|s| s.affinity = required_affinity(terms));
            node_should_run_daemon_pod(&node, &ds).0
        };
        let cases: Vec<(&str, Vec<NodeSelectorTerm>, bool)> = vec![
            (
                "In",
                vec![expressions(vec![req("zone", "In", &["a", "b"])])],
                true,
            ),
            (
                "In miss",
                vec![expressions(vec![req("zone", "In", &["b"])])],
                false,
            ),
            (
                "NotIn",
                vec![expressions(vec![req("zone", "NotIn", &["b"])])],
                true,
            ),
            (
                "NotIn absent key",
                vec![expressions(vec![req("rack", "NotIn", &["b"])])],
                true,
            ),
            (
                "Exists",
                vec![expressions(vec![req("zone", "Exists", &[])])],
                true,
            ),
            (
                "Exists miss",
                vec![expressions(vec![req("rack", "Exists", &[])])],
                false,
            ),
            (
                "DoesNotExist",
                vec![expressions(vec![req("rack", "DoesNotExist", &[])])],
                true,
            ),
            (
                "DoesNotExist miss",
                vec![expressions(vec![req("zone", "DoesNotExist", &[])])],
                false,
            ),
            (
                "Gt",
                vec![expressions(vec![req("cpus", "Gt", &["4"])])],
                true,
            ),
            (
                "Gt equal",
                vec![expressions(vec![req("cpus", "Gt", &["8"])])],
                false,
            ),
            (
                "Lt",
                vec![expressions(vec![req("cpus", "Lt", &["16"])])],
                true,
            ),
            (
                "Lt miss",
                vec![expressions(vec![req("cpus", "Lt", &["8"])])],
                false,
            ),
            (
                "Gt non-numeric label",
                vec![expressions(vec![req("bad", "Gt", &["1"])])],
                false,
            ),
            (
                "Gt absent label",
                vec![expressions(vec![req("rack", "Gt", &["1"])])],
                false,
            ),
            (
                "Gt two values is invalid",
                vec![expressions(vec![req("cpus", "Gt", &["1", "2"])])],
                false,
            ),
            (
                "Gt negative is not a label value",
                vec![expressions(vec![req("cpus", "Gt", &["-1"])])],
                false,
            ),
            (
                "AND within a term",
                vec![expressions(vec![
                    req("zone", "In", &["a"]),
                    req("cpus", "Lt", &["4"]),
                ])],
                false,
            ),
            (
                "OR across terms",
                vec![
                    expressions(vec![req("zone", "In", &["b"])]),
                    expressions(vec![req("zone", "In", &["a"])]),
                ],
                true,
            ),
            (
                "unknown operator invalidates only its term",
                vec![
                    expressions(vec![req("zone", "Near", &["a"])]),
                    expressions(vec![req("zone", "Exists", &[])]),
                ],
                true,
            ),
            (
                "invalid key",
                vec![expressions(vec![req("-bad-", "Exists", &[])])],
                false,
            ),
            (
                "In without values is invalid",
                vec![expressions(vec![req("zone", "In", &[])])],
                false,
            ),
            (
                "matchFields In",
                vec![fields(vec![req("metadata.name", "In", &["node-1"])])],
                true,
            ),
            (
                "matchFields In miss",
                vec![fields(vec![req("metadata.name", "In", &["node-2"])])],
                false,
            ),
            (
                "matchFields NotIn",
                vec![fields(vec![req("metadata.name", "NotIn", &["node-2"])])],
                true,
            ),
            (
                "matchFields other key reads empty",
                vec![fields(vec![req("metadata.foo", "NotIn", &["bar"])])],
                true,
            ),
            (
                "matchFields two values is invalid",
                vec![fields(vec![req(
                    "metadata.name",
                    "In",
                    &["node-1", "node-2"],
                )])],
                false,
            ),
            (
                "matchFields Exists is invalid",
                vec![fields(vec![req("metadata.name", "Exists", &[])])],
                false,
            ),
            (
                "labels and fields in one term",
                vec![NodeSelectorTerm {
                    match_expressions: Some(vec![req("zone", "In", &["a"])]),
                    match_fields: Some(vec![req("metadata.name", "In", &["node-1"])]),
                }],
                true,
            ),
            ("no terms matches nothing", vec![], false),
            (
                "only empty terms match nothing",
                vec![NodeSelectorTerm::default()],
                false,
            ),
            (
                "empty term skipped",
                vec![
                    NodeSelectorTerm::default(),
                    expressions(vec![req("zone", "In", &["a"])]),
                ],
                true,
            ),
        ];
        for (name, terms, expected) in cases {
            assert_eq!(run(terms), expected, "{name}");
        }
    }

    #[test]
    fn match_fields_ignored_for_nameless_node() {
        let ds = with_spec(|s| {
            s.affinity =
                required_affinity(vec![fields(vec![req("metadata.name", "In", &["node-1"])])])
        });
        let mut node = new_node("", None);
        node.metadata.name = None;
        assert_eq!(node_should_run_daemon_pod(&node, &ds), (true, true));
    }

    /// Mirrors upstream `TestTaintedNodeDaemonDoesNotLaunchIntolerantPod`,
    /// `TestTaintedNodeDaemonLaunchesToleratePod`, `TestNodeDaemonLaunchesToleratePod`,
    /// `TestNoScheduleTaintedDoesntEvicitRunningIntolerantPod`, `TestNoExecuteTaintedDoesEvicitRunningIntolerantPod`,
    /// `TestNotReadyNodeDaemonLaunchesPod`, `TestUnreachableNodeDaemonLaunchesPod`,
    /// `TestTaintPressureNodeDaemonLaunchesPod` and `TestNetworkUnavailableNodeDaemonLaunchesPod`.
    #[test]
    fn taints_and_tolerations() {
        let no_schedule = vec![taint("dedicated", Some("user1"), "NoSchedule")];
        let no_execute = vec![taint("dedicated", Some("user1"), "NoExecute")];
        let tolerate_no_schedule = vec![toleration(
            Some("dedicated"),
            None,
            Some("user1"),
            Some("NoSchedule"),
        )];
        let intolerant = new_ds("intolerant");
        let tolerant = with_spec(|s| s.tolerations = Some(tolerate_no_schedule.clone()));
        let host_network = with_spec(|s| s.host_network = Some(true));
        let node = |taints: Vec<Taint>| tainted(new_node("tainted", None), taints);
        let cases: Vec<(&str, &DaemonSetObject, Node, (bool, bool))> = vec![
            (
                "intolerant, NoSchedule: no launch, keep running",
                &intolerant,
                node(no_schedule.clone()),
                (false, true),
            ),
            (
                "intolerant, NoExecute: no launch, evict",
                &intolerant,
                node(no_execute.clone()),
                (false, false),
            ),
            (
                "tolerant, NoSchedule: launch",
                &tolerant,
                node(no_schedule.clone()),
                (true, true),
            ),
            (
                "tolerant, untainted: launch",
                &tolerant,
                new_node("plain", None),
                (true, true),
            ),
            (
                "tolerant of NoSchedule only, NoExecute: evict",
                &tolerant,
                node(no_execute),
                (false, false),
            ),
            (
                "PreferNoSchedule ignored",
                &intolerant,
                node(vec![taint("dedicated", None, "PreferNoSchedule")]),
                (true, true),
            ),
            (
                "not ready",
                &intolerant,
                node(vec![taint(TAINT_NODE_NOT_READY, None, "NoExecute")]),
                (true, true),
            ),
            (
                "unreachable",
                &intolerant,
                node(vec![taint(TAINT_NODE_UNREACHABLE, None, "NoExecute")]),
                (true, true),
            ),
            (
                "pressure",
                &intolerant,
                node(vec![
                    taint(TAINT_NODE_DISK_PRESSURE, None, "NoSchedule"),
                    taint(TAINT_NODE_MEMORY_PRESSURE, None, "NoSchedule"),
                    taint(TAINT_NODE_PID_PRESSURE, None, "NoSchedule"),
                ]),
                (true, true),
            ),
            (
                "unschedulable taint",
                &intolerant,
                node(vec![taint(TAINT_NODE_UNSCHEDULABLE, None, "NoSchedule")]),
                (true, true),
            ),
            (
                "network unavailable, pod network",
                &intolerant,
                node(vec![taint(
                    TAINT_NODE_NETWORK_UNAVAILABLE,
                    None,
                    "NoSchedule",
                )]),
                (false, true),
            ),
            (
                "network unavailable, host network",
                &host_network,
                node(vec![taint(
                    TAINT_NODE_NETWORK_UNAVAILABLE,
                    None,
                    "NoSchedule",
                )]),
                (true, true),
            ),
            (
                "not-ready NoSchedule is not tolerated",
                &intolerant,
                node(vec![taint(TAINT_NODE_NOT_READY, None, "NoSchedule")]),
                (false, true),
            ),
        ];
        for (name, ds, node, expected) in cases {
            assert_eq!(node_should_run_daemon_pod(&node, ds), expected, "{name}");
        }
    }

    #[test]
    fn toleration_matching_rules() {
        let t = |k, o, v, e| toleration(k, o, v, e);
        let taint_kv = taint("k", Some("v"), "NoSchedule");
        let cases = [
            (
                "equal",
                t(Some("k"), Some("Equal"), Some("v"), Some("NoSchedule")),
                true,
            ),
            (
                "empty operator is Equal",
                t(Some("k"), None, Some("v"), None),
                true,
            ),
            (
                "value differs",
                t(Some("k"), Some("Equal"), Some("w"), None),
                false,
            ),
            (
                "exists any value",
                t(Some("k"), Some("Exists"), None, None),
                true,
            ),
            (
                "empty key with Exists tolerates all",
                t(None, Some("Exists"), None, None),
                true,
            ),
            (
                "empty key with Equal and matching value",
                t(None, None, Some("v"), None),
                true,
            ),
            (
                "effect differs",
                t(Some("k"), Some("Exists"), None, Some("NoExecute")),
                false,
            ),
            (
                "key differs",
                t(Some("j"), Some("Exists"), None, None),
                false,
            ),
            (
                "unknown operator",
                t(Some("k"), Some("Near"), Some("v"), None),
                false,
            ),
        ];
        for (name, tol, expected) in cases {
            assert_eq!(
                toleration_tolerates_taint(&tol, &taint_kv, false),
                expected,
                "{name}"
            );
        }
    }

    #[test]
    fn comparison_operators_are_gated() {
        let numeric = taint("gpu-mem", Some("16"), "NoSchedule");
        let gt = toleration(Some("gpu-mem"), Some("Gt"), Some("8"), None);
        let lt = toleration(Some("gpu-mem"), Some("Lt"), Some("32"), None);
        let lt_small = toleration(Some("gpu-mem"), Some("Lt"), Some("16"), None);
        assert!(!toleration_tolerates_taint(&gt, &numeric, false));
        assert!(toleration_tolerates_taint(&gt, &numeric, true));
        assert!(toleration_tolerates_taint(&lt, &numeric, true));
        assert!(!toleration_tolerates_taint(&lt_small, &numeric, true));
        for bad in ["016", "+16", "-0", "", "1e3", "-"] {
            let odd = taint("gpu-mem", Some(bad), "NoSchedule");
            assert!(!toleration_tolerates_taint(&gt, &odd, true), "{bad:?}");
        }
        let negative = taint("gpu-mem", Some("-5"), "NoSchedule");
        let lt_zero = toleration(Some("gpu-mem"), Some("Lt"), Some("0"), None);
        assert!(toleration_tolerates_taint(&lt_zero, &negative, true));

        let ds = with_spec(|s| s.tolerations = Some(vec![gt.clone()]));
        let node = tainted(new_node("n", None), vec![numeric]);
        let placement = DaemonPlacement::new(&ds);
        assert!(!placement.evaluate(&node).should_run);
        assert!(
            placement
                .with_comparison_operators(true)
                .evaluate(&node)
                .should_run
        );
    }

    #[test]
    fn default_tolerations_replace_same_identity() {
        let mut spec = PodSpec {
            tolerations: Some(vec![
                Toleration {
                    toleration_seconds: Some(300),
                    ..toleration(
                        Some(TAINT_NODE_NOT_READY),
                        Some("Exists"),
                        None,
                        Some("NoExecute"),
                    )
                },
                toleration(Some("custom"), Some("Exists"), None, None),
            ]),
            ..Default::default()
        };
        add_or_update_daemon_pod_tolerations(&mut spec);
        let tolerations = spec.tolerations.unwrap();
        let keys: Vec<&str> = tolerations
            .iter()
            .map(|t| t.key.as_deref().unwrap())
            .collect();
        assert_eq!(
            keys,
            [
                TAINT_NODE_NOT_READY,
                "custom",
                TAINT_NODE_UNREACHABLE,
                TAINT_NODE_DISK_PRESSURE,
                TAINT_NODE_MEMORY_PRESSURE,
                TAINT_NODE_PID_PRESSURE,
                TAINT_NODE_UNSCHEDULABLE,
            ]
        );
        assert_eq!(tolerations[0].toleration_seconds, None);

        let mut host = PodSpec {
            host_network: Some(true),
            ..Default::default()
        };
        add_or_update_daemon_pod_tolerations(&mut host);
        assert_eq!(host.tolerations.as_ref().map(Vec::len), Some(7));
        // Idempotent.
        let again = host.clone();
        add_or_update_daemon_pod_tolerations(&mut host);
        assert_eq!(host, again);
    }

    #[test]
    fn why_not_names_the_check_that_failed() {
        let ds = new_ds("ds");
        let placement = DaemonPlacement::new(&ds);
        assert_eq!(placement.why_not(&new_node("n1", None)), None);
        let tainted_node = tainted(
            new_node("n2", None),
            vec![taint("x", Some("y"), "NoSchedule")],
        );
        assert_eq!(
            placement.why_not(&tainted_node).as_deref(),
            Some("node does not tolerate taint x=y:NoSchedule")
        );
        assert!(!placement.evaluate(&tainted_node).should_run);

        // Each check names what it found, and the verdict agrees with it.
        let evicting = tainted(new_node("n3", None), vec![taint("gone", None, "NoExecute")]);
        assert_eq!(
            placement.why_not(&evicting).as_deref(),
            Some("node does not tolerate taint gone:NoExecute")
        );
        assert!(!placement.evaluate(&evicting).should_continue_running);
        let mut pinned = new_ds("pinned");
        pinned.spec.template.spec.as_mut().unwrap().node_name = Some("n9".into());
        let pinned = DaemonPlacement::new(&pinned);
        assert_eq!(
            pinned.why_not(&new_node("n1", None)).as_deref(),
            Some("the template's nodeName is n9")
        );
        assert_eq!(pinned.evaluate(&new_node("n1", None)), NodeDecision::NO);
        let mut selective = new_ds("selective");
        selective.spec.template.spec.as_mut().unwrap().node_selector =
            Some(BTreeMap::from([("disk".to_string(), "ssd".to_string())]));
        let selective = DaemonPlacement::new(&selective);
        assert_eq!(
            selective.why_not(&new_node("n1", None)).as_deref(),
            Some("nodeSelector or required node affinity does not match the node's labels")
        );
        assert_eq!(selective.evaluate(&new_node("n1", None)), NodeDecision::NO);
    }
}
