//! `make bench`: how fast Atoll propagates on the local ClusterSet (3 clusters, hub = c1).
//!
//! 1. N Services with ready endpoints are created in c2, not yet exported.
//! 2. Export -> import: each is exported; latency is until its ServiceImport (with a VIP) is
//!    visible in all 3 clusters, seen through watches.
//! 3. Endpoint change -> remote slice: each Deployment is scaled 1 -> 2; latency is from the
//!    moment c2's own EndpointSlice shows 2 endpoints to the moment c1's MCS slice does.
//! 4. Writes per change, from the agents' `atoll_agent_api_writes_total` less their heartbeat
//!    renewals (`atoll_agent_heartbeats_total`).
//! 5. Idle writes over BENCH_IDLE_SECONDS (default 300).
//!
//! Results are compared with the targets (p99 < 1 s for both latencies, 0 idle writes).

use atoll_bench::stats::percentile;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use atoll_testing::ClusterSet;
use atoll_testing::fixtures;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

type Seen = Arc<Mutex<HashMap<(usize, String), Instant>>>;

/// Records, per (member index, key), the first time `ready` holds for an object.
fn watch_first<K, F>(index: usize, api: Api<K>, seen: Seen, key_and_ready: F)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: Fn(&K) -> Option<String> + Send + 'static,
{
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(
            watcher(api, watcher::Config::default())
                .default_backoff()
                .applied_objects()
        );
        while let Some(Ok(object)) = stream.next().await {
            if let Some(key) = key_and_ready(&object)
                && let Ok(mut map) = seen.lock()
            {
                map.entry((index, key)).or_insert_with(Instant::now);
            }
        }
    });
}

fn report(name: &str, mut samples: Vec<f64>, target_p99: f64) -> bool {
    samples.sort_by(|a, b| a.total_cmp(b));
    let (p50, p99) = (percentile(&samples, 50.0), percentile(&samples, 99.0));
    let ok = p99 < target_p99;
    println!(
        "{name:<34} n={:<4} p50={:>7.1} ms  p99={:>7.1} ms  max={:>7.1} ms  target p99 < {:.0} ms: {}",
        samples.len(),
        p50 * 1e3,
        p99 * 1e3,
        samples.last().copied().unwrap_or(f64::NAN) * 1e3,
        target_p99 * 1e3,
        if ok { "PASS" } else { "FAIL" }
    );
    ok
}

/// The agents' writes besides their heartbeat renewals, summed over their admin ports.
async fn agent_writes(members: usize) -> anyhow::Result<u64> {
    let mut total = 0.0;
    for i in 0..members {
        let port = atoll_testing::agent_admin_port(i)?;
        total += atoll_testing::agent_writes_besides_heartbeats(port).await?;
    }
    Ok(total as u64)
}

