//! `mini-kcm rollout`: kubectl's rollout commands (`status`, `history`, `undo`, `pause`, `resume`,
//! `restart`) for Deployments and DaemonSets of both families, `apps/v1` and the `minikcm.dev/v1`
//! copies (which kubectl's rollout commands do not know).
//!
//! Output and error texts are kubectl's (v0.36 `pkg/cmd/rollout` and `pkg/polymorphichelpers`), so a
//! script written against `kubectl rollout` reads ours; where kubectl names itself in a hint we name
//! `mini-kcm rollout`. The modules:
//! - [`resource`]: the `TYPE/NAME` argument;
//! - [`status`]: status messages and the watch;
//! - [`history`]: revisions of a Deployment (ReplicaSets) or DaemonSet (ControllerRevisions);
//! - [`undo`]: the rollback target and its patch;
//! - [`patches`]: pause, resume and restart.
//!
//! The decisions are pure functions (unit-tested against kubectl's own test tables); this module only
//! fetches, patches and prints.

mod history;
mod patches;
mod resource;
mod status;
mod undo;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{ArgAction, Args, Subcommand};
use k8s_openapi::serde_json::Value;
use kube::api::{DynamicObject, Patch, PatchParams};
use kube::{Api, Client};
use mini_kcm_deployment::LAST_APPLIED_CONFIG_ANNOTATION;
use mini_kcm_runtime::api::kinds::{DaemonSetObject, DeploymentObject};

use resource::{RolloutKind, Target};
use undo::Rollback;

/// The field manager of our writes (kubectl's is `kubectl-rollout`).
const FIELD_MANAGER: &str = "mini-kcm-rollout";

#[derive(Debug, Args)]
pub struct RolloutArgs {
    #[command(subcommand)]
    verb: Verb,
    /// Namespace of the object (default: the kubeconfig context's namespace, or `default`).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long, global = true)]
    kubeconfig: Option<PathBuf>,
}

/// The object a verb acts on.
#[derive(Debug, Args)]
struct ObjectArg {
    /// TYPE/NAME, or TYPE followed by NAME. Types: deployment (deploy), daemonset (ds) for apps/v1;
    /// deployments.minikcm.dev (mdeploy), daemonsets.minikcm.dev (mds) for the copies.
    resource: String,
    /// The name, when TYPE is given alone.
    name: Option<String>,
}

#[derive(Debug, Subcommand)]
enum Verb {
    /// Show the status of the rollout, watching until it is done.
    Status {
        #[command(flatten)]
        object: ObjectArg,
        /// Watch the status of the rollout until it's done (`--watch=false`: print it once).
        #[arg(
            short = 'w',
            long,
            action = ArgAction::Set,
            num_args = 0..=1,
            require_equals = true,
            default_value_t = true,
            default_missing_value = "true"
        )]
        watch: bool,
        /// Pin to a specific revision for showing its status (Deployments). 0: the latest.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        revision: i64,
        /// How long to watch before giving up (e.g. 30s, 5m, 1h); 0 means never.
        #[arg(long, default_value = "0", value_parser = crate::duration::parse_go_duration)]
        timeout: Duration,
    },
    /// Show the rollout history: revisions and change causes, or one revision's pod template.
    History {
        #[command(flatten)]
        object: ObjectArg,
        /// Show the pod template of this revision.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        revision: i64,
    },
    /// Roll back to a previous revision.
    Undo {
        #[command(flatten)]
        object: ObjectArg,
        /// The revision to roll back to. 0: the one before the current revision.
        #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
        to_revision: i64,
    },
    /// Pause a Deployment: template changes do not roll out until it is resumed.
    Pause(ObjectArg),
    /// Resume a paused Deployment.
    Resume(ObjectArg),
    /// Restart the pods: stamp the pod template with the time, which rolls out a new revision.
    Restart(ObjectArg),
}

/// Runs a rollout command and prints its error the way kubectl does.
pub async fn run(args: RolloutArgs) -> ExitCode {
    match execute(args).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{}", error_text(&e));
            ExitCode::FAILURE
        }
    }
}

