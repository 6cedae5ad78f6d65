//! `mini-kcm run`: the controllers against a cluster, until SIGINT or SIGTERM.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, ValueEnum};
use mini_kcm_manager::LeaderElectionConfig;
use mini_kcm_manager::{
    AlwaysAllowPaths, ContentType, FeatureGates, Kinds, ManagerOptions, RequestHeaderAuth,
    SecureServing, ServingCert, feature_gates_help,
};
use tokio::signal::unix::{SignalKind, signal};

/// Which API families to manage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum KindsArg {
    /// apps/v1 (do not run beside kube-controller-manager's own workload controllers).
    Apps,
    /// The minikcm.dev CRD copies (safe beside kube-controller-manager).
    Copies,
    Both,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the in-cluster service account).
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// Which API families to manage.
    #[arg(long, value_enum, default_value_t = KindsArg::Copies)]
    kinds: KindsArg,
    /// Controllers to run, kube-controller-manager style: `*`, names, `-name` (e.g. `*,-replicaset`).
    #[arg(long, value_delimiter = ',', default_value = "*")]
    controllers: Vec<String>,
    /// Only manage objects in this namespace.
    #[arg(long)]
    namespace: Option<String>,
    #[arg(long, default_value_t = 5)]
    concurrent_replicaset_syncs: usize,
    #[arg(long, default_value_t = 5)]
    concurrent_deployment_syncs: usize,
    #[arg(long, default_value_t = 2)]
    concurrent_daemonset_syncs: usize,
    /// Threads that run the controllers. 1 (the default) runs everything on one thread, which costs the
    /// least CPU: the controllers wait on the API server far more than they compute, and a second thread
    /// mostly adds wake-ups between threads (docs/performance.md). 0: one per CPU.
    #[arg(long, default_value_t = 1)]
    pub threads: usize,
    /// Requests per second of each controller's client (0 = unlimited).
    #[arg(long, default_value_t = 20.0)]
    kube_api_qps: f32,
    /// Burst of each controller's client.
    #[arg(long, default_value_t = 30)]
    kube_api_burst: u32,
    /// What the informers ask the API server for, as kube-controller-manager's flag: protobuf for pods
    /// and nodes (the kinds nearly all listed and watched bytes are), or application/json for every
    /// kind. Other kinds and every write are JSON either way; a server that refuses protobuf gets JSON.
    #[arg(long, default_value = "application/vnd.kubernetes.protobuf")]
    kube_api_content_type: ContentType,
    /// Where to serve /metrics, /healthz, /readyz and /debug/controllers over plain HTTP, open to
    /// whoever can connect (keep it on loopback: `mini-kcm explain` reads it); empty: not at all.
    #[arg(long, default_value = "127.0.0.1:10280", value_parser = parse_optional_addr)]
    metrics_addr: OptionalAddr,
    /// The same endpoints over HTTPS, each request authenticated (TokenReview) and authorized
    /// (SubjectAccessReview) through the API server, as kube-controller-manager's secure port (10257
    /// there, and in deploy/in-cluster). 0: off.
    #[arg(long, default_value_t = 0)]
    secure_port: u16,
    /// The address the secure port listens on.
    #[arg(long, default_value = "0.0.0.0")]
    bind_address: std::net::IpAddr,
    /// The secure port's certificate (PEM, chain allowed); without it a self-signed one is made at start.
    #[arg(long, requires = "tls_private_key_file")]
    tls_cert_file: Option<PathBuf>,
    /// The key of --tls-cert-file (PEM).
    #[arg(long, requires = "tls_cert_file")]
    tls_private_key_file: Option<PathBuf>,
    /// Paths the secure port serves without authentication or authorization; a trailing `*` matches a
    /// prefix.
    #[arg(long, value_delimiter = ',', default_value = "/healthz,/readyz,/livez")]
    authorization_always_allow_paths: Vec<String>,
    /// Client certificates signed by a CA of this bundle (PEM) authenticate their requests on the secure
    /// port: the subject's CN is the user, its O's the groups (no TokenReview; still a
    /// SubjectAccessReview).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// The CA bundle (PEM) of front proxies: a client certificate it signed lets the request headers
    /// (--requestheader-username-headers, ...) name the user.
    #[arg(long)]
    requestheader_client_ca_file: Option<PathBuf>,
    /// The CNs a front proxy's certificate may have; empty: any the CA signed.
    #[arg(long, value_delimiter = ',')]
    requestheader_allowed_names: Vec<String>,
    /// Headers naming the user behind a front proxy (the first present wins).
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-User")]
    requestheader_username_headers: Vec<String>,
    /// Headers whose values are the user's groups behind a front proxy.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Group")]
    requestheader_group_headers: Vec<String>,
    /// Header prefixes whose headers (`<prefix><key>: <value>`) are the user's extras behind a front
    /// proxy.
    #[arg(long, value_delimiter = ',', default_value = "X-Remote-Extra-")]
    requestheader_extra_headers_prefix: Vec<String>,
    /// The informers re-deliver every object to the controllers every [period, 2 × period) (Go
    /// duration, e.g. 12h or 30m; 0 disables), as kube-controller-manager's flag.
    #[arg(long, default_value = "12h", value_parser = crate::duration::parse_go_duration)]
    min_resync_period: std::time::Duration,
    /// Keep each sync's decision (what it saw, decided and why) for /debug/controllers and `mini-kcm
    /// explain`; bounded memory (see docs/live-view.md).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    decision_log: bool,
    /// Hand out keys queued by live events before keys queued only by the informers' initial list, a
    /// relist or a resync, so a change made during a big initial sync is not queued behind it (a
    /// deliberate difference from kube-controller-manager's FIFO queues; docs/work-queue.md). false:
    /// one FIFO, as upstream.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    work_queue_priorities: bool,
    /// With --work-queue-priorities: how long a low-priority key may be passed over entirely by
    /// fresh ones before it gets every other hand-out (Go duration).
    #[arg(long, default_value = "5s", value_parser = crate::duration::parse_go_duration)]
    max_low_priority_wait: Duration,
    /// Feature gates, kube-controller-manager's syntax (`Name=true,Other=false`); `mini-kcm run --help`
    /// lists every gate the controllers consult. Gates of other controllers are accepted and ignored.
    #[arg(long, default_value = "", value_parser = parse_feature_gates, long_help = feature_gates_long_help())]
    feature_gates: FeatureGates,
    /// Elect a leader among replicas before running the controllers (kube-controller-manager's flag).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    leader_elect: bool,
    /// How long a standby waits after the leader's last observed renewal before taking over.
    #[arg(long, default_value = "15s", value_parser = crate::duration::parse_go_duration)]
    leader_elect_lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up (and the process exits).
    #[arg(long, default_value = "10s", value_parser = crate::duration::parse_go_duration)]
    leader_elect_renew_deadline: Duration,
    /// How long candidates wait between attempts to acquire or renew.
    #[arg(long, default_value = "2s", value_parser = crate::duration::parse_go_duration)]
    leader_elect_retry_period: Duration,
    /// The name of the Lease.
    #[arg(long, default_value = "mini-kcm")]
    leader_elect_resource_name: String,
    /// The namespace of the Lease (default: $POD_NAMESPACE, else kube-system).
    #[arg(long)]
    leader_elect_resource_namespace: Option<String>,
    /// Every flag's effective value, for `/flagz` (filled by `main` from the parsed command line).
    #[arg(skip)]
    pub flags: BTreeMap<String, String>,
}

