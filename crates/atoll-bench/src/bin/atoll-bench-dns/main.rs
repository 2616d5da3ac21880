//! Helpers for `make bench-dns` (hack/bench-dns.sh):
//!
//! * `populate N FILE`: in cluster c1, replaces namespace `bench-dns` with N ServiceImports
//!   (every fifth headless, with 10 ready endpoints in an MCS EndpointSlice) and writes a dnsperf
//!   query file with a fixed mix: ClusterSetIP A, headless A, SRV, per-endpoint A, NXDOMAIN.
//! * `diff PORT_A PORT_B FILE`: asks both servers every distinct query of FILE and reports the
//!   queries whose answers differ (rcode, or the set of answer records).
//! * `footprint N`: builds the zone of the same N services in this process and prints the memory
//!   of the catalog and of the zone, the first build's time and one-service update times.
//! * `update N NAME=PORT...`: changes the ClusterSetIP of `svc-0` N times, one change at a time,
//!   and reports per server how long after each write it answered with the new address
//!   (p50/p99/max): the cost of one change at the zone's size.
//! * `burst N WAIT NAME=PORT:PID...`: N TCP connections at once to each server in turn (see
//!   [`burst`]): connections still open WAIT seconds later, UDP latency during the burst, RSS.
//!
//! `populate` writes the MCS EndpointSlices as Atoll's agent does, with its credentials and
//! its managed-by label: the admission policy keeps everyone else from writing MCS slices, and
//! `atoll dns` serves only those of trusted controllers.

mod burst;

use std::collections::BTreeSet;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use atoll_api::labels;
use atoll_testing::ClusterSet;
use futures::StreamExt;
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

const NS: &str = "bench-dns";
const ZONE: &str = "svc.clusterset.local";

async fn recreate_namespace(client: &Client) -> anyhow::Result<()> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api.get_opt(NS).await?.is_some() {
        api.delete(NS, &DeleteParams::default()).await?;
        for _ in 0..600 {
            if api.get_opt(NS).await?.is_none() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    api.create(&PostParams::default(), &ns).await?;
    Ok(())
}

/// Service `i` of the bench: every fifth headless, with 10 ready endpoints in one MCS slice.
fn bench_objects(
    i: usize,
) -> anyhow::Result<(atoll_api::v1beta1::ServiceImport, Option<EndpointSlice>)> {
    let name = format!("svc-{i}");
    let headless = i % 5 == 4;
    let import = serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "type": if headless { "Headless" } else { "ClusterSetIP" },
            "ips": if headless { json!([]) } else { json!([format!("10.{}.{}.{}", 101 + i / 62500, (i / 250) % 250, i % 250 + 1)]) },
            "ipFamilies": ["IPv4"],
            "ports": [{"name": "http", "protocol": "TCP", "port": 80}]
        }
    }))?;
    if !headless {
        return Ok((import, None));
    }
    let endpoints: Vec<serde_json::Value> = (0..10)
        .map(|e| json!({"addresses": [format!("10.{}.{}.{}", 200 + i / 62500, (i / 250) % 250, e * 20 + i % 20 + 1)], "conditions": {"ready": true}}))
        .collect();
    let slice = serde_json::from_value(json!({
        "metadata": {"name": format!("{name}-c2"), "namespace": NS, "labels": {
            labels::SERVICE_NAME: name, labels::SOURCE_CLUSTER: "c2",
            labels::ENDPOINTSLICE_MANAGED_BY: labels::ATOLL_ENDPOINTSLICE_MANAGER}},
        "addressType": "IPv4", "endpoints": endpoints,
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]
    }))?;
    Ok((import, Some(slice)))
}

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// The zone of the bench's N services built in this process, without a server or a cluster:
/// memory of the catalog and of the zone (RSS growth), the first build's time, and the time of
/// one-service updates (the cost of a change at this size).
fn footprint(n: usize) -> anyhow::Result<()> {
    use atoll_dns::zone::{Feed, WatchEvent, Zone, ZoneConfig};
    let start = rss_kib();
    let mut feed = Feed::default();
    feed.import_event(WatchEvent::ListStarted);
    feed.slice_event(WatchEvent::ListStarted);
    for i in 0..n {
        let (import, slice) = bench_objects(i)?;
        feed.import_event(WatchEvent::Listed(&import));
        if let Some(slice) = slice {
            feed.slice_event(WatchEvent::Listed(&slice));
        }
    }
    feed.import_event(WatchEvent::ListDone);
    feed.slice_event(WatchEvent::ListDone);
    let changed = feed.take_changed();
    let catalog_rss = rss_kib();
    let started = Instant::now();
    let mut zone = Zone::of_catalog(&ZoneConfig::default(), feed.catalog());
    let build = started.elapsed();
    let zone_rss = rss_kib();
    let mut took = Vec::new();
    for k in 0..1000 {
        let i = (k * 7919) % n;
        let (mut import, _) = bench_objects(i)?;
        if let Some(spec) = import.spec.as_mut() {
            spec.ips = vec![format!("10.102.{}.{}", k / 250, k % 250 + 1)];
        }
        feed.import_event(WatchEvent::Applied(&import));
        let changed = feed.take_changed();
        let started = Instant::now();
        let next = zone.updated(feed.catalog(), &changed);
        took.push(started.elapsed());
        zone = next;
    }
    took.sort();
    let mib = |kib: u64| kib as f64 / 1024.0;
    println!(
        "footprint N={n}: {} services; catalog {:.1} MiB, zone {:.1} MiB ({} names, {:.1} MiB of records); first build {:.0} ms; one-service update p50 {:.1} us, p99 {:.1} us (1000 updates)",
        changed.len(),
        mib(catalog_rss.saturating_sub(start)),
        mib(zone_rss.saturating_sub(catalog_rss)),
        zone.names,
        zone.bytes as f64 / 1048576.0,
        build.as_secs_f64() * 1000.0,
        percentile(&took, 0.5) * 1000.0,
        percentile(&took, 0.99) * 1000.0,
    );
    Ok(())
}

