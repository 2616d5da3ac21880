//! `atoll dns`: serve the clusterset.local zone of this cluster.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use atoll_dns::metrics::DnsMetrics;
use atoll_dns::server::tcp::TcpLimits;
use atoll_dns::zone::{
    DEFAULT_MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, SliceTrust, ZoneConfig, zone_name,
};
use tokio_util::sync::CancellationToken;

use super::kubeconfig::{Cluster, ClusterHelp};

/// The cluster whose zone `atoll dns` serves, as the flags say.
#[derive(Debug, Clone)]
pub struct ServedCluster;

impl ClusterHelp for ServedCluster {
    const KUBECONFIG: &'static str =
        "Kubeconfig of the cluster whose ServiceImports and MCS EndpointSlices are served";
    const KUBECONFIG_ENV: Option<&'static str> = Some("ATOLL_KUBECONFIG");
    const CONTEXT: &'static str = "Context in --kubeconfig";
}

/// Arguments of `atoll dns`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub cluster: Cluster<ServedCluster>,
    /// Address to serve DNS on, UDP and TCP (repeat for several).
    #[arg(long = "listen", default_value = "127.0.0.1:5353")]
    pub listen: Vec<SocketAddr>,
    /// The zone to serve: a DNS name under which nothing else is served (not the root).
    #[arg(long, default_value = "clusterset.local", value_parser = zone_name)]
    pub zone: String,
    /// The `endpointslice.kubernetes.io/managed-by` value of another MCS implementation whose
    /// MCS EndpointSlices are served (repeat for several). Atoll's own are always served;
    /// slices of any other controller are ignored and counted in atoll_dns_untrusted_slices.
    #[arg(long = "trusted-slice-manager", value_name = "MANAGED_BY")]
    pub trusted_slice_managers: Vec<String>,
    /// TTL of service records, in seconds.
    #[arg(long, default_value_t = 5)]
    pub ttl: u32,
    /// UDP sockets and threads per listen address (default: one per CPU).
    #[arg(long)]
    pub udp_workers: Option<usize>,
    /// Address of the admin HTTP server (/metrics, /healthz, /readyz).
    /// After SIGTERM, keep answering for this many seconds while /readyz says not ready, so that
    /// the Pod leaves its Service's endpoints, and every node's proxy rules, before it stops
    /// (a rolling update then loses no query). The chart sets 5; 0 stops at once.
    #[arg(long, default_value_t = 0)]
    pub lameduck_seconds: u64,
    #[arg(long, default_value = "127.0.0.1:9480")]
    pub admin_address: SocketAddr,
    /// Largest UDP answer, in bytes, whatever size a requester's EDNS claims; larger answers
    /// are truncated (TC) and retried over TCP.
    #[arg(long, default_value_t = DEFAULT_MAX_UDP_PAYLOAD,
          value_parser = clap::value_parser!(u16).range(i64::from(MIN_UDP_PAYLOAD)..))]
    pub max_udp_payload: u16,
    /// TCP connections served at once (per listen address); more are reset at once.
    #[arg(long, default_value_t = TcpLimits::default().max_connections)]
    pub tcp_max_connections: usize,
    /// TCP connections served at once from one client address (per listen address); more are
    /// reset at once.
    #[arg(long, default_value_t = TcpLimits::default().max_per_source)]
    pub tcp_max_connections_per_source: usize,
    /// Seconds a TCP connection may wait for its next query before it is closed.
    #[arg(long, default_value_t = TcpLimits::default().idle_timeout.as_secs())]
    pub tcp_idle_timeout: u64,
    /// Seconds a TCP connection may stay open in total, however busy.
    #[arg(long, default_value_t = TcpLimits::default().max_lifetime.as_secs())]
    pub tcp_max_lifetime: u64,
    /// Queries answered on one TCP connection before it is closed.
    #[arg(long, default_value_t = TcpLimits::default().max_queries)]
    pub tcp_max_queries: usize,
}

/// What /readyz waits for once a stop signal came (never done: the process is going).
const STOPPING: &str = "stopping";