async fn execute(args: RolloutArgs) -> anyhow::Result<()> {
    // Malformed arguments are reported before any cluster is contacted.
    let (object, revision) = match &args.verb {
        Verb::Status {
            object, revision, ..
        }
        | Verb::History { object, revision } => (object, *revision),
        Verb::Undo { object, .. }
        | Verb::Pause(object)
        | Verb::Resume(object)
        | Verb::Restart(object) => (object, 0),
    };
    let target = object.target()?;
    if revision < 0 {
        bail!("revision must be a positive integer: {revision}");
    }
    let (client, default_namespace) = connect(args.kubeconfig.as_deref()).await?;
    let namespace = args.namespace.unwrap_or(default_namespace);
    let ctx = Ctx { client, namespace };
    match args.verb {
        Verb::Status { watch, timeout, .. } => {
            let timeout = (!timeout.is_zero()).then_some(timeout);
            ctx.status(&target, watch, revision, timeout).await
        }
        Verb::History { .. } => ctx.history(&target, revision).await,
        Verb::Undo { to_revision, .. } => ctx.undo(&target, to_revision).await,
        Verb::Pause(_) => ctx.pause(&target).await,
        Verb::Resume(_) => ctx.resume(&target).await,
        Verb::Restart(_) => ctx.restart(&target).await,
    }
}

impl ObjectArg {
    fn target(&self) -> anyhow::Result<Target> {
        Target::parse(&self.resource, self.name.as_deref())
    }
}

/// A client and the kubeconfig's namespace (its context's, or `default`; in a pod, the pod's).
async fn connect(kubeconfig: Option<&Path>) -> anyhow::Result<(Client, String)> {
    let config = crate::kubeconfig::load(kubeconfig).await?;
    let namespace = config.default_namespace.clone();
    Ok((Client::try_from(config)?, namespace))
}

/// What every verb needs: the client and the namespace of the object.
struct Ctx {
    client: Client,
    namespace: String,
}

/// The fetched object of a verb.
enum Workload {
    Deployment(Box<DeploymentObject>),
    DaemonSet(Box<DaemonSetObject>),
}

impl Workload {
    fn template_annotation(&self, key: &str) -> Option<&str> {
        let template = match self {
            Workload::Deployment(d) => &d.spec.template,
            Workload::DaemonSet(ds) => &ds.spec.template,
        };
        template
            .metadata
            .as_ref()?
            .annotations
            .as_ref()?
            .get(key)
            .map(String::as_str)
    }

    fn paused(&self) -> Option<bool> {
        match self {
            Workload::Deployment(d) => d.spec.paused,
            Workload::DaemonSet(_) => None,
        }
    }
}

impl Ctx {
    fn api<K>(&self, target: &Target) -> Api<K>
    where
        K: kube::Resource<
                DynamicType = kube::discovery::ApiResource,
                Scope = kube::core::DynamicResourceScope,
            >,
    {
        Api::namespaced_with(self.client.clone(), &self.namespace, &target.api_resource())
    }

    /// GETs the object first, as kubectl does, so a missing one fails with the server's NotFound.
    async fn get(&self, target: &Target) -> anyhow::Result<Workload> {
        Ok(match target.kind {
            RolloutKind::Deployment => Workload::Deployment(Box::new(
                self.api::<DeploymentObject>(target)
                    .get(&target.name)
                    .await?,
            )),
            RolloutKind::DaemonSet => Workload::DaemonSet(Box::new(
                self.api::<DaemonSetObject>(target)
                    .get(&target.name)
                    .await?,
            )),
        })
    }

    async fn status(
        &self,
        target: &Target,
        watch: bool,
        revision: i64,
        timeout: Option<Duration>,
    ) -> anyhow::Result<()> {
        self.get(target).await?;
        match target.kind {
            RolloutKind::Deployment => {
                status::watch_until_done(
                    &self.api::<DeploymentObject>(target),
                    &target.name,
                    watch,
                    timeout,
                    |d| status::deployment_status(d, revision),
                )
                .await
            }
            RolloutKind::DaemonSet => {
                status::watch_until_done(
                    &self.api::<DaemonSetObject>(target),
                    &target.name,
                    watch,
                    timeout,
                    status::daemon_set_status,
                )
                .await
            }
        }
    }

