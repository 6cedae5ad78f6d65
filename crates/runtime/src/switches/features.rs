//! Feature gates: kube-controller-manager's `--feature-gates` for the gates mini-kcm's controllers and
//! manager consult, with the names, stages, defaults and locks they have in v1.37.
//!
//! Upstream keeps one process-wide gate table that every component shares; here the parsed gates are a
//! value the manager hands to each controller (`ControllerOptions::features`), so a unit test can run a
//! sync with a gate off without touching global state. The syntax and the rules are upstream's:
//! `Name=true,Other=false`, `AllAlpha=` / `AllBeta=` set every unlocked gate of that stage, a gate locked
//! to its default cannot be changed, and an enabled gate whose dependency is off is an error.
//!
//! Names: upstream refuses a name it does not know (`unrecognized feature gate: X`), and so does mini-kcm,
//! against the list of every gate kube-controller-manager v1.37.2 accepts (`data/kcm-feature-gates.txt`,
//! read off the binary by `deploy/control-plane/kcm-feature-gates.sh`): a gate removed in 1.37 such as
//! `LogarithmicScaleDown` is refused as upstream refuses it, and so is a locked gate set away from its
//! value. A gate kube-controller-manager accepts but only its other controllers consult
//! (`StaleControllerConsistencyHPA=true`, copied from a kube-controller-manager's flags) is accepted and
//! reported as ignored rather than stopping the manager. Names may carry upstream's component prefix,
//! `kube:` (the only component kube-controller-manager has).

use std::collections::BTreeMap;
use std::fmt;

/// A gate one of mini-kcm's controllers (or its manager) consults.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// Client-go's FIFO that hands over a batch of events atomically; the consistency gates need it.
    AtomicFIFO,
    /// The `/flagz` endpoint.
    ComponentFlagz,
    /// The `/statusz` endpoint.
    ComponentStatusz,
    /// `status.terminatingReplicas` of ReplicaSets and Deployments.
    DeploymentReplicaSetTerminatingReplicas,
    /// `controller.kubernetes.io/pod-deletion-cost` orders a ReplicaSet's scale-down.
    PodDeletionCost,
    /// Read-your-own-writes in the DaemonSet controller (KEP-5647).
    StaleControllerConsistencyDaemonSet,
    /// Read-your-own-writes in the ReplicaSet controller (KEP-5647).
    StaleControllerConsistencyReplicaSet,
    /// Tolerations with the `Gt` / `Lt` operators (DaemonSet placement).
    TaintTolerationComparisonOperators,
    /// Informers start with a streamed list (`sendInitialEvents`) instead of paged lists.
    WatchListClient,
}

/// How mature a gate is; `AllAlpha` / `AllBeta` act on one stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Off by default, may change or go away.
    Alpha,
    /// Usually on by default, still switchable.
    Beta,
    /// Generally available: on by default, usually locked.
    Ga,
}

impl fmt::Display for Stage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Stage::Alpha => "ALPHA",
            Stage::Beta => "BETA",
            Stage::Ga => "GA",
        })
    }
}

/// One gate as kube-controller-manager v1.37 defines it.
#[derive(Debug, Clone, Copy)]
pub struct GateSpec {
    /// The gate this row describes.
    pub feature: Feature,
    /// Its name in `--feature-gates`, as upstream spells it.
    pub name: &'static str,
    /// Its stage (which `AllAlpha` / `AllBeta` it follows).
    pub stage: Stage,
    /// Whether it is on when not set.
    pub default: bool,
    /// Locked gates cannot be set to anything but their default.
    pub locked: bool,
    /// Gates that must be on while this one is.
    pub needs: &'static [Feature],
    /// For a gate that makes the controllers write an API field: the first Kubernetes minor whose API
    /// server keeps that field by default. Against an older server the gate defaults to off (see
    /// [`FeatureGates::for_server_minor`]).
    pub server_keeps_field_since: Option<u32>,
}