/// How long open TCP connections get to end after a stop signal.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// Runs the DNS server until SIGINT or SIGTERM (then returns `Ok`), or until the zone source
/// fails (then returns the error, so the process exits non-zero and is restarted rather than
/// serving a zone that no longer follows the cluster).
pub async fn run(args: Args) -> anyhow::Result<()> {
    // The zone was checked (and lowercased) when the arguments were parsed.
    let zone_config = ZoneConfig {
        zone: args.zone.clone(),
        ttl: args.ttl,
        max_udp_payload: args.max_udp_payload,
        ..ZoneConfig::default()
    };
    let tcp_limits = TcpLimits {
        max_connections: args.tcp_max_connections,
        max_per_source: args.tcp_max_connections_per_source,
        idle_timeout: Duration::from_secs(args.tcp_idle_timeout),
        max_lifetime: Duration::from_secs(args.tcp_max_lifetime),
        max_queries: args.tcp_max_queries,
    };
    let trust = SliceTrust::with_managers(args.trusted_slice_managers.iter().cloned());
    let kube = args.cluster.client("cluster").await?;
    let metrics = DnsMetrics::default();
    // Registered before /readyz is served, so it never reports ready before the first sync.
    let readiness = atoll_dns::source::readiness();
    let mut registry = prometheus_client::registry::Registry::default();
    metrics.register(&mut registry);
    let admin =
        super::admin::serve(args.admin_address, registry, Arc::new(readiness.clone())).await?;
    let zone = atoll_dns::initial_zone(&zone_config);
    let stop = CancellationToken::new();
    let mut tcp_servers = Vec::new();
    let workers = args.udp_workers.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    for address in &args.listen {
        let udp = atoll_dns::server::udp::start(
            *address,
            workers,
            zone.clone(),
            metrics.clone(),
            stop.clone(),
        )
        .with_context(|| format!("starting UDP on {address}"))?;
        let tcp = atoll_dns::server::tcp::start(
            *address,
            zone.clone(),
            metrics.clone(),
            tcp_limits,
            stop.clone(),
        )
        .await
        .with_context(|| format!("starting TCP on {address}"))?;
        tracing::info!(
            %udp,
            tcp = %tcp.address(),
            tcp_backlog = tcp.backlog().granted,
            workers,
            zone = %zone_config.zone,
            "serving DNS"
        );
        tcp_servers.push(tcp);
    }
    tracing::info!(address = %admin, "admin server listening");
    tracing::info!(
        trusted = ?trust.managers().collect::<Vec<_>>(),
        "serving the MCS EndpointSlices of these managed-by values only"
    );
    let result = tokio::select! {
        result = atoll_dns::source::run(kube, zone_config, trust, zone, metrics, readiness.clone()) => {
            match result {
                Ok(()) => Err(anyhow::anyhow!("the zone source stopped")),
                Err(error) => Err(error).context("watching the cluster for the zone"),
            }
        }
        () = super::agent::shutdown_signal() => {
            if args.lameduck_seconds > 0 {
                readiness.wait_for(STOPPING);
                tracing::info!(seconds = args.lameduck_seconds, "stop signal: not ready, still answering (lameduck)");
                tokio::time::sleep(Duration::from_secs(args.lameduck_seconds)).await;
            }
            tracing::info!("shutting down");
            Ok(())
        }
    };
    stop.cancel();
    let stopped = all_stopped(tcp_servers);
    if tokio::time::timeout(STOP_GRACE, stopped).await.is_err() {
        tracing::warn!("TCP connections still open after {STOP_GRACE:?}; leaving them");
    }
    result
}

/// Resolves once every server of `servers` has stopped.
async fn all_stopped(servers: Vec<atoll_dns::server::tcp::TcpServer>) {
    for server in servers {
        server.stopped().await;
    }
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(args: &[&str]) -> Result<Args, String> {
        Cli::try_parse_from(["dns"].iter().chain(args))
            .map(|cli| cli.args)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn the_root_and_invalid_zones_are_refused_before_starting() {
        for zone in [".", "", "a..b", "clusterset.local }", "clusterset local"] {
            let error = parse(&["--zone", zone]).expect_err(&format!("{zone:?} accepted"));
            assert!(error.contains("--zone"), "{error}");
        }
        assert!(parse(&["--zone", "."]).unwrap_err().contains("root"));
        assert_eq!(
            parse(&["--zone", "Example.ORG."]).map(|a| a.zone),
            Ok("example.org".to_owned())
        );
    }

    #[test]
    fn trusted_slice_managers_repeat_and_the_per_source_cap_has_a_default() {
        let args = parse(&[
            "--trusted-slice-manager",
            "one.example.dev",
            "--trusted-slice-manager",
            "two.example.dev",
        ])
        .unwrap();
        assert_eq!(
            args.trusted_slice_managers,
            ["one.example.dev", "two.example.dev"]
        );
        assert_eq!(args.tcp_max_connections_per_source, 64);
        assert!(parse(&[]).unwrap().trusted_slice_managers.is_empty());
    }
}
