//! `make bench-pass`: the CPU one reconcile step costs an importer of a whole fleet, without a
//! cluster. For each size (clusters × services, `BENCH_SIZES`, default
//! `10x100,50x200,100x200,250x200`) the fleet's hub objects (a record and a 10-endpoint copy
//! per cluster and service, as `make bench-scale` publishes them) and every member's heartbeat
//! Lease (its claim matching what it publishes) are handed to `atoll_core::reconciler` exactly
//! as the agent's loop does. The member side is filled from the plans' own writes (a derived
//! Service gets a cluster IP, as the apiserver gives one) until a full pass writes nothing.
//!
//! Then, on a steady fleet, it times (wall clock, one thread):
//! * a full pass (the first one after a start or a relist, and the safety net);
//! * a *beat* step: one member's heartbeat moved and nothing else (at 250 members renewing
//!   every 10 s, 25 of these a second: what the loop does while idle);
//! * an *endpoint* step: one member's endpoint copy of one service changed (the step that
//!   carries an endpoint change to the MCS slices).
//!
//! A step's fixed cost (what it pays whatever its scope) is what every change waits for when
//! the loop is busy, so the endpoint and beat steps are the numbers that bound `make
//! bench-scale`'s latencies. Targets printed beside them.

use atoll_bench::stats::percentile;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context;
use atoll_api::endpoint::ServedSlice;
use atoll_api::hub::{
    self, BEAT_ANNOTATION, CLAIM_ANNOTATION, ExportedEndpointSlice, ExportedService, LEASE_NAME,
};
use atoll_api::interner::Interner;
use atoll_api::keys::ServiceKey;
use atoll_api::mcs_slice::McsSlice;
use atoll_bench::fleet::{NS, addresses, cluster_name, copy, record};
use atoll_core::ClusterId;
use atoll_core::liveness::{Claim, Settings, publication_digest};
use atoll_core::plan::{Member, Observed};
use atoll_core::reconciler::{Config, KeptRead, Reconciler, Step, Tick};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// The agent's allocator (`crates/atoll/src/main.rs`): a step's cost depends on it.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// The importer's cluster id.
const IMPORTER: &str = "importer";
/// Steps timed per kind, unless `BENCH_SAMPLES` says otherwise (more samples make a profile of
/// the steps stand out from the set-up).
const SAMPLES: usize = 40;
/// Targets: what a step may cost so that an endpoint change (p99 < 250 ms in `make
/// bench-scale`) never waits long behind another step.
const STEP_TARGET_MS: f64 = 25.0;

/// The simulated fleet and what the importer holds of its own cluster.
struct World {
    records: Vec<Arc<ExportedService>>,
    copies: Vec<Arc<ExportedEndpointSlice>>,
    /// By cluster: its Lease's claim and beat.
    leases: BTreeMap<String, (Claim, u64)>,
    services: BTreeMap<String, Arc<Service>>,
    imports: BTreeMap<String, Arc<atoll_api::v1beta1::ServiceImport>>,
    mcs: BTreeMap<(String, String), Arc<McsSlice>>,
    /// Shares the MCS slices' repeated values, as the agent's watch does.
    interner: Interner,
    next_ip: u32,
}

fn lease(cluster: &str, claim: &Claim, beat: u64) -> Arc<Lease> {
    let mut lease = Lease::default();
    lease.metadata.name = Some(LEASE_NAME.into());
    lease.metadata.namespace = Some(hub::namespace_for(cluster));
    lease.metadata.annotations = Some(BTreeMap::from([
        (CLAIM_ANNOTATION.to_owned(), claim.encode()),
        (BEAT_ANNOTATION.to_owned(), beat.to_string()),
    ]));
    Arc::new(lease)
}

impl World {
    fn new(size: &str, clusters: usize, services: usize) -> Self {
        let (mut records, mut copies) = (Vec::new(), Vec::new());
        let mut leases = BTreeMap::new();
        for c in 0..clusters {
            let cluster = cluster_name(size, c);
            let (mut mine_r, mut mine_c) = (Vec::new(), Vec::new());
            for s in 0..services {
                let name = format!("svc-{s:04}");
                mine_r.push(Arc::new(record(&cluster, &name)));
                mine_c.push(Arc::new(copy(&cluster, &name, &addresses(c, s))));
            }
            let claim = Claim {
                epoch: 1,
                digest: publication_digest(&mine_r, &mine_c),
            };
            leases.insert(cluster, (claim, 1));
            records.extend(mine_r);
            copies.extend(mine_c);
        }
        leases.insert(
            IMPORTER.to_owned(),
            (
                Claim {
                    epoch: 1,
                    digest: publication_digest(&[], &[]),
                },
                1,
            ),
        );
        Self {
            records,
            copies,
            leases,
            services: BTreeMap::new(),
            imports: BTreeMap::new(),
            mcs: BTreeMap::new(),
            interner: Interner::default(),
            next_ip: 0,
        }
    }

