//! `atoll agent`: run the agent for one member cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::kubeconfig::client;

/// Arguments of `atoll agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig of this member cluster (default: inferred, e.g. in-cluster).
    #[arg(long, env = "ATOLL_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of this member cluster in --kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// Kubeconfig of the hub (default: the one `atoll join` stored in the member's Secret
    /// atoll-system/atoll-hub).
    #[arg(long, env = "ATOLL_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of the hub in --hub-kubeconfig.
    #[arg(long)]
    pub hub_context: Option<String>,
    /// Milliseconds to wait after a change before reconciling, to batch bursts of events.
    #[arg(long, default_value_t = 10)]
    pub debounce_ms: u64,
    /// Seconds between renewals of this member's heartbeat Lease on the hub.
    #[arg(long, default_value_t = 10)]
    pub heartbeat_seconds: u64,
    /// Seconds a source cluster's heartbeat may stay unchanged (as this agent sees it) before
    /// its endpoints are withdrawn here; they return when it moves again.
    #[arg(long, alias = "member-grace", default_value_t = 60)]
    pub member_grace_seconds: u64,
    /// Address of the admin HTTP server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9470")]
    pub admin_address: std::net::SocketAddr,
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    use atoll_agent::identity;
    anyhow::ensure!(
        args.member_grace_seconds > 3 * args.heartbeat_seconds.max(1),
        "--member-grace-seconds ({}) must be more than three heartbeats (--heartbeat-seconds {}), or a late heartbeat would withdraw a live cluster",
        args.member_grace_seconds,
        args.heartbeat_seconds
    );
    let member = client(args.kubeconfig.as_ref(), args.context.as_ref(), "member").await?;
    // The id is the member's ClusterProperty; it is never taken from a flag here.
    let cluster_id = identity::cluster_id(&member).await?;
    let (hub, inventory) = match &args.hub_kubeconfig {
        Some(path) => (
            client(Some(path), args.hub_context.as_ref(), "hub").await?,
            None,
        ),
        None => {
            let (text, inventory) = identity::hub_secret(&member).await?;
            (hub_client(&text).await?, inventory)
        }
    };
    identity::check_hub_credentials(&hub, &cluster_id).await?;
    tracing::info!(cluster = %cluster_id, "starting the agent");
    let config = atoll_agent::AgentConfig {
        profile: inventory.map(|ns| atoll_core::plan::ObjectKey::new(&ns, cluster_id.as_str())),
        cluster_id,
        member,
        hub,
        debounce: Duration::from_millis(args.debounce_ms),
        heartbeat: Duration::from_secs(args.heartbeat_seconds.max(1)),
        member_grace: Duration::from_secs(args.member_grace_seconds),
    };
    let telemetry = atoll_agent::Telemetry::default();
    let mut registry = prometheus_client::registry::Registry::default();
    telemetry.metrics.register(&mut registry);
    let admin = super::admin::serve(
        args.admin_address,
        registry,
        std::sync::Arc::new(telemetry.readiness.clone()),
    )
    .await?;
    tracing::info!(address = %admin, "admin server listening");
    atoll_agent::run(config, telemetry, shutdown_signal())
        .await
        .context("agent stopped")
}

/// A hub client from the kubeconfig text `atoll join` stored.
pub(super) async fn hub_client(text: &str) -> anyhow::Result<kube::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let file = kube::config::Kubeconfig::from_yaml(text)
        .context("parsing the hub kubeconfig in Secret atoll-system/atoll-hub")?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .context("loading the hub kubeconfig in Secret atoll-system/atoll-hub")?;
    kube::Client::try_from(config).context("building the hub client")
}

/// Resolves on SIGINT or SIGTERM.
pub(super) async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = ctrl_c.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}
