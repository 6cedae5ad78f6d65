//! `mini-kcm rollout` as a user runs it, on a real local control plane: the built binary against
//! `apps/v1` Deployments and DaemonSets and their `minikcm.dev` copies, with mini-kcm's controllers
//! running in the test (scoped to its namespace; kube-controller-manager runs no workload controller).
//!
//! DaemonSets are tested twice: with mini-kcm's DaemonSet controller (a whole round trip), and without
//! any controller, on ControllerRevisions the test writes itself (shaped like the controller's), so
//! the command's own behaviour is pinned down independently of the controller's.

// Test code: a panic is the failure report.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ControllerRevision, DaemonSetSpec, DeploymentSpec};
use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::apimachinery::pkg::runtime::RawExtension;
use kube::Api;
use kube::api::{ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use mini_kcm_fixtures::{IMAGE, app_labels as labels, pod_template, selector};
use mini_kcm_manager::{Kinds, ManagerError, ManagerOptions};
use mini_kcm_runtime::api::kinds::{
    ApiFamily, DaemonSetObject, DeploymentObject, ReplicaSetObject, WorkloadKind, controller_uid,
};
use mini_kcm_testkit::{PlaneConfig, PlaneInfo, TestNamespace, shared_plane};
use serde_json::{Value, json};

const REVISION: &str = "deployment.kubernetes.io/revision";
const RESTARTED_AT: &str = "kubectl.kubernetes.io/restartedAt";
/// Long enough for any convergence on a loaded 2-core machine; only reached when something is wrong.
const TIMEOUT: Duration = Duration::from_secs(120);

fn plane() -> &'static PlaneInfo {
    shared_plane(PlaneConfig::default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_deployment_round_trip() {
    deployment_round_trip(ApiFamily::Apps).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_deployment_round_trip() {
    deployment_round_trip(ApiFamily::Copies).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_status_fails_on_deadline_and_timeout() {
    status_fails_on_deadline_and_timeout(ApiFamily::Apps).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_status_fails_on_deadline_and_timeout() {
    status_fails_on_deadline_and_timeout(ApiFamily::Copies).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_daemon_set_round_trip() {
    daemon_set_round_trip(ApiFamily::Apps).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_daemon_set_round_trip() {
    daemon_set_round_trip(ApiFamily::Copies).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_daemon_set_commands() {
    daemon_set_commands(ApiFamily::Apps).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn copies_daemon_set_commands() {
    daemon_set_commands(ApiFamily::Copies).await
}

// ---- the binary ----

struct Run {
    success: bool,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self, what: &str) -> String {
        assert!(
            self.success,
            "{what} failed\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self.stdout
    }

    fn fails(self, what: &str) -> Run {
        assert!(
            !self.success,
            "{what} succeeded\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// `mini-kcm rollout <args> --kubeconfig <plane> -n <ns>`, without blocking the runtime the
/// controllers run on.
async fn rollout(ns: &TestNamespace, args: &[&str]) -> Run {
    let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_mini-kcm"))
        .arg("rollout")
        .args(args)
        .arg("--kubeconfig")
        .arg(&ns.plane.kubeconfig)
        .args(["-n", &ns.name])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(TIMEOUT + Duration::from_secs(30), child)
        .await
        .unwrap_or_else(|_| panic!("mini-kcm rollout {args:?} did not end"))
        .unwrap();
    let run = Run {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    println!(
        "$ mini-kcm rollout {}\n{}{}",
        args.join(" "),
        run.stdout,
        run.stderr
    );
    run
}

/// `rollout status` until the rollout is done; returns its output.
async fn status_done(ns: &TestNamespace, resource: &str) -> String {
    let timeout = format!("--timeout={}s", TIMEOUT.as_secs());
    rollout(ns, &["status", resource, &timeout])
        .await
        .ok("rollout status")
}

// ---- the controllers ----

/// mini-kcm's controllers for the test's namespace, in the test's runtime.
struct Manager {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), ManagerError>>,
}

impl Manager {
    async fn start(ns: &TestNamespace) -> Self {
        mini_kcm_crds::install(&ns.client).await.unwrap();
        let config = mini_kcm_local_plane::config_from_kubeconfig(&ns.plane.kubeconfig)
            .await
            .unwrap();
        let options = ManagerOptions {
            kinds: Kinds::Both,
            namespace: Some(ns.name.clone()),
            metrics_addr: None,
            ..Default::default()
        };
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(mini_kcm_manager::run(config, options, async move {
            let _ = stopped.await;
        }));
        Manager { stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        match self.task.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("the manager failed: {e}"),
            Err(e) => panic!("the manager panicked: {e}"),
        }
    }
}

// ---- objects ----

const NEW_IMAGE: &str = "registry.k8s.io/pause:3.9";

fn deployments(ns: &TestNamespace, family: ApiFamily) -> Api<DeploymentObject> {
    Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::Deployment.api_resource(family),
    )
}

fn replica_sets(ns: &TestNamespace, family: ApiFamily) -> Api<ReplicaSetObject> {
    Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::ReplicaSet.api_resource(family),
    )
}

fn daemon_sets(ns: &TestNamespace, family: ApiFamily) -> Api<DaemonSetObject> {
    Api::namespaced_with(
        ns.client.clone(),
        &ns.name,
        &WorkloadKind::DaemonSet.api_resource(family),
    )
}

async fn create_deployment(
    ns: &TestNamespace,
    family: ApiFamily,
    name: &str,
    replicas: i32,
    edit: impl FnOnce(&mut DeploymentSpec),
) -> DeploymentObject {
    let mut spec = DeploymentSpec {
        replicas: Some(replicas),
        selector: selector(name),
        template: pod_template(name, IMAGE),
        ..Default::default()
    };
    edit(&mut spec);
    let mut d = DeploymentObject::new(name, &WorkloadKind::Deployment.api_resource(family), spec);
    d.status = None;
    deployments(ns, family)
        .create(&PostParams::default(), &d)
        .await
        .unwrap()
}

async fn merge_patch(api: &Api<DeploymentObject>, name: &str, body: Value) {
    api.patch(name, &PatchParams::default(), &Patch::Merge(body))
        .await
        .unwrap();
}

/// The ReplicaSets the Deployment `uid` controls.
async fn owned_replica_sets(
    ns: &TestNamespace,
    family: ApiFamily,
    uid: &str,
) -> Vec<ReplicaSetObject> {
    replica_sets(ns, family)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|rs| controller_uid(&rs.metadata) == Some(uid))
        .collect()
}

fn revision_of(rs: &ReplicaSetObject) -> Option<&str> {
    rs.metadata
        .annotations
        .as_ref()?
        .get(REVISION)
        .map(String::as_str)
}

fn last_line(out: &str) -> &str {
    out.lines().last().unwrap_or_default()
}

// ---- scenarios ----

/// Per family: how the user names the Deployment `web` (long and short type) and how we print it.
fn deployment_names(family: ApiFamily) -> (&'static str, &'static str, &'static str, &'static str) {
    match family {
        ApiFamily::Apps => (
            "deployment/web",
            "deploy/web",
            "deployment.apps/web",
            "deployments.apps",
        ),
        ApiFamily::Copies => (
            "deployments.minikcm.dev/web",
            "mdeploy/web",
            "deployment.minikcm.dev/web",
            "deployments.minikcm.dev",
        ),
    }
}

async fn deployment_round_trip(family: ApiFamily) {
    let ns = TestNamespace::create(plane(), &format!("rollout-{}", family.label())).await;
    let manager = Manager::start(&ns).await;
    let (long, short, display, resource) = deployment_names(family);
    let api = deployments(&ns, family);
    let created = create_deployment(&ns, family, "web", 2, |_| {}).await;
    let uid = created.metadata.uid.unwrap();

    // The first rollout completes.
    let out = status_done(&ns, long).await;
    assert_eq!(
        last_line(&out),
        "deployment \"web\" successfully rolled out"
    );
    assert_eq!(
        rollout(&ns, &["history", short]).await.ok("history"),
        format!("{display} \nREVISION  CHANGE-CAUSE\n1         <none>\n\n")
    );
    let first_uid = owned_replica_sets(&ns, family, &uid).await[0]
        .metadata
        .uid
        .clone()
        .unwrap();

    // A new image: a second revision, with the change cause the Deployment carries.
    merge_patch(
        &api,
        "web",
        json!({
            "metadata": {"annotations": {"kubernetes.io/change-cause": "image 3.9"}},
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": NEW_IMAGE}]}}},
        }),
    )
    .await;
    let out = status_done(&ns, short).await;
    assert_eq!(
        last_line(&out),
        "deployment \"web\" successfully rolled out"
    );
    assert_eq!(
        rollout(&ns, &["history", long]).await.ok("history"),
        format!("{display} \nREVISION  CHANGE-CAUSE\n1         <none>\n2         image 3.9\n\n")
    );
    let out = rollout(&ns, &["history", short, "--revision=2"])
        .await
        .ok("history --revision");
    assert!(
        out.starts_with(&format!("{display} with revision #2\nPod Template:\n")),
        "{out}"
    );
    assert!(out.contains(&format!("image: {NEW_IMAGE}")), "{out}");
    assert!(
        out.contains("kubernetes.io/change-cause: image 3.9"),
        "{out}"
    );
    let out = rollout(&ns, &["history", short, "--revision=7"])
        .await
        .fails("history of a missing revision");
    assert_eq!(out.stderr, "error: unable to find the specified revision\n");

    // Undo: back to revision 1's template, which becomes revision 3 in the same ReplicaSet.
    assert_eq!(
        rollout(&ns, &["undo", short]).await.ok("undo"),
        format!("{display} rolled back\n")
    );
    let d = api.get("web").await.unwrap();
    assert_eq!(
        d.spec.template.spec.as_ref().unwrap().containers[0]
            .image
            .as_deref(),
        Some(IMAGE)
    );
    let out = status_done(&ns, long).await;
    assert_eq!(
        last_line(&out),
        "deployment \"web\" successfully rolled out"
    );
    let rss = owned_replica_sets(&ns, family, &uid).await;
    assert_eq!(rss.len(), 2, "no new ReplicaSet: {rss:?}");
    let reused = rss
        .iter()
        .find(|rs| rs.metadata.uid.as_deref() == Some(first_uid.as_str()))
        .unwrap();
    assert_eq!(revision_of(reused), Some("3"));
    // Revision 1's ReplicaSet had no change cause, so the Deployment's is gone too.
    assert_eq!(
        rollout(&ns, &["history", short]).await.ok("history"),
        format!("{display} \nREVISION  CHANGE-CAUSE\n2         image 3.9\n3         <none>\n\n")
    );
    assert_eq!(
        rollout(&ns, &["undo", long, "--to-revision=3"])
            .await
            .ok("undo to the current revision"),
        format!("{display} skipped rollback (current template already matches revision 3)\n")
    );
    let out = rollout(&ns, &["undo", long, "--to-revision", "9"])
        .await
        .fails("undo to a missing revision");
    assert_eq!(
        out.stderr,
        "error: unable to find specified revision 9 in history\n"
    );

    // Pause and resume toggle spec.paused, with kubectl's refusals.
    assert_eq!(
        rollout(&ns, &["pause", short]).await.ok("pause"),
        format!("{display} paused\n")
    );
    assert_eq!(api.get("web").await.unwrap().spec.paused, Some(true));
    let out = rollout(&ns, &["pause", short]).await.fails("pause twice");
    assert_eq!(
        out.stderr,
        format!("error: {resource} \"web\" is already paused\n")
    );
    let out = rollout(&ns, &["restart", short])
        .await
        .fails("restart while paused");
    assert_eq!(
        out.stderr,
        format!(
            "error: {resource} \"web\" can't restart paused deployment (run rollout resume first)\n"
        )
    );
    let out = rollout(&ns, &["undo", short])
        .await
        .fails("undo while paused");
    assert!(
        out.stderr
            .starts_with("error: you cannot rollback a paused deployment"),
        "{}",
        out.stderr
    );
    assert_eq!(
        rollout(&ns, &["resume", long]).await.ok("resume"),
        format!("{display} resumed\n")
    );
    assert_ne!(api.get("web").await.unwrap().spec.paused, Some(true));
    let out = rollout(&ns, &["resume", long]).await.fails("resume twice");
    assert_eq!(
        out.stderr,
        format!("error: {resource} \"web\" is not paused\n")
    );

    // Restart stamps the template, which rolls out revision 4.
    assert_eq!(
        rollout(&ns, &["restart", long]).await.ok("restart"),
        format!("{display} restarted\n")
    );
    let d = api.get("web").await.unwrap();
    let stamp = d
        .spec
        .template
        .metadata
        .as_ref()
        .unwrap()
        .annotations
        .as_ref()
        .unwrap()[RESTARTED_AT]
        .clone();
    assert!(
        stamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "{stamp}"
    );
    let out = status_done(&ns, short).await;
    assert_eq!(
        last_line(&out),
        "deployment \"web\" successfully rolled out"
    );
    let revisions: Vec<String> = owned_replica_sets(&ns, family, &uid)
        .await
        .iter()
        .filter_map(|rs| revision_of(rs).map(str::to_string))
        .collect();
    assert!(revisions.contains(&"4".to_string()), "{revisions:?}");
    let out = rollout(&ns, &["history", short, "--revision", "4"])
        .await
        .ok("history --revision 4");
    assert!(out.contains(RESTARTED_AT), "{out}");

    // One look without watching, and a missing object.
    assert_eq!(
        rollout(&ns, &["status", short, "--watch=false"])
            .await
            .ok("status --watch=false"),
        "deployment \"web\" successfully rolled out\n"
    );
    let missing = format!("{}/nope", short.split('/').next().unwrap());
    let out = rollout(&ns, &["status", &missing])
        .await
        .fails("status of a missing Deployment");
    assert_eq!(
        out.stderr,
        format!("Error from server (NotFound): {resource} \"nope\" not found\n")
    );
    manager.stop().await;
}

async fn status_fails_on_deadline_and_timeout(family: ApiFamily) {
    let ns = TestNamespace::create(plane(), &format!("rollout-fail-{}", family.label())).await;
    let manager = Manager::start(&ns).await;
    let (_, short, _, _) = deployment_names(family);
    let ty = short.split('/').next().unwrap();
    let api = deployments(&ns, family);

    // A rollout whose pods never become Ready exceeds its progress deadline: status fails with
    // kubectl's error after reporting progress.
    create_deployment(&ns, family, "stuck", 1, |spec| {
        spec.progress_deadline_seconds = Some(3)
    })
    .await;
    let stuck = format!("{ty}/stuck");
    status_done(&ns, &stuck).await;
    merge_patch(
        &api,
        "stuck",
        json!({"spec": {"template": {"metadata": {"labels": {"minikcm.dev/kwok-behaviour": "never-ready"}}}}}),
    )
    .await;
    let timeout = format!("--timeout={}s", TIMEOUT.as_secs());
    let out = rollout(&ns, &["status", &stuck, &timeout])
        .await
        .fails("status of a stuck rollout");
    assert_eq!(
        out.stderr,
        "error: deployment \"stuck\" exceeded its progress deadline\n"
    );
    assert!(
        out.stdout
            .contains("Waiting for deployment \"stuck\" rollout to finish"),
        "{}",
        out.stdout
    );

    // A paused Deployment with a new template never finishes: --timeout ends the watch.
    create_deployment(&ns, family, "held", 1, |spec| spec.paused = Some(true)).await;
    merge_patch(
        &api,
        "held",
        json!({"spec": {"template": {"spec": {"containers": [{"name": "main", "image": NEW_IMAGE}]}}}}),
    )
    .await;
    let held = format!("{ty}/held");
    let out = rollout(&ns, &["status", &held, "--timeout=3s"])
        .await
        .fails("status of a paused rollout");
    assert_eq!(out.stderr, "error: timed out waiting for the condition\n");
    manager.stop().await;
}

/// Per family: how the user names the DaemonSet `agent` and how we print it and its resource.
fn daemon_set_names(family: ApiFamily) -> (&'static str, &'static str, &'static str) {
    match family {
        ApiFamily::Apps => ("ds/agent", "daemonset.apps/agent", "daemonsets.apps"),
        ApiFamily::Copies => (
            "mds/agent",
            "daemonset.minikcm.dev/agent",
            "daemonsets.minikcm.dev",
        ),
    }
}

async fn create_daemon_set(ns: &TestNamespace, family: ApiFamily) -> DaemonSetObject {
    let mut ds = DaemonSetObject::new(
        "agent",
        &WorkloadKind::DaemonSet.api_resource(family),
        DaemonSetSpec {
            selector: selector("agent"),
            template: pod_template("agent", IMAGE),
            ..Default::default()
        },
    );
    ds.status = None;
    daemon_sets(ns, family)
        .create(&PostParams::default(), &ds)
        .await
        .unwrap()
}

/// The revision numbers of a `history` table.
fn table_revisions(out: &str) -> Vec<i64> {
    out.lines()
        .skip(2)
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn image_of(template: &PodTemplateSpec) -> Option<&str> {
    template.spec.as_ref()?.containers.first()?.image.as_deref()
}

async fn daemon_set_round_trip(family: ApiFamily) {
    let ns = TestNamespace::create(plane(), &format!("rollout-dsrt-{}", family.label())).await;
    let manager = Manager::start(&ns).await;
    let (arg, display, _) = daemon_set_names(family);
    let api = daemon_sets(&ns, family);
    create_daemon_set(&ns, family).await;
    let out = status_done(&ns, arg).await;
    assert_eq!(
        last_line(&out),
        "daemon set \"agent\" successfully rolled out"
    );

    // A new image, with a change cause the controller copies into the revision.
    api.patch(
        "agent",
        &PatchParams::default(),
        &Patch::Merge(json!({
            "metadata": {"annotations": {"kubernetes.io/change-cause": "image 3.9"}},
            "spec": {"template": {"spec": {"containers": [{"name": "main", "image": NEW_IMAGE}]}}},
        })),
    )
    .await
    .unwrap();
    let out = status_done(&ns, arg).await;
    assert_eq!(
        last_line(&out),
        "daemon set \"agent\" successfully rolled out"
    );
    assert_eq!(
        rollout(&ns, &["history", arg]).await.ok("history"),
        format!("{display} \nREVISION  CHANGE-CAUSE\n1         <none>\n2         image 3.9\n\n")
    );

    // Undo: the first template again, under a new revision number.
    assert_eq!(
        rollout(&ns, &["undo", arg]).await.ok("undo"),
        format!("{display} rolled back\n")
    );
    assert_eq!(
        image_of(&api.get("agent").await.unwrap().spec.template),
        Some(IMAGE)
    );
    let out = status_done(&ns, arg).await;
    assert_eq!(
        last_line(&out),
        "daemon set \"agent\" successfully rolled out"
    );
    let out = rollout(&ns, &["history", arg]).await.ok("history");
    assert_eq!(table_revisions(&out), vec![2, 3], "{out}");
    assert_eq!(
        rollout(&ns, &["undo", arg, "--to-revision=3"])
            .await
            .ok("undo to the current revision"),
        format!("{display} skipped rollback (current template already matches revision 3)\n")
    );

    // Restart rolls out revision 4.
    assert_eq!(
        rollout(&ns, &["restart", arg]).await.ok("restart"),
        format!("{display} restarted\n")
    );
    let out = status_done(&ns, arg).await;
    assert_eq!(
        last_line(&out),
        "daemon set \"agent\" successfully rolled out"
    );
    let out = rollout(&ns, &["history", arg]).await.ok("history");
    assert_eq!(table_revisions(&out), vec![2, 3, 4], "{out}");
    let out = rollout(&ns, &["history", arg, "--revision=4"])
        .await
        .ok("history --revision");
    assert!(out.contains(RESTARTED_AT), "{out}");
    manager.stop().await;
}

/// A ControllerRevision of `ds` as the DaemonSet controller writes it: the whole template (as the
/// server defaulted it) with `"$patch": "replace"`, here with `image`.
fn controller_revision(ds: &DaemonSetObject, revision: i64, image: &str) -> ControllerRevision {
    let name = ds.metadata.name.clone().unwrap();
    let mut template = ds.spec.template.clone();
    template.spec.as_mut().unwrap().containers[0].image = Some(image.into());
    let mut template = serde_json::to_value(template).unwrap();
    template["$patch"] = json!("replace");
    ControllerRevision {
        metadata: ObjectMeta {
            name: Some(format!("{name}-{revision}")),
            labels: Some(labels(&name)),
            annotations: (revision == 2).then(|| {
                BTreeMap::from([(
                    "kubernetes.io/change-cause".to_string(),
                    "image 3.10".to_string(),
                )])
            }),
            owner_references: Some(vec![OwnerReference {
                api_version: ds.types.as_ref().unwrap().api_version.clone(),
                kind: "DaemonSet".into(),
                name,
                uid: ds.metadata.uid.clone().unwrap(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..Default::default()
        },
        revision: Some(revision),
        data: RawExtension(json!({"spec": {"template": template}})),
    }
}

async fn daemon_set_commands(family: ApiFamily) {
    let ns = TestNamespace::create(plane(), &format!("rollout-ds-{}", family.label())).await;
    // The CRD copies must exist; no controller runs, so the test's objects stay as it writes them.
    mini_kcm_crds::install(&ns.client).await.unwrap();
    let (arg, display, resource) = daemon_set_names(family);
    let api = daemon_sets(&ns, family);
    let ds = create_daemon_set(&ns, family).await;

    // Nothing observed the DaemonSet yet.
    assert_eq!(
        rollout(&ns, &["status", arg, "--watch=false"])
            .await
            .ok("status --watch=false"),
        "Waiting for daemon set spec update to be observed...\n"
    );
    assert_eq!(
        rollout(&ns, &["history", arg]).await.ok("history"),
        format!("{display} \nNo rollout history found.\n")
    );
    let out = rollout(&ns, &["undo", arg])
        .await
        .fails("undo without history");
    assert_eq!(out.stderr, "error: no last revision to roll back to\n");

    // Two revisions, the current one second.
    let revisions: Api<ControllerRevision> = ns.api();
    for (revision, image) in [(1, NEW_IMAGE), (2, IMAGE)] {
        revisions
            .create(
                &PostParams::default(),
                &controller_revision(&ds, revision, image),
            )
            .await
            .unwrap();
    }
    assert_eq!(
        rollout(&ns, &["history", arg]).await.ok("history"),
        format!("{display} \nREVISION  CHANGE-CAUSE\n1         <none>\n2         image 3.10\n\n")
    );
    let out = rollout(&ns, &["history", arg, "--revision=1"])
        .await
        .ok("history --revision");
    assert!(
        out.starts_with(&format!("{display} with revision #1\nPod Template:\n")),
        "{out}"
    );
    assert!(out.contains(&format!("image: {NEW_IMAGE}")), "{out}");
    assert_eq!(
        rollout(&ns, &["undo", arg, "--to-revision=2"])
            .await
            .ok("undo to the current revision"),
        format!("{display} skipped rollback (current template already matches revision 2)\n")
    );
    assert_eq!(
        rollout(&ns, &["undo", arg]).await.ok("undo"),
        format!("{display} rolled back\n")
    );
    assert_eq!(
        image_of(&api.get("agent").await.unwrap().spec.template),
        Some(NEW_IMAGE)
    );

    // No pause for DaemonSets; restart stamps the template.
    let out = rollout(&ns, &["pause", arg]).await.fails("pause");
    assert_eq!(
        out.stderr,
        format!("error: {resource} \"agent\" pausing is not supported\n")
    );
    let out = rollout(&ns, &["resume", arg]).await.fails("resume");
    assert_eq!(
        out.stderr,
        format!("error: {resource} \"agent\" resuming is not supported\n")
    );
    assert_eq!(
        rollout(&ns, &["restart", arg]).await.ok("restart"),
        format!("{display} restarted\n")
    );
    let template = api.get("agent").await.unwrap().spec.template;
    let stamp = &template.metadata.unwrap().annotations.unwrap()[RESTARTED_AT];
    assert!(
        stamp.parse::<k8s_openapi::jiff::Timestamp>().is_ok(),
        "{stamp}"
    );
}
