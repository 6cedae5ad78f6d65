//! Certificates and credentials of one plane, generated fresh at every start.
//!
//! One CA signs a serving certificate (used by kube-apiserver, and by kube-scheduler and
//! kube-controller-manager for their health ports); one EC key signs and verifies service account
//! tokens; every client (our controllers, tests, scheduler, controller-manager, kwok, kubectl) uses a
//! static admin token in `system:masters`, so there is a single kubeconfig.
//!
//! The optional real node needs three client certificates from the same CA, since its components
//! authenticate as Kubernetes expects them to: the kubelet as `system:node:<name>` in `system:nodes`
//! (the Node authorizer grants it exactly its own node and pods), kube-proxy as `system:kube-proxy`
//! (bound to `system:node-proxier`), and the API server towards the kubelet (`kubectl logs`) in
//! `system:masters`. They are cheap, so they are always generated.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::PlaneError;

/// File paths of the generated material.
#[derive(Debug, Clone)]
pub(crate) struct PkiFiles {
    pub ca_cert: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub service_account_key: PathBuf,
    pub service_account_public_key: PathBuf,
    pub token_file: PathBuf,
    pub admin_token: String,
    pub kubelet_client: ClientCert,
    pub kube_proxy_client: ClientCert,
    pub apiserver_kubelet_client: ClientCert,
}

/// A client certificate and its key (PEM files).
#[derive(Debug, Clone)]
pub(crate) struct ClientCert {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// The name the real node registers under (its kubelet's client certificate names it).
pub const REAL_NODE_NAME: &str = "mini-kcm-real-node";

const SERVING_NAMES: &[&str] = &[
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
];

pub(crate) fn generate(dir: &Path) -> Result<PkiFiles, PlaneError> {
    std::fs::create_dir_all(dir)
        .map_err(|e| PlaneError::io(format!("creating {}", dir.display()), e))?;

    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "mini-kcm local plane CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca_cert = ca_params.self_signed(&ca_key)?;
    let ca = Issuer::new(ca_params, ca_key);

    let serving_key = KeyPair::generate()?;
    let names: Vec<String> = SERVING_NAMES.iter().map(|s| s.to_string()).collect();
    let mut serving_params = CertificateParams::new(names)?;
    serving_params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving_params.signed_by(&serving_key, &ca)?;

    let service_account_key = KeyPair::generate()?;
    let admin_token = random_token();

    let files = PkiFiles {
        ca_cert: dir.join("ca.crt"),
        serving_cert: dir.join("serving.crt"),
        serving_key: dir.join("serving.key"),
        service_account_key: dir.join("service-account.key"),
        service_account_public_key: dir.join("service-account.pub"),
        token_file: dir.join("tokens.csv"),
        admin_token,
        kubelet_client: ClientCert::named(dir, "kubelet-client"),
        kube_proxy_client: ClientCert::named(dir, "kube-proxy-client"),
        apiserver_kubelet_client: ClientCert::named(dir, "apiserver-kubelet-client"),
    };
    write(&files.ca_cert, &ca_cert.pem())?;
    write(&files.serving_cert, &serving_cert.pem())?;
    write(&files.serving_key, &serving_key.serialize_pem())?;
    write(
        &files.service_account_key,
        &service_account_key.serialize_pem(),
    )?;
    write(
        &files.service_account_public_key,
        &service_account_key.public_key_pem(),
    )?;
    write(
        &files.token_file,
        &format!("{},admin,admin,\"system:masters\"\n", files.admin_token),
    )?;
    for (client, common_name, organization) in [
        (
            &files.kubelet_client,
            format!("system:node:{REAL_NODE_NAME}"),
            "system:nodes",
        ),
        (
            &files.kube_proxy_client,
            "system:kube-proxy".to_string(),
            "system:node-proxier",
        ),
        (
            &files.apiserver_kubelet_client,
            "kube-apiserver-kubelet-client".to_string(),
            "system:masters",
        ),
    ] {
        let key = KeyPair::generate()?;
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(DnType::OrganizationName, organization);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let cert = params.signed_by(&key, &ca)?;
        write(&client.cert, &cert.pem())?;
        write(&client.key, &key.serialize_pem())?;
    }
    Ok(files)
}

impl ClientCert {
    fn named(dir: &Path, name: &str) -> Self {
        ClientCert {
            cert: dir.join(format!("{name}.crt")),
            key: dir.join(format!("{name}.key")),
        }
    }
}

fn random_token() -> String {
    let bytes: [u8; 24] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn write(path: &Path, contents: &str) -> Result<(), PlaneError> {
    std::fs::write(path, contents)
        .map_err(|e| PlaneError::io(format!("writing {}", path.display()), e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_pem_material_and_a_token_line() {
        let dir = std::env::temp_dir().join(format!("mini-kcm-pki-{}", std::process::id()));
        let files = generate(&dir).unwrap();
        for f in [&files.ca_cert, &files.serving_cert] {
            assert!(
                std::fs::read_to_string(f)
                    .unwrap()
                    .starts_with("-----BEGIN CERTIFICATE-----")
            );
        }
        assert!(
            std::fs::read_to_string(&files.serving_key)
                .unwrap()
                .contains("PRIVATE KEY")
        );
        let tokens = std::fs::read_to_string(&files.token_file).unwrap();
        assert!(tokens.starts_with(&files.admin_token));
        assert!(tokens.contains("system:masters"));
        assert_eq!(files.admin_token.len(), 48);
        for client in [&files.kubelet_client, &files.kube_proxy_client] {
            assert!(
                std::fs::read_to_string(&client.cert)
                    .unwrap()
                    .starts_with("-----BEGIN CERTIFICATE-----")
            );
            assert!(
                std::fs::read_to_string(&client.key)
                    .unwrap()
                    .contains("PRIVATE KEY")
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
