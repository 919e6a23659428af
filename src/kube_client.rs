//! The Kubernetes API client every part that reads the cluster shares (the namespace watch,
//! SubjectAccessReviews, discovery, `/version`): its configuration from `--kubeconfig`, else
//! `KUBECONFIG` / `~/.kube/config`, else the pod's service account, as kube-rs' `Config::infer`
//! finds them. A leaf: it depends on no other module of the crate.

use std::path::Path;

use kube::Client;

/// At most this many of a kube-rs error's causes are read ([`KubeError`]): kube's chains are
/// three or four deep (kube, hyper-util, the connector, the OS).
const MAX_CAUSES: usize = 16;

/// A kube-rs error as one message: kube's text, then each of its causes that text does not
/// already quote, joined by `: ` (`ServiceError: client error (Connect): tcp connect error:
/// Connection refused (os error 111)`). kube's messages quote some of their causes and not
/// others, so the chain is joined here, once, and this error has no `source()`.
#[derive(Debug)]
pub struct KubeError(pub kube::Error);

impl std::fmt::Display for KubeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut message = self.0.to_string();
        let causes = std::iter::successors(std::error::Error::source(&self.0), |e| e.source());
        for cause in causes.take(MAX_CAUSES) {
            let text = cause.to_string();
            if !message.contains(&text) {
                message.push_str(": ");
                message.push_str(&text);
            }
        }
        f.write_str(&message)
    }
}

impl std::error::Error for KubeError {}

/// Why no Kubernetes client can be made, kube's words quoted: kube's messages already hold
/// their causes', so they are not a `source()` (the chain would repeat them).
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The `--kubeconfig` file cannot be read or used.
    #[error("cannot read kubeconfig {path}: {error}")]
    Kubeconfig {
        /// The `--kubeconfig` path.
        path: String,
        /// kube's reason.
        error: kube::config::KubeconfigError,
    },
    /// Neither `KUBECONFIG` / `~/.kube/config` nor the in-cluster service account gives one.
    #[error("no Kubernetes client configuration (in-cluster service account or KUBECONFIG): {0}")]
    Config(kube::config::InferConfigError),
    /// The configuration does not make a client (TLS material, proxy, ...).
    #[error("cannot build the Kubernetes client: {0}")]
    Client(KubeError),
}

/// The Kubernetes client: `kubeconfig` when given, else `KUBECONFIG` / `~/.kube/config`,
/// else the in-cluster service account (kube-rs' `Config::infer`).
///
/// # Errors
/// [`ClientError`] when no configuration is found or it cannot be used.
pub async fn client(kubeconfig: Option<&Path>) -> Result<Client, ClientError> {
    Client::try_from(config(kubeconfig).await?).map_err(|e| ClientError::Client(KubeError(e)))
}

/// The client configuration `client` uses, for callers that adjust it (discovery turns
/// kube-rs' retries off).
///
/// # Errors
/// [`ClientError`] when no configuration is found or it cannot be used.
pub async fn config(kubeconfig: Option<&Path>) -> Result<kube::Config, ClientError> {
    Ok(match kubeconfig {
        Some(path) => {
            let kc = kube::config::Kubeconfig::read_from(path).map_err(|error| {
                ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    error,
                }
            })?;
            kube::Config::from_custom_kubeconfig(kc, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|error| ClientError::Kubeconfig {
                    path: path.display().to_string(),
                    error,
                })?
        }
        None => kube::Config::infer().await.map_err(ClientError::Config)?,
    })
}
