//! The secure port's TLS: the certificate given by `--tls-cert-file`/`--tls-private-key-file`, or one
//! made in memory at start (self-signed for `localhost`, `127.0.0.1` and the host's name), as
//! kube-controller-manager does when it is given none. Clients of a self-signed port (kubelet probes,
//! Prometheus with `insecure_skip_verify`) authenticate themselves with a token and do not verify the
//! server; give a certificate signed by a CA they trust to change that.
//!
//! A certificate from files is reloaded when the files change (cert-manager renews them in place, a
//! Secret volume swaps its `..data` symlink), as upstream's dynamic serving content does: each new
//! handshake takes the current pair from [`ServingKeys`], so established connections and their
//! requests are untouched. A pair that does not load (unreadable, unparsable, key not matching the
//! certificate) is logged and the previous one kept, as upstream keeps it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock, Weak};
use std::time::Duration;

use mini_kcm_runtime::controller::worker::error_chain;
use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::danger::ClientCertVerifier;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

/// How often the certificate files are compared with the pair being served. Upstream watches them with
/// fsnotify and re-checks every minute; reading two small files every few seconds costs nothing and
/// sees every way they change (rewritten in place, renamed over, a symlink swapped under a Secret
/// volume) without re-arming watches on replaced inodes.
pub(crate) const RELOAD_PERIOD: Duration = Duration::from_secs(5);

/// Where the serving certificate comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServingCert {
    /// Made at start, in memory.
    SelfSigned,
    /// PEM files: the certificate (chain) and its private key; reloaded when they change.
    Files { cert: PathBuf, key: PathBuf },
}

