//! Where the commands that talk to a cluster (`run`, `rollout`) find it: the kubeconfig named by
//! `--kubeconfig`, else kube's inference (`$KUBECONFIG`, `~/.kube/config`, or the pod's service account).

use std::path::Path;

use anyhow::Context;

/// The client configuration from `path`, or inferred when there is none.
pub(crate) async fn load(path: Option<&Path>) -> anyhow::Result<kube::Config> {
    match path {
        Some(path) => {
            let kubeconfig = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            Ok(kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?)
        }
        None => kube::Config::infer()
            .await
            .context("finding a kubeconfig or in-cluster config"),
    }
}