    async fn history(&self, target: &Target, revision: i64) -> anyhow::Result<()> {
        let revisions = match self.get(target).await? {
            Workload::Deployment(d) => {
                let rss = history::owned_replica_sets(&self.client, target.family, &d).await?;
                history::deployment_revisions(&rss)
            }
            Workload::DaemonSet(ds) => {
                let crs = history::owned_controller_revisions(&self.client, &ds).await?;
                history::daemon_set_revisions(&ds, &crs)?
            }
        };
        print!(
            "{}",
            history::render(&target.display(), &revisions, revision)?
        );
        Ok(())
    }

    async fn undo(&self, target: &Target, to_revision: i64) -> anyhow::Result<()> {
        let workload = self.get(target).await?;
        let annotations = match &workload {
            Workload::Deployment(d) => &d.metadata.annotations,
            Workload::DaemonSet(ds) => &ds.metadata.annotations,
        };
        if annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(LAST_APPLIED_CONFIG_ANNOTATION))
        {
            eprintln!(
                "Warning: resource {}/{} was previously managed with 'kubectl apply'. Rolling back \
                 will not update the {LAST_APPLIED_CONFIG_ANNOTATION} annotation, which may cause \
                 unexpected behavior on future 'kubectl apply' operations. Consider using 'kubectl \
                 apply' with your previous configuration file instead.",
                target.resource_group(),
                target.name
            );
        }
        let plan = match &workload {
            Workload::Deployment(d) => {
                let rss = history::owned_replica_sets(&self.client, target.family, d).await?;
                undo::plan_deployment_rollback(d, &rss, to_revision)?
            }
            Workload::DaemonSet(ds) => {
                let crs = history::owned_controller_revisions(&self.client, ds).await?;
                undo::plan_daemon_set_rollback(ds, &crs, to_revision)?
            }
        };
        match plan {
            Rollback::Skip(message) => println!("{} {message}", target.display()),
            Rollback::Patch(patch) => {
                self.api::<DynamicObject>(target)
                    .patch(&target.name, &patch_params(), &Patch::<()>::Json(patch))
                    .await
                    .with_context(|| format!("failed restoring revision {to_revision}"))?;
                println!("{} {}", target.display(), undo::ROLLED_BACK);
            }
        }
        Ok(())
    }

    async fn pause(&self, target: &Target) -> anyhow::Result<()> {
        let workload = self.get(target).await?;
        let patch = patches::pause(target, workload.paused())?;
        self.merge_patch(target, &patch, "paused").await
    }

    async fn resume(&self, target: &Target) -> anyhow::Result<()> {
        let workload = self.get(target).await?;
        let patch = patches::resume(target, workload.paused())?;
        self.merge_patch(target, &patch, "resumed").await
    }

    async fn restart(&self, target: &Target) -> anyhow::Result<()> {
        let workload = self.get(target).await?;
        let patch = patches::restart(
            target,
            workload.paused(),
            workload.template_annotation(patches::RESTARTED_AT_ANNOTATION),
            &patches::now_rfc3339(),
        )?;
        self.merge_patch(target, &patch, "restarted").await
    }

    /// Sends a JSON merge patch and prints `<object> <done>` like kubectl's name printer.
    async fn merge_patch(&self, target: &Target, patch: &Value, done: &str) -> anyhow::Result<()> {
        self.api::<DynamicObject>(target)
            .patch(&target.name, &patch_params(), &Patch::Merge(patch))
            .await
            .context("failed to patch")?;
        println!("{} {done}", target.display());
        Ok(())
    }
}

fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_string()),
        ..Default::default()
    }
}

