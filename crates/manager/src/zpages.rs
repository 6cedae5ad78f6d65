//! kube-controller-manager's z-pages: `/flagz` and `/statusz` (ComponentFlagz and ComponentStatusz, beta
//! and on in Kubernetes 1.36) and `/configz`.
//!
//! `/flagz` and `/statusz` answer plain text by default, for people (upstream warns it is not meant to be
//! parsed, and picks a random `key: value` delimiter so nobody does). A client that wants data asks for
//! the `config.k8s.io` object by its Accept header, as upstream negotiates it:
//! `application/json;as=Flagz;g=config.k8s.io;v=v1beta1` (or `application/yaml`; `v1alpha1` still
//! works, with a deprecation Warning). Asking for JSON or YAML without naming the object, or for a type
//! neither serves, is 406 with a `Status` listing what is served.
//!
//! Where mini-kcm's answers differ from kube-controller-manager's, and why:
//! - the component name (the text's title, the objects' `metadata.name`) is `mini-kcm`;
//! - `/statusz`'s `goVersion` holds the Rust compiler that built the binary (the text says "Rust
//!   version"): there is no Go here, and the field is the one for the toolchain; `binaryVersion` is
//!   mini-kcm's version, `emulationVersion` the Kubernetes minor whose controllers it mirrors;
//! - the start time is the manager's process start in UTC (upstream prints the local zone);
//! - CBOR (behind upstream's alpha `CBORServingAndStorage` gate) is not served.
//!
//! `/configz` is kube-controller-manager's component config under its key
//! `kubecontrollermanager.config.k8s.io`, with upstream's field names for the settings mini-kcm has,
//! plus mini-kcm's own settings under `minikcm.dev`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::jiff::Timestamp;
use mini_kcm_runtime::switches::features::Feature;
use serde::Serialize;

use crate::leader_election::LeaderElectionConfig;
use crate::options::{Kinds, ManagerOptions};
use crate::version::{RUSTC_VERSION, VERSION};

/// The name the pages give the component.
pub(crate) const COMPONENT: &str = "mini-kcm";
/// The group of the structured `/flagz` and `/statusz` objects.
const GROUP: &str = "config.k8s.io";
/// The media types the two pages serve, in the order upstream's codecs list them (also the 406 message).
const SERVED: [&str; 3] = ["application/json", "application/yaml", "text/plain"];
/// `/configz`'s key for kube-controller-manager's configuration (upstream's `ConfigzName`).
const KCM_CONFIGZ_NAME: &str = "kubecontrollermanager.config.k8s.io";

/// What the z-pages report; fixed at start.
#[derive(Clone)]
pub(crate) struct Zpages {
    flags: BTreeMap<String, String>,
    /// Rendered once: upstream keeps its first text answer, so one process keeps one delimiter.
    flagz_text: String,
    started: SystemTime,
    /// The served paths, reduced to their first segment as upstream lists them.
    paths: Vec<String>,
    configz: serde_json::Value,
    /// The `ComponentFlagz` and `ComponentStatusz` gates: off, the path is not served (404).
    pub(crate) flagz_on: bool,
    pub(crate) statusz_on: bool,
}

impl Zpages {
    pub(crate) fn new(options: &ManagerOptions, started: SystemTime, served: &[&str]) -> Self {
        let flags = options.flags.clone();
        let mut flagz_text = header("flagz");
        let delimiter = delimiter();
        for (name, value) in &flags {
            let _ = writeln!(flagz_text, "{name}{delimiter}{value}");
        }
        let mut paths: Vec<String> = served
            .iter()
            .filter_map(|p| p.split('/').nth(1).filter(|s| !s.is_empty()))
            .map(|first| format!("/{first}"))
            .collect();
        paths.sort();
        paths.dedup();
        Zpages {
            flags,
            flagz_text,
            started,
            paths,
            configz: configz(options),
            flagz_on: options.feature_gates.enabled(Feature::ComponentFlagz),
            statusz_on: options.feature_gates.enabled(Feature::ComponentStatusz),
        }
    }

