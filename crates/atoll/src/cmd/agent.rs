//! `atoll agent`: run the agent for one member cluster.

use std::time::Duration;

use anyhow::Context;

use super::kubeconfig::{ClusterHelp, HubHelp, MemberAndHub, client};

/// Arguments of `atoll agent`.
#[derive(Debug, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub clusters: MemberAndHub<AgentClusters>,
    /// Milliseconds to wait after a change before reconciling, to batch bursts of events.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(0..=60_000))]
    pub debounce_ms: u64,
    /// Seconds between renewals of this member's heartbeat Lease on the hub (1 to 3600).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_HEARTBEAT_SECONDS))]
    pub heartbeat_seconds: u64,
    /// Seconds a source cluster's heartbeat may stay unchanged (as this agent sees it) before
    /// its endpoints are withdrawn here; they return when it moves again (at most a week).
    #[arg(long, alias = "member-grace", default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..=MAX_GRACE_SECONDS))]
    pub member_grace_seconds: u64,
    /// Seconds between full passes over every service, the safety net under the incremental
    /// passes that watch events drive (10 to 86400).
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(10..=86_400))]
    pub safety_net_seconds: u64,
    /// Most records (exported services) this member imports from each other member; each
    /// costs a ClusterIP here, so one member cannot exhaust the Service CIDR.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_RECORDS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_LIMIT))]
    pub max_records_per_member: usize,
    /// Most endpoints (over all of its endpoint copies) this member imports from each other
    /// member.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_ENDPOINTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_LIMIT))]
    pub max_endpoints_per_member: usize,
    /// Most Service ports (over all of its records) this member imports from each other
    /// member: each is a port of a derived Service every node's kube-proxy programs.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_PORTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_LIMIT))]
    pub max_ports_per_member: usize,
    /// Most endpoint-port pairs of one service (over its endpoint copies) this member imports
    /// from each other member: what kube-proxy programs for it, and its SRV records.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_ENDPOINT_PORTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_LIMIT))]
    pub max_endpoint_ports_per_service: usize,
    /// Most endpoint-port pairs (over all of its endpoint copies) this member imports from
    /// each other member: what bounds the member's DNS records here.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_MEMBER_ENDPOINT_PORTS, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_LIMIT))]
    pub max_endpoint_ports_per_member: usize,
    /// Most bytes of each other member's hub objects (records and endpoint copies, as the hub
    /// serves them) this agent holds in memory; what does not fit is left out (and reported).
    /// Default: an eighth of the memory this container may use above 64 MiB (24 MiB at the
    /// chart's 256 Mi limit), between 4 and 64 MiB; 24 MiB when no limit is set.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(0..=MAX_HUB_BYTES))]
    pub max_hub_bytes_per_member: Option<usize>,
    /// Address ranges (CIDRs, comma-separated) other members' endpoints may not be in, besides
    /// this cluster's Service CIDRs (read from its ServiceCIDRs): e.g. its nodes' network.
    #[arg(long, value_delimiter = ',')]
    pub deny_endpoint_cidrs: Vec<atoll_core::validate::Cidr>,
    /// Address of the admin HTTP server (/metrics, /healthz, /readyz).
    #[arg(long, default_value = "127.0.0.1:9470")]
    pub admin_address: std::net::SocketAddr,
    /// Elect one writer among this member's agent replicas with a Lease in the member; the
    /// others plan but write nothing until they take over.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, env = "ATOLL_LEADER_ELECTION")]
    pub leader_election: bool,
    /// Namespace of the leader election Lease.
    #[arg(long, default_value = atoll_core::membership::SYSTEM_NAMESPACE, env = "POD_NAMESPACE")]
    pub leader_election_namespace: String,
    /// Name of the leader election Lease.
    #[arg(long, default_value = atoll_core::membership::LEADER_LEASE)]
    pub leader_election_lease: String,
    /// This replica's name in the election (default: POD_NAME, else host name and pid).
    #[arg(long, env = "POD_NAME")]
    pub leader_election_identity: Option<String>,
    /// Seconds an unrenewed leader Lease keeps standbys from taking over.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..=MAX_LEADER_SECONDS))]
    pub leader_lease_seconds: u64,
    /// Seconds the leader keeps writing without a successful renewal (less than the lease).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=MAX_LEADER_SECONDS))]
    pub leader_renew_deadline_seconds: u64,
    /// Milliseconds between looks at the Lease (and renewals by the leader); at least 100, so
    /// replicas never spin on the apiserver.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(MIN_LEADER_RETRY_MS..=MAX_LEADER_SECONDS * 1000))]
    pub leader_retry_ms: u64,
}

