//! Building Kubernetes clients from flags: an explicit kubeconfig file and context, or the
//! usual inference (KUBECONFIG, ~/.kube/config, in-cluster service account).

use std::marker::PhantomData;
use std::path::PathBuf;

use anyhow::Context;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// What a command's cluster flags say in its help, and which environment variable may stand
/// for --kubeconfig: each command words them for what the cluster is to it, while the flags
/// themselves are declared once ([`Cluster`], [`MemberAndHub`]).
pub trait ClusterHelp {
    /// Help of --kubeconfig.
    const KUBECONFIG: &'static str;
    /// The environment variable read when --kubeconfig is not given.
    const KUBECONFIG_ENV: Option<&'static str> = None;
    /// Help of --context.
    const CONTEXT: &'static str;
}

/// [`ClusterHelp`] of a command that also reaches the hub.
pub trait HubHelp: ClusterHelp {
    /// Help of --hub-kubeconfig.
    const HUB_KUBECONFIG: &'static str;
    /// The environment variable read when --hub-kubeconfig is not given.
    const HUB_KUBECONFIG_ENV: Option<&'static str> = None;
}

/// The cluster a command talks to: --kubeconfig and --context, helped as `H` says.
#[derive(Debug, Clone, clap::Args)]
pub struct Cluster<H: ClusterHelp> {
    #[arg(long, help = H::KUBECONFIG, env = H::KUBECONFIG_ENV)]
    pub kubeconfig: Option<PathBuf>,
    #[arg(long, help = H::CONTEXT)]
    pub context: Option<String>,
    #[arg(skip)]
    help: PhantomData<H>,
}

impl<H: ClusterHelp> Cluster<H> {
    /// A client for this cluster; `what` names it in errors.
    pub async fn client(&self, what: &str) -> anyhow::Result<Client> {
        client(self.kubeconfig.as_ref(), self.context.as_ref(), what).await
    }
}

/// A member and the hub: the member's [`Cluster`] flags, --hub-kubeconfig and --hub-context.
#[derive(Debug, Clone, clap::Args)]
pub struct MemberAndHub<H: HubHelp> {
    #[command(flatten)]
    pub member: Cluster<H>,
    #[arg(long, help = H::HUB_KUBECONFIG, env = H::HUB_KUBECONFIG_ENV)]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of the hub in --hub-kubeconfig.
    #[arg(long)]
    pub hub_context: Option<String>,
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Clone)]
    struct Words;

    impl ClusterHelp for Words {
        const KUBECONFIG: &'static str = "the member's kubeconfig";
        const CONTEXT: &'static str = "the member's context";
    }

    impl HubHelp for Words {
        const HUB_KUBECONFIG: &'static str = "the hub's kubeconfig";
    }

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        clusters: MemberAndHub<Words>,
    }

    #[test]
    fn the_cluster_flags_fill_the_member_and_the_hub_with_each_commands_help() {
        let cli = Cli::try_parse_from([
            "atoll",
            "--kubeconfig",
            "member.yaml",
            "--context",
            "c1",
            "--hub-kubeconfig",
            "hub.yaml",
            "--hub-context",
            "hub",
        ])
        .unwrap();
        let c = &cli.clusters;
        assert_eq!(c.member.kubeconfig, Some(PathBuf::from("member.yaml")));
        assert_eq!(c.member.context.as_deref(), Some("c1"));
        assert_eq!(c.hub_kubeconfig, Some(PathBuf::from("hub.yaml")));
        assert_eq!(c.hub_context.as_deref(), Some("hub"));
        let help = <Cli as clap::CommandFactory>::command()
            .render_help()
            .to_string();
        for words in [
            "the member's kubeconfig",
            "the member's context",
            "the hub's kubeconfig",
        ] {
            assert!(help.contains(words), "{help}");
        }
    }
}
