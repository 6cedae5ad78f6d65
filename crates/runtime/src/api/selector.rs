//! Label selectors as the controllers use them: a `metav1.LabelSelector` from an object's spec is validated once
//! and turned into a [`Selector`] that answers "does this label set match?".
//!
//! Semantics follow upstream `metav1.LabelSelectorAsSelector` and `labels.Requirement`:
//!
//! - an absent selector (`None`, Go's `nil`) matches **nothing**: [`Selector::from_optional`];
//! - an empty selector `{}` (no matchLabels, no matchExpressions) matches **everything**;
//! - `NotIn` and `DoesNotExist` match when the key is absent; `In` and `Exists` need the key.
//!
//! The controllers treat the "matches everything" case specially, so callers must check [`Selector::is_empty`]:
//! the Deployment and DaemonSet controllers refuse to manage pods with an empty selector (event `SelectingAll`,
//! no sync), while the ReplicaSet controller relies on API validation having rejected it. A selector that fails
//! to parse selects no pods at all (ReplicaSet lookups skip such owners).

use std::collections::BTreeMap;
use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    LabelSelector, LabelSelectorRequirement, ObjectMeta,
};

/// Why a `LabelSelector` could not be turned into a [`Selector`]. Upstream aggregates every problem of a
/// requirement; we report the first one, checked in upstream's order (operator, key, value count, values).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    /// A matchExpressions operator other than `In`, `NotIn`, `Exists` and `DoesNotExist`.
    #[error("{operator:?} is not a valid label selector operator (key {key:?})")]
    UnknownOperator {
        /// The requirement's key.
        key: String,
        /// The operator as written.
        operator: String,
    },
    /// A key that is not a valid label key (qualified name with optional DNS-subdomain prefix).
    #[error("invalid label key {key:?}: {reason}")]
    InvalidKey {
        /// The key as written.
        key: String,
        /// Every problem with it, joined by `; `.
        reason: String,
    },
    /// `In` or `NotIn` without values.
    #[error("key {key:?}: for 'in', 'notin' operators, values set can't be empty")]
    MissingValues {
        /// The requirement's key.
        key: String,
    },
    /// `Exists` or `DoesNotExist` with values.
    #[error("key {key:?}: values set must be empty for exists and does not exist")]
    UnexpectedValues {
        /// The requirement's key.
        key: String,
    },
    /// A value (of matchLabels or of an `In`/`NotIn` list) that is not a valid label value.
    #[error("key {key:?}: invalid label value {value:?}: {reason}")]
    InvalidValue {
        /// The requirement's key.
        key: String,
        /// The first invalid value.
        value: String,
        /// Every problem with it, joined by `; `.
        reason: String,
    },
}

/// A parsed label selector: either "nothing" or the AND of its requirements (none = everything).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selector {
    /// `None` is the nil selector that matches nothing.
    requirements: Option<Vec<Requirement>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Requirement {
    key: String,
    op: Op,
    values: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// From `matchLabels`; rendered `k=v`.
    Equals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

impl Selector {
    #[cfg(test)]
    /// Matches every label set (upstream `labels.Everything()`).
    pub(crate) fn everything() -> Self {
        Self {
            requirements: Some(Vec::new()),
        }
    }

    /// Matches no label set (upstream `labels.Nothing()`).
    pub(crate) fn nothing() -> Self {
        Self { requirements: None }
    }

    /// Upstream `LabelSelectorAsSelector` for a present selector: `{}` matches everything.
    pub fn from_label_selector(selector: &LabelSelector) -> Result<Self, SelectorError> {
        let match_labels = selector.match_labels.iter().flatten();
        let match_expressions = selector.match_expressions.iter().flatten();
        let mut requirements = Vec::new();
        for (key, value) in match_labels {
            requirements.push(Requirement::new(
                key,
                Op::Equals,
                std::slice::from_ref(value),
            )?);
        }
        for expression in match_expressions {
            requirements.push(Requirement::from_expression(expression)?);
        }
        Ok(Self::from_requirements(requirements))
    }

    /// Upstream `LabelSelectorAsSelector` including Go's `nil`: an absent selector matches nothing.
    pub(crate) fn from_optional(selector: Option<&LabelSelector>) -> Result<Self, SelectorError> {
        selector.map_or_else(|| Ok(Self::nothing()), Self::from_label_selector)
    }

    /// A selector requiring exactly these labels (upstream `SelectorFromSet`): unvalidated, empty = everything.
    pub fn from_map(labels: &BTreeMap<String, String>) -> Self {
        let requirements = labels
            .iter()
            .map(|(key, value)| Requirement {
                key: key.clone(),
                op: Op::Equals,
                values: vec![value.clone()],
            })
            .collect();
        Self::from_requirements(requirements)
    }

    fn from_requirements(mut requirements: Vec<Requirement>) -> Self {
        // Sorted by key like upstream, so that the rendering is deterministic.
        requirements.sort_by(|a, b| a.key.cmp(&b.key));
        Self {
            requirements: Some(requirements),
        }
    }

    /// Whether `labels` satisfies every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        match &self.requirements {
            None => false,
            Some(requirements) => requirements.iter().all(|r| r.matches(labels)),
        }
    }

    /// [`Selector::matches`] against an object's labels (absent labels = no labels).
    pub fn matches_meta(&self, meta: &ObjectMeta) -> bool {
        static NO_LABELS: BTreeMap<String, String> = BTreeMap::new();
        self.matches(meta.labels.as_ref().unwrap_or(&NO_LABELS))
    }

    /// Upstream `Selector.Empty()`: no requirements, so it matches everything. False for [`Selector::nothing`].
    pub fn is_empty(&self) -> bool {
        self.requirements.as_ref().is_some_and(Vec::is_empty)
    }

    #[cfg(test)]
    /// Same as [`Selector::is_empty`], named for what it means.
    pub(crate) fn matches_everything(&self) -> bool {
        self.is_empty()
    }

    /// Whether this is the nil selector (upstream `labels.MatchesNothing`).
    pub(crate) fn matches_nothing(&self) -> bool {
        self.requirements.is_none()
    }
}

