//! `atoll dns`: serve the clusterset.local zone of this cluster.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use anyhow::Context;
use atoll_core::dns::ZoneConfig;
use atoll_dns::metrics::DnsMetrics;

use super::kubeconfig::client;

/// Arguments of `atoll dns`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Kubeconfig of the cluster whose ServiceImports and MCS EndpointSlices are served.
    #[arg(long, env = "ATOLL_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// Context in --kubeconfig.
    #[arg(long)]
    pub context: Option<String>,
    /// Address to serve DNS on, UDP and TCP (repeat for several).
    #[arg(long = "listen", default_value = "127.0.0.1:5353")]
    pub listen: Vec<SocketAddr>,
    /// The zone to serve.
    #[arg(long, default_value = "clusterset.local")]
    pub zone: String,
    /// TTL of service records, in seconds.
    #[arg(long, default_value_t = 5)]
    pub ttl: u32,
    /// UDP sockets and threads per listen address (default: one per CPU).
    #[arg(long)]
    pub udp_workers: Option<usize>,
    /// Address of the admin HTTP server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9480")]
    pub admin_address: SocketAddr,
}

/// Runs the DNS server until SIGINT or SIGTERM.
pub async fn run(args: Args) -> anyhow::Result<()> {
    let zone_config = ZoneConfig {
        zone: args.zone.trim_end_matches('.').to_ascii_lowercase(),
        ttl: args.ttl,
        ..ZoneConfig::default()
    };
    anyhow::ensure!(
        atoll_core::dns::encode_name(&zone_config.zone).is_some(),
        "--zone {} is not a valid DNS name",
        args.zone
    );
    let kube = client(args.kubeconfig.as_ref(), args.context.as_ref(), "cluster").await?;
    let metrics = DnsMetrics::default();
    let ready = Arc::new(AtomicBool::new(false));
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let admin = super::admin::serve(args.admin_address, registry, ready.clone()).await?;
    let zone = atoll_dns::initial_zone(&zone_config);
    let stop = Arc::new(AtomicBool::new(false));
    let workers = args.udp_workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    for address in &args.listen {
        let udp = atoll_dns::udp::start(
            *address,
            workers,
            zone.clone(),
            metrics.clone(),
            stop.clone(),
        )
        .with_context(|| format!("starting UDP on {address}"))?;
        let tcp = atoll_dns::tcp::start(*address, zone.clone(), metrics.clone())
            .await
            .with_context(|| format!("starting TCP on {address}"))?;
        tracing::info!(%udp, %tcp, workers, zone = %zone_config.zone, "serving DNS");
    }
    tracing::info!(address = %admin, "admin server listening");
    tokio::select! {
        () = atoll_dns::source::run(kube, zone_config, zone, metrics, ready) => {}
        () = super::agent::shutdown_signal() => tracing::info!("shutting down"),
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}