impl RunArgs {
    pub fn manager_options(&self) -> ManagerOptions {
        let mut options = ManagerOptions {
            kinds: match self.kinds {
                KindsArg::Apps => Kinds::Apps,
                KindsArg::Copies => Kinds::Copies,
                KindsArg::Both => Kinds::Both,
            },
            controllers: self.controllers.clone(),
            namespace: self.namespace.clone(),
            concurrent_replicaset_syncs: self.concurrent_replicaset_syncs,
            concurrent_deployment_syncs: self.concurrent_deployment_syncs,
            concurrent_daemonset_syncs: self.concurrent_daemonset_syncs,
            kube_api_qps: self.kube_api_qps,
            kube_api_burst: self.kube_api_burst,
            kube_api_content_type: self.kube_api_content_type,
            metrics_addr: self.metrics_addr.0,
            secure_serving: self.secure_serving(),
            min_resync_period: self.min_resync_period,
            decision_log: self.decision_log,
            work_queue_priorities: self.work_queue_priorities,
            max_low_priority_wait: self.max_low_priority_wait,
            feature_gates: self.feature_gates.clone(),
            leader_election: None,
            flags: self.flags.clone(),
            ..Default::default()
        };
        if self.leader_elect {
            let namespace = self
                .leader_elect_resource_namespace
                .clone()
                .unwrap_or_else(|| {
                    std::env::var("POD_NAMESPACE")
                        .ok()
                        .filter(|ns| !ns.is_empty())
                        .unwrap_or_else(|| "kube-system".into())
                });
            let mut election = LeaderElectionConfig::new(namespace, options.identity.clone());
            election.lease_name = self.leader_elect_resource_name.clone();
            election.lease_duration = self.leader_elect_lease_duration;
            election.renew_deadline = self.leader_elect_renew_deadline;
            election.retry_period = self.leader_elect_retry_period;
            options.leader_election = Some(election);
        }
        options
    }
}

