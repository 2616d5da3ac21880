//! `make bench-scale`: the published envelope. Member clusters are simulated by writing into
//! the hub what their agents would (ExportedService records, EndpointSlice copies with 10
//! endpoints each, and heartbeat Leases whose claims match what they publish, renewed every
//! 2 s); one real member (c2, the only agent running) imports all of it. For each size
//! (clusters × services, `BENCH_SIZES`, default `10x100,20x100,50x200`) it measures, for c2:
//!
//! * converge: from the last hub write to c2 holding every ServiceImport (with its VIP) and
//!   every MCS EndpointSlice with all 10 endpoints;
//! * endpoint change -> member slice: a copy's endpoint is replaced, until c2's MCS slice of
//!   that cluster and service shows it (`BENCH_SAMPLES`, default 40, one at a time);
//! * new export -> ServiceImport: a simulated cluster publishes a new service (record, copy,
//!   claim), until c2's ServiceImport has its VIP (`BENCH_NEW_EXPORTS`, default 20);
//! * the agent's RSS (now and peak) and CPU seconds while converging, from /proc;
//! * the agent's API writes besides its heartbeat renewals, per change and while idle for
//!   `BENCH_IDLE_SECONDS` (default 60);
//! * withdraw: the simulated clusters stop renewing; until c2 holds none of their imports.
//!
//! The agent's pid is `BENCH_AGENT_PID`; the table ends with the targets of the scale issue.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use atoll_api::hub;
use atoll_api::hub::{CLAIM_ANNOTATION, LEASE_NAME};
use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use atoll_bench::fleet::{ENDPOINTS, NS, addresses, cluster_name, copy, record};
use atoll_core::liveness::{Claim, digest, next_epoch};
use atoll_testing::ClusterSet;
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher::{self, Event};
use kube::{Api, Client, ResourceExt};
use tokio::sync::Notify;

const MANAGER: &str = "atoll-bench-scale";
const RENEW: Duration = Duration::from_secs(2);
const IN_FLIGHT: usize = 16;

/// What the simulated clusters publish, by cluster: the claimed names.
type Published = Arc<Mutex<BTreeMap<String, BTreeSet<String>>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

async fn apply<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let name = object.name_any();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {name}"))?;
    Ok(())
}

/// Publishes `service` from `cluster` as its agent would: record, copy, then the claim.
async fn publish(
    hub: &Client,
    cluster: &str,
    service: &str,
    addrs: &[String],
) -> anyhow::Result<()> {
    let ns = hub::namespace_for(cluster);
    apply(
        &Api::namespaced(hub.clone(), &ns),
        &record(cluster, service),
    )
    .await?;
    apply(
        &Api::namespaced(hub.clone(), &ns),
        &copy(cluster, service, addrs),
    )
    .await
}

fn claimed_names(cluster: &str, service: &str) -> [String; 2] {
    let r = record(cluster, service);
    let c = copy(cluster, service, &[]);
    [format!("r/{}", r.name_any()), format!("s/{}", c.name_any())]
}

/// Each simulated cluster's current claim: as a real agent does, a cluster keeps its claim's
/// epoch while what it publishes is unchanged, and takes a new one when it changes (a new
/// epoch at every renewal would make every importer keep new accepted epochs forever).
type Claims = Arc<Mutex<BTreeMap<String, Claim>>>;

