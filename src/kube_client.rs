//! The Kubernetes API client every part that reads the cluster shares (the namespace watch,
//! SubjectAccessReviews, discovery, `/version`): its configuration from `--kubeconfig`, else
//! `KUBECONFIG` / `~/.kube/config`, else the pod's service account, as kube-rs' `Config::infer`
//! finds them. A leaf: it depends on no other module of the crate.

use std::path::Path;

use kube::Client;

/// Why no Kubernetes client can be made; kube's error is kept as the source (its text is also
/// in the message, which the binary prints once).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file cannot be read or used.
    #[error("cannot read kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The `--kubeconfig` path.
        path: String,
        /// kube's reason.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// Neither `KUBECONFIG` / `~/.kube/config` nor the in-cluster service account gives one.
    #[error("no Kubernetes client configuration (in-cluster service account or KUBECONFIG): {0}")]
    Config(#[source] kube::config::InferConfigError),
    /// The configuration does not make a client (TLS material, proxy, ...).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(#[source] kube::Error),
}

/// The Kubernetes client: `kubeconfig` when given, else `KUBECONFIG` / `~/.kube/config`,
/// else the in-cluster service account (kube-rs' `Config::infer`).
///
/// # Errors
/// [`ClientError`] when no configuration is found or it cannot be used.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    Client::try_from(config(kubeconfig).await?).map_err(ClientError::Client)
}

/// The client configuration `client` uses, for callers that adjust it (discovery turns
/// kube-rs' retries off).
///
/// # Errors
/// [`ClientError`] when no configuration is found or it cannot be used.
pub async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|source| {
                ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|source| ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    source,
                })?
        }
        None => kube::Config::infer().await.map_err(ClientError::Config)?,
    })
}