/// A client of the first cluster with the credentials its agent runs with
/// (`agent-<cluster>.kubeconfig` beside the ClusterSet's kubeconfig, written by env-up).
async fn agent_client(set: &ClusterSet) -> anyhow::Result<Client> {
    let cluster = set.members[0]
        .context
        .strip_prefix("kwok-")
        .unwrap_or(&set.members[0].context);
    let path = set
        .kubeconfig
        .with_file_name(format!("agent-{cluster}.kubeconfig"));
    let file = kube::config::Kubeconfig::read_from(&path)
        .with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

async fn populate(n: usize, file: &str) -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let client = set.members[0].client.clone();
    recreate_namespace(&client).await?;
    let imports: Api<atoll_api::v1beta1::ServiceImport> = Api::namespaced(client.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(agent_client(&set).await?, NS);
    let params = PatchParams::apply("atoll-bench-dns");
    let writes = futures::stream::iter(0..n).map(|i| {
        let (imports, slices, params) = (imports.clone(), slices.clone(), params.clone());
        async move {
            let (import, slice) = bench_objects(i)?;
            imports
                .patch(&format!("svc-{i}"), &params, &Patch::Apply(&import))
                .await?;
            if let Some(slice) = slice {
                slices
                    .patch(&format!("svc-{i}-c2"), &params, &Patch::Apply(&slice))
                    .await?;
            }
            anyhow::Ok(())
        }
    });
    let results: Vec<anyhow::Result<()>> = writes.buffer_unordered(32).collect().await;
    for r in results {
        r?;
    }
    // The query mix: 5 queries per 10 services, spread over the whole set.
    let mut lines = Vec::new();
    for i in (0..n).step_by((n / 2000).max(1)) {
        let name = format!("svc-{i}.{NS}.{ZONE}.");
        if i % 5 == 4 {
            lines.push(format!("{name} A"));
            lines.push(format!(
                "10-{}-{}-{}.c2.{name} A",
                200 + i / 62500,
                (i / 250) % 250,
                i % 20 + 1
            ));
        } else {
            lines.push(format!("{name} A"));
            lines.push(format!("{name} A"));
        }
        lines.push(format!("{name} SRV"));
        lines.push(format!("_http._tcp.{name} SRV"));
        lines.push(format!("missing-{i}.{NS}.{ZONE}. A"));
    }
    std::fs::write(file, lines.join("\n") + "\n").with_context(|| format!("writing {file}"))?;
    println!(
        "populated {n} services in {NS}; {} queries in {file}",
        lines.len()
    );
    Ok(())
}

fn ask(port: u16, name: &str, rtype: RecordType) -> anyhow::Result<(String, BTreeSet<String>)> {
    let mut query = Message::query();
    query.metadata.id = 1;
    query.add_query(Query::query(Name::from_ascii(name)?, rtype));
    // A large EDNS buffer: both servers then send whole answers, so truncation strategies (both
    // trim whole records; CoreDNS sets TC for any left out, Atoll only when answer records are)
    // do not count as differences.
    let mut edns = hickory_proto::op::Edns::new();
    edns.set_max_payload(4096);
    query.set_edns(edns);
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.set_read_timeout(Some(Duration::from_secs(2)))?;
    let mut buf = [0u8; 65535];
    let packet = query.to_vec()?;
    let len = (0..3)
        .find_map(|_| {
            socket.send_to(&packet, ("127.0.0.1", port)).ok()?;
            socket.recv_from(&mut buf).ok().map(|(len, _)| len)
        })
        .with_context(|| format!("no answer from port {port} for {name}"))?;
    let m = Message::from_vec(&buf[..len])?;
    let answers = m
        .answers
        .iter()
        .map(|r| format!("{} {}", r.record_type(), r.data))
        .collect();
    Ok((m.metadata.response_code.to_string(), answers))
}

fn diff(a: u16, b: u16, file: &str) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(file)?;
    let queries: BTreeSet<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut differ = 0;
    for line in &queries {
        let (name, t) = line.split_once(' ').context("query line")?;
        let rtype: RecordType = t.parse()?;
        let (ra, sa) = ask(a, name, rtype)?;
        let (rb, sb) = ask(b, name, rtype)?;
        if ra != rb || sa != sb {
            differ += 1;
            if differ <= 10 {
                println!("DIFF {line}\n  atoll:   {ra} {sa:?}\n  coredns: {rb} {sb:?}");
            }
        }
    }
    println!(
        "differential: {} queries, {} same, {differ} different",
        queries.len(),
        queries.len() - differ
    );
    Ok(())
}