/// Renews every simulated cluster's heartbeat Lease with a claim of what it publishes.
async fn renew_all(hub: &Client, published: &Published, claims: &Claims) -> anyhow::Result<()> {
    let now_ms = u64::try_from(Timestamp::now().as_millisecond()).unwrap_or_default();
    let encoded: Vec<(String, String)> = {
        let published = lock(published);
        let mut claims = lock(claims);
        let newest = claims.values().map(|c| c.epoch).max().unwrap_or(0);
        let epoch = next_epoch(newest, now_ms);
        published
            .iter()
            .map(|(c, names)| {
                let digest = digest(names.iter().map(String::as_str));
                let claim = claims
                    .entry(c.clone())
                    .and_modify(|claim| {
                        if claim.digest != digest {
                            *claim = Claim {
                                epoch,
                                digest: digest.clone(),
                            };
                        }
                    })
                    .or_insert_with(|| Claim {
                        epoch,
                        digest: digest.clone(),
                    });
                (c.clone(), claim.encode())
            })
            .collect()
    };
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(encoded)
        .map(|(cluster, claim)| async move { renew(hub, &cluster, &claim).await })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn renew(hub: &Client, cluster: &str, claim: &str) -> anyhow::Result<()> {
    let mut lease = Lease::default();
    lease.metadata.name = Some(LEASE_NAME.into());
    lease.metadata.namespace = Some(hub::namespace_for(cluster));
    lease.metadata.annotations = Some(BTreeMap::from([(
        CLAIM_ANNOTATION.to_owned(),
        claim.to_owned(),
    )]));
    let spec = lease.spec.get_or_insert_with(Default::default);
    spec.holder_identity = Some(cluster.to_owned());
    spec.renew_time = Some(MicroTime(Timestamp::now()));
    spec.lease_duration_seconds = Some(6);
    let api: Api<Lease> = Api::namespaced(hub.clone(), &hub::namespace_for(cluster));
    let value = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": lease.metadata, "spec": lease.spec,
    });
    api.patch(
        LEASE_NAME,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(&value),
    )
    .await
    .with_context(|| format!("renewing the heartbeat of {cluster}"))?;
    Ok(())
}

/// What c2 holds in the bench namespace, kept current by watches.
#[derive(Default)]
struct Member {
    /// (service, source cluster) -> endpoint addresses of its MCS slices.
    slices: HashMap<(String, String), BTreeSet<String>>,
    /// slice name -> (service, source cluster), to follow deletions.
    slice_owner: HashMap<String, ((String, String), BTreeSet<String>)>,
    /// ServiceImports with their VIP.
    imports: BTreeSet<String>,
    /// First sighting of each awaited address in a slice of (service, cluster).
    first_address: HashMap<(String, String, String), Instant>,
    /// First sighting of each import with a VIP.
    first_import: HashMap<String, Instant>,
}

impl Member {
    fn full_slices(&self) -> usize {
        self.slices
            .values()
            .filter(|a| a.len() >= ENDPOINTS)
            .count()
    }
}

type Shared = (Arc<Mutex<Member>>, Arc<Notify>);

fn watch_member(client: &Client) -> Shared {
    let state: Arc<Mutex<Member>> = Arc::default();
    let changed = Arc::new(Notify::new());
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let config = watcher::Config::default().labels(&format!(
        "{}={}",
        labels::ENDPOINTSLICE_MANAGED_BY,
        labels::ATOLL_ENDPOINTSLICE_MANAGER
    ));
    let (s, n) = (state.clone(), changed.clone());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher::watcher(slices, config));
        while let Some(event) = stream.next().await {
            let now = Instant::now();
            let mut m = lock(&s);
            match event {
                Ok(Event::Apply(slice) | Event::InitApply(slice)) => {
                    let l = slice.labels();
                    let (Some(svc), Some(cluster)) =
                        (l.get(labels::SERVICE_NAME), l.get(labels::SOURCE_CLUSTER))
                    else {
                        continue;
                    };
                    let key = (svc.clone(), cluster.clone());
                    let addrs: BTreeSet<String> = slice
                        .endpoints
                        .iter()
                        .flat_map(|e| e.addresses.iter().cloned())
                        .collect();
                    for a in &addrs {
                        m.first_address
                            .entry((key.0.clone(), key.1.clone(), a.clone()))
                            .or_insert(now);
                    }
                    m.slices.insert(key.clone(), addrs.clone());
                    m.slice_owner.insert(slice.name_any(), (key, addrs));
                }
                Ok(Event::Delete(slice)) => {
                    if let Some((key, _)) = m.slice_owner.remove(&slice.name_any()) {
                        m.slices.remove(&key);
                    }
                }
                Ok(_) => {}
                Err(e) => eprintln!("member slice watch: {e}"),
            }
            drop(m);
            n.notify_waiters();
        }
    });
    let imports: Api<ServiceImport> = Api::namespaced(client.clone(), NS);
    let (s, n) = (state.clone(), changed.clone());
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(watcher::watcher(imports, watcher::Config::default()));
        while let Some(event) = stream.next().await {
            let now = Instant::now();
            let mut m = lock(&s);
            match event {
                Ok(Event::Apply(i) | Event::InitApply(i)) => {
                    if i.spec.as_ref().is_some_and(|s| !s.ips.is_empty()) {
                        m.first_import.entry(i.name_any()).or_insert(now);
                        m.imports.insert(i.name_any());
                    }
                }
                Ok(Event::Delete(i)) => {
                    m.imports.remove(&i.name_any());
                }
                Ok(_) => {}
                Err(e) => eprintln!("member import watch: {e}"),
            }
            drop(m);
            n.notify_waiters();
        }
    });
    (state, changed)
}