async fn wait_all(seen: &Seen, keys: &[(usize, String)], timeout: Duration) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        let missing = {
            let map = seen.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            keys.iter().filter(|k| !map.contains_key(*k)).count()
        };
        if missing == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "{missing} of {} events still missing after {timeout:?}",
            keys.len()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn endpoints_key(slice: &EndpointSlice, service_label: &str, want: usize) -> Option<String> {
    let service = slice.labels().get(service_label)?.clone();
    (slice.endpoints.len() >= want).then_some(service)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("BENCH_SERVICES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100);
    let idle = Duration::from_secs(
        std::env::var("BENCH_IDLE_SECONDS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(300),
    );
    let set = ClusterSet::from_env().await?;
    let members = set.members.len();
    let ns = set.namespace("bench").await?;
    let exporter: Client = set.members[1].client.clone();
    println!(
        "atoll bench: {n} services exported from c2 into {members} clusters (namespace {})",
        ns.name
    );

    // 1. Services with ready endpoints, not yet exported.
    let core_ready: Seen = Arc::default();
    let core_two: Seen = Arc::default();
    let core_api: Api<EndpointSlice> = Api::namespaced(exporter.clone(), &ns.name);
    watch_first(
        0,
        core_api.clone(),
        core_ready.clone(),
        |s: &EndpointSlice| endpoints_key(s, labels::KUBERNETES_SERVICE_NAME, 1),
    );
    watch_first(0, core_api, core_two.clone(), |s: &EndpointSlice| {
        endpoints_key(s, labels::KUBERNETES_SERVICE_NAME, 2)
    });
    let names: Vec<String> = (0..n).map(|i| format!("svc-{i}")).collect();
    for name in &names {
        fixtures::deployment(&exporter, &ns.name, name, 1).await?;
        fixtures::apply_service(
            &exporter,
            &fixtures::service(&ns.name, name, name, &[("tcp", "TCP", 80, 8080)], false),
        )
        .await?;
    }
    let keys: Vec<(usize, String)> = names.iter().map(|s| (0, s.clone())).collect();
    wait_all(&core_ready, &keys, Duration::from_secs(120))
        .await
        .context("services getting endpoints")?;

    // 2. Export -> import visible everywhere.
    let imported: Seen = Arc::default();
    for (i, member) in set.members.iter().enumerate() {
        let api: Api<ServiceImport> = Api::namespaced(member.client.clone(), &ns.name);
        watch_first(i, api, imported.clone(), |imp: &ServiceImport| {
            imp.spec
                .as_ref()
                .filter(|s| !s.ips.is_empty())
                .map(|_| imp.name_any())
        });
    }
    let remote_two: Seen = Arc::default();
    let remote_api: Api<EndpointSlice> = Api::namespaced(set.members[0].client.clone(), &ns.name);
    watch_first(0, remote_api, remote_two.clone(), |s: &EndpointSlice| {
        endpoints_key(s, labels::SERVICE_NAME, 2)
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    let writes_before = agent_writes(members).await?;
    let mut exported_at = HashMap::new();
    for name in &names {
        exported_at.insert(name.clone(), Instant::now());
        fixtures::export(&exporter, &ns.name, name, &[]).await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keys: Vec<(usize, String)> = (0..members)
        .flat_map(|i| names.iter().map(move |s| (i, s.clone())))
        .collect();
    wait_all(&imported, &keys, Duration::from_secs(120))
        .await
        .context("imports appearing")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let export_writes = agent_writes(members).await? - writes_before;
    let samples: Vec<f64> = {
        let map = imported.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        names
            .iter()
            .map(|s| {
                let last = (0..members)
                    .filter_map(|i| map.get(&(i, s.clone())))
                    .max()
                    .copied();
                last.map(|t| t.duration_since(exported_at[s]).as_secs_f64())
                    .unwrap_or(f64::INFINITY)
            })
            .collect()
    };
    let mut ok = report("export -> import in all clusters", samples, 1.0);

    // 3. Endpoint change in c2 -> MCS slice in c1.
    let writes_before = agent_writes(members).await?;
    for name in &names {
        Api::<Deployment>::namespaced(exporter.clone(), &ns.name)
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({"spec": {"replicas": 2}})),
            )
            .await?;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let keys: Vec<(usize, String)> = names.iter().map(|s| (0, s.clone())).collect();
    wait_all(&remote_two, &keys, Duration::from_secs(120))
        .await
        .context("remote slices following")?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let churn_writes = agent_writes(members).await? - writes_before;
    let samples: Vec<f64> = {
        let local = core_two.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let remote = remote_two.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        names
            .iter()
            .map(
                |s| match (local.get(&(0, s.clone())), remote.get(&(0, s.clone()))) {
                    (Some(a), Some(b)) => b.saturating_duration_since(*a).as_secs_f64(),
                    _ => f64::INFINITY,
                },
            )
            .collect()
    };
    ok &= report("endpoint change -> remote slice", samples, 1.0);
    println!(
        "API writes per change              export: {:.1} per service ({export_writes} total)  endpoint change: {:.1} per change ({churn_writes} total)",
        export_writes as f64 / n as f64,
        churn_writes as f64 / n as f64
    );

    // 5. Idle.
    let before = agent_writes(members).await?;
    tokio::time::sleep(idle).await;
    let idle_writes = agent_writes(members).await? - before;
    let idle_ok = idle_writes == 0;
    println!(
        "API writes while idle for {:>4} s    {idle_writes}  target 0: {}",
        idle.as_secs(),
        if idle_ok { "PASS" } else { "FAIL" }
    );
    ok &= idle_ok;
    ns.cleanup().await?;
    anyhow::ensure!(ok, "a target was missed");
    Ok(())
}