/// How long after `since` the server on `port` first answers `name` A with `address`.
fn answers_with(port: u16, name: &str, address: &str, since: Instant) -> anyhow::Result<Duration> {
    let deadline = since + Duration::from_secs(30);
    let expected = format!("A {address}");
    while Instant::now() < deadline {
        let (_, answers) = ask(port, name, RecordType::A)?;
        if answers.contains(&expected) {
            return Ok(since.elapsed());
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    bail!("port {port} did not answer {name} with {address} within 30 s")
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

async fn update(changes: usize, servers: &[(String, u16)]) -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let imports: Api<atoll_api::v1beta1::ServiceImport> =
        Api::namespaced(set.members[0].client.clone(), NS);
    let name = format!("svc-0.{NS}.{ZONE}.");
    let mut took: Vec<Vec<Duration>> = vec![Vec::new(); servers.len()];
    for k in 0..changes {
        let address = format!("10.102.{}.{}", k / 250, k % 250 + 1);
        let since = Instant::now();
        imports
            .patch(
                "svc-0",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"ips": [address]}})),
            )
            .await?;
        let waits: Vec<std::thread::JoinHandle<anyhow::Result<Duration>>> = servers
            .iter()
            .map(|(_, port)| {
                let (port, name, address) = (*port, name.clone(), address.clone());
                std::thread::spawn(move || answers_with(port, &name, &address, since))
            })
            .collect();
        for (i, wait) in waits.into_iter().enumerate() {
            let elapsed = wait
                .join()
                .map_err(|_| anyhow::anyhow!("a waiting thread panicked"))??;
            took[i].push(elapsed);
        }
    }
    for ((server, _), mut took) in servers.iter().zip(took) {
        took.sort();
        println!(
            "update {server}: one change → new answer p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({changes} changes)",
            percentile(&took, 0.5),
            percentile(&took, 0.99),
            percentile(&took, 1.0)
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("populate") => {
            let n = args.get(2).context("N")?.parse()?;
            populate(n, args.get(3).context("FILE")?).await
        }
        Some("diff") => diff(
            args.get(2).context("PORT_A")?.parse()?,
            args.get(3).context("PORT_B")?.parse()?,
            args.get(4).context("FILE")?,
        ),
        Some("footprint") => footprint(args.get(2).context("N")?.parse()?),
        Some("update") => {
            let changes = args.get(2).context("N")?.parse()?;
            let servers = args[3..]
                .iter()
                .map(|a| {
                    let (name, port) = a.split_once('=').context("NAME=PORT")?;
                    anyhow::Ok((name.to_owned(), port.parse()?))
                })
                .collect::<anyhow::Result<Vec<(String, u16)>>>()?;
            update(changes, &servers).await
        }
        Some("burst") => {
            let connections = args.get(2).context("N")?.parse()?;
            let wait = args.get(3).context("WAIT")?.parse()?;
            let targets = args[4..]
                .iter()
                .map(|a| a.parse())
                .collect::<anyhow::Result<Vec<burst::Target>>>()?;
            burst::run(connections, wait, &targets)
        }
        _ => bail!(
            "usage: atoll-bench-dns populate N FILE | footprint N | diff PORT_A PORT_B FILE | update N NAME=PORT... | burst N WAIT NAME=PORT:PID..."
        ),
    }
}