/// Bounds of the agent's durations: every one is used in additions to clock readings and in
/// multiples (three heartbeats), which must not overflow.
const MAX_HEARTBEAT_SECONDS: u64 = 3600;
const MAX_GRACE_SECONDS: u64 = 7 * 24 * 3600;
const MAX_LEADER_SECONDS: u64 = 3600;
const MIN_LEADER_RETRY_MS: u64 = atoll_core::leader::MIN_RETRY_PERIOD.as_millis() as u64;
/// Largest per-member cap.
const MAX_LIMIT: u64 = 10_000_000;
/// Largest per-member byte budget.
const MAX_HUB_BYTES: u64 = 1 << 40;

/// The default byte budget per member (see `--max-hub-bytes-per-member`), from the memory
/// limit of this container's cgroup (`memory.max`, cgroup v2), when it has one.
fn default_hub_bytes() -> usize {
    let limit = std::fs::read_to_string("/sys/fs/cgroup/memory.max")
        .ok()
        .and_then(|text| text.trim().parse::<usize>().ok());
    hub_bytes_for(limit)
}

/// An eighth of `limit` above 64 MiB, between 4 and 64 MiB; without a limit, the default.
fn hub_bytes_for(limit: Option<usize>) -> usize {
    match limit {
        Some(limit) => (limit.saturating_sub(64 << 20) / 8).clamp(4 << 20, 64 << 20),
        None => atoll_core::caps::Limits::DEFAULT_HUB_BYTES,
    }
}

/// The agent's member cluster and hub, as the flags say.
#[derive(Debug, Clone)]
pub struct AgentClusters;

impl ClusterHelp for AgentClusters {
    const KUBECONFIG: &'static str =
        "Kubeconfig of this member cluster (default: inferred, e.g. in-cluster)";
    const KUBECONFIG_ENV: Option<&'static str> = Some("ATOLL_KUBECONFIG");
    const CONTEXT: &'static str = "Context of this member cluster in --kubeconfig";
}

impl HubHelp for AgentClusters {
    const HUB_KUBECONFIG: &'static str = "Kubeconfig of the hub (default: the one `atoll join` stored in the member's Secret atoll-system/atoll-hub)";
    const HUB_KUBECONFIG_ENV: Option<&'static str> = Some("ATOLL_HUB_KUBECONFIG");
}

/// The election settings the flags ask for, or `None` when election is off.
fn election(args: &Args) -> anyhow::Result<Option<atoll_agent::leader::Settings>> {
    if !args.leader_election {
        return Ok(None);
    }
    let timings = atoll_core::leader::Timings {
        lease_duration: Duration::from_secs(args.leader_lease_seconds),
        renew_deadline: Duration::from_secs(args.leader_renew_deadline_seconds),
        retry_period: Duration::from_millis(args.leader_retry_ms),
    };
    timings.validate().context("leader election timings")?;
    let identity = match &args.leader_election_identity {
        Some(id) if !id.is_empty() => id.clone(),
        _ => {
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_owned())
                .unwrap_or_else(|_| "atoll-agent".to_owned());
            format!("{host}-{}", std::process::id())
        }
    };
    Ok(Some(atoll_agent::leader::Settings {
        namespace: args.leader_election_namespace.clone(),
        name: args.leader_election_lease.clone(),
        identity,
        timings,
    }))
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
    let leader = election(&args)?;
    let clusters = &args.clusters;
    let member = clusters.member.client("member").await?;
    // Alive (/healthz) and not ready (/readyz) from here on, also while waiting for the join.
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
    let joined = tokio::select! {
        joined = until_joined(clusters, &member) => joined?,
        () = shutdown_signal() => return Ok(()),
    };
    let (cluster_id, hub, inventory) = joined;
    identity::check_hub_credentials(&hub, &cluster_id).await?;
    match &leader {
        Some(l) => {
            tracing::info!(cluster = %cluster_id, identity = %l.identity, lease = %format!("{}/{}", l.namespace, l.name), "starting the agent (leader election on: it writes once it leads)")
        }
        None => {
            tracing::info!(cluster = %cluster_id, "starting the agent (leader election off: it writes)")
        }
    }
    let hub_bytes = args
        .max_hub_bytes_per_member
        .unwrap_or_else(default_hub_bytes);
    tracing::info!(
        hub_bytes,
        "holding at most this many bytes of each other member's hub objects (--max-hub-bytes-per-member)"
    );
    let config = atoll_agent::AgentConfig {
        profile: inventory.map(|ns| atoll_api::keys::ObjectKey::new(&ns, cluster_id.as_str())),
        cluster_id,
        member,
        hub,
        debounce: Duration::from_millis(args.debounce_ms),
        heartbeat: Duration::from_secs(args.heartbeat_seconds.max(1)),
        member_grace: Duration::from_secs(args.member_grace_seconds),
        safety_net: Duration::from_secs(args.safety_net_seconds),
        // Beside the election Lease, in the agent's namespace.
        kept: atoll_api::keys::ObjectKey::new(
            &args.leader_election_namespace,
            atoll_agent::kept::CONFIG_MAP,
        ),
        leader,
        limits: atoll_core::caps::Limits {
            records: args.max_records_per_member,
            endpoints: args.max_endpoints_per_member,
            ports: args.max_ports_per_member,
            endpoint_ports: args.max_endpoint_ports_per_service,
            member_endpoint_ports: args.max_endpoint_ports_per_member,
            hub_bytes,
        },
        denied_cidrs: args.deny_endpoint_cidrs.clone(),
    };
    atoll_agent::run(config, telemetry, shutdown_signal())
        .await
        .context("agent stopped")
}

