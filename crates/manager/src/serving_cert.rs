//! The secure port's TLS: the certificate given by `--tls-cert-file`/`--tls-private-key-file`, or one
//! made in memory at start (self-signed for `localhost`, `127.0.0.1` and the host's name), as
//! kube-controller-manager does when it is given none. Clients of a self-signed port (kubelet probes,
//! Prometheus with `insecure_skip_verify`) authenticate themselves with a token and do not verify the
//! server; give a certificate signed by a CA they trust to change that.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::ServerConfig;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio_rustls::TlsAcceptor;

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingCert {
    /// Made at start, in memory.
    SelfSigned,
    /// PEM files: the certificate (chain) and its private key.
    Files { cert: PathBuf, key: PathBuf },
}

#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("generating a self-signed serving certificate: {0}")]
    Generate(#[source] rcgen::Error),
    #[error("the serving certificate and key do not make a TLS configuration: {0}")]
    Tls(#[source] rustls::Error),
}

/// The acceptor that wraps each connection of the secure port.
pub(crate) fn acceptor(cert: &ServingCert) -> Result<TlsAcceptor, ServingCertError> {
    let (chain, key) = match cert {
        ServingCert::SelfSigned => self_signed()?,
        ServingCert::Files { cert, key } => (read_chain(cert)?, read_key(key)?),
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ServingCertError::Tls)?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(ServingCertError::Tls)?;
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

type CertAndKey = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

fn self_signed() -> Result<CertAndKey, ServingCertError> {
    let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
    if let Some(host) = std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty()) {
        names.push(host);
    }
    let generated =
        rcgen::generate_simple_self_signed(names).map_err(ServingCertError::Generate)?;
    let key = PrivatePkcs8KeyDer::from(generated.signing_key.serialize_der());
    Ok((vec![generated.cert.der().clone()], key.into()))
}

fn read_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServingCertError> {
    let read = |source| ServingCertError::Read {
        path: path.to_path_buf(),
        source,
    };
    CertificateDer::pem_file_iter(path)
        .map_err(read)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, ServingCertError> {
    PrivateKeyDer::from_pem_file(path).map_err(|source| ServingCertError::Read {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_signed_and_file_certificates_make_an_acceptor() {
        assert!(acceptor(&ServingCert::SelfSigned).is_ok());

        let dir = std::env::temp_dir().join(format!("serving-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let generated = rcgen::generate_simple_self_signed(vec!["example".to_string()]).unwrap();
        let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
        std::fs::write(&cert, generated.cert.pem()).unwrap();
        std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
        let files = ServingCert::Files {
            cert: cert.clone(),
            key: key.clone(),
        };
        assert!(acceptor(&files).is_ok());

        // A key file that holds no key says which file.
        std::fs::write(&key, "not a key").unwrap();
        let error = acceptor(&files)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains("tls.key"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