    pub(crate) fn flagz(&self, headers: &HeaderMap, query: Option<&str>) -> Response {
        match negotiate(headers, query, "Flagz") {
            Some(Answer::Text) => text(self.flagz_text.clone()),
            Some(Answer::Structured(form)) => form.write(
                "flagz",
                &Flagz {
                    kind: "Flagz",
                    api_version: form.api_version(),
                    metadata: Metadata { name: COMPONENT },
                    flags: &self.flags,
                },
            ),
            None => not_acceptable(),
        }
    }

    pub(crate) fn statusz(&self, headers: &HeaderMap, query: Option<&str>) -> Response {
        let started = Timestamp::try_from(self.started)
            .ok()
            .and_then(|t| Timestamp::from_second(t.as_second()).ok())
            .unwrap_or(Timestamp::UNIX_EPOCH);
        let uptime = SystemTime::now()
            .duration_since(self.started)
            .unwrap_or_default()
            .as_secs();
        let binary_version = VERSION.version;
        let emulation_version = emulation_version(VERSION.kubernetes_version);
        match negotiate(headers, query, "Statusz") {
            Some(Answer::Text) => {
                let d = delimiter();
                let mut body = header("statusz");
                let up = format!(
                    "{} hr {:02} min {:02} sec",
                    uptime / 3600,
                    (uptime / 60) % 60,
                    uptime % 60
                );
                let emulation = emulation_version
                    .as_deref()
                    .map(|v| format!("Emulation version{d} {v}"))
                    .unwrap_or_default();
                let paths = if self.paths.is_empty() {
                    String::new()
                } else {
                    format!("Paths{d} {}", self.paths.join(" "))
                };
                let _ = write!(
                    body,
                    "\nStarted{d} {}\nUp{d} {up}\nRust version{d} {RUSTC_VERSION}\n\
                     Binary version{d} {binary_version}\n{emulation}\n{paths}\n",
                    started.strftime("%a %b %e %H:%M:%S UTC %Y"),
                );
                text(body)
            }
            Some(Answer::Structured(form)) => form.write(
                "statusz",
                &Statusz {
                    kind: "Statusz",
                    api_version: form.api_version(),
                    metadata: Metadata { name: COMPONENT },
                    start_time: started.to_string(),
                    uptime_seconds: uptime,
                    go_version: RUSTC_VERSION,
                    binary_version,
                    emulation_version,
                    paths: &self.paths,
                },
            ),
            None => not_acceptable(),
        }
    }

    /// JSON whatever the Accept header says, as upstream's `/configz`.
    pub(crate) fn configz(&self) -> Response {
        match serde_json::to_vec(&self.configz) {
            Ok(body) => (
                [
                    (header::CONTENT_TYPE, "application/json"),
                    (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
                ],
                body,
            )
                .into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        }
    }
}

fn header(page: &str) -> String {
    format!(
        "\n{COMPONENT} {page}\nWarning: This endpoint is not meant to be machine parseable, has no \
         formatting compatibility guarantees and is for debugging purposes only.\n"
    )
}

/// One of upstream's delimiters, at random: the text is for people, not parsers.
fn delimiter() -> &'static str {
    const DELIMITERS: [&str; 4] = [":", ": ", "=", " "];
    DELIMITERS[rand::random_range(0..DELIMITERS.len())]
}

/// `1.37` of `v1.37.2`: the minor whose kube-controller-manager mini-kcm behaves like.
fn emulation_version(kubernetes: &str) -> Option<String> {
    let mut parts = kubernetes.trim_start_matches('v').split('.');
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some(format!("{major}.{minor}"))
}