impl RunArgs {
    fn secure_serving(&self) -> Option<SecureServing> {
        if self.secure_port == 0 {
            return None;
        }
        let cert = match (&self.tls_cert_file, &self.tls_private_key_file) {
            (Some(cert), Some(key)) => ServingCert::Files {
                cert: cert.clone(),
                key: key.clone(),
            },
            _ => ServingCert::SelfSigned,
        };
        Some(SecureServing {
            addr: SocketAddr::new(self.bind_address, self.secure_port),
            cert,
            always_allow: AlwaysAllowPaths::new(self.authorization_always_allow_paths.clone()),
            client_ca_file: self.client_ca_file.clone(),
            request_header: self.requestheader_client_ca_file.as_ref().map(|ca| {
                RequestHeaderAuth {
                    allowed_names: self.requestheader_allowed_names.clone(),
                    username_headers: self.requestheader_username_headers.clone(),
                    group_headers: self.requestheader_group_headers.clone(),
                    extra_headers_prefix: self.requestheader_extra_headers_prefix.clone(),
                    ..RequestHeaderAuth::new(ca.clone())
                }
            }),
        })
    }
}

/// `--feature-gates`, refused with upstream's words.
pub(crate) fn parse_feature_gates(value: &str) -> Result<FeatureGates, String> {
    FeatureGates::parse(value).map_err(|e| e.to_string())
}

fn feature_gates_long_help() -> String {
    format!(
        "{}\n(Gates of kube-controller-manager's other controllers are accepted and ignored.)",
        feature_gates_help()
    )
}

/// The effective value of every flag of `command` (the `run` subcommand as parsed, global flags
/// included) by its long name: as given, else its default, else empty (as upstream's `/flagz` lists an
/// unset flag); several values joined by commas. Clap keeps the text, so values read as typed (`12h`).
pub fn effective_flags(
    command: &clap::Command,
    matches: &clap::ArgMatches,
) -> BTreeMap<String, String> {
    command
        .get_arguments()
        .filter(|arg| {
            !matches!(
                arg.get_action(),
                clap::ArgAction::Help
                    | clap::ArgAction::HelpShort
                    | clap::ArgAction::HelpLong
                    | clap::ArgAction::Version
            )
        })
        .filter_map(|arg| {
            let name = arg.get_long()?;
            let value = matches
                .try_get_raw(arg.get_id().as_str())
                .ok()
                .flatten()
                .map(|values| {
                    values
                        .map(|v| v.to_string_lossy().into_owned())
                        .collect::<Vec<_>>()
                        .join(",")
                })
                .unwrap_or_default();
            Some((name.to_string(), value))
        })
        .collect()
}

/// `--metrics-addr`: an address, or nothing when empty.
#[derive(Debug, Clone, Copy)]
pub struct OptionalAddr(Option<SocketAddr>);

