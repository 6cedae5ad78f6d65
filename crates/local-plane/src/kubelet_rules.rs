//! The simulated kubelet's rules: the `kubelet-*` stages of `deploy/kwok/stages.yaml`, which make kwok
//! report pods the way a kubelet would where controllers can see it (unpullable images stay Pending in
//! ImagePullBackOff, readiness probes delay Ready by `initialDelaySeconds`, pods marked NotReady by the
//! node-lifecycle controller turn Ready again).
//!
//! They are on by default. A plane can run without them (the fast defaults then make every pod Ready at
//! once) and can choose which images count as unpullable; both are read from the environment so that every
//! way of starting a plane (`mini-kcm up`, the test harness, the benchmark) honours them.

use crate::{KWOK_STAGES, PlaneError};

/// Set to `off` to start planes without the kubelet rules.
pub(crate) const KUBELET_RULES_ENV: &str = "MINI_KCM_KUBELET_RULES";
/// A regular expression (Go RE2 syntax, evaluated by kwok's jq `test`) for image names that cannot be
/// pulled; replaces [`DEFAULT_UNPULLABLE_IMAGES`].
pub(crate) const UNPULLABLE_IMAGES_ENV: &str = "MINI_KCM_UNPULLABLE_IMAGES";
/// The images the upstream e2e suites use when they need a rollout that never becomes available
/// (`webserver:404`, `foo:non-existent`, `...:nonexistent`).
pub(crate) const DEFAULT_UNPULLABLE_IMAGES: &str = "(:404$)|non-?existent";
/// Every stage whose name starts with this is a kubelet rule.
const RULE_PREFIX: &str = "kubelet-";

/// Whether a plane's kwok applies the kubelet rules, and which images it treats as unpullable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KubeletRules {
    On { unpullable_images: String },
    Off,
}

impl Default for KubeletRules {
    fn default() -> Self {
        KubeletRules::On {
            unpullable_images: DEFAULT_UNPULLABLE_IMAGES.to_string(),
        }
    }
}

impl KubeletRules {
    /// The rules as [`KUBELET_RULES_ENV`] and [`UNPULLABLE_IMAGES_ENV`] ask (on, default pattern, when
    /// unset).
    pub(crate) fn from_env() -> Self {
        Self::from_values(
            std::env::var(KUBELET_RULES_ENV).ok().as_deref(),
            std::env::var(UNPULLABLE_IMAGES_ENV).ok().as_deref(),
        )
    }

    fn from_values(switch: Option<&str>, pattern: Option<&str>) -> Self {
        if switch.is_some_and(|s| matches!(s.trim(), "off" | "0" | "false" | "no")) {
            return KubeletRules::Off;
        }
        match pattern.map(str::trim).filter(|p| !p.is_empty()) {
            Some(pattern) => KubeletRules::On {
                unpullable_images: pattern.to_string(),
            },
            None => KubeletRules::default(),
        }
    }

    /// The kwok stage file for a plane with these rules.
    pub(crate) fn stage_file(&self) -> Result<String, PlaneError> {
        match self {
            KubeletRules::Off => Ok(split_stages(KWOK_STAGES)
                .filter(|stage| !stage_name(stage).is_some_and(|n| n.starts_with(RULE_PREFIX)))
                .collect::<Vec<_>>()
                .join("---\n")),
            KubeletRules::On { unpullable_images } => {
                if unpullable_images.contains('\n') {
                    return Err(PlaneError::KubeletRules(format!(
                        "{UNPULLABLE_IMAGES_ENV} must be one line, got {unpullable_images:?}"
                    )));
                }
                // The pattern sits in a jq string literal (JSON syntax) inside a single-quoted YAML scalar.
                let default = yaml_single_quoted(&jq_string(DEFAULT_UNPULLABLE_IMAGES));
                let wanted = yaml_single_quoted(&jq_string(unpullable_images));
                Ok(KWOK_STAGES.replace(&default, &wanted))
            }
        }
    }
}

/// The YAML documents of a stage file, each ending with a newline.
fn split_stages(file: &str) -> impl Iterator<Item = &str> {
    file.split("---\n")
}

fn stage_name(stage: &str) -> Option<&str> {
    stage
        .lines()
        .find_map(|line| line.strip_prefix("  name: "))
        .map(str::trim)
}

fn jq_string(text: &str) -> String {
    serde_json::Value::String(text.to_string()).to_string()
}

fn yaml_single_quoted(text: &str) -> String {
    text.replace('\'', "''")
}

#[cfg(test)]
mod tests {
    use super::*;

    const RULES: [&str; 5] = [
        "kubelet-image-pull-error",
        "kubelet-image-pull-backoff",
        "kubelet-probe-start",
        "kubelet-probe-ready",
        "kubelet-ready-again",
    ];

    fn names(file: &str) -> Vec<&str> {
        split_stages(file).filter_map(stage_name).collect()
    }

    #[test]
    fn the_stage_file_holds_the_rules_and_the_default_pattern() {
        let all = names(KWOK_STAGES);
        for rule in RULES {
            assert!(all.contains(&rule), "{rule} missing from {all:?}");
        }
        let pattern = yaml_single_quoted(&jq_string(DEFAULT_UNPULLABLE_IMAGES));
        // Every rule that looks at images (both image-pull stages and the probe start) uses the pattern.
        assert_eq!(KWOK_STAGES.matches(&pattern).count(), 3);
    }

    #[test]
    fn off_drops_exactly_the_rules() {
        let file = KubeletRules::Off.stage_file().unwrap();
        let kept = names(&file);
        let all = names(KWOK_STAGES);
        assert_eq!(kept.len(), all.len() - RULES.len());
        assert!(kept.iter().all(|n| !n.starts_with(RULE_PREFIX)), "{kept:?}");
        assert!(kept.contains(&"pod-ready") && kept.contains(&"node-heartbeat"));
    }

    #[test]
    fn the_default_rules_are_the_file_as_written() {
        assert_eq!(KubeletRules::default().stage_file().unwrap(), KWOK_STAGES);
    }

    #[test]
    fn a_custom_pattern_replaces_the_default_everywhere_escaped() {
        let rules = KubeletRules::On {
            unpullable_images: r#"^private\.registry/'x"$"#.to_string(),
        };
        let file = rules.stage_file().unwrap();
        assert!(!file.contains(r#"test("(:404$)|non-?existent")"#));
        // JSON escapes the backslash and the double quote; YAML doubles the single quote.
        assert_eq!(
            file.matches(r#"test("^private\\.registry/''x\"$")"#)
                .count(),
            3
        );
    }

    #[test]
    fn the_environment_switches_and_overrides() {
        assert_eq!(
            KubeletRules::from_values(Some("off"), None),
            KubeletRules::Off
        );
        assert_eq!(
            KubeletRules::from_values(Some("on"), Some(" ")),
            KubeletRules::default()
        );
        assert_eq!(
            KubeletRules::from_values(None, Some("broken")),
            KubeletRules::On {
                unpullable_images: "broken".into()
            }
        );
    }

    #[test]
    fn a_multi_line_pattern_is_refused() {
        let rules = KubeletRules::On {
            unpullable_images: "a\nb".into(),
        };
        assert!(rules.stage_file().is_err());
    }
}
