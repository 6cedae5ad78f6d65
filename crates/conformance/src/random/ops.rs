//! Random user operations, drawn from a seed: what a person does to workloads with `kubectl`, written as
//! the command they would type, so a divergence can be replayed by pasting it.
//!
//! A generator keeps a small model of what exists (which Deployments, ReplicaSets, DaemonSets and how
//! they were made), so every operation it draws can apply: it scales what exists, undoes a Deployment
//! with history, creates again what was deleted with `--cascade=orphan`.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// A pullable image and a second one (template changes), and one the plane never pulls (a stuck rollout;
/// docs/local-control-plane.md, the kubelet rules).
pub(crate) const IMAGES: [&str; 3] = [
    "registry.k8s.io/pause:3.10",
    "registry.k8s.io/pause:3.9",
    "foo:non-existent",
];

/// One operation, as data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    /// `kubectl apply` of a manifest (a Deployment, ReplicaSet or DaemonSet being created).
    Apply { what: String, manifest: Value },
    /// Any other `kubectl` command, as its arguments (the namespace is added when run).
    Kubectl { args: Vec<String> },
    /// `kubectl <verb> <pod> <rest>` on the `index`-th pod (in an order both planes agree on) of the
    /// workload `owner`: delete it, relabel it out of its selector, give it a deletion cost.
    OnPod {
        owner: String,
        index: usize,
        verb: Vec<String>,
        rest: Vec<String>,
    },
    /// Commands run one right after another, with no settling between them (never a pod operation:
    /// which pod is `index`-th is only agreed on settled planes).
    Burst { ops: Vec<Op> },
}

impl Op {
    fn kubectl(args: &[&str]) -> Op {
        Op::Kubectl {
            args: args.iter().map(|a| (*a).to_string()).collect(),
        }
    }

    /// Whether it adds, removes, labels, taints or (un)cordons a node.
    pub(crate) fn changes_nodes(&self) -> bool {
        match self {
            Op::Kubectl { args } => args
                .iter()
                .any(|a| a == "node" || a == "cordon" || a == "uncordon"),
            Op::Apply { manifest, .. } => manifest["kind"] == "Node",
            Op::OnPod { .. } => false,
            Op::Burst { ops } => ops.iter().any(Op::changes_nodes),
        }
    }

    /// Whether it deletes a node.
    pub(crate) fn removes_node(&self) -> bool {
        match self {
            Op::Kubectl { args } => args.starts_with(&["delete".to_string(), "node".to_string()]),
            Op::Burst { ops } => ops.iter().any(Op::removes_node),
            _ => false,
        }
    }

    /// One line for progress output: the command, with a manifest named by what it creates.
    pub(crate) fn summary(&self) -> String {
        match self {
            Op::Apply { what, .. } => format!("kubectl apply: {what}"),
            Op::Burst { ops } => format!(
                "at once: {}",
                ops.iter().map(Op::summary).collect::<Vec<_>>().join("; ")
            ),
            _ => self.command("<ns>").replace("kubectl -n <ns> ", "kubectl "),
        }
    }

    /// The command a person types for it in namespace `ns` (pods named by their place, which the
    /// runner resolves on each plane).
    pub(crate) fn command(&self, ns: &str) -> String {
        match self {
            Op::Apply { manifest, .. } => {
                format!("kubectl -n {ns} apply -f - <<'EOF'\n{manifest}\nEOF")
            }
            Op::Kubectl { args } => format!("kubectl -n {ns} {}", args.join(" ")),
            Op::OnPod {
                owner,
                index,
                verb,
                rest,
            } => format!(
                "kubectl -n {ns} {} <pod {index} of {owner}, ordered by image, readiness, relabelled, deletion cost and node> {}",
                verb.join(" "),
                rest.join(" ")
            )
            .trim_end()
            .to_string(),
            Op::Burst { ops } => ops
                .iter()
                .map(|op| op.command(ns))
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

/// What the generator knows exists.
#[derive(Debug, Default)]
struct Model {
    deployments: Vec<String>,
    /// Deployments deleted with `--cascade=orphan`, with the manifest to create them again.
    orphaned: Vec<(String, Value)>,
    replica_sets: Vec<String>,
    daemon_sets: Vec<String>,
    /// DaemonSets whose rolling update surges (see [`pod_relabelling`]).
    surging: Vec<String>,
    created: usize,
    /// Deployments and DaemonSets with a pod relabelled out of their selector.
    released: Vec<String>,
    /// Whether the extra node ([`EXTRA_NODE`]) exists.
    extra_node: bool,
}

/// The node a sequence adds and removes (the runner removes it before each sequence).
pub(crate) const EXTRA_NODE: &str = "random-extra";
/// The label of a pod relabelled out of its owner's selector, so which pods survive is compared.
pub(crate) const RELABELLED: &str = "random/relabelled";
/// The annotation by which a ReplicaSet chooses which pods to delete first on a scale-down.
pub(crate) const DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// `count` operations drawn from `seed`, for a plane with `nodes` nodes named by `node_names`.
pub(crate) fn generate(seed: u64, count: usize, node_names: &[String]) -> Vec<Op> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut model = Model::default();
    let mut ops = Vec::with_capacity(count);
    while ops.len() < count {
        ops.extend(draw(&mut rng, &mut model, node_names));
    }
    ops.truncate(count);
    ops
}

fn pick<'a, T>(rng: &mut StdRng, items: &'a [T]) -> Option<&'a T> {
    (!items.is_empty()).then(|| &items[rng.random_range(0..items.len())])
}

