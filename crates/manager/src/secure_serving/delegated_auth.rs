//! Who may read the secure port: kube-controller-manager's delegated authentication and authorization.
//!
//! The manager keeps no credentials and no policy of its own. A request's bearer token is checked by the
//! API server (a TokenReview), and what the user it names may do by a SubjectAccessReview on the
//! request's non-resource path and verb (`get /metrics`), so the cluster's RBAC decides:
//! `mini-kcm-metrics-reader` grants `/metrics`, `mini-kcm-debug-viewer` grants `/debug/*`.
//! A client certificate (`super::client_cert`) can name the user instead of a token.
//!
//! The user is found as upstream's union of authenticators finds it: a trusted front proxy's headers,
//! then a client certificate, then a bearer token; the first that names a user wins, the others'
//! failures then do not matter. If none names one and one failed, 401; if none applied, the request is
//! `system:anonymous`.
//!
//! As on kube-controller-manager: a request without credentials is `system:anonymous` (which RBAC
//! usually refuses: 403), a token the API server rejects is 401, `system:masters` needs no review, and the
//! `--authorization-always-allow-paths` (the probes, by default) need no credentials at all, so a
//! kubelet's probe never waits on the API server. Answers are kept for 10 s, as client-go's delegating
//! authenticator and authorizer keep theirs: a scrape every few seconds costs the API server nothing,
//! and a revoked token or role stops working within 10 s.

use std::collections::HashMap;
use std::future::Future;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

use axum::http::{HeaderMap, header};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use tokio::time::Instant;

use super::client_cert::{ClientCerts, PeerIdentity};
use super::user::User;

/// How long an answer of the API server is reused (client-go's delegating defaults, both ways).
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Entries per cache; past it, expired entries go first, then everything (a flood of distinct tokens
/// must not grow the manager).
const CACHE_CAPACITY: usize = 4096;
/// The group that is allowed everything without a SubjectAccessReview (kube-controller-manager's
/// `AlwaysAllowGroups`).
const PRIVILEGED_GROUP: &str = "system:masters";

/// Paths served to anyone: exact paths, or prefixes written with a trailing `*` (`/debug/*`), as
/// kube-controller-manager's `--authorization-always-allow-paths`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlwaysAllowPaths(Vec<String>);

impl AlwaysAllowPaths {
    pub fn new(paths: impl IntoIterator<Item = String>) -> Self {
        AlwaysAllowPaths(
            paths
                .into_iter()
                .map(|p| p.trim().to_string())
                .filter(|p| !p.is_empty())
                .collect(),
        )
    }

    fn allows(&self, path: &str) -> bool {
        self.0.iter().any(|rule| match rule.strip_suffix('*') {
            Some(prefix) => path.starts_with(prefix),
            None => path == rule,
        })
    }
}

impl Default for AlwaysAllowPaths {
    fn default() -> Self {
        AlwaysAllowPaths::new(["/healthz", "/readyz", "/livez"].map(String::from))
    }
}

/// What to answer a request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    Allowed,
    /// 401: the token was refused (or could not be checked).
    Unauthorized(String),
    /// 403: the user may not do this.
    Forbidden(String),
    /// 500: the SubjectAccessReview failed.
    ReviewFailed(String),
}

/// The answers of one kind of review, kept for [`CACHE_TTL`].
struct TtlCache<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    fn new() -> Self {
        TtlCache {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < CACHE_TTL)
            .map(|(_, value)| value.clone())
    }

    fn put(&self, key: K, value: V) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= CACHE_CAPACITY {
            entries.retain(|_, (at, _)| at.elapsed() < CACHE_TTL);
            if entries.len() >= CACHE_CAPACITY {
                entries.clear();
            }
        }
        entries.insert(key, (Instant::now(), value));
    }
}

/// Asks the API server who a token is and what it may do (see the module's header).
pub(crate) struct DelegatedAuth {
    client: kube::Client,
    always_allow: AlwaysAllowPaths,
    /// `--client-ca-file` and `--requestheader-client-ca-file`, if given.
    certs: Option<ClientCerts>,
    /// By the token's SHA-256 (the tokens themselves are not kept): the user, or why it was refused.
    tokens: TtlCache<[u8; 32], Result<User, String>>,
    /// By user, verb and path: allowed, or the reason it was not.
    decisions: TtlCache<(User, String, String), Result<(), String>>,
}