#[derive(Debug, thiserror::Error)]
pub enum ServingCertError {
    #[error("reading {path}")]
    ReadFile {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("reading PEM from {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path} holds no certificate")]
    NoCertificate { path: PathBuf },
    #[error("generating a self-signed serving certificate")]
    Generate(#[source] rcgen::Error),
    #[error("the serving certificate and key do not make a TLS configuration")]
    Tls(#[source] rustls::Error),
}

/// The acceptor that wraps each connection of the secure port. Certificates from files are watched
/// from here on (a task that ends with the acceptor). `client_certs`: the handshake asks for a client
/// certificate and checks it with this verifier.
pub(crate) fn acceptor(
    cert: &ServingCert,
    client_certs: Option<Arc<dyn ClientCertVerifier>>,
) -> Result<TlsAcceptor, ServingCertError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let keys = match cert {
        ServingCert::SelfSigned => {
            let (chain, key) = self_signed()?;
            let key =
                CertifiedKey::from_der(chain, key, &provider).map_err(ServingCertError::Tls)?;
            Arc::new(ServingKeys::new(key))
        }
        ServingCert::Files { cert, key } => {
            let (reloader, keys) = Reloader::new(cert.clone(), key.clone(), provider.clone())?;
            tokio::spawn(async move { reloader.run(RELOAD_PERIOD).await });
            keys
        }
    };
    let builder = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(ServingCertError::Tls)?;
    let builder = match client_certs {
        Some(verifier) => builder.with_client_cert_verifier(verifier),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(keys);
    // The server speaks HTTP/1.1 only.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// The pair each new handshake presents; swapped whole when the files change.
#[derive(Debug)]
pub(crate) struct ServingKeys {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingKeys {
    fn new(key: CertifiedKey) -> Self {
        ServingKeys {
            current: RwLock::new(Arc::new(key)),
        }
    }

    fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn replace(&self, key: CertifiedKey) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(key);
    }
}

impl ResolvesServerCert for ServingKeys {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The files' bytes as last read: a change of either starts a reload.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Contents {
    cert: Vec<u8>,
    key: Vec<u8>,
}

/// What one look at the files did.
#[derive(Debug, PartialEq, Eq)]
enum Poll {
    Unchanged,
    Swapped,
    /// The files changed but do not load: the previous pair is still served.
    Kept(String),
    /// The acceptor was dropped: nothing to reload.
    Gone,
}

/// Watches one pair of files and swaps [`ServingKeys`] when they hold a new valid pair.
struct Reloader {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<CryptoProvider>,
    /// Weak: the task ends once the acceptor is dropped.
    keys: Weak<ServingKeys>,
    /// What was last read, loaded or not: a broken pair is reported once, not at every poll.
    seen: Contents,
}

impl Reloader {
    /// Loads the pair once; at start a pair that does not load is an error, not a warning.
    fn new(
        cert: PathBuf,
        key: PathBuf,
        provider: Arc<CryptoProvider>,
    ) -> Result<(Self, Arc<ServingKeys>), ServingCertError> {
        let seen = read_contents(&cert, &key)?;
        let keys = Arc::new(ServingKeys::new(certified_key(
            &cert, &key, &seen, &provider,
        )?));
        let reloader = Reloader {
            cert,
            key,
            provider,
            keys: Arc::downgrade(&keys),
            seen,
        };
        Ok((reloader, keys))
    }

    /// Polls every `period` until the acceptor (the only strong holder of the keys) is gone.
    async fn run(mut self, period: Duration) {
        let mut interval = tokio::time::interval(period);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        interval.tick().await;
        loop {
            interval.tick().await;
            if self.poll() == Poll::Gone {
                return;
            }
        }
    }

    /// Reads the files; swaps the served pair if they changed and load.
    fn poll(&mut self) -> Poll {
        let Some(keys) = self.keys.upgrade() else {
            return Poll::Gone;
        };
        let contents = match read_contents(&self.cert, &self.key) {
            Ok(contents) => contents,
            Err(e) => {
                let reason = error_chain(&e);
                // An unreadable file is reported once per distinct reason.
                let seen = Contents {
                    cert: reason.clone().into_bytes(),
                    key: Vec::new(),
                };
                if seen != self.seen {
                    tracing::warn!(error = %reason, "could not read the serving certificate: keeping the one being served");
                    self.seen = seen;
                }
                return Poll::Kept(reason);
            }
        };
        if contents == self.seen {
            return Poll::Unchanged;
        }
        self.seen = contents;
        match certified_key(&self.cert, &self.key, &self.seen, &self.provider) {
            Ok(loaded) => {
                let (serial, not_after) = describe(&loaded);
                keys.replace(loaded);
                tracing::info!(
                    cert = %self.cert.display(),
                    %serial,
                    %not_after,
                    "loaded a new serving certificate"
                );
                Poll::Swapped
            }
            Err(e) => {
                let reason = error_chain(&e);
                tracing::warn!(
                    cert = %self.cert.display(),
                    error = %reason,
                    "the serving certificate files changed but do not load: keeping the one being served"
                );
                Poll::Kept(reason)
            }
        }
    }
}

fn read_contents(cert: &Path, key: &Path) -> Result<Contents, ServingCertError> {
    // `fs::read` follows symlinks: a Secret volume's swapped `..data` link is seen as new content.
    let read = |path: &Path| {
        std::fs::read(path).map_err(|source| ServingCertError::ReadFile {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok(Contents {
        cert: read(cert)?,
        key: read(key)?,
    })
}

/// The pair in `contents`, its key checked against the certificate (as Go's `tls.X509KeyPair`).
fn certified_key(
    cert_path: &Path,
    key_path: &Path,
    contents: &Contents,
    provider: &CryptoProvider,
) -> Result<CertifiedKey, ServingCertError> {
    let chain = CertificateDer::pem_slice_iter(&contents.cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| ServingCertError::Read {
            path: cert_path.to_path_buf(),
            source,
        })?;
    if chain.is_empty() {
        return Err(ServingCertError::NoCertificate {
            path: cert_path.to_path_buf(),
        });
    }
    let key =
        PrivateKeyDer::from_pem_slice(&contents.key).map_err(|source| ServingCertError::Read {
            path: key_path.to_path_buf(),
            source,
        })?;
    CertifiedKey::from_der(chain, key, provider).map_err(ServingCertError::Tls)
}

/// The leaf's serial number and expiry, for the reload's log line (empty if it does not parse).
fn describe(key: &CertifiedKey) -> (String, String) {
    key.cert
        .first()
        .and_then(|der| x509_parser::parse_x509_certificate(der).ok())
        .map(|(_, cert)| {
            (
                cert.raw_serial_as_string(),
                cert.validity().not_after.to_string(),
            )
        })
        .unwrap_or_default()
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

#[cfg(test)]
mod tests {
    use super::*;

    struct Dir(PathBuf);

    impl Dir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn pair() -> (String, String) {
        let generated = rcgen::generate_simple_self_signed(vec!["example".to_string()]).unwrap();
        (generated.cert.pem(), generated.signing_key.serialize_pem())
    }

    fn served(keys: &ServingKeys) -> Vec<u8> {
        keys.current().cert[0].to_vec()
    }

    fn der(pem: &str) -> Vec<u8> {
        CertificateDer::from_pem_slice(pem.as_bytes())
            .unwrap()
            .to_vec()
    }

    #[tokio::test]
    async fn self_signed_and_file_certificates_make_an_acceptor() {
        assert!(acceptor(&ServingCert::SelfSigned, None).is_ok());

        let dir = Dir::new("serving-cert");
        let (cert_pem, key_pem) = pair();
        let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
        std::fs::write(&cert, cert_pem).unwrap();
        std::fs::write(&key, key_pem).unwrap();
        let files = ServingCert::Files {
            cert: cert.clone(),
            key: key.clone(),
        };
        assert!(acceptor(&files, None).is_ok());

        // A key file that holds no key says which file.
        std::fs::write(&key, "not a key").unwrap();
        let error = acceptor(&files, None)
            .err()
            .map(|e| error_chain(&e))
            .unwrap_or_default();
        assert!(error.contains("tls.key"), "{error}");
    }

    /// A new valid pair is swapped in; a broken one (unparsable, or a key of another certificate, or a
    /// missing file) is reported once and the served pair kept; fixing the files loads them.
    #[test]
    fn reload_swaps_valid_pairs_and_keeps_the_old_one_otherwise() {
        let dir = Dir::new("serving-cert-reload");
        let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
        let (first_cert, first_key) = pair();
        std::fs::write(&cert, &first_cert).unwrap();
        std::fs::write(&key, &first_key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (mut reloader, keys) = Reloader::new(cert.clone(), key.clone(), provider).unwrap();
        assert_eq!(served(&keys), der(&first_cert));
        assert_eq!(reloader.poll(), Poll::Unchanged);

        // Renamed over (as a Secret volume or cert-manager's atomic write).
        let (second_cert, second_key) = pair();
        std::fs::write(dir.0.join("new.crt"), &second_cert).unwrap();
        std::fs::write(dir.0.join("new.key"), &second_key).unwrap();
        std::fs::rename(dir.0.join("new.crt"), &cert).unwrap();
        std::fs::rename(dir.0.join("new.key"), &key).unwrap();
        assert_eq!(reloader.poll(), Poll::Swapped);
        assert_eq!(served(&keys), der(&second_cert));
        assert_eq!(reloader.poll(), Poll::Unchanged);

        // Half rewritten: a new certificate with the old key does not match.
        let (third_cert, third_key) = pair();
        std::fs::write(&cert, &third_cert).unwrap();
        let Poll::Kept(reason) = reloader.poll() else {
            panic!("a mismatched key was loaded");
        };
        assert!(
            reason.contains("do not make a TLS configuration"),
            "{reason}"
        );
        assert_eq!(served(&keys), der(&second_cert));
        assert_eq!(reloader.poll(), Poll::Unchanged, "reported once");
        // The key follows: the pair loads.
        std::fs::write(&key, &third_key).unwrap();
        assert_eq!(reloader.poll(), Poll::Swapped);
        assert_eq!(served(&keys), der(&third_cert));

        // Garbage, then a missing file: kept.
        std::fs::write(&cert, "garbage").unwrap();
        assert!(matches!(reloader.poll(), Poll::Kept(r) if r.contains("tls.crt")));
        std::fs::remove_file(&cert).unwrap();
        assert!(matches!(reloader.poll(), Poll::Kept(r) if r.contains("tls.crt")));
        assert_eq!(served(&keys), der(&third_cert));
        std::fs::write(&cert, &third_cert).unwrap();
        // Back to what is served: loaded again (same pair), harmless.
        assert_eq!(reloader.poll(), Poll::Swapped);
    }

    /// The watching task swaps the pair by itself, and ends once the acceptor is dropped.
    #[tokio::test]
    async fn the_watching_task_reloads_and_ends_with_the_acceptor() {
        let dir = Dir::new("serving-cert-task");
        let (cert, key) = (dir.0.join("tls.crt"), dir.0.join("tls.key"));
        let (first_cert, first_key) = pair();
        std::fs::write(&cert, &first_cert).unwrap();
        std::fs::write(&key, &first_key).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (reloader, keys) = Reloader::new(cert.clone(), key.clone(), provider).unwrap();
        let task = tokio::spawn(reloader.run(Duration::from_millis(10)));

        let (second_cert, second_key) = pair();
        std::fs::write(&key, &second_key).unwrap();
        std::fs::write(&cert, &second_cert).unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        while served(&keys) != der(&second_cert) {
            assert!(tokio::time::Instant::now() < deadline, "never reloaded");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        drop(keys);
        tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("the task ended")
            .unwrap();
    }
}