/// The operations (usually one) of a kind drawn at random that applies to `model`; none when it has
/// nothing to act on.
fn draw(rng: &mut StdRng, model: &mut Model, nodes: &[String]) -> Vec<Op> {
    match rng.random_range(0..28) {
        0..=19 => draw_one(rng, model, nodes).into_iter().collect(),
        20..=21 => pod_relabelling(rng, model).into_iter().collect(),
        22..=23 => cheapest_pod_then_scale_down(rng, model).unwrap_or_default(),
        24..=25 => burst(rng, model, nodes).into_iter().collect(),
        _ => node_added_or_removed(model).into_iter().collect(),
    }
}

/// Two or three operations with no settling between them (a user typing fast, a script): the
/// controllers meet them mid-reconcile. Pod operations are left out (see [`Op::Burst`]).
fn burst(rng: &mut StdRng, model: &mut Model, nodes: &[String]) -> Option<Op> {
    let size = rng.random_range(2..=3);
    let mut ops = Vec::new();
    for _ in 0..size * 4 {
        if ops.len() == size {
            break;
        }
        if let Some(op) = draw_one(rng, model, nodes).filter(|op| !matches!(op, Op::OnPod { .. })) {
            ops.push(op);
        }
    }
    (ops.len() >= 2).then_some(Op::Burst { ops })
}