/// How often an agent installed before `atoll join` looks again.
const JOIN_POLL: Duration = Duration::from_secs(2);

/// The member's id (its ClusterProperty; never taken from a flag here) and the hub client.
/// Helm installs the chart before the administrator runs `atoll join`: until the id property
/// and the hub Secret exist the agent waits, not ready, saying what it waits for, instead of
/// exiting into a crash-loop back-off that would hold it back for minutes after the join. Any
/// other error (a malformed Secret, an invalid id, an unreachable API) still stops it.
async fn until_joined<H: HubHelp>(
    clusters: &MemberAndHub<H>,
    member: &kube::Client,
) -> anyhow::Result<(atoll_core::ClusterId, kube::Client, Option<String>)> {
    use atoll_agent::identity::{self, IdentityError};
    let mut waiting_for = String::new();
    loop {
        let attempt = async {
            let id = identity::cluster_id(member).await?;
            let (hub, inventory) = hub(clusters, member).await?;
            anyhow::Ok((id, hub, inventory))
        }
        .await;
        match attempt {
            Ok(joined) => return Ok(joined),
            Err(error) => match error.downcast_ref::<IdentityError>() {
                Some(reason) if reason.is_not_joined() => {
                    let now = reason.to_string();
                    if now != waiting_for {
                        tracing::warn!(reason = %now, "waiting for `atoll join` of this cluster");
                        waiting_for = now;
                    }
                    tokio::time::sleep(JOIN_POLL).await;
                }
                _ => return Err(error),
            },
        }
    }
}

/// The hub client: from --hub-kubeconfig, else from the credentials `atoll join` stored in
/// the member, with the inventory namespace stored next to them.
pub(super) async fn hub<H: HubHelp>(
    clusters: &MemberAndHub<H>,
    member: &kube::Client,
) -> anyhow::Result<(kube::Client, Option<String>)> {
    if let Some(path) = &clusters.hub_kubeconfig {
        let hub = client(Some(path), clusters.hub_context.as_ref(), "hub").await?;
        return Ok((hub, None));
    }
    let (text, inventory) = atoll_agent::identity::hub_secret(member).await?;
    Ok((hub_client(&text).await?, inventory))
}

/// A hub client from the kubeconfig text `atoll join` stored.
async fn hub_client(text: &str) -> anyhow::Result<kube::Client> {
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

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(flags: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("agent").chain(flags.iter().copied())).map(|c| c.args)
    }

    #[test]
    fn durations_that_would_overflow_or_spin_are_refused_before_anything_runs() {
        for flags in [
            &["--heartbeat-seconds", "18446744073709551615"][..],
            &["--heartbeat-seconds", "0"],
            &["--member-grace-seconds", "18446744073709551615"],
            &["--leader-retry-ms", "0"],
            &["--leader-lease-seconds", "18446744073709551615"],
            &["--debounce-ms", "18446744073709551615"],
            &["--max-records-per-member", "-1"],
            &["--deny-endpoint-cidrs", "10.0.0.0/33"],
        ] {
            assert!(parse(flags).is_err(), "{flags:?} accepted");
        }
        let args = parse(&["--deny-endpoint-cidrs", "192.168.0.0/24,fd00::/64"]).unwrap();
        assert_eq!(args.deny_endpoint_cidrs.len(), 2);
        assert_eq!(args.max_records_per_member, 2000);
        assert_eq!(args.max_endpoints_per_member, 20_000);
        assert_eq!(args.leader_retry_ms, 1000);
    }

    #[test]
    fn the_byte_budget_is_sized_from_the_memory_limit() {
        let mib = 1usize << 20;
        assert_eq!(
            hub_bytes_for(Some(256 * mib)),
            24 * mib,
            "the chart's limit"
        );
        assert_eq!(hub_bytes_for(Some(64 * mib)), 4 * mib, "at least 4 MiB");
        assert_eq!(hub_bytes_for(Some(8192 * mib)), 64 * mib, "at most 64 MiB");
        assert_eq!(
            hub_bytes_for(None),
            atoll_core::caps::Limits::DEFAULT_HUB_BYTES
        );
        let args =
            parse(&["--max-hub-bytes-per-member", "1048576"]).map(|a| a.max_hub_bytes_per_member);
        assert_eq!(args.ok(), Some(Some(mib)));
    }
}
