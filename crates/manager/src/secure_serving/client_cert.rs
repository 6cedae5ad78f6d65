//! Client certificates on the secure port, as kube-controller-manager's delegated authentication reads
//! them:
//! - `--client-ca-file`: a certificate that chains to this bundle names the user (subject CN) and its
//!   groups (subject O's), with no TokenReview;
//! - `--requestheader-client-ca-file`: a front proxy whose certificate chains to this bundle (and, with
//!   `--requestheader-allowed-names`, has one of those CNs) names the user in request headers
//!   (`X-Remote-User`, `X-Remote-Group`, `X-Remote-Extra-*`).
//!
//! As upstream (Go's `RequestClientCert`), the handshake asks for a certificate but neither requires nor
//! judges it, beyond the client proving it holds the key: a certificate that does not verify fails
//! authentication per request, where a valid bearer token may still win, instead of failing the
//! handshake. Each connection's certificate is verified once, after the handshake ([`PeerIdentity`]).
//! The bundles are read at start (upstream also reloads them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use axum::http::HeaderMap;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};

use super::user::User;

/// The group every authenticated user gets (upstream's authenticated-group adder).
const AUTHENTICATED_GROUP: &str = "system:authenticated";
/// The extra key naming the credential a user came with (upstream's `user.CredentialIDKey`).
const CREDENTIAL_ID_KEY: &str = "authentication.kubernetes.io/credential-id";

/// kube-controller-manager's `--requestheader-*` flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHeaderAuth {
    /// `--requestheader-client-ca-file`: the CAs of the front proxies' client certificates.
    pub client_ca: PathBuf,
    /// `--requestheader-allowed-names`: the proxies' allowed CNs; empty: any CN the CA signed.
    pub allowed_names: Vec<String>,
    /// `--requestheader-username-headers`: the first one present names the user.
    pub username_headers: Vec<String>,
    /// `--requestheader-group-headers`: every value of each is a group.
    pub group_headers: Vec<String>,
    /// `--requestheader-extra-headers-prefix`: `<prefix><key>: <value>` is an extra.
    pub extra_headers_prefix: Vec<String>,
}

impl RequestHeaderAuth {
    /// Upstream's defaults for the headers.
    pub fn new(client_ca: PathBuf) -> Self {
        RequestHeaderAuth {
            client_ca,
            allowed_names: Vec::new(),
            username_headers: vec!["X-Remote-User".into()],
            group_headers: vec!["X-Remote-Group".into()],
            extra_headers_prefix: vec!["X-Remote-Extra-".into()],
        }
    }