fn text(body: String) -> Response {
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

#[derive(Serialize)]
struct Metadata {
    name: &'static str,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Flagz<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Metadata,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    flags: &'a BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Statusz<'a> {
    kind: &'static str,
    api_version: &'static str,
    metadata: Metadata,
    start_time: String,
    uptime_seconds: u64,
    go_version: &'static str,
    binary_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    emulation_version: Option<String>,
    paths: &'a [String],
}

/// What a request negotiated.
#[derive(Debug, PartialEq)]
enum Answer {
    Text,
    Structured(Form),
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct Form {
    yaml: bool,
    /// `v1alpha1` (deprecated) rather than `v1beta1`.
    alpha: bool,
    pretty: bool,
}

impl Form {
    fn api_version(self) -> &'static str {
        if self.alpha {
            "config.k8s.io/v1alpha1"
        } else {
            "config.k8s.io/v1beta1"
        }
    }

    fn write(self, page: &str, object: &impl Serialize) -> Response {
        let encoded = if self.yaml {
            serde_norway::to_string(object).map_err(|e| e.to_string())
        } else if self.pretty {
            serde_json::to_string_pretty(object).map_err(|e| e.to_string())
        } else {
            serde_json::to_string(object).map_err(|e| e.to_string())
        };
        let mut body = match encoded {
            Ok(body) => body,
            Err(e) => return (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        };
        if !body.ends_with('\n') {
            body.push('\n');
        }
        let content_type = if self.yaml { SERVED[1] } else { SERVED[0] };
        let mut response = ([(header::CONTENT_TYPE, content_type)], body).into_response();
        if self.alpha {
            let warning = format!(
                "299 - \"This version of the {page} endpoint is deprecated. Please use a newer version.\""
            );
            if let Ok(value) = HeaderValue::from_str(&warning) {
                response.headers_mut().insert(header::WARNING, value);
            }
        }
        response
    }
}

/// One clause of an Accept header.
struct Clause<'a> {
    kind: &'a str,
    sub: &'a str,
    q: f64,
    params: Vec<(&'a str, &'a str)>,
}

/// Parses an Accept header as upstream's negotiation does (goautoneg): malformed clauses are dropped,
/// the rest ordered by quality, then concrete types before wildcards.
fn clauses(accept: &str) -> Vec<Clause<'_>> {
    let mut clauses: Vec<Clause<'_>> = accept
        .split(',')
        .filter_map(|part| {
            let mut pieces = part.trim_matches(' ').split(';');
            let range = pieces.next()?;
            let (kind, sub) = match range.split_once('/') {
                Some((_, sub)) if sub.contains('/') => return None,
                Some((kind, sub)) => (kind.trim_matches(' '), sub.trim_matches(' ')),
                None if range.trim_matches(' ') == "*" => ("*", "*"),
                None => return None,
            };
            let mut clause = Clause {
                kind,
                sub,
                q: 1.0,
                params: Vec::new(),
            };
            for param in pieces {
                let Some((key, value)) = param.split_once('=') else {
                    continue;
                };
                if value.contains('=') {
                    continue;
                }
                let key = key.trim_matches(' ');
                if key == "q" {
                    clause.q = value.parse().unwrap_or(0.0);
                } else {
                    clause.params.push((key, value.trim_matches(' ')));
                }
            }
            Some(clause)
        })
        .collect();
    clauses.sort_by(|a, b| {
        b.q.total_cmp(&a.q)
            .then((a.kind == "*").cmp(&(b.kind == "*")))
            .then((a.sub == "*").cmp(&(b.sub == "*")))
    });
    clauses
}

/// Upstream's choice for `/flagz` and `/statusz`: no Accept header is text; otherwise the first clause
/// (by quality) that a served type matches and whose parameters that type allows: text only without a
/// conversion, JSON and YAML only as this page's `config.k8s.io` object. None: nothing fits (406).
fn negotiate(headers: &HeaderMap, query: Option<&str>, kind: &str) -> Option<Answer> {
    let accept = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if accept.trim().is_empty() {
        return Some(Answer::Text);
    }
    for clause in clauses(accept) {
        for served in SERVED {
            let (served_kind, served_sub) = served.split_once('/').unwrap_or((served, ""));
            let matches = (clause.kind == served_kind
                && (clause.sub == served_sub || clause.sub == "*"))
                || (clause.kind == "*" && clause.sub == "*");
            if matches && let Some(answer) = accepts(&clause, served, kind, headers, query) {
                return Some(answer);
            }
        }
    }
    None
}

