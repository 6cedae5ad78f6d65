//! The secure port (`--secure-port`), secured as k8s.io/apiserver's delegated authentication and
//! authorization secure kube-controller-manager's port 10257: the certificate it serves
//! (`serving_cert`: given and reloaded when its files change, or self-signed), who a request is
//! (`client_cert`: client certificates and front proxies; `delegated_auth`: bearer tokens through a
//! TokenReview), whether it may (`delegated_auth`: a SubjectAccessReview, or a path always allowed), and
//! `user`, the identity each of them names.
//!
//! The manager sees [`SecureServing`] (the flags) and [`SecurePort`] (built from them: the TLS acceptor
//! and the gate every request passes); the HTTP server sees the gate's verdicts.

mod client_cert;
mod delegated_auth;
mod serving_cert;
mod user;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_rustls::TlsAcceptor;

pub(crate) use client_cert::PeerIdentity;
pub use client_cert::{ClientCaError, RequestHeaderAuth};
pub use delegated_auth::AlwaysAllowPaths;
pub(crate) use delegated_auth::{DelegatedAuth, Verdict};
pub use serving_cert::{ServingCert, ServingCertError};

/// The secure port's settings (kube-controller-manager's `--bind-address`/`--secure-port`, `--tls-*`,
/// `--authorization-always-allow-paths`, `--client-ca-file` and `--requestheader-*`).
#[derive(Debug, Clone)]
pub struct SecureServing {
    pub addr: SocketAddr,
    pub cert: ServingCert,
    pub always_allow: AlwaysAllowPaths,
    /// Client certificates signed by these CAs name their user (CN) and groups (O).
    pub client_ca_file: Option<PathBuf>,
    /// A front proxy's certificate lets request headers name the user.
    pub request_header: Option<RequestHeaderAuth>,
}

/// What serving on the secure port takes: TLS (asking for a client certificate when a CA is given)
/// and the gate that authenticates and authorizes each request.
pub(crate) struct SecurePort {
    pub(crate) tls: TlsAcceptor,
    pub(crate) auth: Arc<DelegatedAuth>,
}

/// Why the secure port could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SecurePortError {
    #[error("the secure port's certificate")]
    ServingCert(#[from] ServingCertError),
    #[error("the secure port's client CA")]
    ClientCa(#[from] ClientCaError),
}

impl SecurePort {
    /// Reads the CAs and the certificate; `client` makes the TokenReviews and SubjectAccessReviews.
    pub(crate) fn new(
        secure: &SecureServing,
        client: kube::Client,
    ) -> Result<Self, SecurePortError> {
        let certs = client_cert::ClientCerts::load(
            secure.client_ca_file.as_deref(),
            secure.request_header.as_ref(),
        )?;
        let auth = DelegatedAuth::new(client, secure.always_allow.clone(), certs);
        let tls = serving_cert::acceptor(&secure.cert, auth.handshake_verifier())?;
        Ok(SecurePort {
            tls,
            auth: Arc::new(auth),
        })
    }
}
