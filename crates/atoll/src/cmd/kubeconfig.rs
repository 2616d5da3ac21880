//! Building Kubernetes clients from flags: an explicit kubeconfig file and context, or the
//! usual inference (KUBECONFIG, ~/.kube/config, in-cluster service account).

use std::path::PathBuf;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// Where a client's cluster is, as given on the command line.
#[derive(Debug, Clone, clap::Args)]
pub struct Target {
    /// Kubeconfig file (default: KUBECONFIG, ~/.kube/config, or the in-cluster account).
    #[arg(long)]
    pub kubeconfig: Option<PathBuf>,
    /// Context in the kubeconfig (default: its current context).
    #[arg(long)]
    pub context: Option<String>,
}

/// A client for `kubeconfig`/`context`; `what` names the cluster in errors.
pub async fn client(
    kubeconfig: Option<&PathBuf>,
    context: Option<&String>,
    what: &str,
) -> anyhow::Result<Client> {
    // rustls needs a process-wide crypto provider; a second install is harmless.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let options = KubeConfigOptions {
        context: context.cloned(),
        ..Default::default()
    };
    let config = match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .with_context(|| format!("reading the {what} kubeconfig {}", path.display()))?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .with_context(|| format!("loading the {what} kubeconfig {}", path.display()))?
        }
        None if context.is_some() => Config::from_kubeconfig(&options)
            .await
            .with_context(|| format!("loading the {what} kubeconfig"))?,
        None => Config::infer()
            .await
            .with_context(|| format!("finding the {what} cluster (no --kubeconfig given)"))?,
    };
    Client::try_from(config).with_context(|| format!("building the {what} client"))
}