const fn gate(feature: Feature, name: &'static str, stage: Stage, default: bool) -> GateSpec {
    GateSpec {
        feature,
        name,
        stage,
        default,
        locked: false,
        needs: &[],
        server_keeps_field_since: None,
    }
}

/// The gates, as `pkg/features`, client-go's and component-base's tables define them at v1.37 (none of
/// them changed stage or default between 1.35 and 1.37; `LogarithmicScaleDown`, GA and locked since 1.31,
/// was removed in 1.37: its log2 buckets are simply how pods are ranked).
pub const GATES: [GateSpec; 9] = [
    gate(Feature::AtomicFIFO, "AtomicFIFO", Stage::Beta, true),
    gate(Feature::ComponentFlagz, "ComponentFlagz", Stage::Beta, true),
    gate(
        Feature::ComponentStatusz,
        "ComponentStatusz",
        Stage::Beta,
        true,
    ),
    GateSpec {
        // Alpha (off) on 1.33-1.34 API servers, which drop the field from status writes.
        server_keeps_field_since: Some(35),
        ..gate(
            Feature::DeploymentReplicaSetTerminatingReplicas,
            "DeploymentReplicaSetTerminatingReplicas",
            Stage::Beta,
            true,
        )
    },
    gate(
        Feature::PodDeletionCost,
        "PodDeletionCost",
        Stage::Beta,
        true,
    ),
    GateSpec {
        needs: &[Feature::AtomicFIFO],
        ..gate(
            Feature::StaleControllerConsistencyDaemonSet,
            "StaleControllerConsistencyDaemonSet",
            Stage::Beta,
            true,
        )
    },
    GateSpec {
        needs: &[Feature::AtomicFIFO],
        ..gate(
            Feature::StaleControllerConsistencyReplicaSet,
            "StaleControllerConsistencyReplicaSet",
            Stage::Beta,
            true,
        )
    },
    gate(
        Feature::TaintTolerationComparisonOperators,
        "TaintTolerationComparisonOperators",
        Stage::Alpha,
        false,
    ),
    gate(
        Feature::WatchListClient,
        "WatchListClient",
        Stage::Beta,
        true,
    ),
];

impl Feature {
    /// Its row in [`GATES`].
    pub fn spec(self) -> &'static GateSpec {
        GATES
            .iter()
            .find(|g| g.feature == self)
            .unwrap_or_else(|| unreachable!("every Feature has a row in GATES"))
    }

    /// Its name in `--feature-gates`.
    pub fn name(self) -> &'static str {
        self.spec().name
    }
}

/// Why `--feature-gates` was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// An entry without `=` (the entry as given).
    #[error("missing bool value for {0}")]
    MissingValue(String),
    /// A value Go's `strconv.ParseBool` does not take.
    #[error("invalid value of {name}={value}, want true or false")]
    InvalidValue {
        /// The gate's name (without a `kube:` prefix).
        name: String,
        /// The value as given.
        value: String,
    },
    #[error("cannot set feature gate {name} to {value}, feature is locked to {locked}")]
    /// A locked gate (of mini-kcm's table or kube-controller-manager's) set away from its value.
    Locked {
        /// The gate's name.
        name: String,
        /// The value asked for.
        value: bool,
        /// The value it is locked to.
        locked: bool,
    },
    /// An enabled gate needs another that is off (see [`GateSpec::needs`]).
    #[error("{name} is enabled, but depends on features that are disabled: {missing}")]
    Dependency {
        /// The enabled gate.
        name: &'static str,
        /// The disabled gates it needs, joined by `, `.
        missing: String,
    },
    /// A name neither mini-kcm nor kube-controller-manager v1.37.2 knows (the name as given).
    #[error("unrecognized feature gate: {0}")]
    Unrecognized(String),
}

/// Every gate kube-controller-manager v1.37.2 accepts in `--feature-gates`, one per line (`#` comments),
/// `Name` or `Name locked-to=true|false` (tests/e2e/bad_input.rs checks it against the built binary).
pub const KUBE_CONTROLLER_MANAGER_GATES: &str = include_str!("../../data/kcm-feature-gates.txt");

