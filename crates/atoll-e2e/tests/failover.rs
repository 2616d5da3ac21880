//! Two agent replicas of one member, as the Helm chart runs them: one leads (writes), the other
//! stands by warm (ready, planning, writing nothing); when the leader is killed the standby
//! takes over and writes within the Lease's duration, and when the leader stops (SIGTERM) it
//! releases the Lease and the standby takes over at its next look. Nothing Atoll keeps is
//! deleted, recreated or rewritten by either. Disruptive (replaces c3's agent): run with the
//! other disruptive tests, one at a time. Measured times are printed to stderr.

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atoll_testing::mcs::{
    HELLO_PORTS, deploy_and_export, deploy_service, import_snapshot, wait_endpoints,
    wait_import_clusters,
};
use atoll_testing::membership::binary;
use atoll_testing::ports::{SPARE_AGENT_ADMIN_PORT, agent_admin_port};
use atoll_testing::{ClusterSet, Undo, fixtures, http_get, metric, wait_for};

/// What must not change across a failover: every object's identity (nothing deleted or
/// recreated) and the versions of the derived Services and MCS slices (the data path). The
/// ServiceImports' status may say for a moment that c3's heartbeat is late (SourcesStale): with
/// the 2 s heartbeats of the local ClusterSet a 6 s takeover is late, and saying so is honest.
async fn kept(
    set: &ClusterSet,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String, String)>> {
    Ok(import_snapshot(set, ns, name)
        .await?
        .into_iter()
        .map(|(object, uid, version)| {
            let version = if object.contains(":ServiceImport/") {
                String::new()
            } else {
                version
            };
            (object, uid, version)
        })
        .collect())
}

/// The Lease duration the replicas run with (the agent's default).
const LEASE: Duration = Duration::from_secs(6);

/// One agent replica of c3 with its own election identity and admin port.
struct Replica {
    identity: &'static str,
    port: u16,
    pid: u32,
}

/// The replicas' processes, killed when the test ends however it ends.
type Children = Arc<Mutex<Vec<Child>>>;

fn start(
    set: &ClusterSet,
    children: &Children,
    identity: &'static str,
    port: u16,
) -> anyhow::Result<Replica> {
    let kubeconfig = set
        .kubeconfig
        .parent()
        .map(|dir| dir.join("agent-c3.kubeconfig"))
        .ok_or_else(|| anyhow::anyhow!("no env directory"))?;
    let log = std::fs::File::create(log_path(identity))?;
    let child = Command::new(binary())
        .args(["agent", "--kubeconfig"])
        .arg(&kubeconfig)
        .args(["--heartbeat-seconds", "2", "--member-grace-seconds", "12"])
        .args([
            "--leader-election-identity",
            identity,
            "--log-format",
            "json",
        ])
        .args(["--admin-address", &format!("127.0.0.1:{port}")])
        .env("RUST_LOG", "info,kube=warn")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()?;
    let pid = child.id();
    children
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .push(child);
    Ok(Replica {
        identity,
        port,
        pid,
    })
}

fn log_path(identity: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("atoll-{identity}.log"))
}

/// Every line a replica logged is one JSON object; returns the messages.
fn json_messages(identity: &str) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(log_path(identity))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| {
            let value: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| anyhow::anyhow!("not a JSON log line ({e}): {line}"))?;
            anyhow::ensure!(value["level"].is_string(), "no level: {line}");
            Ok(value["message"].as_str().unwrap_or_default().to_owned())
        })
        .collect()
}

async fn leads(replica: &Replica) -> anyhow::Result<bool> {
    Ok(metric(replica.port, "atoll_agent_leader").await? == 1.0)
}

/// Waits until exactly one of `replicas` leads and every one is ready; returns the leader's
/// index.
async fn one_leader(replicas: &[&Replica], within: Duration) -> anyhow::Result<usize> {
    wait_for(
        "exactly one leading, every replica ready",
        within,
        || async {
            let mut leading = Vec::new();
            let mut ready = Vec::new();
            for (i, r) in replicas.iter().enumerate() {
                if leads(r).await.unwrap_or(false) {
                    leading.push(i);
                }
                ready.push(
                    http_get(r.port, "/readyz")
                        .await
                        .map_or(0, |(code, _)| code),
                );
            }
            Ok(match leading.as_slice() {
                [one] if ready.iter().all(|c| *c == 200) => Ok(*one),
                _ => Err((leading, ready)),
            })
        },
    )
    .await
}

fn signal(replica: &Replica, signal: &str) -> anyhow::Result<()> {
    let status = Command::new("kill")
        .args([signal, &replica.pid.to_string()])
        .status()?;
    anyhow::ensure!(status.success(), "kill {signal} {} failed", replica.pid);
    Ok(())
}