    fn observed(&self) -> Observed {
        Observed {
            records: self.records.clone(),
            hub_slices: self.copies.clone(),
            services: self.services.values().cloned().collect(),
            imports: self.imports.values().cloned().collect(),
            mcs_slices: self.mcs.values().cloned().collect(),
            namespaces: vec![Arc::new(Namespace {
                metadata: ObjectMeta {
                    name: Some(NS.into()),
                    ..Default::default()
                },
                ..Default::default()
            })],
            ..Observed::default()
        }
    }

    fn leases(&self) -> Vec<Arc<Lease>> {
        self.leases
            .iter()
            .map(|(c, (claim, beat))| lease(c, claim, *beat))
            .collect()
    }

    /// Carries out a step's writes in the member, as its apiserver would; returns how many.
    fn apply(&mut self, step: &Step) -> usize {
        let w = &step.plan.member;
        for service in &w.apply_derived {
            let mut service = service.clone();
            let name = service.metadata.name.clone().unwrap_or_default();
            let spec = service.spec.get_or_insert_with(Default::default);
            match self.services.get(&name).and_then(|s| s.spec.as_ref()) {
                Some(old) if old.cluster_ips.is_some() => {
                    spec.cluster_ip = old.cluster_ip.clone();
                    spec.cluster_ips = old.cluster_ips.clone();
                }
                _ => {
                    self.next_ip += 1;
                    let ip = format!("10.96.{}.{}", self.next_ip / 250, self.next_ip % 250 + 1);
                    spec.cluster_ip = Some(ip.clone());
                    spec.cluster_ips = Some(vec![ip]);
                }
            }
            self.services.insert(name, Arc::new(service));
        }
        for import in &w.apply_imports {
            let name = import.object.metadata.name.clone().unwrap_or_default();
            let mut object = import.object.clone();
            object.status = self.imports.get(&name).and_then(|i| i.status.clone());
            self.imports.insert(name, Arc::new(object));
        }
        for status in &w.import_statuses {
            if let Some(existing) = self.imports.get(&status.key.name) {
                let mut import = (**existing).clone();
                import.status = Some(status.status.clone());
                self.imports
                    .insert(status.key.name.clone(), Arc::new(import));
            }
        }
        for slice in &w.apply_slices {
            let key = (
                slice.metadata.namespace.clone().unwrap_or_default(),
                slice.metadata.name.clone().unwrap_or_default(),
            );
            let kept = McsSlice::kept(ServedSlice::from(slice), &mut self.interner);
            self.mcs.insert(key, Arc::new(kept));
        }
        w.apply_derived.len()
            + w.apply_imports.len()
            + w.import_statuses.len()
            + w.apply_slices.len()
    }

    /// One member's heartbeat moves.
    fn beat(&mut self, cluster: &str) {
        if let Some((_, beat)) = self.leases.get_mut(cluster) {
            *beat += 1;
        }
    }

    /// The endpoint copy of service `s` of cluster `c` changes (one address moves), and the
    /// member's claim with it (same names, so the same digest).
    fn move_endpoint(&mut self, size: &str, c: usize, s: usize, services: usize, round: usize) {
        let cluster = cluster_name(size, c);
        let mut addrs = addresses(c, s);
        addrs[0] = format!("10.250.{}.{}", round / 250, round % 250 + 1);
        let index = c * services + s;
        if let Some(slot) = self.copies.get_mut(index) {
            *slot = Arc::new(copy(&cluster, &format!("svc-{s:04}"), &addrs));
        }
    }
}

struct Clock {
    start: Instant,
    wall: i64,
    elapsed: Duration,
}

impl Clock {
    fn tick(&mut self, by: Duration, leading: bool) -> Tick {
        self.elapsed += by;
        let ms = self.wall + i64::try_from(self.elapsed.as_millis()).unwrap_or_default();
        Tick {
            now: self.start + self.elapsed,
            wall: Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH)),
            leading,
        }
    }
}

struct Row {
    size: String,
    hub_objects: usize,
    converge_passes: usize,
    full_ms: f64,
    beat: (f64, f64),
    endpoint: (f64, f64),
    endpoint_writes: usize,
}