/// Whether the clause's parameters fit `served` for this page's `kind`.
fn accepts(
    clause: &Clause<'_>,
    served: &str,
    kind: &str,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Option<Answer> {
    let (mut as_kind, mut group, mut version) = (None, None, None);
    let mut pretty = false;
    for &(key, value) in &clause.params {
        match key {
            "as" => as_kind = Some(value),
            "g" => group = Some(value),
            "v" => version = Some(value),
            "pretty" => pretty = value == "1",
            // Streams and server versions are not served here.
            "stream" | "sv" if !value.is_empty() => return None,
            _ => {}
        }
    }
    let converts = as_kind.is_some() || group.is_some() || version.is_some();
    if served == "text/plain" {
        return (!converts).then_some(Answer::Text);
    }
    if as_kind != Some(kind) || group != Some(GROUP) {
        return None;
    }
    let alpha = match version {
        Some("v1beta1") => false,
        Some("v1alpha1") => true,
        _ => return None,
    };
    Some(Answer::Structured(Form {
        yaml: served == "application/yaml",
        alpha,
        pretty: pretty || pretty_for(headers, query),
    }))
}

/// Upstream indents for `?pretty=true` and for the clients people type into (curl, wget, browsers).
fn pretty_for(headers: &HeaderMap, query: Option<&str>) -> bool {
    if let Some(pretty) = query
        .into_iter()
        .flat_map(|q| q.split('&'))
        .find_map(|pair| {
            pair.strip_prefix("pretty=")
                .filter(|v| !v.is_empty())
                .map(|v| matches!(v, "1" | "t" | "T" | "true" | "TRUE" | "True"))
        })
    {
        return pretty;
    }
    let agent = headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    ["curl", "Wget", "Mozilla/5.0"]
        .iter()
        .any(|p| agent.starts_with(p))
}

/// 406 with the API server's `Status` (reason `NotAcceptable`), always as JSON.
fn not_acceptable() -> Response {
    let status = serde_json::json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": format!("only the following media types are accepted: {}", SERVED.join(", ")),
        "reason": "NotAcceptable",
        "code": 406,
    });
    (
        StatusCode::NOT_ACCEPTABLE,
        [(header::CONTENT_TYPE, "application/json")],
        format!("{status}\n"),
    )
        .into_response()
}

/// Go's `time.Duration` text (`12h0m0s`, `15s`, `250ms`): upstream's config shows durations so.
pub(crate) fn go_duration(d: Duration) -> String {
    fn with_fraction(value: u128, unit: u128, digits: usize) -> String {
        let (whole, rest) = (value / unit, value % unit);
        if rest == 0 {
            return whole.to_string();
        }
        let fraction = format!("{rest:0digits$}");
        format!("{whole}.{}", fraction.trim_end_matches('0'))
    }
    let nanos = d.as_nanos();
    match nanos {
        0 => "0s".into(),
        1..1_000 => format!("{nanos}ns"),
        1_000..1_000_000 => format!("{}µs", with_fraction(nanos, 1_000, 3)),
        1_000_000..1_000_000_000 => format!("{}ms", with_fraction(nanos, 1_000_000, 6)),
        _ => {
            let secs = d.as_secs();
            let (hours, minutes) = (secs / 3600, (secs / 60) % 60);
            let seconds = with_fraction(nanos % 60_000_000_000, 1_000_000_000, 9);
            let mut out = String::new();
            if hours > 0 {
                let _ = write!(out, "{hours}h");
            }
            if hours > 0 || minutes > 0 {
                let _ = write!(out, "{minutes}m");
            }
            out + &seconds + "s"
        }
    }
}