/// How kube-controller-manager v1.37.2 takes the gate `name`: `None` when it does not know it, else the
/// value it is locked to, if any.
pub fn kube_controller_manager_gate(name: &str) -> Option<Option<bool>> {
    KUBE_CONTROLLER_MANAGER_GATES
        .lines()
        .filter(|line| !line.starts_with('#'))
        .find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next()? == name).then(|| {
                words
                    .next()
                    .and_then(|w| w.strip_prefix("locked-to="))
                    .and_then(parse_bool)
            })
        })
}

/// The gates in effect: every known gate at its default unless `--feature-gates` set it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FeatureGates {
    /// Only what was set explicitly (directly or through `AllAlpha` / `AllBeta`).
    set: BTreeMap<Feature, bool>,
    /// Names this manager does not consult, as given; reported, not applied.
    ignored: Vec<String>,
}

impl FeatureGates {
    /// Parses `--feature-gates` (`A=true,B=false`; empty means every default).
    pub fn parse(spec: &str) -> Result<Self, FeatureGateError> {
        let mut given: Vec<(String, bool)> = Vec::new();
        for entry in spec.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let Some((name, value)) = entry.split_once('=') else {
                return Err(FeatureGateError::MissingValue(entry.to_string()));
            };
            let (name, value) = (name.trim(), value.trim());
            let name = name.strip_prefix("kube:").unwrap_or(name);
            let on = parse_bool(value).ok_or_else(|| FeatureGateError::InvalidValue {
                name: name.to_string(),
                value: value.to_string(),
            })?;
            given.push((name.to_string(), on));
        }
        Self::from_pairs(given)
    }

    fn from_pairs(given: Vec<(String, bool)>) -> Result<Self, FeatureGateError> {
        let mut gates = FeatureGates::default();
        // As upstream: `AllAlpha` / `AllBeta` first, so a named gate beside them wins.
        for (name, on) in &given {
            let stage = match name.as_str() {
                "AllAlpha" => Stage::Alpha,
                "AllBeta" => Stage::Beta,
                _ => continue,
            };
            for spec in GATES.iter().filter(|g| g.stage == stage && !g.locked) {
                gates.set.insert(spec.feature, *on);
            }
        }
        for (name, on) in given {
            if name == "AllAlpha" || name == "AllBeta" {
                continue;
            }
            let Some(spec) = GATES.iter().find(|g| g.name == name) else {
                match kube_controller_manager_gate(&name) {
                    None => return Err(FeatureGateError::Unrecognized(name)),
                    Some(Some(locked)) if locked != on => {
                        return Err(FeatureGateError::Locked {
                            name,
                            value: on,
                            locked,
                        });
                    }
                    Some(_) => gates.ignored.push(format!("{name}={on}")),
                }
                continue;
            };
            if spec.locked && on != spec.default {
                return Err(FeatureGateError::Locked {
                    name: spec.name.to_string(),
                    value: on,
                    locked: spec.default,
                });
            }
            gates.set.insert(spec.feature, on);
        }
        for spec in GATES.iter().filter(|g| gates.enabled(g.feature)) {
            let missing: Vec<&str> = spec
                .needs
                .iter()
                .filter(|need| !gates.enabled(**need))
                .map(|need| need.name())
                .collect();
            if !missing.is_empty() {
                return Err(FeatureGateError::Dependency {
                    name: spec.name,
                    missing: missing.join(", "),
                });
            }
        }
        Ok(gates)
    }

    /// Whether `feature` is on.
    pub fn enabled(&self, feature: Feature) -> bool {
        self.set
            .get(&feature)
            .copied()
            .unwrap_or_else(|| feature.spec().default)
    }

    /// These gates against an API server of Kubernetes minor `minor`: a gate that writes a field such a
    /// server drops (its own gate for the field is off there) defaults to off, unless it was set
    /// explicitly. Otherwise the controller would write the field, read it back absent, and write the
    /// status again at every sync (writes that change nothing; twice the status writes, measured on a
    /// 1.34 plane). Returns the gates so turned off, for the log.
    pub fn for_server_minor(&mut self, minor: u32) -> Vec<&'static str> {
        let mut turned_off = Vec::new();
        for spec in &GATES {
            if let Some(since) = spec.server_keeps_field_since
                && minor < since
                && !self.set.contains_key(&spec.feature)
            {
                self.set.insert(spec.feature, false);
                turned_off.push(spec.name);
            }
        }
        turned_off
    }

    /// This set with `feature` turned on or off (tests; the manager parses the flag).
    #[must_use]
    pub fn with(mut self, feature: Feature, on: bool) -> Self {
        self.set.insert(feature, on);
        self
    }

    /// The gates given that no controller here consults (`Name=value`), for a warning at start.
    pub fn ignored(&self) -> &[String] {
        &self.ignored
    }

    /// The gates set away from their default, `Name=value`, for logs and `/flagz`.
    pub fn changed(&self) -> Vec<String> {
        GATES
            .iter()
            .filter(|g| self.enabled(g.feature) != g.default)
            .map(|g| format!("{}={}", g.name, self.enabled(g.feature)))
            .collect()
    }
}