impl DelegatedAuth {
    pub(crate) fn new(
        client: kube::Client,
        always_allow: AlwaysAllowPaths,
        certs: Option<ClientCerts>,
    ) -> Self {
        DelegatedAuth {
            client,
            always_allow,
            certs,
            tokens: TtlCache::new(),
            decisions: TtlCache::new(),
        }
    }

    /// The handshake's client-certificate verifier, if certificates are read at all.
    pub(crate) fn handshake_verifier(
        &self,
    ) -> Option<std::sync::Arc<dyn rustls::server::danger::ClientCertVerifier>> {
        self.certs.as_ref().map(ClientCerts::handshake_verifier)
    }

    /// What a connection's client certificate chain proves (nothing without `--client-ca-file`).
    pub(crate) fn identify_peer(
        &self,
        chain: Option<&[rustls::pki_types::CertificateDer<'_>]>,
    ) -> PeerIdentity {
        self.certs
            .as_ref()
            .map(|certs| certs.identify(chain))
            .unwrap_or_default()
    }

    /// The verdict on `verb` (the HTTP method) of `path`, for a request with these headers on a
    /// connection whose client certificate proved `peer`.
    pub(crate) async fn check(
        &self,
        peer: &PeerIdentity,
        headers: &HeaderMap,
        verb: &str,
        path: &str,
    ) -> Verdict {
        if self.always_allow.allows(path) {
            return Verdict::Allowed;
        }
        let authorization = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok());
        let proxied = || {
            self.certs
                .as_ref()
                .and_then(|certs| certs.proxied_user(headers))
        };
        let found = authenticate_request(peer, proxied, bearer_token(authorization), |token| {
            self.authenticate(token)
        })
        .await;
        let user = match found {
            Ok(Some(user)) => user,
            Ok(None) => User::anonymous(),
            Err(reason) => return Verdict::Unauthorized(reason),
        };
        if user.groups.iter().any(|g| g == PRIVILEGED_GROUP) {
            return Verdict::Allowed;
        }
        let verb = verb.to_ascii_lowercase();
        let key = (user, verb, path.to_string());
        if let Some(answer) = self.decisions.get(&key) {
            return answer.map_or_else(Verdict::Forbidden, |()| Verdict::Allowed);
        }
        match self.review_access(&key.0, &key.1, &key.2).await {
            Ok(answer) => {
                self.decisions.put(key, answer.clone());
                answer.map_or_else(Verdict::Forbidden, |()| Verdict::Allowed)
            }
            Err(e) => Verdict::ReviewFailed(format!("reviewing access: {e}")),
        }
    }