    /// The user the headers name; `None` without a username header (then the next authenticator).
    pub(crate) fn user(&self, headers: &HeaderMap) -> Option<User> {
        let name = self.username_headers.iter().find_map(|header| {
            headers
                .get(header.as_str())
                .and_then(|v| v.to_str().ok())
                .filter(|v| !v.is_empty())
        })?;
        let mut groups: Vec<String> = self
            .group_headers
            .iter()
            .flat_map(|header| headers.get_all(header.as_str()))
            .filter_map(|v| v.to_str().ok())
            .filter(|v| !v.is_empty())
            .map(String::from)
            .collect();
        if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
            groups.push(AUTHENTICATED_GROUP.into());
        }
        let mut extra: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for prefix in &self.extra_headers_prefix {
            for (header, value) in headers {
                // Header names are lower case here; the prefix is matched in any case.
                let Some(key) = header
                    .as_str()
                    .get(..prefix.len())
                    .filter(|head| head.eq_ignore_ascii_case(prefix))
                    .map(|_| &header.as_str()[prefix.len()..])
                else {
                    continue;
                };
                if let Ok(value) = value.to_str() {
                    extra
                        .entry(percent_decode(key))
                        .or_default()
                        .push(value.to_string());
                }
            }
        }
        Some(User {
            name: name.to_string(),
            uid: None,
            groups,
            extra,
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ClientCaError {
    #[error("reading the CA bundle {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("the CA bundle {path} holds no usable certificate")]
    Empty { path: PathBuf },
    #[error("the CA bundle {path} does not make a verifier")]
    Verifier {
        path: PathBuf,
        #[source]
        source: rustls::server::VerifierBuilderError,
    },
}

/// What a connection's client certificate proves, worked out once per connection.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PeerIdentity {
    /// With `--requestheader-client-ca-file` and a certificate: the proxy is trusted, or why not.
    pub(crate) proxy: Option<Result<(), String>>,
    /// With `--client-ca-file` and a certificate: its user (`None`: verified but without a CN, so it
    /// names nobody), or why it was refused.
    pub(crate) x509: Option<Result<Option<User>, String>>,
}

/// The CA bundles of `--client-ca-file` and `--requestheader-client-ca-file`.
pub(crate) struct ClientCerts {
    client_ca: Option<Arc<dyn ClientCertVerifier>>,
    request_header: Option<(Arc<dyn ClientCertVerifier>, RequestHeaderAuth)>,
    handshake: Arc<dyn ClientCertVerifier>,
}

impl ClientCerts {
    /// `None` when neither bundle is given (the handshake then asks for no certificate).
    pub(crate) fn load(
        client_ca: Option<&Path>,
        request_header: Option<&RequestHeaderAuth>,
    ) -> Result<Option<Self>, ClientCaError> {
        if client_ca.is_none() && request_header.is_none() {
            return Ok(None);
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client_ca = client_ca
            .map(|path| verifier(path, &provider))
            .transpose()?;
        let request_header = request_header
            .map(|auth| verifier(&auth.client_ca, &provider).map(|v| (v, auth.clone())))
            .transpose()?;
        // Both bundles' subjects are offered as hints: Go clients send a certificate only when its
        // issuer is among them.
        let hints = client_ca
            .iter()
            .chain(request_header.iter().map(|(v, _)| v))
            .flat_map(|v| v.root_hint_subjects().iter().cloned())
            .collect();
        let handshake = Arc::new(Requested {
            hints,
            algorithms: provider.signature_verification_algorithms,
        });
        Ok(Some(ClientCerts {
            client_ca,
            request_header,
            handshake,
        }))
    }

    /// The verifier of the handshake: asks for a certificate, checks only that the client holds its key.
    pub(crate) fn handshake_verifier(&self) -> Arc<dyn ClientCertVerifier> {
        self.handshake.clone()
    }

    /// What the connection's certificate chain (leaf first) proves.
    pub(crate) fn identify(&self, chain: Option<&[CertificateDer<'_>]>) -> PeerIdentity {
        let Some((leaf, intermediates)) = chain.and_then(|c| c.split_first()) else {
            return PeerIdentity::default();
        };
        let now = UnixTime::now();
        let verify = |verifier: &Arc<dyn ClientCertVerifier>| {
            verifier
                .verify_client_cert(leaf, intermediates, now)
                .map(|_| ())
                .map_err(|e| format!("verifying the client certificate: {e}"))
        };
        let proxy = self.request_header.as_ref().map(|(verifier, auth)| {
            verify(verifier)?;
            allowed_proxy(leaf, &auth.allowed_names)
        });
        let x509 = self
            .client_ca
            .as_ref()
            .map(|verifier| verify(verifier).and_then(|()| certificate_user(leaf)));
        PeerIdentity { proxy, x509 }
    }

    /// The user a trusted proxy's headers name.
    pub(crate) fn proxied_user(&self, headers: &HeaderMap) -> Option<User> {
        self.request_header
            .as_ref()
            .and_then(|(_, auth)| auth.user(headers))
    }
}

fn verifier(
    path: &Path,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ClientCertVerifier>, ClientCaError> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|source| ClientCaError::Read {
            path: path.to_path_buf(),
            source,
        })?;
    let mut roots = RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(ClientCaError::Empty {
            path: path.to_path_buf(),
        });
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone())
        .allow_unauthenticated()
        .build()
        .map_err(|source| ClientCaError::Verifier {
            path: path.to_path_buf(),
            source,
        })
}

/// A verified proxy certificate's CN must be allowed, if a list is given.
fn allowed_proxy(leaf: &CertificateDer<'_>, allowed: &[String]) -> Result<(), String> {
    if allowed.is_empty() {
        return Ok(());
    }
    let subject = Subject::parse(leaf)?;
    let cn = subject.common_name.unwrap_or_default();
    if allowed.contains(&cn) {
        Ok(())
    } else {
        Err(format!("the proxy's certificate CN {cn:?} is not allowed"))
    }
}

/// The user of a verified client certificate: the CN names it, the O's are its groups (upstream's
/// common-name conversion); `None` without a CN.
pub(crate) fn certificate_user(leaf: &CertificateDer<'_>) -> Result<Option<User>, String> {
    let subject = Subject::parse(leaf)?;
    let Some(name) = subject.common_name.filter(|cn| !cn.is_empty()) else {
        return Ok(None);
    };
    let mut groups = subject.organizations;
    if !groups.iter().any(|g| g == AUTHENTICATED_GROUP) {
        groups.push(AUTHENTICATED_GROUP.into());
    }
    let digest = ring::digest::digest(&ring::digest::SHA256, leaf);
    let id: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    let extra = BTreeMap::from([(
        CREDENTIAL_ID_KEY.to_string(),
        vec![format!("X509SHA256={id}")],
    )]);
    Ok(Some(User {
        name,
        uid: None,
        groups,
        extra,
    }))
}

/// The parts of a certificate's subject that name a user.
#[derive(Debug, PartialEq, Eq)]
struct Subject {
    /// The last CN, as Go's `pkix.Name` keeps it.
    common_name: Option<String>,
    organizations: Vec<String>,
}

impl Subject {
    fn parse(der: &CertificateDer<'_>) -> Result<Self, String> {
        let (_, cert) = x509_parser::parse_x509_certificate(der)
            .map_err(|e| format!("parsing the client certificate: {e}"))?;
        let subject = cert.subject();
        let text = |attr: &x509_parser::x509::AttributeTypeAndValue<'_>| {
            attr.as_str().ok().map(String::from)
        };
        Ok(Subject {
            common_name: subject.iter_common_name().filter_map(text).last(),
            organizations: subject.iter_organization().filter_map(text).collect(),
        })
    }
}

/// `%XX` escapes decoded (extra keys are escaped by proxies); a malformed escape keeps the key as is.
fn percent_decode(key: &str) -> String {
    let bytes = key.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => return key.to_string(),
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| key.to_string())
}