/// Go's `strconv.ParseBool`, which upstream's flag parsing uses.
fn parse_bool(value: &str) -> Option<bool> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// The help text of `--feature-gates`: every gate with its stage and default, as upstream prints them.
pub fn feature_gates_help() -> String {
    let mut lines = vec![
        "A set of key=value pairs that describe feature gates for alpha/experimental features. Options are:"
            .to_string(),
        "AllAlpha=true|false (ALPHA - default=false)".to_string(),
        "AllBeta=true|false (BETA - default=false)".to_string(),
    ];
    for g in GATES {
        let default = if g.locked {
            format!("default={}, locked", g.default)
        } else {
            format!("default={}", g.default)
        };
        lines.push(format!("{}=true|false ({} - {default})", g.name, g.stage));
    }
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_upstreams_at_v1_37() {
        let gates = FeatureGates::default();
        for spec in GATES {
            assert_eq!(gates.enabled(spec.feature), spec.default, "{}", spec.name);
        }
        assert!(gates.enabled(Feature::DeploymentReplicaSetTerminatingReplicas));
        assert!(!gates.enabled(Feature::TaintTolerationComparisonOperators));
        assert!(gates.changed().is_empty());
        assert_eq!(FeatureGates::parse("").unwrap(), gates);
    }

    #[test]
    fn named_gates_turn_on_and_off() {
        let gates = FeatureGates::parse(
            "TaintTolerationComparisonOperators=true, DeploymentReplicaSetTerminatingReplicas=false",
        )
        .unwrap();
        assert!(gates.enabled(Feature::TaintTolerationComparisonOperators));
        assert!(!gates.enabled(Feature::DeploymentReplicaSetTerminatingReplicas));
        assert_eq!(
            gates.changed(),
            [
                "DeploymentReplicaSetTerminatingReplicas=false",
                "TaintTolerationComparisonOperators=true"
            ]
        );
        // Go's ParseBool spellings.
        assert!(
            !FeatureGates::parse("PodDeletionCost=0")
                .unwrap()
                .enabled(Feature::PodDeletionCost)
        );
        assert!(
            FeatureGates::parse("TaintTolerationComparisonOperators=T")
                .unwrap()
                .enabled(Feature::TaintTolerationComparisonOperators)
        );
    }

    #[test]
    fn bad_input_is_refused_with_upstreams_words() {
        let err = |s| FeatureGates::parse(s).unwrap_err().to_string();
        assert_eq!(
            err("PodDeletionCost"),
            "missing bool value for PodDeletionCost"
        );
        assert!(err("PodDeletionCost=maybe").contains("invalid value of PodDeletionCost=maybe"));
        // Removed in 1.37: refused whatever the value, as upstream.
        assert_eq!(
            err("LogarithmicScaleDown=true"),
            "unrecognized feature gate: LogarithmicScaleDown"
        );
        assert_eq!(
            err("NoSuchGate=true"),
            "unrecognized feature gate: NoSuchGate"
        );
        // A locked gate only other parts of kube-controller-manager consult: its own value is fine (and
        // ignored), another is refused as upstream refuses it.
        assert_eq!(
            FeatureGates::parse("InOrderInformers=true")
                .unwrap()
                .ignored(),
            ["InOrderInformers=true"]
        );
        assert_eq!(
            err("InOrderInformers=false"),
            "cannot set feature gate InOrderInformers to false, feature is locked to true"
        );
        assert_eq!(
            err("AtomicFIFO=false"),
            "StaleControllerConsistencyDaemonSet is enabled, but depends on features that are disabled: AtomicFIFO"
        );
        // Turning the dependents off too is consistent.
        assert!(
            FeatureGates::parse(
                "AtomicFIFO=false,StaleControllerConsistencyDaemonSet=false,StaleControllerConsistencyReplicaSet=false"
            )
            .is_ok()
        );
    }

    #[test]
    fn all_alpha_and_all_beta_set_a_stage_and_named_gates_win() {
        let gates = FeatureGates::parse("AllAlpha=true").unwrap();
        assert!(gates.enabled(Feature::TaintTolerationComparisonOperators));
        let gates = FeatureGates::parse("PodDeletionCost=true,AllBeta=false").unwrap();
        assert!(
            gates.enabled(Feature::PodDeletionCost),
            "the named gate wins"
        );
        assert!(!gates.enabled(Feature::WatchListClient));
        assert!(!gates.enabled(Feature::AtomicFIFO));
        assert!(!gates.enabled(Feature::StaleControllerConsistencyReplicaSet));
    }

    #[test]
    fn the_component_prefix_kube_is_accepted() {
        let gates = FeatureGates::parse("kube:PodDeletionCost=false").unwrap();
        assert!(!gates.enabled(Feature::PodDeletionCost));
    }

    #[test]
    fn every_gate_consulted_here_is_one_kube_controller_manager_accepts() {
        for spec in GATES {
            assert_eq!(
                kube_controller_manager_gate(spec.name),
                Some(None),
                "{} (known, not locked)",
                spec.name
            );
        }
        assert_eq!(kube_controller_manager_gate("LogarithmicScaleDown"), None);
    }

    #[test]
    fn gates_of_other_controllers_are_reported_not_applied() {
        let gates = FeatureGates::parse("StaleControllerConsistencyHPA=true,PodDeletionCost=false")
            .unwrap();
        assert_eq!(gates.ignored(), ["StaleControllerConsistencyHPA=true"]);
        assert!(!gates.enabled(Feature::PodDeletionCost));
    }

    #[test]
    fn gates_writing_fields_an_older_server_drops_default_to_off_there() {
        let mut gates = FeatureGates::default();
        assert!(gates.for_server_minor(36).is_empty());
        assert!(gates.for_server_minor(35).is_empty());
        assert!(gates.enabled(Feature::DeploymentReplicaSetTerminatingReplicas));
        assert_eq!(
            gates.for_server_minor(34),
            ["DeploymentReplicaSetTerminatingReplicas"]
        );
        assert!(!gates.enabled(Feature::DeploymentReplicaSetTerminatingReplicas));
        // An explicit setting is the user's choice (e.g. a 1.34 server with its gate turned on).
        let mut explicit =
            FeatureGates::parse("DeploymentReplicaSetTerminatingReplicas=true").unwrap();
        assert!(explicit.for_server_minor(34).is_empty());
        assert!(explicit.enabled(Feature::DeploymentReplicaSetTerminatingReplicas));
    }

    #[test]
    fn help_lists_every_gate() {
        let help = feature_gates_help();
        for spec in GATES {
            assert!(help.contains(spec.name), "{}", spec.name);
        }
        assert!(!help.contains("LogarithmicScaleDown"));
        assert!(
            help.contains("TaintTolerationComparisonOperators=true|false (ALPHA - default=false)")
        );
    }
}
