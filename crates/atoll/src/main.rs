//! `atoll`: the one binary of Atoll, with a subcommand per role.

mod cmd;

use clap::{Parser, Subcommand};

/// Atoll implements the Kubernetes Multi-Cluster Services API (KEP-1645): export a Service from
/// any cluster of a ClusterSet with a ServiceExport, and every cluster can reach it as
/// <svc>.<ns>.svc.clusterset.local.
#[derive(Debug, Parser)]
#[command(name = "atoll", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions Atoll needs, ready for `kubectl apply -f -`.
    Crds(cmd::crds::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => cmd::crds::run(&args, &mut std::io::stdout().lock()),
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

fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error
        .chain()
        .filter_map(|cause| cause.downcast_ref::<std::io::Error>())
        .any(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
}
