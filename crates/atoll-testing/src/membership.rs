//! Membership in tests: the hub credentials `atoll join` issued to a member, the `atoll`
//! binary, and the agents' logs.

use std::path::PathBuf;
use std::process::Output;

use anyhow::Context;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client, Config};

use crate::cluster_set::{ClusterSet, Member};

/// A hub client with the credentials `atoll join` stored in `member`'s Secret.
pub async fn hub_client_of(member: &Member) -> anyhow::Result<Client> {
    let secret = Api::<Secret>::namespaced(member.client.clone(), "atoll-system")
        .get("atoll-hub")
        .await
        .with_context(|| format!("reading atoll-system/atoll-hub in {}", member.context))?;
    let bytes = secret
        .data
        .and_then(|d| d.get("kubeconfig").cloned())
        .context("the Secret has no kubeconfig")?;
    let text = String::from_utf8(bytes.0)?;
    let file = kube::config::Kubeconfig::from_yaml(&text)?;
    let config = Config::from_custom_kubeconfig(file, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

/// The `atoll` binary under test (`ATOLL`, or the workspace's debug build).
pub fn binary() -> PathBuf {
    std::env::var_os("ATOLL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/atoll")
        })
}

/// Runs `atoll <args>` and returns what it did.
pub fn atoll(args: &[&str]) -> anyhow::Result<Output> {
    let binary = binary();
    std::process::Command::new(&binary)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .with_context(|| format!("running {}", binary.display()))
}

/// `atoll join` (or `leave`, with `command`) of `cluster` (e.g. `c3`) through the hub c1, as
/// `hack/env-up.sh` runs it.
pub fn membership_command(
    set: &ClusterSet,
    command: &str,
    cluster: &str,
    extra: &[&str],
) -> anyhow::Result<Output> {
    let kubeconfig = set.kubeconfig.display().to_string();
    let context = format!("kwok-{cluster}");
    let mut args = vec![
        command,
        "--kubeconfig",
        &kubeconfig,
        "--context",
        &context,
        "--hub-context",
        "kwok-c1",
    ];
    args.extend_from_slice(extra);
    atoll(&args)
}

/// What `cluster`'s agent (run by `hack/agents.sh`) has logged so far.
pub fn agent_log(set: &ClusterSet, cluster: &str) -> anyhow::Result<String> {
    let path = set
        .kubeconfig
        .with_file_name("procs")
        .join(format!("agent-{cluster}.log"));
    std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))
}

/// Resident memory of `cluster`'s agent (run by `hack/agents.sh`), in MiB.
pub fn agent_rss_mib(set: &ClusterSet, cluster: &str) -> anyhow::Result<f64> {
    let procs = set.kubeconfig.with_file_name("procs");
    let pid_file = procs.join(format!("agent-{cluster}.pid"));
    let pid = std::fs::read_to_string(&pid_file)
        .with_context(|| format!("reading {}", pid_file.display()))?;
    let status = std::fs::read_to_string(format!("/proc/{}/status", pid.trim()))
        .context("reading the agent's /proc status")?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .context("no VmRSS in the agent's /proc status")?;
    Ok(kib / 1024.0)
}

/// Runs `kubectl --context <context> <args>` against the local ClusterSet, synchronously: for
/// clean-ups in `Drop`, where the test's async client cannot run.
pub fn kubectl(set: &ClusterSet, context: &str, args: &[&str]) -> anyhow::Result<()> {
    let status = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&set.kubeconfig)
        .args(["--context", context])
        .args(args)
        .stdout(std::process::Stdio::null())
        .status()
        .context("running kubectl (hack/lib.sh puts it on PATH)")?;
    anyhow::ensure!(status.success(), "kubectl {args:?} failed: {status}");
    Ok(())
}