/// kubectl's error line (`cmdutil.CheckErr`): API errors as `Error from server (Reason): message`,
/// everything else prefixed with `error: ` unless it already is.
fn error_text(e: &anyhow::Error) -> String {
    let mut causes = e.chain();
    if let Some(kube::Error::Api(status)) =
        causes.next().and_then(|c| c.downcast_ref::<kube::Error>())
    {
        return match status.reason.as_str() {
            "Unauthorized" => format!(
                "error: You must be logged in to the server ({})",
                status.message
            ),
            "" => format!("Error from server: {}", status.message),
            reason => format!("Error from server ({reason}): {}", status.message),
        };
    }
    // Context, then causes; an API error below the context contributes its message only (kube's
    // rendering repeats it with the whole Status).
    let mut parts = Vec::new();
    for cause in e.chain() {
        if let Some(kube::Error::Api(status)) = cause.downcast_ref::<kube::Error>() {
            parts.push(status.message.clone());
            break;
        }
        let text = cause.to_string();
        // Many errors (kube's among them) already print their source; say it once.
        if !parts
            .last()
            .is_some_and(|last: &String| last.contains(&text))
        {
            parts.push(text);
        }
    }
    let text = parts.join(": ");
    if text.starts_with("error: ") {
        text
    } else {
        format!("error: {text}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Command {
        Rollout(RolloutArgs),
    }

    fn parse(args: &[&str]) -> RolloutArgs {
        let argv = ["mini-kcm", "rollout"].iter().chain(args);
        match Cli::try_parse_from(argv) {
            Ok(Cli {
                command: Command::Rollout(args),
            }) => args,
            Err(e) => panic!("{args:?}: {e}"),
        }
    }

    #[test]
    fn status_flags_like_kubectl() {
        let args = parse(&[
            "status",
            "deploy/web",
            "-n",
            "ns",
            "--watch=false",
            "--timeout=90s",
        ]);
        assert_eq!(args.namespace.as_deref(), Some("ns"));
        match args.verb {
            Verb::Status {
                object,
                watch,
                revision,
                timeout,
            } => {
                assert_eq!(object.resource, "deploy/web");
                assert!(!watch);
                assert_eq!(revision, 0);
                assert_eq!(timeout, Duration::from_secs(90));
            }
            other => panic!("{other:?}"),
        }
        // Defaults: watch, no timeout; the namespace may come before the verb.
        let args = parse(&["-n", "ns", "status", "mds", "agent", "-w"]);
        assert_eq!(args.namespace.as_deref(), Some("ns"));
        match args.verb {
            Verb::Status {
                object,
                watch,
                timeout,
                ..
            } => {
                assert_eq!(object.name.as_deref(), Some("agent"));
                assert!(watch);
                assert_eq!(timeout, Duration::ZERO);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn undo_and_history_flags() {
        match parse(&["undo", "mdeploy/web", "--to-revision", "2"]).verb {
            Verb::Undo { to_revision, .. } => assert_eq!(to_revision, 2),
            other => panic!("{other:?}"),
        }
        match parse(&["history", "deployments.minikcm.dev/web", "--revision=3"]).verb {
            Verb::History { revision, .. } => assert_eq!(revision, 3),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse(&["restart", "ds/agent"]).verb,
            Verb::Restart(_)
        ));
    }

    #[test]
    fn errors_print_like_kubectl() {
        let not_found = kube::Error::Api(Box::new(kube::core::Status {
            message: "deployments.apps \"web\" not found".into(),
            reason: "NotFound".into(),
            code: 404,
            ..Default::default()
        }));
        assert_eq!(
            error_text(&not_found.into()),
            "Error from server (NotFound): deployments.apps \"web\" not found"
        );
        let conflict = kube::Error::Api(Box::new(kube::core::Status {
            message: "the object has been modified".into(),
            reason: "Conflict".into(),
            code: 409,
            ..Default::default()
        }));
        assert_eq!(
            error_text(&anyhow::Error::from(conflict).context("failed to patch")),
            "error: failed to patch: the object has been modified"
        );
        assert_eq!(
            error_text(&anyhow::anyhow!(
                "deployment \"web\" exceeded its progress deadline"
            )),
            "error: deployment \"web\" exceeded its progress deadline"
        );
        assert_eq!(
            error_text(&anyhow::anyhow!(
                "error: deployments.apps \"web\" is already paused"
            )),
            "error: deployments.apps \"web\" is already paused"
        );
    }
}