/// Upstream `LabelSelectorAsSelector(selector).String()`: the label selector string form that `kubectl get -l`
/// accepts and that a scale subresource reports in `status.selector` (HorizontalPodAutoscalers parse it to find
/// the pods of their target). Requirements are sorted by key (on equal keys, matchLabels before
/// matchExpressions, expressions in their order), values sorted, `k=v` for matchLabels, `k in (a,b)`,
/// `k notin (a,b)`, `k` for Exists and `!k` for DoesNotExist, joined by `,`. Both the absent selector (matches
/// nothing) and `{}` (matches everything) render as the empty string, as upstream's do.
pub(crate) fn label_selector_string(
    selector: Option<&LabelSelector>,
) -> Result<String, SelectorError> {
    let selector = Selector::from_optional(selector)?;
    Ok(if selector.matches_nothing() {
        String::new()
    } else {
        selector.to_string()
    })
}

/// Renders like upstream `Selector.String()`, e.g. `baz in (norf,qux),foo=bar,!gone`; "everything" renders as
/// the empty string. Upstream renders "nothing" as empty too; we write `<nothing>` so log lines can tell them apart.
impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(requirements) = &self.requirements else {
            return f.write_str("<nothing>");
        };
        for (i, requirement) in requirements.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{requirement}")?;
        }
        Ok(())
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sorted_values: Vec<&str> = self.values.iter().map(String::as_str).collect();
        sorted_values.sort_unstable();
        let values = sorted_values.join(",");
        match self.op {
            Op::Equals => write!(f, "{}={values}", self.key),
            Op::In => write!(f, "{} in ({values})", self.key),
            Op::NotIn => write!(f, "{} notin ({values})", self.key),
            Op::Exists => write!(f, "{}", self.key),
            Op::DoesNotExist => write!(f, "!{}", self.key),
        }
    }
}

impl Requirement {
    fn from_expression(expression: &LabelSelectorRequirement) -> Result<Self, SelectorError> {
        let op = match expression.operator.as_str() {
            "In" => Op::In,
            "NotIn" => Op::NotIn,
            "Exists" => Op::Exists,
            "DoesNotExist" => Op::DoesNotExist,
            other => {
                return Err(SelectorError::UnknownOperator {
                    key: expression.key.clone(),
                    operator: other.to_owned(),
                });
            }
        };
        let values = expression.values.as_deref().unwrap_or_default();
        Self::new(&expression.key, op, values)
    }