    async fn authenticate(&self, token: &str) -> Result<User, String> {
        let digest: [u8; 32] = ring::digest::digest(&ring::digest::SHA256, token.as_bytes())
            .as_ref()
            .try_into()
            .map_err(|_| "hashing the token".to_string())?;
        if let Some(answer) = self.tokens.get(&digest) {
            return answer;
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            // Not cached: the next request asks again. Logged loudly: it is the manager's problem (RBAC
            // without `tokenreviews`, the API server unreachable), not the caller's.
            .map_err(|e| {
                tracing::warn!(error = %e, "could not review a bearer token: answering 401");
                format!("reviewing the token: {e}")
            })?;
        let status = answer.status.unwrap_or_default();
        let user = status.user.unwrap_or_default();
        let answer = match (status.authenticated, user.username) {
            (Some(true), Some(name)) => Ok(User {
                name,
                uid: user.uid,
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }),
            _ => Err(status
                .error
                .filter(|e| !e.is_empty())
                .unwrap_or_else(|| "invalid bearer token".into())),
        };
        self.tokens.put(digest, answer.clone());
        answer
    }

    /// `Ok(Ok(()))`: allowed; `Ok(Err(reason))`: refused; `Err`: the review itself failed.
    async fn review_access(
        &self,
        user: &User,
        verb: &str,
        path: &str,
    ) -> Result<Result<(), String>, kube::Error> {
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(user.name.clone()),
                uid: user.uid.clone(),
                groups: Some(user.groups.clone()),
                extra: Some(user.extra.clone()),
                non_resource_attributes: Some(NonResourceAttributes {
                    path: Some(path.to_string()),
                    verb: Some(verb.to_string()),
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let answer = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await?;
        let status = answer.status.unwrap_or_default();
        if status.allowed && status.denied != Some(true) {
            return Ok(Ok(()));
        }
        let mut reason = format!(
            "forbidden: User \"{}\" cannot {verb} path \"{path}\"",
            user.name
        );
        if let Some(why) = status.reason.filter(|r| !r.is_empty()) {
            reason.push_str(": ");
            reason.push_str(&why);
        }
        Ok(Err(reason))
    }
}

/// The request's user, trying upstream's authenticators in its order (see the module's header):
/// `Ok(None)` when none applied (anonymous), `Err` when none named a user and one failed (401).
async fn authenticate_request<'t, F, Fut>(
    peer: &PeerIdentity,
    proxied: impl FnOnce() -> Option<User>,
    token: Credentials<'t>,
    review_token: F,
) -> Result<Option<User>, String>
where
    F: FnOnce(&'t str) -> Fut,
    Fut: Future<Output = Result<User, String>>,
{
    let mut failures = Vec::new();
    match &peer.proxy {
        // A trusted proxy that names nobody leaves the decision to the others.
        Some(Ok(())) => {
            if let Some(user) = proxied() {
                return Ok(Some(user));
            }
        }
        Some(Err(reason)) => failures.push(reason.clone()),
        None => {}
    }
    match &peer.x509 {
        Some(Ok(Some(user))) => return Ok(Some(user.clone())),
        Some(Err(reason)) => failures.push(reason.clone()),
        Some(Ok(None)) | None => {}
    }
    match token {
        Credentials::None => {}
        Credentials::Malformed => failures.push("invalid bearer token".into()),
        Credentials::Token(token) => match review_token(token).await {
            Ok(user) => return Ok(Some(user)),
            Err(reason) => failures.push(reason),
        },
    }
    if failures.is_empty() {
        Ok(None)
    } else {
        Err(failures.join("; "))
    }
}

enum Credentials<'a> {
    None,
    Malformed,
    Token(&'a str),
}

/// The token of an `Authorization: Bearer <token>` header (the scheme in any case, as upstream). Other
/// schemes are not ours to judge: the request is then anonymous.
fn bearer_token(header: Option<&str>) -> Credentials<'_> {
    let Some(header) = header else {
        return Credentials::None;
    };
    let mut parts = header.trim().splitn(2, ' ');
    let scheme = parts.next().unwrap_or_default();
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Credentials::None;
    }
    match parts.next().map(str::trim) {
        Some(token) if !token.is_empty() => Credentials::Token(token),
        _ => Credentials::Malformed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn always_allowed_paths_are_exact_or_prefixes() {
        let paths = AlwaysAllowPaths::default();
        assert!(paths.allows("/healthz") && paths.allows("/readyz") && paths.allows("/livez"));
        assert!(!paths.allows("/metrics") && !paths.allows("/healthz/extra"));
        let paths = AlwaysAllowPaths::new(["/debug/*".into(), " ".into()]);
        assert!(paths.allows("/debug/controllers") && paths.allows("/debug/"));
        assert!(!paths.allows("/debug") && !paths.allows("/metrics"));
        assert!(!AlwaysAllowPaths::new([]).allows("/healthz"));
    }

    #[test]
    fn bearer_tokens_are_read_as_upstream_reads_them() {
        assert!(matches!(bearer_token(None), Credentials::None));
        assert!(matches!(bearer_token(Some("Basic abc")), Credentials::None));
        assert!(matches!(
            bearer_token(Some("bearer abc")),
            Credentials::Token("abc")
        ));
        assert!(matches!(
            bearer_token(Some("Bearer  abc ")),
            Credentials::Token("abc")
        ));
        assert!(matches!(
            bearer_token(Some("Bearer ")),
            Credentials::Malformed
        ));
        assert!(matches!(
            bearer_token(Some("Bearer")),
            Credentials::Malformed
        ));
    }

    fn user(name: &str) -> User {
        User {
            name: name.into(),
            uid: None,
            groups: vec!["system:authenticated".into()],
            extra: std::collections::BTreeMap::new(),
        }
    }

    /// Runs upstream's order with a token review that knows one token, `good`, and records whether it
    /// was asked at all.
    async fn who(
        peer: &PeerIdentity,
        proxied: Option<&str>,
        token: Option<&str>,
    ) -> (Result<Option<String>, String>, bool) {
        let asked = std::cell::Cell::new(false);
        let header = token.map(|t| format!("Bearer {t}"));
        let found = authenticate_request(
            peer,
            || proxied.map(user),
            bearer_token(header.as_deref()),
            |token| {
                asked.set(true);
                let answer = if token == "good" {
                    Ok(user("token-user"))
                } else {
                    Err("token rejected".to_string())
                };
                std::future::ready(answer)
            },
        )
        .await;
        (found.map(|u| u.map(|u| u.name)), asked.get())
    }

    /// Proxy headers, then the client certificate, then the token: the first that names a user wins
    /// (the token is then not even reviewed); failures count only when nobody is named; nothing at all
    /// is anonymous.
    #[tokio::test]
    async fn authenticators_are_tried_in_upstreams_order() {
        let none = PeerIdentity::default();
        assert_eq!(who(&none, None, None).await, (Ok(None), false));
        assert_eq!(
            who(&none, None, Some("good")).await,
            (Ok(Some("token-user".into())), true)
        );
        assert_eq!(
            who(&none, None, Some("bad")).await,
            (Err("token rejected".into()), true)
        );

        let cert = PeerIdentity {
            proxy: None,
            x509: Some(Ok(Some(user("alice")))),
        };
        assert_eq!(
            who(&cert, None, Some("good")).await,
            (Ok(Some("alice".into())), false)
        );
        // A certificate without a CN names nobody: the token decides, or anonymous.
        let no_cn = PeerIdentity {
            proxy: None,
            x509: Some(Ok(None)),
        };
        assert_eq!(who(&no_cn, None, None).await, (Ok(None), false));
        assert_eq!(
            who(&no_cn, None, Some("good")).await.0,
            Ok(Some("token-user".into()))
        );
        // An unverified certificate: a good token still wins; alone it is 401, not anonymous.
        let unknown = PeerIdentity {
            proxy: None,
            x509: Some(Err(
                "verifying the client certificate: unknown issuer".into()
            )),
        };
        assert_eq!(
            who(&unknown, None, Some("good")).await.0,
            Ok(Some("token-user".into()))
        );
        let (found, _) = who(&unknown, None, None).await;
        assert!(
            matches!(found, Err(ref e) if e.contains("unknown issuer")),
            "{found:?}"
        );
        let (found, _) = who(&unknown, None, Some("bad")).await;
        assert!(
            matches!(found, Err(ref e) if e.contains("unknown issuer") && e.contains("token rejected")),
            "{found:?}"
        );

        // A trusted proxy's headers come first; without a user header the certificate is next.
        let proxy = PeerIdentity {
            proxy: Some(Ok(())),
            x509: Some(Ok(Some(user("front-proxy")))),
        };
        assert_eq!(
            who(&proxy, Some("bob"), Some("good")).await,
            (Ok(Some("bob".into())), false)
        );
        assert_eq!(
            who(&proxy, None, None).await.0,
            Ok(Some("front-proxy".into()))
        );
        // An untrusted proxy's headers are ignored.
        let untrusted = PeerIdentity {
            proxy: Some(Err("not allowed".into())),
            x509: None,
        };
        assert_eq!(
            who(&untrusted, Some("bob"), Some("good")).await.0,
            Ok(Some("token-user".into()))
        );
        assert_eq!(
            who(&untrusted, Some("bob"), None).await.0,
            Err("not allowed".into())
        );
        // `Bearer` without a token is a failed credential, not an absent one.
        assert_eq!(
            who(&none, None, Some("")).await.0,
            Err("invalid bearer token".into())
        );
    }

    /// Answers live for the TTL and no longer; a full cache drops the expired entries first.
    #[tokio::test(start_paused = true)]
    async fn answers_expire_after_the_ttl() {
        let cache = TtlCache::new();
        cache.put("a", 1);
        tokio::time::advance(CACHE_TTL - Duration::from_millis(1)).await;
        assert_eq!(cache.get(&"a"), Some(1));
        tokio::time::advance(Duration::from_millis(1)).await;
        assert_eq!(cache.get(&"a"), None);

        let cache = TtlCache::new();
        for i in 0..CACHE_CAPACITY {
            cache.put(i, i);
        }
        tokio::time::advance(CACHE_TTL).await;
        cache.put(CACHE_CAPACITY, 0);
        let len = cache.entries.lock().map(|e| e.len()).unwrap_or_default();
        assert_eq!(len, 1, "the expired entries made room");
    }
}
