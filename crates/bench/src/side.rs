//! The two sides of the comparison and how each controller process is started.
//!
//! Both get the same client limits (`--kube-api-qps`, `--kube-api-burst`), no leader election, the
//! default worker counts, and a kubeconfig of their own: the plane's admin kubeconfig plus an
//! impersonated user for the run, so the audit log attributes their requests (see `audit`). Upstream's
//! kube-controller-manager runs only the three controllers mini-kcm replaces and serves nothing
//! (`--secure-port=0`): readiness is shown by the probe objects instead, the same way for both sides.

use std::path::{Path, PathBuf};

use mini_kcm_local_plane::{ManagedProcess, PlaneInfo, REPLACED_CONTROLLERS};
use serde::Serialize;
use serde_json::{Value, json};

use crate::BenchError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    MiniKcm,
    Upstream,
    /// mini-kcm with `--decision-log=false`: the baseline that measures what the decision log costs.
    MiniKcmNoDecisionLog,
    /// Another mini-kcm executable (`--baseline-binary`): compares two builds (allocators, profiles,
    /// changes) in one invocation, because the plane's pace differs more between invocations than
    /// such builds differ.
    OtherMiniKcm,
    /// mini-kcm with `--work-queue-priorities=false`: its queue in client-go's FIFO order (the
    /// fresh-under-load scenario runs it beside the other two).
    MiniKcmNoPriority,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::MiniKcm => "mini-kcm",
            Side::Upstream => "upstream",
            Side::MiniKcmNoDecisionLog => "mini-kcm-no-decision-log",
            Side::OtherMiniKcm => "other-mini-kcm",
            Side::MiniKcmNoPriority => "mini-kcm-no-priority",
        }
    }
}

/// The client limits both sides get. `None`: effectively unthrottled (client-go reads a QPS of 0 as
/// its default of 5, so both sides get a limit far above what the plane can serve instead).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ClientLimits {
    pub qps: f32,
    pub burst: u32,
}

impl ClientLimits {
    pub const UNTHROTTLED: ClientLimits = ClientLimits {
        qps: 100_000.0,
        burst: 100_000,
    };

    pub fn describe(self) -> String {
        if self == Self::UNTHROTTLED {
            "unthrottled".into()
        } else {
            format!("QPS {}/{}", self.qps, self.burst)
        }
    }
}

/// Writes the plane's kubeconfig with every user impersonating `user` in `system:masters`.
pub(crate) fn write_impersonating_kubeconfig(
    plane: &PlaneInfo,
    user: &str,
    out: &Path,
) -> Result<(), BenchError> {
    let text = std::fs::read_to_string(&plane.kubeconfig)
        .map_err(|e| BenchError::io(format!("reading {}", plane.kubeconfig.display()), e))?;
    let mut config: Value = serde_norway::from_str(&text).map_err(|e| {
        BenchError::io(
            format!("parsing {}", plane.kubeconfig.display()),
            std::io::Error::other(e),
        )
    })?;
    impersonate(&mut config, user);
    // JSON is YAML: both kube-rs and client-go read it.
    let json = serde_json::to_string_pretty(&config)
        .map_err(|e| BenchError::io("encoding a kubeconfig", std::io::Error::other(e)))?;
    std::fs::write(out, json).map_err(|e| BenchError::io(format!("writing {}", out.display()), e))
}

fn impersonate(config: &mut Value, user: &str) {
    if let Some(users) = config.get_mut("users").and_then(Value::as_array_mut) {
        for entry in users {
            if let Some(auth) = entry.get_mut("user").and_then(Value::as_object_mut) {
                auth.insert("as".into(), json!(user));
                auth.insert("as-groups".into(), json!(["system:masters"]));
            }
        }
    }
}

/// What starting a side needs.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub mini_kcm_binary: PathBuf,
    /// The executable of the `OtherMiniKcm` side.
    pub other_mini_kcm_binary: Option<PathBuf>,
    pub kubeconfig: PathBuf,
    pub limits: ClientLimits,
    pub log: PathBuf,
}

