//! Which upstream specs run, and which of them are expected to fail on the local plane, with the reason.
//!
//! The sets are regular expressions over Ginkgo's full spec text, as the e2e binary's `--ginkgo.focus`
//! takes them. A spec that fails on mini-kcm's plane fails the CI test unless it is listed in
//! [`EXPECTED_FAILURES`]; every entry there fails with kube-controller-manager's controllers as well
//! (measured with `mini-kcm conformance --compare`, docs/conformance.md), so CI fails exactly when a spec
//! that passes with upstream's controllers fails with mini-kcm's.

use clap::ValueEnum;

/// Never run: they stop or break plane components, or are known to be unreliable upstream.
pub const SKIP: &str = r"\[Disruptive\]|\[Flaky\]";

/// A named group of upstream specs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, ValueEnum)]
pub enum SpecSet {
    /// `[sig-apps] Deployment | ReplicaSet | Daemon set | ControllerRevision` (31 specs, serial ones
    /// included).
    Apps,
    /// `[sig-apps] DisruptionController` (19 specs): PodDisruptionBudgets over pods of ReplicaSets and
    /// Deployments.
    Disruption,
    /// Specs of other areas that drive Deployments and ReplicaSets: the garbage collector, admission
    /// policies, ResourceQuota, server-side apply, `kubectl rollout`/`diff`/`scale`.
    Widened,
}

impl SpecSet {
    pub const ALL: [SpecSet; 3] = [SpecSet::Apps, SpecSet::Disruption, SpecSet::Widened];

    pub fn name(self) -> &'static str {
        match self {
            SpecSet::Apps => "apps",
            SpecSet::Disruption => "disruption",
            SpecSet::Widened => "widened",
        }
    }

    /// The `--ginkgo.focus` expression of the set.
    pub fn focus(self) -> String {
        match self {
            SpecSet::Apps => {
                r"\[sig-apps\] (Deployment|ReplicaSet|Daemon set|ControllerRevision)".to_string()
            }
            SpecSet::Disruption => r"\[sig-apps\] DisruptionController".to_string(),
            SpecSet::Widened => WIDENED
                .iter()
                .map(|spec| exact_spec_regex(spec))
                .collect::<Vec<_>>()
                .join("|"),
        }
    }
}

/// The specs outside sig-apps that create Deployments or ReplicaSets and depend on what their
/// controllers do (found by reading test/e2e/apimachinery and test/e2e/kubectl of the pinned version).
pub const WIDENED: &[&str] = &[
    "[sig-api-machinery] Garbage collector should delete RS created by deployment when not orphaning [Conformance]",
    "[sig-api-machinery] Garbage collector should orphan RS created by deployment when deleteOptions.PropagationPolicy is Orphan [Conformance]",
    "[sig-api-machinery] MutatingAdmissionPolicy [Privileged:ClusterAdmin] should mutate a Deployment [Conformance]",
    "[sig-api-machinery] MutatingAdmissionPolicy [Privileged:ClusterAdmin] should mutate a Deployment with annotations [Conformance]",
    "[sig-api-machinery] MutatingAdmissionPolicy [Privileged:ClusterAdmin] should support MutatingAdmissionPolicyBinding API operations [Conformance]",
    "[sig-api-machinery] ResourceQuota should create a ResourceQuota and capture the life of a replica set. [Conformance]",
    "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should validate against a Deployment [Conformance]",
    "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should allow expressions to refer variables. [Conformance]",
    "[sig-api-machinery] ValidatingAdmissionPolicy [Privileged:ClusterAdmin] should support ValidatingAdmissionPolicyBinding API operations [Conformance]",
    "[sig-api-machinery] ServerSideApply should remove a field if it is owned but removed in the apply request",
    "[sig-api-machinery] ServerSideApply should give up ownership of a field if forced applied by a controller",
    "[sig-cli] Kubectl client Kubectl diff should check if kubectl diff finds a difference for Deployments [Conformance]",
    "[sig-cli] Kubectl rollout undo undo should rollback and update deployment env",
    "[sig-cli] Kubectl delete interactive based on user confirmation input",
];

/// A spec that fails on the local plane whoever's controllers run, and why.
#[derive(Debug, Clone, Copy)]
pub struct ExpectedFailure {
    /// The spec's full text, as the report prints it.
    pub spec: &'static str,
    pub reason: &'static str,
}

pub const EXPECTED_FAILURES: &[ExpectedFailure] = &[ExpectedFailure {
    spec: "[sig-apps] ReplicaSet should serve a basic image on each replica with a public image [Conformance]",
    reason: "reads each pod's answer through the API server's pod proxy; kwok's pods have no containers \
             behind their IPs",
}];

/// Why `spec` is expected to fail, when it is.
pub fn expected_failure(spec: &str) -> Option<&'static ExpectedFailure> {
    EXPECTED_FAILURES.iter().find(|e| e.spec == spec)
}

/// A `--ginkgo.focus` expression that selects exactly the spec with this full text. Ginkgo matches focus
/// expressions against "<suite description> <spec text>", hence the space instead of `^`.
pub fn exact_spec_regex(spec: &str) -> String {
    format!(" {}$", literal_regex(spec))
}

/// `text` as a regular expression (Go RE2) that matches exactly it.
pub fn literal_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if r"\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_regex_escapes_every_meta_character() {
        assert_eq!(
            literal_regex("[sig-apps] a.b (c) x|y $1 ^{2}*+?"),
            r"\[sig-apps\] a\.b \(c\) x\|y \$1 \^\{2\}\*\+\?"
        );
    }

    #[test]
    fn expected_failures_are_found_by_their_full_text() {
        let first = EXPECTED_FAILURES[0];
        assert!(expected_failure(first.spec).is_some());
        assert!(expected_failure("[sig-apps] ReplicaSet something else").is_none());
    }
}
