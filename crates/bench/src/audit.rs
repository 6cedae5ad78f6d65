//! API requests per client, counted where they arrive: the plane's audit log.
//!
//! The plane logs every request at metadata level (`PlaneInfo::audit_log`). Each controller process of
//! a benchmark run talks to the API server through a kubeconfig that impersonates a user of its own
//! (`minikcm-bench:<scenario>:<side>:<round>`), so its requests are told apart from those of the plane's
//! components (kwok, the scheduler, the plane's own kube-controller-manager, which sends the same
//! user agents as the upstream side) and from the benchmark's own client. Within a run, the user agent
//! names the client: mini-kcm sends `mini-kcm/v<version> (<identity>) <client>`, kube-controller-manager
//! `kube-controller-manager/<version> (<os>/<arch>) kubernetes/<commit>/<client>`.
//!
//! The log is followed while the benchmark runs ([`AuditTail`]), across the API server's rotation of the
//! file, and only complete requests are counted (stage `ResponseComplete` or `Panic`; a watch completes
//! when it ends).

use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The prefix of every impersonated user a benchmark run uses.
pub(crate) const BENCH_USER_PREFIX: &str = "minikcm-bench:";

/// Requests of one run: client name to `"<verb> <resource>"` to count.
pub(crate) type ClientRequests = BTreeMap<String, BTreeMap<String, u64>>;

/// One complete request of a benchmark run, as read from one audit log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CountedRequest {
    /// The impersonated user, i.e. which run sent it.
    pub user: String,
    pub client: String,
    pub verb: String,
    /// `pods`, `deployments/status`, or the path of a non-resource request such as `/apis`.
    pub resource: String,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AuditEvent {
    stage: String,
    verb: String,
    #[serde(default)]
    user_agent: String,
    #[serde(default, rename = "requestURI")]
    request_uri: String,
    impersonated_user: Option<UserInfo>,
    object_ref: Option<ObjectRef>,
}

#[derive(Deserialize)]
struct UserInfo {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize)]
struct ObjectRef {
    #[serde(default)]
    resource: String,
    #[serde(default)]
    subresource: String,
}

/// The request of an audit log line if it is a complete request of a benchmark run; `None` for every
/// other line (other users, intermediate stages, lines that are not audit events).
pub(crate) fn parse_line(line: &str) -> Option<CountedRequest> {
    // Most lines are the plane's own traffic: skip them before decoding.
    if !line.contains(BENCH_USER_PREFIX) {
        return None;
    }
    let event: AuditEvent = serde_json::from_str(line).ok()?;
    if event.stage != "ResponseComplete" && event.stage != "Panic" {
        return None;
    }
    let user = event.impersonated_user?.username;
    if !user.starts_with(BENCH_USER_PREFIX) {
        return None;
    }
    let resource = match event.object_ref {
        Some(object) if !object.resource.is_empty() => {
            if object.subresource.is_empty() {
                object.resource
            } else {
                format!("{}/{}", object.resource, object.subresource)
            }
        }
        _ => event
            .request_uri
            .split('?')
            .next()
            .unwrap_or_default()
            .to_string(),
    };
    Some(CountedRequest {
        user,
        client: client_name(&event.user_agent),
        verb: event.verb,
        resource,
    })
}

/// The client part of a user agent: what mini-kcm puts after `(<identity>) `, what client-go's
/// `AddUserAgent` appends as the last `/` segment after `kubernetes/<commit>`. A user agent of another
/// shape is kept whole.
pub(crate) fn client_name(user_agent: &str) -> String {
    let Some((_, rest)) = user_agent.split_once(") ") else {
        return user_agent.to_string();
    };
    match rest.strip_prefix("kubernetes/") {
        // `kubernetes/<commit>/<client>`, or the bare default user agent of the process.
        Some(after) => match after.split_once('/') {
            Some((_, client)) if !client.is_empty() => client.to_string(),
            _ => "(default)".to_string(),
        },
        None => rest.to_string(),
    }
}

/// Follows the audit log from where it was when created, counting benchmark requests per run user.
#[derive(Debug)]
pub(crate) struct AuditTail {
    path: PathBuf,
    file: Option<File>,
    inode: u64,
    /// The start of a line whose end has not been written yet.
    partial: Vec<u8>,
    counts: HashMap<String, ClientRequests>,
}

impl AuditTail {
    /// Starts at the current end of the log (or at its start once it appears).
    pub(crate) fn open_at_end(path: &Path) -> std::io::Result<Self> {
        let mut tail = AuditTail {
            path: path.to_path_buf(),
            file: None,
            inode: 0,
            partial: Vec::new(),
            counts: HashMap::new(),
        };
        if let Ok(mut file) = File::open(path) {
            tail.inode = file.metadata()?.ino();
            file.seek(SeekFrom::End(0))?;
            tail.file = Some(file);
        }
        Ok(tail)
    }

    /// Reads everything written since the last call. When the API server has rotated the log, the rest
    /// of the old file is read first, then the new one from its start.
    pub(crate) fn drain(&mut self) -> std::io::Result<()> {
        loop {
            if let Some(file) = self.file.as_mut() {
                let mut bytes = Vec::new();
                file.read_to_end(&mut bytes)?;
                self.consume(&bytes);
            }
            let current = match std::fs::metadata(&self.path) {
                Ok(metadata) => metadata.ino(),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
                Err(e) => return Err(e),
            };
            if self.file.is_some() && current == self.inode {
                return Ok(());
            }
            // Rotated (or first seen): the old file is read to its end, continue with the new one.
            self.partial.clear();
            let file = File::open(&self.path)?;
            self.inode = file.metadata()?.ino();
            self.file = Some(file);
        }
    }