#[tokio::test]
async fn a_standby_replica_takes_over_when_the_leader_dies_and_withdraws_nothing()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xfailover").await?;
    // c3 exports one service and imports one from c2: both must survive the failover.
    deploy_and_export(&set.members[2], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(&set.members[0], &ns.name, "hello", 1).await?;

    fixtures::agents("stop", &["c3"])?;
    let children: Children = Arc::default();
    let _restore = {
        let children = children.clone();
        Undo::new(move || {
            // SIGTERM, so the last leader releases the Lease and the agent started next
            // leads at once; SIGKILL only for a replica that does not stop.
            if let Ok(mut children) = children.lock() {
                for child in children.iter() {
                    let _ = Command::new("kill")
                        .args(["-TERM", &child.id().to_string()])
                        .status();
                }
                for child in children.iter_mut() {
                    for _ in 0..50 {
                        if matches!(child.try_wait(), Ok(Some(_))) {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    let _ = child.kill();
                    let _ = child.wait();
                }
            }
            let _ = fixtures::agents("start", &["c3"]);
        })
    };
    let a = start(&set, &children, "c3-replica-a", agent_admin_port(2)?)?;
    let b = start(&set, &children, "c3-replica-b", SPARE_AGENT_ADMIN_PORT)?;
    // The Lease the stopped agent released (or left) may take one duration to free.
    let first = one_leader(&[&a, &b], LEASE * 4).await?;
    let (leader, standby) = if first == 0 { (a, b) } else { (b, a) };
    eprintln!(
        "leader {}, standby {} (ready, planning, not writing)",
        leader.identity, standby.identity
    );
    deploy_service(&set.members[1], &ns.name, "peer", 1, HELLO_PORTS, false).await?;
    fixtures::export(&set.members[1].client, &ns.name, "peer", &[]).await?;
    wait_import_clusters(&set.members[2], &ns.name, "peer", 1).await?;
    anyhow::ensure!(
        metric(standby.port, "atoll_agent_api_writes_total").await? == 0.0,
        "the standby wrote"
    );
    // Settled first: every member holds every endpoint (pods become ready after the export).
    for member in &set.members {
        wait_endpoints(member, &ns.name, "hello", 2).await?;
        wait_endpoints(member, &ns.name, "peer", 1).await?;
    }
    let before_hello = kept(&set, &ns.name, "hello").await?;
    let before_peer = kept(&set, &ns.name, "peer").await?;

    // Kill the leader: no chance to release the Lease.
    signal(&leader, "-KILL")?;
    let killed = Instant::now();
    // A change made right after: the standby must publish it once it leads.
    deploy_service(&set.members[2], &ns.name, "after", 1, HELLO_PORTS, false).await?;
    fixtures::export(&set.members[2].client, &ns.name, "after", &[]).await?;
    wait_for("the standby to lead", LEASE * 3, || async {
        Ok(if leads(&standby).await? {
            Ok(())
        } else {
            Err("standby")
        })
    })
    .await?;
    let took_over = killed.elapsed();
    wait_import_clusters(&set.members[0], &ns.name, "after", 1).await?;
    let wrote = killed.elapsed();
    eprintln!(
        "leader killed: the standby led after {:.1} s and its first write reached c1 after {:.1} s (Lease {} s)",
        took_over.as_secs_f64(),
        wrote.as_secs_f64(),
        LEASE.as_secs()
    );
    anyhow::ensure!(
        took_over > LEASE / 2,
        "the standby led {took_over:?} after the kill: before the dead leader's Lease could expire"
    );
    // Nothing the dead leader kept was deleted or recreated, no endpoint rewritten.
    assert_eq!(kept(&set, &ns.name, "hello").await?, before_hello);
    assert_eq!(kept(&set, &ns.name, "peer").await?, before_peer);

    // A graceful stop (SIGTERM) releases the Lease: a fresh standby takes over at its next look.
    let fresh = start(&set, &children, "c3-replica-c", leader.port)?;
    one_leader(&[&standby, &fresh], LEASE * 2).await?;
    anyhow::ensure!(
        leads(&standby).await?,
        "the running leader must keep leading"
    );
    signal(&standby, "-TERM")?;
    let stopped = Instant::now();
    wait_for("the fresh replica to lead", LEASE * 2, || async {
        Ok(if leads(&fresh).await? {
            Ok(())
        } else {
            Err("fresh")
        })
    })
    .await?;
    let handed_over = stopped.elapsed();
    eprintln!(
        "leader stopped (SIGTERM): the standby led after {:.1} s",
        handed_over.as_secs_f64()
    );
    anyhow::ensure!(
        handed_over < LEASE,
        "a released Lease must be taken before it would expire ({handed_over:?})"
    );
    assert_eq!(kept(&set, &ns.name, "hello").await?, before_hello);
    // --log-format json, as the chart runs the agent: one JSON object per line.
    let messages = json_messages(fresh.identity)?;
    assert!(
        messages.iter().any(|m| m.starts_with("leading")),
        "the fresh replica logged that it leads: {messages:?}"
    );
    ns.cleanup().await
}