fn draw_one(rng: &mut StdRng, model: &mut Model, nodes: &[String]) -> Option<Op> {
    let deployment = pick(rng, &model.deployments).cloned();
    match rng.random_range(0..20) {
        0..=2 => {
            if model.deployments.len() >= 3 {
                return None;
            }
            model.created += 1;
            let name = format!("web{}", model.created);
            let manifest = deployment_manifest(rng, &name);
            model.deployments.push(name.clone());
            Some(Op::Apply {
                what: format!("Deployment {name}"),
                manifest,
            })
        }
        3..=4 => {
            let d = deployment?;
            let replicas = rng.random_range(0..=6).to_string();
            Some(Op::kubectl(&[
                "scale",
                &format!("deployment/{d}"),
                "--replicas",
                &replicas,
            ]))
        }
        5..=6 => {
            let d = deployment?;
            let image = IMAGES[rng.random_range(0..IMAGES.len())];
            Some(Op::kubectl(&[
                "set",
                "image",
                &format!("deployment/{d}"),
                &format!("main={image}"),
            ]))
        }
        7 => {
            let d = deployment?;
            let verb = ["pause", "resume", "restart"][rng.random_range(0..3)];
            Some(Op::kubectl(&["rollout", verb, &format!("deployment/{d}")]))
        }
        8 => {
            let d = deployment?;
            let target = format!("deployment/{d}");
            if rng.random_bool(0.5) {
                Some(Op::kubectl(&["rollout", "undo", &target]))
            } else {
                let revision = rng.random_range(1..=3).to_string();
                Some(Op::kubectl(&[
                    "rollout",
                    "undo",
                    &target,
                    "--to-revision",
                    &revision,
                ]))
            }
        }
        9 => {
            let d = deployment?;
            let patch = match rng.random_range(0..3) {
                0 => json!({"spec": {"strategy": {"type": "Recreate", "rollingUpdate": null}}}),
                1 => json!({"spec": {"minReadySeconds": rng.random_range(0..=2)}}),
                _ => json!({"spec": {"progressDeadlineSeconds": rng.random_range(5..=30)}}),
            };
            Some(Op::kubectl(&[
                "patch",
                &format!("deployment/{d}"),
                "--type=merge",
                "-p",
                &patch.to_string(),
            ]))
        }
        10 => {
            let d = deployment?;
            model.deployments.retain(|n| *n != d);
            match rng.random_range(0..10) {
                0..=5 => {
                    let manifest = deployment_manifest(rng, &d);
                    model.orphaned.push((d.clone(), manifest));
                    Some(Op::kubectl(&[
                        "delete",
                        &format!("deployment/{d}"),
                        "--cascade=orphan",
                    ]))
                }
                6..=7 => Some(Op::kubectl(&["delete", &format!("deployment/{d}")])),
                // The garbage collector deletes its ReplicaSets and pods before it.
                _ => Some(Op::kubectl(&[
                    "delete",
                    &format!("deployment/{d}"),
                    "--cascade=foreground",
                ])),
            }
        }
        11 => {
            if model.orphaned.is_empty() {
                return None;
            }
            let (name, manifest) = model.orphaned.remove(0);
            model.deployments.push(name.clone());
            Some(Op::Apply {
                what: format!("Deployment {name} again (adopting its orphans)"),
                manifest,
            })
        }
        12..=13 => {
            let owners: Vec<String> = model
                .deployments
                .iter()
                .chain(&model.replica_sets)
                .chain(&model.daemon_sets)
                .cloned()
                .collect();
            let owner = pick(rng, &owners)?.clone();
            Some(Op::OnPod {
                owner,
                index: rng.random_range(0..4),
                verb: vec!["delete".into(), "pod".into()],
                rest: vec!["--wait=false".into()],
            })
        }
        14 => {
            if model.replica_sets.len() >= 2 {
                let rs = pick(rng, &model.replica_sets)?.clone();
                let replicas = rng.random_range(0..=4).to_string();
                return Some(Op::kubectl(&[
                    "scale",
                    &format!("replicaset/{rs}"),
                    "--replicas",
                    &replicas,
                ]));
            }
            let name = format!("rs{}", model.replica_sets.len() + 1);
            model.replica_sets.push(name.clone());
            let replicas = rng.random_range(1..=3);
            // Both select app=shared: overlapping selectors, each keeps its own pods.
            Some(Op::Apply {
                what: format!("ReplicaSet {name}"),
                manifest: json!({
                    "apiVersion": "apps/v1", "kind": "ReplicaSet",
                    "metadata": {"name": name},
                    "spec": {
                        "replicas": replicas,
                        "selector": {"matchLabels": {"app": "shared"}},
                        "template": workload_template("shared", IMAGES[0]),
                    }
                }),
            })
        }
        15..=16 => {
            if let Some(ds) = pick(rng, &model.daemon_sets).cloned() {
                return Some(daemon_set_op(rng, model, &ds));
            }
            let name = "agent".to_string();
            model.daemon_sets.push(name.clone());
            let rolling = match rng.random_range(0..4) {
                0 => json!({"maxSurge": 1, "maxUnavailable": 0}),
                1 => json!({"maxSurge": "50%", "maxUnavailable": 0}),
                2 => json!({"maxUnavailable": "50%"}),
                _ => json!({"maxUnavailable": 1}),
            };
            if rolling.get("maxSurge").is_some() {
                model.surging.push(name.clone());
            }
            let mut spec = json!({
                "selector": {"matchLabels": {"app": name}},
                "template": template(&name, IMAGES[0]),
                "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": rolling},
            });
            if rng.random_bool(0.5) {
                spec["template"]["spec"]["nodeSelector"] = json!({"random/agent": "yes"});
            }
            // Tolerating the sequences' own taint (one effect or both): the node operations then
            // change some verdicts and not others.
            match rng.random_range(0..3) {
                0 => {}
                1 => {
                    spec["template"]["spec"]["tolerations"] =
                        json!([{"key": "random", "operator": "Exists", "effect": "NoSchedule"}]);
                }
                _ => {
                    spec["template"]["spec"]["tolerations"] =
                        json!([{"key": "random", "operator": "Exists"}]);
                }
            }
            Some(Op::Apply {
                what: format!("DaemonSet {name}"),
                manifest: json!({
                    "apiVersion": "apps/v1", "kind": "DaemonSet",
                    "metadata": {"name": name}, "spec": spec,
                }),
            })
        }
        _ => {
            let node = pick(rng, nodes)?.clone();
            let args: &[&str] = match rng.random_range(0..7) {
                0 => &["label", "node", &node, "random/agent=yes", "--overwrite"],
                1 => &["taint", "node", &node, "random=x:NoSchedule", "--overwrite"],
                2 => &["taint", "node", &node, "random=x:NoExecute", "--overwrite"],
                3 => &["cordon", &node],
                // And undone: the verdicts change back.
                4 => &["label", "node", &node, "random/agent-"],
                5 => &["taint", "node", &node, "random-"],
                _ => &["uncordon", &node],
            };
            Some(Op::kubectl(args))
        }
    }
}