    /// Upstream `labels.NewRequirement` restricted to the operators a `LabelSelector` can produce.
    fn new(key: &str, op: Op, values: &[String]) -> Result<Self, SelectorError> {
        let key_problems = label_key_problems(key);
        if !key_problems.is_empty() {
            return Err(SelectorError::InvalidKey {
                key: key.to_owned(),
                reason: key_problems.join("; "),
            });
        }
        match op {
            Op::In | Op::NotIn if values.is_empty() => {
                return Err(SelectorError::MissingValues {
                    key: key.to_owned(),
                });
            }
            Op::Exists | Op::DoesNotExist if !values.is_empty() => {
                return Err(SelectorError::UnexpectedValues {
                    key: key.to_owned(),
                });
            }
            _ => {}
        }
        for value in values {
            let value_problems = label_value_problems(value);
            if !value_problems.is_empty() {
                return Err(SelectorError::InvalidValue {
                    key: key.to_owned(),
                    value: value.clone(),
                    reason: value_problems.join("; "),
                });
            }
        }
        Ok(Self {
            key: key.to_owned(),
            op,
            values: values.to_vec(),
        })
    }

    fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        let listed = |v: &String| self.values.contains(v);
        match self.op {
            Op::Equals | Op::In => value.is_some_and(listed),
            Op::NotIn => !value.is_some_and(listed),
            Op::Exists => value.is_some(),
            Op::DoesNotExist => value.is_none(),
        }
    }
}