fn run(size: &str) -> anyhow::Result<Row> {
    let (clusters, services) = size
        .split_once('x')
        .and_then(|(c, s)| Some((c.parse::<usize>().ok()?, s.parse::<usize>().ok()?)))
        .with_context(|| format!("size {size}: expected CLUSTERSxSERVICES"))?;
    let mut world = World::new(size, clusters, services);
    let id = ClusterId::new(IMPORTER).context("importer id")?;
    let settings = Settings::new(Duration::from_secs(10), Duration::from_secs(60));
    let mut clock = Clock {
        start: Instant::now(),
        wall: Timestamp::now().as_millisecond(),
        elapsed: Duration::ZERO,
    };
    let first = clock.tick(Duration::ZERO, true);
    let mut reconciler = Reconciler::new(
        Config::new(Member::new(id), settings),
        KeptRead::Absent,
        first.now,
        &first.wall,
    );

    // Converge: full passes until one writes nothing. Every member beats before each (an
    // importer takes nothing of a member before it has seen it beat).
    let mut converge_passes = 0;
    let mut full_ms = f64::NAN;
    let members: Vec<String> = world.leases.keys().cloned().collect();
    for _ in 0..8 {
        for name in &members {
            world.beat(name);
        }
        reconciler.marks().mark_everything();
        let tick = clock.tick(Duration::from_millis(100), true);
        let started = Instant::now();
        let step = reconciler.step(&tick, world.observed(), &world.leases());
        full_ms = started.elapsed().as_secs_f64() * 1e3;
        reconciler.outcome(Default::default(), tick.now);
        converge_passes += 1;
        if world.apply(&step) == 0 && converge_passes > 1 {
            break;
        }
    }

    let samples = atoll_bench::env_or("BENCH_SAMPLES", SAMPLES);
    // Beat steps: one member's heartbeat moved, round robin.
    let names: Vec<String> = world.leases.keys().cloned().collect();
    let mut beats = Vec::new();
    for i in 0..samples {
        world.beat(&names[i % names.len()]);
        world.beat(IMPORTER);
        let tick = clock.tick(Duration::from_millis(40), true);
        let (observed, leases) = (world.observed(), world.leases());
        let started = Instant::now();
        let step = reconciler.step(&tick, observed, &leases);
        beats.push(started.elapsed().as_secs_f64() * 1e3);
        reconciler.outcome(Default::default(), tick.now);
        world.apply(&step);
    }

    // Endpoint steps: one copy changed, its service marked as the watch would.
    let mut endpoints = Vec::new();
    let mut endpoint_writes = 0;
    for i in 0..samples {
        let (c, s) = (i % clusters, (i * 7) % services);
        world.move_endpoint(size, c, s, services, i);
        world.beat(IMPORTER);
        reconciler
            .marks()
            .mark(ServiceKey::new(NS, &format!("svc-{s:04}")));
        let tick = clock.tick(Duration::from_millis(40), true);
        let (observed, leases) = (world.observed(), world.leases());
        let started = Instant::now();
        let step = reconciler.step(&tick, observed, &leases);
        endpoints.push(started.elapsed().as_secs_f64() * 1e3);
        reconciler.outcome(Default::default(), tick.now);
        endpoint_writes += world.apply(&step);
    }
    let p = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        (percentile(&v, 50.0), percentile(&v, 99.0))
    };
    Ok(Row {
        size: size.to_owned(),
        hub_objects: world.records.len() + world.copies.len(),
        converge_passes,
        full_ms,
        beat: p(beats),
        endpoint: p(endpoints),
        endpoint_writes,
    })
}

fn main() -> anyhow::Result<()> {
    let sizes =
        std::env::var("BENCH_SIZES").unwrap_or_else(|_| "10x100,50x200,100x200,250x200".into());
    println!(
        "atoll bench-pass: CPU of one reconcile step of an importer of the whole fleet (one thread, wall clock)"
    );
    println!();
    println!(
        "| size | hub objects | passes to converge | full pass | beat step p50 / p99 | endpoint step p50 / p99 (writes) | target: a step < {STEP_TARGET_MS} ms |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut ok = true;
    for size in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let row = run(size)?;
        let pass = row.beat.1 < STEP_TARGET_MS && row.endpoint.1 < STEP_TARGET_MS;
        ok &= pass;
        println!(
            "| {} | {} | {} | {:.0} ms | {:.1} / {:.1} ms | {:.1} / {:.1} ms ({}) | {} |",
            row.size,
            row.hub_objects,
            row.converge_passes,
            row.full_ms,
            row.beat.0,
            row.beat.1,
            row.endpoint.0,
            row.endpoint.1,
            row.endpoint_writes,
            if pass { "PASS" } else { "FAIL" },
        );
    }
    println!();
    println!(
        "bench-pass: {}",
        if ok {
            "every size within target"
        } else {
            "some size above target"
        }
    );
    Ok(())
}