fn parse_optional_addr(value: &str) -> Result<OptionalAddr, String> {
    if value.trim().is_empty() {
        return Ok(OptionalAddr(None));
    }
    value
        .parse()
        .map(|addr| OptionalAddr(Some(addr)))
        .map_err(|e| format!("{e} (expected IP:PORT, or empty for none)"))
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = crate::kubeconfig::load(args.kubeconfig.as_deref()).await?;
    let mut sigint = signal(SignalKind::interrupt())?;
    let mut sigterm = signal(SignalKind::terminate())?;
    let shutdown = async move {
        tokio::select! {
            _ = sigint.recv() => {},
            _ = sigterm.recv() => {},
        }
    };
    mini_kcm_manager::run(config, args.manager_options(), shutdown).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leader_election_is_on_by_default_with_upstreams_timing() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let options = Cli::parse_from(["run"]).run.manager_options();
        let election = options.leader_election.unwrap();
        assert_eq!(election.lease_duration, Duration::from_secs(15));
        assert_eq!(election.renew_deadline, Duration::from_secs(10));
        assert_eq!(election.retry_period, Duration::from_secs(2));
        assert_eq!(election.lease_name, "mini-kcm");
        assert_eq!(election.identity, options.identity);
        let off = Cli::parse_from(["run", "--leader-elect=false"])
            .run
            .manager_options();
        assert!(off.leader_election.is_none());
    }

    #[test]
    fn work_queue_priorities_are_on_by_default_and_can_be_turned_off() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let options = Cli::parse_from(["run"]).run.manager_options();
        assert!(options.work_queue_priorities);
        assert_eq!(options.max_low_priority_wait, Duration::from_secs(5));
        let options = Cli::parse_from(["run", "--max-low-priority-wait=250ms"])
            .run
            .manager_options();
        assert_eq!(options.max_low_priority_wait, Duration::from_millis(250));
        let off = Cli::parse_from(["run", "--work-queue-priorities=false"])
            .run
            .manager_options();
        assert!(!off.work_queue_priorities);
    }

    /// The plain listener on loopback and no secure port by default; the manifests' flags give the
    /// secure port with a self-signed certificate and the probes open, and no plain listener.
    #[test]
    fn serving_flags() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let options = Cli::parse_from(["run"]).run.manager_options();
        assert_eq!(
            options.metrics_addr,
            Some("127.0.0.1:10280".parse().unwrap())
        );
        assert!(options.secure_serving.is_none());

        let options = Cli::parse_from(["run", "--secure-port=10257", "--metrics-addr="])
            .run
            .manager_options();
        assert_eq!(options.metrics_addr, None);
        let secure = options.secure_serving.unwrap();
        assert_eq!(secure.addr, "0.0.0.0:10257".parse().unwrap());
        assert_eq!(secure.cert, ServingCert::SelfSigned);
        assert_eq!(secure.always_allow, AlwaysAllowPaths::default());
        assert_eq!((secure.client_ca_file, secure.request_header), (None, None));

        let options = Cli::parse_from([
            "run",
            "--secure-port=8443",
            "--bind-address=127.0.0.1",
            "--tls-cert-file=/c",
            "--tls-private-key-file=/k",
            "--authorization-always-allow-paths=/healthz,/debug/*",
        ])
        .run
        .manager_options();
        let secure = options.secure_serving.unwrap();
        assert_eq!(secure.addr, "127.0.0.1:8443".parse().unwrap());
        assert_eq!(
            secure.cert,
            ServingCert::Files {
                cert: "/c".into(),
                key: "/k".into()
            }
        );
        assert_eq!(
            secure.always_allow,
            AlwaysAllowPaths::new(["/healthz".into(), "/debug/*".into()])
        );
        // A certificate without its key is refused.
        assert!(Cli::try_parse_from(["run", "--tls-cert-file=/c"]).is_err());

        // Client certificates, and a front proxy with upstream's default headers.
        let options = Cli::parse_from([
            "run",
            "--secure-port=10257",
            "--client-ca-file=/ca",
            "--requestheader-client-ca-file=/proxy-ca",
            "--requestheader-allowed-names=front-proxy-client,aggregator",
        ])
        .run
        .manager_options();
        let secure = options.secure_serving.unwrap();
        assert_eq!(secure.client_ca_file, Some("/ca".into()));
        assert_eq!(
            secure.request_header,
            Some(RequestHeaderAuth {
                allowed_names: vec!["front-proxy-client".into(), "aggregator".into()],
                ..RequestHeaderAuth::new("/proxy-ca".into())
            })
        );
        // The header flags alone configure nothing (as upstream, without the proxies' CA).
        let options = Cli::parse_from([
            "run",
            "--secure-port=10257",
            "--requestheader-username-headers=X-User,X-Remote-User",
            "--requestheader-group-headers=X-Group",
            "--requestheader-extra-headers-prefix=X-Extra-",
        ])
        .run
        .manager_options();
        assert_eq!(options.secure_serving.unwrap().request_header, None);
        let options = Cli::parse_from([
            "run",
            "--secure-port=10257",
            "--requestheader-client-ca-file=/p",
            "--requestheader-username-headers=X-User,X-Remote-User",
            "--requestheader-group-headers=X-Group",
            "--requestheader-extra-headers-prefix=X-Extra-",
        ])
        .run
        .manager_options();
        let header = options.secure_serving.unwrap().request_header.unwrap();
        assert_eq!(header.username_headers, ["X-User", "X-Remote-User"]);
        assert_eq!(header.group_headers, ["X-Group"]);
        assert_eq!(header.extra_headers_prefix, ["X-Extra-"]);
        assert!(header.allowed_names.is_empty());
    }

    #[test]
    fn feature_gates_flag() {
        use clap::Parser;
        use mini_kcm_runtime::switches::features::Feature;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            run: RunArgs,
        }
        let options = Cli::parse_from(["run"]).run.manager_options();
        assert_eq!(options.feature_gates, FeatureGates::default());
        let options = Cli::parse_from([
            "run",
            "--feature-gates=TaintTolerationComparisonOperators=true,WatchListClient=false",
        ])
        .run
        .manager_options();
        assert!(
            options
                .feature_gates
                .enabled(Feature::TaintTolerationComparisonOperators)
        );
        assert!(!options.feature_gates.enabled(Feature::WatchListClient));
        let refused = Cli::try_parse_from(["run", "--feature-gates=LogarithmicScaleDown=true"])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            refused.contains("unrecognized feature gate: LogarithmicScaleDown"),
            "{refused}"
        );
    }
}