/// The handshake's verifier: a certificate is asked for, not required, and accepted whatever its
/// issuer (it is judged per request); its signature over the handshake is still checked, so a client
/// cannot present a certificate whose key it lacks.
#[derive(Debug)]
struct Requested {
    hints: Vec<DistinguishedName>,
    algorithms: WebPkiSupportedAlgorithms,
}

impl ClientCertVerifier for Requested {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &self.hints
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
    };

    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        pem: String,
    }

    fn ca(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let key = KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(params, key),
        }
    }

    fn client(ca: &Ca, cn: Option<&str>, orgs: &[&str]) -> CertificateDer<'static> {
        let mut params = CertificateParams::new(Vec::new()).unwrap();
        // rcgen's default subject has a CN.
        params.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            params.distinguished_name.push(DnType::CommonName, cn);
        }
        for org in orgs {
            params
                .distinguished_name
                .push(DnType::OrganizationName, *org);
        }
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let key = KeyPair::generate().unwrap();
        params.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn bundle(dir: &Path, name: &str, ca: &Ca) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, &ca.pem).unwrap();
        path
    }

    #[test]
    fn a_certificates_subject_names_the_user_and_groups() {
        let ca = ca("ca");
        // (rcgen keeps one value per attribute type: one O here.)
        let cert = client(&ca, Some("alice"), &["team-a"]);
        let user = certificate_user(&cert).unwrap().unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, ["team-a", "system:authenticated"]);
        let id = &user.extra[CREDENTIAL_ID_KEY];
        assert!(
            id[0].starts_with("X509SHA256=") && id[0].len() == 11 + 64,
            "{id:?}"
        );
        // No CN: names nobody (the next authenticator decides).
        assert_eq!(certificate_user(&client(&ca, None, &["o"])), Ok(None));
        assert!(certificate_user(&CertificateDer::from(vec![1, 2, 3])).is_err());
    }

    #[test]
    fn certificates_are_verified_against_their_bundle() {
        let dir = std::env::temp_dir().join(format!("client-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (clients, proxies, stranger) = (ca("clients"), ca("proxies"), ca("stranger"));
        let mut header_auth = RequestHeaderAuth::new(bundle(&dir, "proxies.crt", &proxies));
        header_auth.allowed_names = vec!["front-proxy".into()];
        let certs = ClientCerts::load(
            Some(&bundle(&dir, "clients.crt", &clients)),
            Some(&header_auth),
        )
        .unwrap()
        .unwrap();
        assert_eq!(certs.handshake_verifier().root_hint_subjects().len(), 2);

        assert_eq!(certs.identify(None), PeerIdentity::default());
        let alice = certs.identify(Some(&[client(&clients, Some("alice"), &[])]));
        assert_eq!(alice.proxy.as_ref().map(Result::is_err), Some(true));
        assert_eq!(
            alice.x509.and_then(|u| u.ok()).flatten().map(|u| u.name),
            Some("alice".into())
        );
        let unknown = certs.identify(Some(&[client(&stranger, Some("alice"), &[])]));
        assert!(
            matches!(unknown.x509, Some(Err(ref e)) if e.contains("verifying")),
            "{unknown:?}"
        );

        let proxy = certs.identify(Some(&[client(&proxies, Some("front-proxy"), &[])]));
        assert_eq!(proxy.proxy, Some(Ok(())));
        let other = certs.identify(Some(&[client(&proxies, Some("other"), &[])]));
        assert!(matches!(other.proxy, Some(Err(ref e)) if e.contains("not allowed")));

        assert!(ClientCerts::load(None, None).unwrap().is_none());
        std::fs::write(dir.join("empty.crt"), "").unwrap();
        assert!(ClientCerts::load(Some(&dir.join("empty.crt")), None).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn request_headers_name_the_user_as_upstream_reads_them() {
        let auth = RequestHeaderAuth::new(PathBuf::new());
        let mut headers = HeaderMap::new();
        assert_eq!(auth.user(&headers), None);
        headers.insert("x-remote-user", "bob".parse().unwrap());
        headers.append("x-remote-group", "g1".parse().unwrap());
        headers.append("X-Remote-Group", "g2".parse().unwrap());
        headers.append("x-remote-extra-scopes", "a".parse().unwrap());
        headers.append("x-remote-extra-scopes", "b".parse().unwrap());
        headers.append("x-remote-extra-example.org%2fkey", "v".parse().unwrap());
        let user = auth.user(&headers).unwrap();
        assert_eq!(user.name, "bob");
        assert_eq!(user.groups, ["g1", "g2", "system:authenticated"]);
        assert_eq!(user.extra["scopes"], ["a", "b"]);
        assert_eq!(user.extra["example.org/key"], ["v"]);
        assert_eq!(percent_decode("a%zz"), "a%zz");
    }
}