    fn consume(&mut self, bytes: &[u8]) {
        self.partial.extend_from_slice(bytes);
        let Some(last_newline) = self.partial.iter().rposition(|b| *b == b'\n') else {
            return;
        };
        let rest = self.partial.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        for line in complete.split(|b| *b == b'\n') {
            let Ok(line) = std::str::from_utf8(line) else {
                continue;
            };
            if let Some(request) = parse_line(line) {
                add(&mut self.counts, request);
            }
        }
    }

    /// The requests counted so far for one run user.
    pub(crate) fn requests_of(&self, user: &str) -> ClientRequests {
        self.counts.get(user).cloned().unwrap_or_default()
    }
}

fn add(counts: &mut HashMap<String, ClientRequests>, request: CountedRequest) {
    let per_verb = counts
        .entry(request.user)
        .or_default()
        .entry(request.client)
        .or_default()
        .entry(format!("{} {}", request.verb, request.resource))
        .or_default();
    *per_verb = per_verb.saturating_add(1);
}

/// The verbs that change state.
pub(crate) fn is_write(verb: &str) -> bool {
    matches!(
        verb,
        "create" | "update" | "patch" | "delete" | "deletecollection"
    )
}

/// Total requests, and the writes among them, over all clients of a run.
pub(crate) fn totals(requests: &ClientRequests) -> (u64, u64) {
    let mut all = 0u64;
    let mut writes = 0u64;
    for (key, count) in requests.values().flatten() {
        all = all.saturating_add(*count);
        let verb = key.split(' ').next().unwrap_or_default();
        if is_write(verb) {
            writes = writes.saturating_add(*count);
        }
    }
    (all, writes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn line(stage: &str, user: Option<&str>, agent: &str, verb: &str, object: &str) -> String {
        let impersonated = user
            .map(|u| {
                format!(r#","impersonatedUser":{{"username":"{u}","groups":["system:masters"]}}"#)
            })
            .unwrap_or_default();
        format!(
            r#"{{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","stage":"{stage}","requestURI":"/apis/apps/v1/namespaces/n/deployments?watch=true","verb":"{verb}","user":{{"username":"admin","groups":["system:masters"]}}{impersonated},"userAgent":"{agent}"{object}}}"#
        )
    }

    const MINI: &str = "mini-kcm/v0.1.0 (host-1_ab12) replicaset-controller";
    const KCM: &str =
        "kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0f1e2d3/deployment-controller";

    #[test]
    fn client_names_of_both_sides() {
        assert_eq!(client_name(MINI), "replicaset-controller");
        assert_eq!(client_name(KCM), "deployment-controller");
        assert_eq!(
            client_name("kube-controller-manager/v1.36.3 (linux/amd64) kubernetes/0f1e2d3"),
            "(default)"
        );
        assert_eq!(client_name("curl/8.0"), "curl/8.0");
    }

    #[test]
    fn counts_complete_requests_of_bench_users_only() {
        let user = "minikcm-bench:scale-up:mini-kcm:1";
        let pods = r#","objectRef":{"resource":"pods","namespace":"n","apiVersion":"v1"}"#;
        let status =
            r#","objectRef":{"resource":"deployments","subresource":"status","namespace":"n"}"#;
        assert_eq!(
            parse_line(&line("ResponseComplete", Some(user), MINI, "create", pods)),
            Some(CountedRequest {
                user: user.into(),
                client: "replicaset-controller".into(),
                verb: "create".into(),
                resource: "pods".into(),
            })
        );
        let update = parse_line(&line("ResponseComplete", Some(user), KCM, "update", status));
        assert_eq!(update.unwrap().resource, "deployments/status");
        // A watch is logged when it starts too: only its completion counts.
        assert_eq!(
            parse_line(&line("ResponseStarted", Some(user), MINI, "watch", pods)),
            None
        );
        // The plane's own components do not impersonate.
        assert_eq!(
            parse_line(&line("ResponseComplete", None, KCM, "create", pods)),
            None
        );
        assert_eq!(
            parse_line(&line(
                "ResponseComplete",
                Some("someone"),
                MINI,
                "create",
                pods
            )),
            None
        );
        assert_eq!(parse_line("not json minikcm-bench:"), None);
        // Non-resource requests are keyed by path.
        let discovery = parse_line(&line("ResponseComplete", Some(user), KCM, "get", ""));
        assert_eq!(
            discovery.unwrap().resource,
            "/apis/apps/v1/namespaces/n/deployments"
        );
    }

    #[test]
    fn tail_follows_appends_partial_lines_and_rotation() {
        let dir = std::env::temp_dir().join(format!("bench-audit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("audit.log");
        let user = "minikcm-bench:daemonset:upstream:2";
        let pods = r#","objectRef":{"resource":"pods"}"#;
        let complete = line("ResponseComplete", Some(user), KCM, "create", pods);
        // Written before the tail opens: not counted.
        std::fs::write(&path, format!("{complete}\n")).unwrap();
        let mut tail = AuditTail::open_at_end(&path).unwrap();
        let mut file = File::options().append(true).open(&path).unwrap();
        let (head, rest) = complete.split_at(40);
        write!(file, "{complete}\n{head}").unwrap();
        tail.drain().unwrap();
        writeln!(file, "{rest}").unwrap();
        // Rotation: the old file is renamed, a new one is created.
        std::fs::rename(&path, dir.join("audit-old.log")).unwrap();
        std::fs::write(&path, format!("{complete}\n")).unwrap();
        tail.drain().unwrap();
        let requests = tail.requests_of(user);
        assert_eq!(requests["deployment-controller"]["create pods"], 3);
        assert_eq!(totals(&requests), (3, 3));
        assert!(tail.requests_of("minikcm-bench:other").is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
