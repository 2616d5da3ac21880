//! `atoll`: the one binary of Atoll, with a subcommand per role.

mod cmd;

use clap::{Parser, Subcommand};

/// Atoll implements the Kubernetes Multi-Cluster Services API (KEP-1645): export a Service from
/// any cluster of a ClusterSet with a ServiceExport, and every cluster can reach it as
/// <svc>.<ns>.svc.clusterset.local.
#[derive(Debug, Parser)]
#[command(name = "atoll", version, about, long_about = None, propagate_version = true)]
struct Cli {
    /// Log lines as text, or as one JSON object per line (for log collectors in a cluster).
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "ATOLL_LOG_FORMAT")]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

/// How long-lived subcommands log.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions Atoll needs, ready for `kubectl apply -f -`.
    Crds(cmd::crds::Args),
    /// Print the admission policy that lets only the agent change imported objects.
    AdmissionPolicy(cmd::policy::Args),
    /// Print the member-side ServiceAccounts and RBAC of the agent and the DNS server.
    Rbac(cmd::rbac::Args),
    /// Run the agent of one member cluster: publish its exports on the hub, import everyone's.
    Agent(cmd::agent::Args),
    /// Serve the clusterset.local DNS zone from this cluster's ServiceImports and MCS slices.
    Dns(cmd::dns::Args),
    /// Admit a cluster to the ClusterSet: its hub namespace and credentials, ClusterProperties
    /// and ClusterProfile. Run by an administrator who can reach both the member and the hub.
    Join(cmd::join::JoinArgs),
    /// Take a cluster out of the ClusterSet: its services are withdrawn everywhere.
    Leave(cmd::join::LeaveArgs),
    /// The ClusterSet's members (heartbeat age, state, exports, last error) and this member's
    /// imports.
    Status(cmd::inspect::StatusArgs),
    /// Wire clusterset.local into the cluster's CoreDNS (its Corefile ConfigMap, or a file):
    /// add, remove, check, or print Atoll's block.
    Coredns(cmd::coredns::Args),
    /// Trace one service hop by hop from this member and name the first broken hop with a fix;
    /// exits 1 when something is broken.
    Explain(cmd::inspect::ExplainArgs),
}

/// jemalloc rather than the C library's allocator: an agent holds a large, long-lived heap and
/// every pass allocates and frees many small objects on tokio's worker threads. Measured at
/// 100×200 (`make bench-scale`): the agent's RSS fell from 216 to 158 MiB with it (and the
/// endpoint digest, which did not lower the counted heap), and a full pass took 239 ms instead
/// of 319 (`make bench-pass`, trial run).
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let format = cli.log_format;
    let result = match cli.command {
        Command::Crds(args) => cmd::crds::run(&args, &mut std::io::stdout().lock()),
        Command::AdmissionPolicy(args) => cmd::policy::run(&args, &mut std::io::stdout().lock()),
        Command::Rbac(args) => cmd::rbac::run(&args, &mut std::io::stdout().lock()),
        Command::Dns(args) => serve(format, cmd::dns::run(args)),
        Command::Agent(args) => serve(format, cmd::agent::run(args)),
        Command::Join(args) => serve(format, cmd::join::join(args)),
        Command::Leave(args) => serve(format, cmd::join::leave(args)),
        Command::Status(args) => serve(format, cmd::inspect::status(args)),
        Command::Coredns(args) => match serve(format, cmd::coredns::run(args)) {
            Ok(true) => Ok(()),
            Ok(false) => return std::process::ExitCode::from(1),
            Err(e) => Err(e),
        },
        Command::Explain(args) => match serve(format, cmd::inspect::explain_service(args)) {
            Ok(true) => Ok(()),
            Ok(false) => return std::process::ExitCode::from(1),
            Err(e) => Err(e),
        },
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        // `atoll crds | head` closing the pipe early is not an error worth a message.
        Err(e) if is_broken_pipe(&e) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Logs to stderr, as text or JSON lines; `RUST_LOG` filters (default `info`).
fn init_logging(format: LogFormat) -> anyhow::Result<()> {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let result = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
    result.map_err(|e| anyhow::anyhow!("initialising logging: {e}"))
}

/// Runs a long-lived subcommand: logging, a Tokio runtime, and on the way out a short grace
/// period for lingering tasks (watch streams, connections) instead of waiting for them.
fn serve<T>(
    format: LogFormat,
    command: impl std::future::Future<Output = anyhow::Result<T>>,
) -> anyhow::Result<T> {
    init_logging(format)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(command);
    runtime.shutdown_timeout(std::time::Duration::from_millis(200));
    result
}

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