/// kube-controller-manager's `KubeControllerManagerConfiguration` (v1alpha1 field names) for the
/// settings mini-kcm has, and mini-kcm's own settings beside it.
fn configz(options: &ManagerOptions) -> serde_json::Value {
    let election = options.leader_election.clone();
    let lease = election
        .clone()
        .unwrap_or_else(|| LeaderElectionConfig::new("kube-system", ""));
    let kinds = match options.kinds {
        Kinds::Apps => "apps",
        Kinds::Copies => "copies",
        Kinds::Both => "both",
    };
    serde_json::json!({
        KCM_CONFIGZ_NAME: {
            "kind": "KubeControllerManagerConfiguration",
            "apiVersion": "kubecontrollermanager.config.k8s.io/v1alpha1",
            "Generic": {
                "MinResyncPeriod": go_duration(options.min_resync_period),
                "ClientConnection": {
                    // What the informers ask for (pods and nodes; the rest and every write are JSON).
                    "contentType": options.kube_api_content_type.as_str(),
                    "qps": options.kube_api_qps,
                    "burst": options.kube_api_burst,
                },
                "LeaderElection": {
                    "leaderElect": election.is_some(),
                    "leaseDuration": go_duration(lease.lease_duration),
                    "renewDeadline": go_duration(lease.renew_deadline),
                    "retryPeriod": go_duration(lease.retry_period),
                    "resourceLock": "leases",
                    "resourceName": lease.lease_name,
                    "resourceNamespace": lease.lease_namespace,
                },
                "Controllers": options.controllers,
            },
            "DaemonSetController": {
                "ConcurrentDaemonSetSyncs": options.concurrent_daemonset_syncs,
            },
            "DeploymentController": {
                "ConcurrentDeploymentSyncs": options.concurrent_deployment_syncs,
            },
            "ReplicaSetController": {
                "ConcurrentRSSyncs": options.concurrent_replicaset_syncs,
            },
        },
        "minikcm.dev": {
            "kinds": kinds,
            "namespace": options.namespace.as_deref().unwrap_or(""),
            "decisionLog": options.decision_log,
            "workQueuePriorities": options.work_queue_priorities,
            "maxLowPriorityWait": go_duration(options.max_low_priority_wait),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
        headers
    }

    fn form(yaml: bool, alpha: bool) -> Option<Answer> {
        Some(Answer::Structured(Form {
            yaml,
            alpha,
            pretty: false,
        }))
    }

    #[test]
    fn negotiation_follows_upstreams_restrictions() {
        let answer = |value: &str| negotiate(&accept(value), None, "Flagz");
        assert_eq!(
            negotiate(&HeaderMap::new(), None, "Flagz"),
            Some(Answer::Text)
        );
        assert_eq!(answer("  "), Some(Answer::Text));
        assert_eq!(answer("text/plain"), Some(Answer::Text));
        assert_eq!(answer("*/*"), Some(Answer::Text));
        assert_eq!(answer("application/json, */*"), Some(Answer::Text));
        assert_eq!(
            answer("application/json;as=Flagz;g=config.k8s.io;v=v1beta1"),
            form(false, false)
        );
        assert_eq!(
            answer("application/yaml;v=v1alpha1;g=config.k8s.io;as=Flagz"),
            form(true, true)
        );
        // Quality orders the clauses.
        assert_eq!(
            answer("text/plain;q=0.5, application/json;as=Flagz;g=config.k8s.io;v=v1beta1"),
            form(false, false)
        );
        assert_eq!(
            answer("application/*;as=Flagz;g=config.k8s.io;v=v1beta1"),
            form(false, false)
        );
        // JSON without the object, another page's object, an unknown version, text with a conversion,
        // a type not served: 406.
        for refused in [
            "application/json",
            "application/json;as=Statusz;g=config.k8s.io;v=v1beta1",
            "application/json;as=Flagz;g=config.k8s.io;v=v1",
            "text/plain;as=Flagz;g=config.k8s.io;v=v1beta1",
            "text/html",
            "application/vnd.kubernetes.protobuf",
        ] {
            assert_eq!(answer(refused), None, "{refused}");
        }
    }

    #[test]
    fn go_durations() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_secs(12 * 3600), "12h0m0s"),
            (Duration::from_secs(15), "15s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_micros(1500), "1.5ms"),
        ] {
            assert_eq!(go_duration(d), text);
        }
    }

    #[test]
    fn emulation_version_is_the_mirrored_minor() {
        assert_eq!(emulation_version("v1.36.3").as_deref(), Some("1.36"));
        assert_eq!(emulation_version("unknown"), None);
    }
}