/// Waits until `done` holds for c2's state; returns when it first held.
async fn until(
    shared: &Shared,
    what: &str,
    timeout: Duration,
    done: impl Fn(&Member) -> bool,
) -> anyhow::Result<Instant> {
    let start = Instant::now();
    loop {
        let notified = shared.1.notified();
        if done(&lock(&shared.0)) {
            return Ok(Instant::now());
        }
        anyhow::ensure!(
            start.elapsed() < timeout,
            "{what}: not reached after {timeout:?}"
        );
        let _ = tokio::time::timeout(Duration::from_millis(200), notified).await;
    }
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

/// CPU seconds (user + system) and RSS / peak RSS in MiB of `pid`.
fn process(pid: u32) -> anyhow::Result<(f64, f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat (BENCH_AGENT_PID)"))?;
    // Fields after the command (which may hold spaces) start at the state, field 3.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> f64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    // utime and stime are fields 14 and 15 (indexes 11, 12 here), in USER_HZ = 100 ticks/s.
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    Ok((cpu, kib("VmRSS:") / 1024.0, kib("VmHWM:") / 1024.0))
}

/// The agent's writes besides its heartbeat renewals.
async fn writes(port: u16) -> anyhow::Result<f64> {
    atoll_testing::agent_writes_besides_heartbeats(port).await
}

/// Waits until the agent has made no write for 2 s (what a phase set off is finished before
/// the next phase counts its own writes); at most a minute.
async fn settle(port: u16) -> anyhow::Result<()> {
    let start = Instant::now();
    let mut last = writes(port).await?;
    loop {
        tokio::time::sleep(Duration::from_secs(2)).await;
        let now = writes(port).await?;
        if now == last || start.elapsed() > Duration::from_secs(60) {
            return Ok(());
        }
        last = now;
    }
}

/// Figures of one size.
#[derive(Debug, Default)]
struct Row {
    size: String,
    objects: usize,
    write_seconds: f64,
    converge: f64,
    converge_cpu: f64,
    endpoint: (f64, f64),
    new_export: (f64, f64),
    rss: f64,
    peak_rss: f64,
    endpoint_writes: f64,
    export_writes: f64,
    idle_writes: f64,
    idle_seconds: u64,
    withdraw: f64,
    full_pass: f64,
}

async fn run_size(
    hub: &Client,
    shared: &Shared,
    size: &str,
    clusters: usize,
    services: usize,
    pid: u32,
    port: u16,
) -> anyhow::Result<Row> {
    let mut row = Row {
        size: size.to_owned(),
        ..Default::default()
    };
    let names: Vec<String> = (0..clusters).map(|c| cluster_name(size, c)).collect();
    let namespaces: Api<Namespace> = Api::all(hub.clone());
    for name in &names {
        let ns = Namespace {
            metadata: ObjectMeta {
                name: Some(hub::namespace_for(name)),
                ..Default::default()
            },
            ..Default::default()
        };
        match namespaces.create(&PostParams::default(), &ns).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {}
            Err(e) => return Err(e).context("creating a simulated member's hub namespace"),
        }
    }
    let published: Published = Arc::default();
    for name in &names {
        lock(&published).insert(name.clone(), BTreeSet::new());
    }
    let claims: Claims = Arc::default();
    renew_all(hub, &published, &claims).await?;
    // Heartbeats every 2 s until told to stop.
    let stop = Arc::new(Notify::new());
    let heartbeats = {
        let (hub, published, stop, claims) =
            (hub.clone(), published.clone(), stop.clone(), claims.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(RENEW) => {}
                    () = stop.notified() => return,
                }
                if let Err(e) = renew_all(&hub, &published, &claims).await {
                    eprintln!("heartbeat: {e:#}");
                }
            }
        })
    };

    // 1. Publish everything, service by service, every cluster (as members coming up would).
    let cpu_before = process(pid)?.0;
    let started = Instant::now();
    let work: Vec<(usize, usize)> = (0..services)
        .flat_map(|s| (0..clusters).map(move |c| (c, s)))
        .collect();
    let results: Vec<anyhow::Result<()>> = futures::stream::iter(work)
        .map(|(c, s)| {
            let (names, published) = (&names, &published);
            async move {
                let svc = format!("svc-{s}");
                publish(hub, &names[c], &svc, &addresses(c, s)).await?;
                lock(published)
                    .entry(names[c].clone())
                    .or_default()
                    .extend(claimed_names(&names[c], &svc));
                Ok(())
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    results.into_iter().collect::<anyhow::Result<()>>()?;
    // The members claim what they now publish at once (an agent renews on a new digest).
    renew_all(hub, &published, &claims).await?;
    let last_write = Instant::now();
    row.write_seconds = last_write.duration_since(started).as_secs_f64();
    row.objects = 2 * clusters * services;
    let want_slices = clusters * services;
    let done = until(shared, "converging", Duration::from_secs(600), |m| {
        m.imports.len() >= services && m.full_slices() >= want_slices
    })
    .await?;
    row.converge = done.duration_since(last_write).as_secs_f64();
    row.converge_cpu = process(pid)?.0 - cpu_before;

    // 2. Endpoint changes, one at a time.
    settle(port).await?;
    let samples: usize = env_or("BENCH_SAMPLES", 40);
    let before = writes(port).await?;
    let mut latencies = Vec::new();
    let mut seed: u64 = 0x5eed;
    for i in 0..samples {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let (c, s) = (
            (seed >> 33) as usize % clusters,
            (seed >> 17) as usize % services,
        );
        let svc = format!("svc-{s}");
        let mut addrs = addresses(c, s);
        let new = format!("10.250.{}.{}", i / 250, i % 250 + 1);
        addrs[0] = new.clone();
        let ns = hub::namespace_for(&names[c]);
        let t0 = Instant::now();
        apply(
            &Api::namespaced(hub.clone(), &ns),
            &copy(&names[c], &svc, &addrs),
        )
        .await?;
        let key = (svc, names[c].clone(), new);
        until(shared, "an endpoint change", Duration::from_secs(60), |m| {
            m.first_address.contains_key(&key)
        })
        .await?;
        let seen = lock(&shared.0).first_address[&key];
        latencies.push(seen.duration_since(t0).as_secs_f64());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settle(port).await?;
    row.endpoint_writes = (writes(port).await? - before) / samples.max(1) as f64;
    latencies.sort_by(f64::total_cmp);
    row.endpoint = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));

    // 3. New exports, one at a time.
    let new_exports: usize = env_or("BENCH_NEW_EXPORTS", 20);
    let before = writes(port).await?;
    let mut latencies = Vec::new();
    for j in 0..new_exports {
        let c = j % clusters;
        // Named per size: the watches remember first sightings across sizes.
        let svc = format!("new-{size}-{j}");
        let t0 = Instant::now();
        publish(hub, &names[c], &svc, &addresses(c, 250)).await?;
        lock(&published)
            .entry(names[c].clone())
            .or_default()
            .extend(claimed_names(&names[c], &svc));
        renew_all(hub, &published, &claims).await?;
        until(shared, "a new export", Duration::from_secs(60), |m| {
            m.first_import.contains_key(&svc)
        })
        .await?;
        let seen = lock(&shared.0).first_import[&svc];
        latencies.push(seen.duration_since(t0).as_secs_f64());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    settle(port).await?;
    row.export_writes = (writes(port).await? - before) / new_exports.max(1) as f64;
    latencies.sort_by(f64::total_cmp);
    row.new_export = (percentile(&latencies, 50.0), percentile(&latencies, 99.0));

    // 4. Idle. The changes above moved the simulated members' claims: the importer keeps the
    // accepted epochs in its member at most once per batch, so the last of those writes may
    // come up to a batch after the last change. Idle starts after it.
    tokio::time::sleep(atoll_core::reconciler::EPOCH_BATCH + Duration::from_secs(2)).await;
    row.idle_seconds = env_or("BENCH_IDLE_SECONDS", 60);
    let before = writes(port).await?;
    tokio::time::sleep(Duration::from_secs(row.idle_seconds)).await;
    row.idle_writes = writes(port).await? - before;
    let (_, rss, peak) = process(pid)?;
    row.rss = rss;
    row.peak_rss = peak;
    row.full_pass = atoll_testing::metric(port, "atoll_agent_full_pass_seconds")
        .await
        .unwrap_or(f64::NAN);

    // 5. Withdraw: every simulated cluster stops renewing.
    stop.notify_one();
    heartbeats.await?;
    let silent = Instant::now();
    let done = until(shared, "withdrawing", Duration::from_secs(600), |m| {
        m.imports.is_empty() && m.slices.is_empty()
    })
    .await?;
    row.withdraw = done.duration_since(silent).as_secs_f64();

    // Clean up: the simulated members' hub namespaces, gone before the next size.
    for name in &names {
        let _ = namespaces
            .delete(&hub::namespace_for(name), &DeleteParams::background())
            .await;
    }
    let start = Instant::now();
    loop {
        let left = namespaces
            .list(&Default::default())
            .await?
            .items
            .iter()
            .filter(|n| names.iter().any(|c| n.name_any() == hub::namespace_for(c)))
            .count();
        if left == 0 || start.elapsed() > Duration::from_secs(300) {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(row)
}

fn verdict(ok: bool) -> &'static str {
    if ok { "PASS" } else { "FAIL" }
}

fn print_table(rows: &[Row]) -> bool {
    println!();
    println!(
        "| size (clusters×services) | hub objects | converge after last write | endpoint change p50 / p99 | new export p50 / p99 | agent RSS (peak) | agent CPU converging | writes per endpoint change / new export | idle writes | withdraw all (grace 12 s) | full pass | |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut ok = true;
    for r in rows {
        let pass = r.converge < 10.0
            && r.endpoint.1 < 1.0
            && r.new_export.1 < 1.0
            && r.peak_rss < 256.0
            && r.idle_writes == 0.0;
        ok &= pass;
        println!(
            "| {} | {} | {:.1} s | {:.0} / {:.0} ms | {:.0} / {:.0} ms | {:.0} ({:.0}) MiB | {:.1} s | {:.1} / {:.1} | {:.0} in {} s | {:.1} s | {} | {} |",
            r.size,
            r.objects,
            r.converge,
            r.endpoint.0 * 1e3,
            r.endpoint.1 * 1e3,
            r.new_export.0 * 1e3,
            r.new_export.1 * 1e3,
            r.rss,
            r.peak_rss,
            r.converge_cpu,
            r.endpoint_writes,
            r.export_writes,
            r.idle_writes,
            r.idle_seconds,
            r.withdraw,
            // Agents before the incremental passes had no such metric.
            if r.full_pass > 0.0 {
                format!("{:.0} ms", r.full_pass * 1e3)
            } else {
                "–".to_owned()
            },
            verdict(pass),
        );
    }
    println!(
        "| target | | < 10 s | p99 < 1000 ms | p99 < 1000 ms | peak < 256 MiB | | | 0 | | | |"
    );
    ok
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let pid: u32 = std::env::var("BENCH_AGENT_PID")
        .context("BENCH_AGENT_PID: the pid of c2's agent")?
        .parse()
        .context("BENCH_AGENT_PID")?;
    let sizes = std::env::var("BENCH_SIZES").unwrap_or_else(|_| "10x100,20x100,50x200".into());
    let set = ClusterSet::from_env().await?;
    let hub = set.members[0].client.clone();
    let member = set.members[1].client.clone();
    let port = atoll_testing::agent_admin_port(1)?;
    let namespaces: Api<Namespace> = Api::all(member.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(NS.into()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &ns).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("creating the bench namespace in c2"),
    }
    let shared = watch_member(&member);
    let mut rows = Vec::new();
    for size in sizes.split(',').filter(|s| !s.is_empty()) {
        let (c, s) = size
            .split_once('x')
            .context("BENCH_SIZES: <clusters>x<services>,...")?;
        let (clusters, services): (usize, usize) = (c.parse()?, s.parse()?);
        anyhow::ensure!(clusters <= 100 && services <= 250, "at most 100x250");
        println!(
            "atoll bench-scale: {clusters} simulated clusters × {services} services, {ENDPOINTS} endpoints each, imported by c2"
        );
        let row = run_size(&hub, &shared, size, clusters, services, pid, port).await?;
        println!("  {row:?}");
        rows.push(row);
    }
    let _ = namespaces.delete(NS, &DeleteParams::background()).await;
    let ok = print_table(&rows);
    anyhow::ensure!(ok, "a target was missed");
    Ok(())
}