/// An operation on the existing DaemonSet `ds`: a new image (most often), a restart, an undo, a
/// switch between OnDelete and RollingUpdate, or its deletion (orphaning its pods or not; a later draw
/// creates it again, adopting the orphans).
fn daemon_set_op(rng: &mut StdRng, model: &mut Model, ds: &str) -> Op {
    let target = format!("daemonset/{ds}");
    match rng.random_range(0..10) {
        0..=4 => {
            let image = IMAGES[rng.random_range(0..IMAGES.len())];
            Op::kubectl(&["set", "image", &target, &format!("main={image}")])
        }
        5 => Op::kubectl(&["rollout", "restart", &target]),
        6 => Op::kubectl(&["rollout", "undo", &target]),
        7 => {
            let strategy = if rng.random_bool(0.5) {
                json!({"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": null}}})
            } else {
                json!({"spec": {"updateStrategy": {"type": "RollingUpdate",
                                                    "rollingUpdate": {"maxUnavailable": 1}}}})
            };
            // Without a surge from here on (see pod_relabelling).
            model.surging.retain(|d| d != ds);
            Op::kubectl(&[
                "patch",
                &target,
                "--type=merge",
                "-p",
                &strategy.to_string(),
            ])
        }
        _ => {
            model.daemon_sets.retain(|d| d != ds);
            model.surging.retain(|d| d != ds);
            if rng.random_bool(0.5) {
                Op::kubectl(&["delete", &target, "--cascade=orphan"])
            } else {
                Op::kubectl(&["delete", &target])
            }
        }
    }
}

/// A pod of a Deployment or DaemonSet relabelled out of its selector (its owner releases it and makes
/// another), or, when one was, relabelled back (its owner adopts it and deletes one too many).
/// Left out: ReplicaSets (two select the same pods, so which adopts a returning pod is a race), and
/// DaemonSets that surge: released mid-update, a surged pod is replaced on a node upstream picks at
/// random, and back again it leaves one node with two new pods (one deleted) or three nodes with one
/// each (none deleted), so the number of surged pods itself would depend on the draw.
fn pod_relabelling(rng: &mut StdRng, model: &mut Model) -> Option<Op> {
    if let Some(owner) = model.released.pop() {
        return Some(Op::kubectl(&[
            "label",
            "pods",
            "-l",
            &format!("app={owner}-away"),
            &format!("app={owner}"),
            "--overwrite",
        ]));
    }
    let owners: Vec<String> = model
        .deployments
        .iter()
        .chain(
            model
                .daemon_sets
                .iter()
                .filter(|d| !model.surging.contains(d)),
        )
        .cloned()
        .collect();
    let owner = pick(rng, &owners)?.clone();
    model.released.push(owner.clone());
    Some(Op::OnPod {
        index: rng.random_range(0..4),
        verb: vec!["label".into(), "pod".into()],
        rest: vec![
            format!("app={owner}-away"),
            format!("{RELABELLED}=yes"),
            "--overwrite".into(),
        ],
        owner,
    })
}

/// A deletion cost on one pod of a Deployment, then a scale-down: the costly pod must survive it on
/// both planes (a negative cost: it must go first).
fn cheapest_pod_then_scale_down(rng: &mut StdRng, model: &mut Model) -> Option<Vec<Op>> {
    let owner = pick(rng, &model.deployments)?.clone();
    let cost = [-100, 100][rng.random_range(0..2)];
    Some(vec![
        Op::OnPod {
            owner: owner.clone(),
            index: rng.random_range(0..4),
            verb: vec!["annotate".into(), "pod".into()],
            rest: vec![format!("{DELETION_COST}={cost}"), "--overwrite".into()],
        },
        Op::kubectl(&[
            "scale",
            &format!("deployment/{owner}"),
            "--replicas",
            &rng.random_range(0..=2).to_string(),
        ]),
    ])
}