/// The program and arguments of a side.
pub(crate) fn command(side: Side, plane: &PlaneInfo, launch: &Launch) -> (PathBuf, Vec<String>) {
    let qps = format!("--kube-api-qps={}", launch.limits.qps);
    let burst = format!("--kube-api-burst={}", launch.limits.burst);
    let kubeconfig = format!("--kubeconfig={}", launch.kubeconfig.display());
    let other = launch.other_mini_kcm_binary.as_ref();
    match side {
        Side::MiniKcm
        | Side::MiniKcmNoDecisionLog
        | Side::OtherMiniKcm
        | Side::MiniKcmNoPriority => (
            match (side, other) {
                (Side::OtherMiniKcm, Some(binary)) => binary.clone(),
                _ => launch.mini_kcm_binary.clone(),
            },
            [
                "run".into(),
                "--kinds=apps".into(),
                kubeconfig,
                qps,
                burst,
                "--leader-elect=false".into(),
                // Any free port: readiness is shown by the probe objects.
                "--metrics-addr=127.0.0.1:0".into(),
                format!("--decision-log={}", side != Side::MiniKcmNoDecisionLog),
            ]
            .into_iter()
            // Only this side names the flag, so an `other-mini-kcm` build without it still runs.
            .chain(
                (side == Side::MiniKcmNoPriority).then(|| "--work-queue-priorities=false".into()),
            )
            .collect(),
        ),
        Side::Upstream => (
            plane.bin_dir.join("kube-controller-manager"),
            vec![
                kubeconfig,
                format!("--controllers={}", REPLACED_CONTROLLERS.join(",")),
                qps,
                burst,
                "--leader-elect=false".into(),
                "--secure-port=0".into(),
            ],
        ),
    }
}

/// [`start`] with leader election on, on the Lease `lease` in `namespace` (upstream's Lease timing:
/// 15 s, 10 s, 2 s, the defaults of both sides).
pub(crate) fn start_leader_elected(
    side: Side,
    plane: &PlaneInfo,
    launch: &Launch,
    lease: &str,
    namespace: &str,
) -> Result<ManagedProcess, BenchError> {
    let (program, mut args) = command(side, plane, launch);
    args.retain(|a| a != "--leader-elect=false");
    args.extend([
        "--leader-elect=true".to_string(),
        format!("--leader-elect-resource-name={lease}"),
        format!("--leader-elect-resource-namespace={namespace}"),
    ]);
    spawn(side, &program, &args, launch)
}

pub(crate) fn start(
    side: Side,
    plane: &PlaneInfo,
    launch: &Launch,
) -> Result<ManagedProcess, BenchError> {
    let (program, args) = command(side, plane, launch);
    spawn(side, &program, &args, launch)
}

fn spawn(
    side: Side,
    program: &std::path::Path,
    args: &[String],
    launch: &Launch,
) -> Result<ManagedProcess, BenchError> {
    Ok(ManagedProcess::spawn(
        side.name(),
        program,
        args,
        &[],
        &launch.log,
    )?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impersonation_is_added_to_every_user() {
        let mut config: Value = serde_norway::from_str(
            "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: abc\n",
        )
        .unwrap();
        impersonate(&mut config, "minikcm-bench:x");
        assert_eq!(config["users"][0]["user"]["as"], "minikcm-bench:x");
        assert_eq!(config["users"][0]["user"]["as-groups"][0], "system:masters");
        assert_eq!(config["users"][0]["user"]["token"], "abc");
    }

    #[test]
    fn each_side_runs_its_own_executable_and_options() {
        let plane = PlaneInfo {
            state_dir: "/plane".into(),
            kubeconfig: "/plane/kubeconfig".into(),
            log_dir: "/plane/logs".into(),
            bin_dir: "/plane/bin".into(),
            server: "https://127.0.0.1:6443".into(),
            pids: Default::default(),
            ports: Default::default(),
            nodes: Vec::new(),
            kubernetes_version: "v1.36.3".into(),
            startup_seconds: 0.0,
            real_node: None,
        };
        let launch = Launch {
            mini_kcm_binary: "/a/mini-kcm".into(),
            other_mini_kcm_binary: Some("/b/mini-kcm".into()),
            kubeconfig: "/k".into(),
            limits: ClientLimits::UNTHROTTLED,
            log: "/log".into(),
        };
        let program = |side| command(side, &plane, &launch).0;
        assert_eq!(program(Side::MiniKcm), Path::new("/a/mini-kcm"));
        assert_eq!(
            program(Side::MiniKcmNoDecisionLog),
            Path::new("/a/mini-kcm")
        );
        assert_eq!(program(Side::OtherMiniKcm), Path::new("/b/mini-kcm"));
        assert_eq!(
            program(Side::Upstream),
            plane.bin_dir.join("kube-controller-manager")
        );
        let decision_log = |side| {
            command(side, &plane, &launch)
                .1
                .into_iter()
                .find(|a| a.starts_with("--decision-log="))
        };
        assert_eq!(
            decision_log(Side::MiniKcm).as_deref(),
            Some("--decision-log=true")
        );
        assert_eq!(
            decision_log(Side::OtherMiniKcm).as_deref(),
            Some("--decision-log=true")
        );
        assert_eq!(
            decision_log(Side::MiniKcmNoDecisionLog).as_deref(),
            Some("--decision-log=false")
        );
    }
}
