//! `atoll agent`: run the agent for one member cluster.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use atoll_core::ClusterId;

use super::kubeconfig::client;

/// Arguments of `atoll agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// This member's cluster id: one lowercase RFC-1123 label, at most 63 characters.
    #[arg(long, env = "ATOLL_CLUSTER_ID")]
    pub cluster_id: String,
    /// Kubeconfig of this member cluster (default: inferred, e.g. in-cluster).
    #[arg(long, env = "ATOLL_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context of this member cluster in --kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// Kubeconfig of the hub.
    #[arg(long, env = "ATOLL_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,
    /// Context of the hub in --hub-kubeconfig.
    #[arg(long)]
    pub hub_context: Option<String>,
    /// Milliseconds to wait after a change before reconciling, to batch bursts of events.
    #[arg(long, default_value_t = 10)]
    pub debounce_ms: u64,
    /// Address of the admin HTTP server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9470")]
    pub admin_address: std::net::SocketAddr,
}

/// Runs the agent until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let cluster_id = ClusterId::new(&args.cluster_id).context("invalid --cluster-id")?;
    let member = client(args.kubeconfig.as_ref(), args.context.as_ref(), "member").await?;
    let hub_kubeconfig = args.hub_kubeconfig.as_ref().or(args.kubeconfig.as_ref());
    let hub = client(hub_kubeconfig, args.hub_context.as_ref(), "hub").await?;
    tracing::info!(cluster = %cluster_id, "starting the agent");
    let config = atoll_agent::AgentConfig {
        cluster_id,
        member,
        hub,
        debounce: Duration::from_millis(args.debounce_ms),
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