/// A simulated node added (kwok takes it over), or the one added removed.
fn node_added_or_removed(model: &mut Model) -> Option<Op> {
    model.extra_node = !model.extra_node;
    if !model.extra_node {
        return Some(Op::kubectl(&["delete", "node", EXTRA_NODE]));
    }
    Some(Op::Apply {
        what: format!("Node {EXTRA_NODE}"),
        manifest: json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": EXTRA_NODE,
                "labels": {"type": "kwok", "kubernetes.io/hostname": EXTRA_NODE,
                           "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
                "annotations": {"kwok.x-k8s.io/node": "fake"},
            },
            "status": {
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
            },
        }),
    })
}

fn template(app: &str, image: &str) -> Value {
    json!({
        "metadata": {"labels": {"app": app}},
        "spec": {"containers": [{"name": "main", "image": image}]},
    })
}

/// The pod template of a Deployment or ReplicaSet. The scheduler picks among equally good nodes at
/// random, so such a pod may land on different nodes on the two planes; an eviction or a removed node
/// would then delete it on one plane only (and a released pod is not replaced). So these pods tolerate
/// the sequences' NoExecute taint and keep off the extra node: the node operations act on the
/// DaemonSet, whose pods are placed by its controller, and on where new pods may be scheduled.
fn workload_template(app: &str, image: &str) -> Value {
    let mut template = template(app, image);
    template["spec"]["tolerations"] =
        json!([{"key": "random", "operator": "Exists", "effect": "NoExecute"}]);
    template["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [EXTRA_NODE]}
        ]}]
    }}});
    template
}

/// A Deployment with random replicas, strategy and history.
fn deployment_manifest(rng: &mut StdRng, name: &str) -> Value {
    let amount = |rng: &mut StdRng| -> Value {
        if rng.random_bool(0.5) {
            json!(rng.random_range(0..=2))
        } else {
            json!(format!("{}%", [10, 25, 50][rng.random_range(0..3)]))
        }
    };
    let strategy = if rng.random_bool(0.2) {
        json!({"type": "Recreate"})
    } else {
        let mut surge = amount(rng);
        let unavailable = amount(rng);
        if surge == json!(0) && unavailable == json!(0) {
            surge = json!(1);
        }
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    };
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": rng.random_range(1..=5),
            "revisionHistoryLimit": rng.random_range(0..=10),
            "selector": {"matchLabels": {"app": name}},
            "strategy": strategy,
            "template": workload_template(name, IMAGES[0]),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_removal_is_told_apart() {
        assert!(Op::kubectl(&["delete", "node", EXTRA_NODE]).removes_node());
        assert!(!Op::kubectl(&["delete", "deployment/web1"]).removes_node());
        assert!(!Op::kubectl(&["cordon", EXTRA_NODE]).removes_node());
    }

    #[test]
    fn a_seed_draws_the_same_operations_every_time() {
        let nodes = vec!["n1".to_string(), "n2".to_string()];
        let first = generate(7, 40, &nodes);
        assert_eq!(first, generate(7, 40, &nodes));
        assert_ne!(first, generate(8, 40, &nodes));
        assert_eq!(first.len(), 40);
    }

    #[test]
    fn operations_act_on_what_exists() {
        let nodes = vec!["n1".to_string()];
        for seed in 0..20 {
            let mut created = Vec::new();
            // A burst's commands run in order, as single ones do.
            let flat = generate(seed, 40, &nodes)
                .into_iter()
                .flat_map(|op| match op {
                    Op::Burst { ops } => ops,
                    op => vec![op],
                });
            for op in flat {
                if let Op::Apply { manifest, .. } = &op {
                    created.push(
                        manifest["metadata"]["name"]
                            .as_str()
                            .unwrap_or_default()
                            .to_string(),
                    );
                }
                if let Op::Kubectl { args } = &op
                    && args[0] == "scale"
                {
                    let name = args[1].split('/').nth(1).unwrap_or_default().to_string();
                    assert!(
                        created.contains(&name),
                        "seed {seed}: {args:?} before its creation"
                    );
                }
            }
        }
    }
}