const LABEL_NAME_MAX_BYTES: usize = 63;
const DNS_SUBDOMAIN_MAX_BYTES: usize = 253;
const LABEL_NAME_SHAPE: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/// Upstream `IsLabelKey`: an optional DNS-subdomain prefix and `/`, then a name of at most 63 bytes.
fn label_key_problems(key: &str) -> Vec<String> {
    let parts: Vec<&str> = key.split('/').collect();
    let mut problems = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                problems.extend(
                    dns_subdomain_problems(prefix)
                        .into_iter()
                        .map(|p| format!("prefix part {p}")),
                );
            }
            *name
        }
        _ => {
            return vec![format!(
                "a valid label key {LABEL_NAME_SHAPE}, with an optional DNS subdomain prefix and '/' (e.g. \
                 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > LABEL_NAME_MAX_BYTES {
        problems.push(format!(
            "name part must be no more than {LABEL_NAME_MAX_BYTES} bytes"
        ));
    }
    if !is_label_name_shaped(name) {
        problems.push(format!("name part {LABEL_NAME_SHAPE}"));
    }
    problems
}

/// Upstream `IsValidLabelValue`: empty, or a label name of at most 63 bytes.
fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > LABEL_NAME_MAX_BYTES {
        problems.push(format!("must be no more than {LABEL_NAME_MAX_BYTES} bytes"));
    }
    if !value.is_empty() && !is_label_name_shaped(value) {
        problems.push(format!(
            "a valid label must be an empty string or {LABEL_NAME_SHAPE}"
        ));
    }
    problems
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, without the length limit.
fn is_label_name_shaped(name: &str) -> bool {
    let bytes = name.as_bytes();
    let (Some(first), Some(last)) = (bytes.first(), bytes.last()) else {
        return false;
    };
    first.is_ascii_alphanumeric()
        && last.is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// Upstream `IsDNS1123Subdomain`: at most 253 bytes of dot-separated lowercase RFC 1123 labels.
fn dns_subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > DNS_SUBDOMAIN_MAX_BYTES {
        problems.push(format!(
            "must be no more than {DNS_SUBDOMAIN_MAX_BYTES} bytes"
        ));
    }
    let is_lower_alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let label_ok = |label: &str| {
        let bytes = label.as_bytes();
        bytes.first().is_some_and(is_lower_alnum)
            && bytes.last().is_some_and(is_lower_alnum)
            && bytes.iter().all(|b| is_lower_alnum(b) || *b == b'-')
    };
    if !value.split('.').all(label_ok) {
        problems.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and \
             must start and end with an alphanumeric character"
                .to_owned(),
        );
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn expression(key: &str, operator: &str, values: &[&str]) -> LabelSelectorRequirement {
        LabelSelectorRequirement {
            key: key.to_owned(),
            operator: operator.to_owned(),
            values: Some(values.iter().map(|v| v.to_string()).collect()),
        }
    }

    fn selector(
        match_labels: &[(&str, &str)],
        expressions: Vec<LabelSelectorRequirement>,
    ) -> LabelSelector {
        LabelSelector {
            match_labels: (!match_labels.is_empty()).then(|| labels(match_labels)),
            match_expressions: (!expressions.is_empty()).then_some(expressions),
        }
    }

    fn parse(
        match_labels: &[(&str, &str)],
        expressions: Vec<LabelSelectorRequirement>,
    ) -> Selector {
        Selector::from_label_selector(&selector(match_labels, expressions)).unwrap()
    }

    // Mirrors apimachinery TestLabelSelectorAsSelector.
    #[test]
    fn label_selector_as_selector() {
        let nil = Selector::from_optional(None).unwrap();
        assert!(nil.matches_nothing());
        assert!(!nil.is_empty());
        assert!(!nil.matches(&labels(&[])));

        let empty = Selector::from_optional(Some(&LabelSelector::default())).unwrap();
        assert!(empty.is_empty() && empty.matches_everything());
        assert!(empty.matches(&labels(&[("any", "thing")])));
        assert_eq!(empty.to_string(), "");

        // Present but empty collections are still the empty selector.
        let empty_collections = LabelSelector {
            match_labels: Some(BTreeMap::new()),
            match_expressions: Some(Vec::new()),
        };
        assert!(
            Selector::from_label_selector(&empty_collections)
                .unwrap()
                .is_empty()
        );

        let in_expr = || vec![expression("baz", "In", &["qux", "norf"])];
        assert_eq!(parse(&[("foo", "bar")], vec![]).to_string(), "foo=bar");
        assert_eq!(parse(&[], in_expr()).to_string(), "baz in (norf,qux)");
        assert_eq!(
            parse(&[("foo", "bar")], in_expr()).to_string(),
            "baz in (norf,qux),foo=bar"
        );

        let exists_with_values = selector(&[], vec![expression("baz", "Exists", &["qux", "norf"])]);
        assert_eq!(
            Selector::from_label_selector(&exists_with_values),
            Err(SelectorError::UnexpectedValues { key: "baz".into() })
        );
    }

    // Mirrors the LabelSelector-reachable cases of apimachinery TestRequirementConstructor.
    #[test]
    fn requirement_validation() {
        let check = |expr: LabelSelectorRequirement| {
            Selector::from_label_selector(&selector(&[], vec![expr]))
        };
        assert_eq!(
            check(expression("x1", "In", &[])),
            Err(SelectorError::MissingValues { key: "x1".into() })
        );
        let no_values = LabelSelectorRequirement {
            key: "x2".into(),
            operator: "NotIn".into(),
            values: None,
        };
        assert_eq!(
            check(no_values),
            Err(SelectorError::MissingValues { key: "x2".into() })
        );
        assert!(check(expression("x3", "In", &["foo"])).is_ok());
        assert!(check(expression("x4", "NotIn", &["foo"])).is_ok());
        assert!(check(expression("x6", "Exists", &[])).is_ok());
        assert!(check(expression("x7", "DoesNotExist", &[])).is_ok());
        assert_eq!(
            check(expression("x8", "Exists", &["foo"])),
            Err(SelectorError::UnexpectedValues { key: "x8".into() })
        );
        assert_eq!(
            check(expression("x8", "DoesNotExist", &["foo"])),
            Err(SelectorError::UnexpectedValues { key: "x8".into() })
        );
        assert!(matches!(
            check(expression(&"a".repeat(254), "Exists", &[])),
            Err(SelectorError::InvalidKey { .. })
        ));
        assert!(matches!(
            check(expression("x16", "In", &[&"a".repeat(254)])),
            Err(SelectorError::InvalidValue { .. })
        ));
        assert!(matches!(
            check(expression("x17", "In", &["a b"])),
            Err(SelectorError::InvalidValue { .. })
        ));
        assert_eq!(
            check(expression("x18", "unsupportedOp", &[])),
            Err(SelectorError::UnknownOperator {
                key: "x18".into(),
                operator: "unsupportedOp".into()
            })
        );
        // Operators are case-sensitive and the set-based string forms are not accepted in a LabelSelector.
        assert!(matches!(
            check(expression("x19", "in", &["a"])),
            Err(SelectorError::UnknownOperator { .. })
        ));

        // matchLabels are validated too.
        let bad_value = selector(&[("app", "-bad")], vec![]);
        assert!(matches!(
            Selector::from_label_selector(&bad_value),
            Err(SelectorError::InvalidValue { .. })
        ));
        let empty_value = selector(&[("app", "")], vec![]);
        assert!(Selector::from_label_selector(&empty_value).is_ok());
    }

    #[test]
    fn label_key_syntax() {
        let valid = [
            "a",
            "app",
            "A_b.c-d9",
            "example.com/MyName",
            "this-is-a-dns.domain.com/key-with-dash",
            "0.1.2.domain/99",
            &"n".repeat(63),
            &format!("{}/name", "p".repeat(253)),
        ];
        for key in valid {
            assert!(
                label_key_problems(key).is_empty(),
                "{key:?} should be valid"
            );
        }
        let invalid = [
            "",
            "-a",
            "a-",
            "a b",
            "é",
            "/name",
            "prefix/",
            "a/b/c",
            "Example.com/name",
            "ex_ample.com/name",
            ".example.com/name",
            "example..com/name",
            &"n".repeat(64),
            &format!("{}/name", "p".repeat(254)),
        ];
        for key in invalid {
            assert!(
                !label_key_problems(key).is_empty(),
                "{key:?} should be invalid"
            );
        }
        assert_eq!(
            label_key_problems(""),
            vec![
                "name part must be non-empty".to_owned(),
                format!("name part {LABEL_NAME_SHAPE}")
            ]
        );
    }

    #[test]
    fn label_value_syntax() {
        for value in [
            "",
            "a",
            "MyValue",
            "my_value",
            "12345",
            "a.b-c_d",
            &"v".repeat(63),
        ] {
            assert!(
                label_value_problems(value).is_empty(),
                "{value:?} should be valid"
            );
        }
        for value in ["-a", "a-", "_", "a/b", "a b", &"v".repeat(64)] {
            assert!(
                !label_value_problems(value).is_empty(),
                "{value:?} should be invalid"
            );
        }
    }

    // Mirrors apimachinery TestRequirementSelectorMatching for the LabelSelector operators.
    #[test]
    fn requirement_matching() {
        let cases: Vec<(BTreeMap<String, String>, Selector, bool)> = vec![
            (
                labels(&[("x", "foo"), ("y", "baz")]),
                parse(
                    &[],
                    vec![
                        expression("x", "In", &["foo"]),
                        expression("y", "NotIn", &["alpha"]),
                    ],
                ),
                true,
            ),
            (
                labels(&[("x", "foo"), ("y", "baz")]),
                parse(
                    &[],
                    vec![
                        expression("x", "In", &["foo"]),
                        expression("y", "In", &["alpha"]),
                    ],
                ),
                false,
            ),
            (
                labels(&[("y", "")]),
                parse(
                    &[],
                    vec![
                        expression("x", "NotIn", &[""]),
                        expression("y", "Exists", &[]),
                    ],
                ),
                true,
            ),
            (
                labels(&[("y", "")]),
                parse(
                    &[],
                    vec![
                        expression("x", "DoesNotExist", &[]),
                        expression("y", "Exists", &[]),
                    ],
                ),
                true,
            ),
            (
                labels(&[("y", "")]),
                parse(
                    &[],
                    vec![
                        expression("x", "NotIn", &[""]),
                        expression("y", "DoesNotExist", &[]),
                    ],
                ),
                false,
            ),
            (
                labels(&[("y", "baz")]),
                parse(&[], vec![expression("x", "In", &[""])]),
                false,
            ),
            // NotIn matches an absent key, In does not.
            (
                labels(&[]),
                parse(&[], vec![expression("x", "NotIn", &["a"])]),
                true,
            ),
            (
                labels(&[("x", "a")]),
                parse(&[], vec![expression("x", "NotIn", &["a", "b"])]),
                false,
            ),
            (
                labels(&[("x", "c")]),
                parse(&[], vec![expression("x", "NotIn", &["a", "b"])]),
                true,
            ),
            (
                labels(&[("x", "b")]),
                parse(&[], vec![expression("x", "In", &["a", "b"])]),
                true,
            ),
            // matchLabels and matchExpressions are ANDed.
            (
                labels(&[("app", "web"), ("tier", "fe")]),
                parse(
                    &[("app", "web")],
                    vec![expression("tier", "In", &["fe", "be"])],
                ),
                true,
            ),
            (
                labels(&[("app", "web"), ("tier", "db")]),
                parse(
                    &[("app", "web")],
                    vec![expression("tier", "In", &["fe", "be"])],
                ),
                false,
            ),
            (
                labels(&[("app", "api")]),
                parse(&[("app", "web")], vec![]),
                false,
            ),
            (labels(&[]), parse(&[("app", "web")], vec![]), false),
        ];
        for (set, selector, want) in cases {
            assert_eq!(selector.matches(&set), want, "{selector} against {set:?}");
        }
    }

    // Mirrors the LabelSelector-reachable rows of apimachinery TestToString.
    #[test]
    fn display() {
        let s = parse(
            &[],
            vec![
                expression("z", "Exists", &[]),
                expression("x", "In", &["def", "abc"]),
                expression("y", "NotIn", &["jkl"]),
            ],
        );
        assert_eq!(s.to_string(), "x in (abc,def),y notin (jkl),z");
        let s = parse(
            &[],
            vec![
                expression("x", "NotIn", &["abc", "def"]),
                expression("z", "DoesNotExist", &[]),
            ],
        );
        assert_eq!(s.to_string(), "x notin (abc,def),!z");
        let s = parse(&[], vec![expression("z", "NotIn", &[""])]);
        assert_eq!(s.to_string(), "z notin ()");
        assert_eq!(Selector::nothing().to_string(), "<nothing>");
    }

    /// Upstream's string form on a table: apimachinery's TestLabelSelectorAsSelector and the LabelSelector
    /// rows of TestToString, plus ordering, duplicate keys and values, and the special selectors.
    #[test]
    fn label_selector_string_matches_upstream() {
        let cases: Vec<(Option<LabelSelector>, &str)> = vec![
            (None, ""),
            (Some(LabelSelector::default()), ""),
            (Some(selector(&[("foo", "bar")], vec![])), "foo=bar"),
            (
                Some(selector(
                    &[],
                    vec![expression("baz", "In", &["qux", "norf"])],
                )),
                "baz in (norf,qux)",
            ),
            (
                Some(selector(
                    &[("foo", "bar")],
                    vec![expression("baz", "In", &["qux", "norf"])],
                )),
                "baz in (norf,qux),foo=bar",
            ),
            (
                Some(selector(
                    &[],
                    vec![
                        expression("z", "Exists", &[]),
                        expression("y", "NotIn", &["jkl"]),
                        expression("x", "In", &["def", "abc"]),
                    ],
                )),
                "x in (abc,def),y notin (jkl),z",
            ),
            (
                Some(selector(
                    &[],
                    vec![
                        expression("x", "NotIn", &["abc", "def"]),
                        expression("z", "DoesNotExist", &[]),
                    ],
                )),
                "x notin (abc,def),!z",
            ),
            (
                Some(selector(
                    &[],
                    vec![
                        expression("x", "NotIn", &["abc"]),
                        expression("y", "In", &["mno", "jkl"]),
                        expression("z", "NotIn", &[""]),
                    ],
                )),
                "x notin (abc),y in (jkl,mno),z notin ()",
            ),
            // matchLabels are sorted by key, and merged with the expressions by key.
            (
                Some(selector(
                    &[("tier", "web"), ("app", "shop"), ("env", "prod")],
                    vec![expression("canary", "DoesNotExist", &[])],
                )),
                "app=shop,!canary,env=prod,tier=web",
            ),
            // Equal keys keep their order: matchLabels first, then the expressions as written.
            (
                Some(selector(
                    &[("app", "web")],
                    vec![
                        expression("app", "NotIn", &["db"]),
                        expression("app", "Exists", &[]),
                    ],
                )),
                "app=web,app notin (db),app",
            ),
            // Values are sorted byte-wise (uppercase first) and duplicates are kept.
            (
                Some(selector(
                    &[],
                    vec![expression("k", "In", &["b", "B", "a", "b"])],
                )),
                "k in (B,a,b,b)",
            ),
            (
                Some(selector(&[("example.com/role", "")], vec![])),
                "example.com/role=",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(
                label_selector_string(input.as_ref()).as_deref(),
                Ok(want),
                "{input:?}"
            );
        }
        let invalid = selector(&[], vec![expression("baz", "Exists", &["qux"])]);
        assert_eq!(
            label_selector_string(Some(&invalid)),
            Err(SelectorError::UnexpectedValues { key: "baz".into() })
        );
    }

    #[test]
    fn from_map_and_meta() {
        let s = Selector::from_map(&labels(&[("b", "2"), ("a", "1")]));
        assert_eq!(s.to_string(), "a=1,b=2");
        assert!(s.matches(&labels(&[("a", "1"), ("b", "2"), ("c", "3")])));
        assert!(!s.matches(&labels(&[("a", "1")])));
        assert!(Selector::from_map(&BTreeMap::new()).is_empty());

        let meta = ObjectMeta {
            labels: Some(labels(&[("a", "1"), ("b", "2")])),
            ..Default::default()
        };
        assert!(s.matches_meta(&meta));
        assert!(!s.matches_meta(&ObjectMeta::default()));
        assert!(Selector::everything().matches_meta(&ObjectMeta::default()));
        assert!(!Selector::nothing().matches_meta(&meta));
    }
}
