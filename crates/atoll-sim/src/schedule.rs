//! One schedule: a ClusterSet of three members (two of them beating every second with a 6 s
//! grace, one every 3 s asking for 15 s), two agent replicas each, warmed up; then faults
//! injected at random moments among regular operation (watch events delivered late, partly,
//! twice; replicas stepping when due); then every fault healed and a quiet phase; then the
//! comparison with a fault-free run and an idle phase in which nothing may be written.
//! Among the faults, troubles with a member's kept liveness decisions (writes refused, reads
//! failing, the ConfigMap lost or garbled) must change nothing anyone else sees; and a region
//! going dark (every member but one dying in the same step) must leave the survivor within
//! the same bound as one death.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::Duration;

use atoll_core::leader::Timings;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};

use crate::apiserver::Hub;
use crate::invariants::Violation;
use crate::replica::{Rhythm, Which};
use crate::scenario::{BULK, EXTRA, RENAMED, SERVICES, Scenario};
use crate::store::Restore;
use crate::world::{World, tracing};

/// How a schedule runs.
#[derive(Clone, Copy, Debug)]
pub struct Shape {
    pub warmup: Duration,
    pub faults: Duration,
    pub quiet: Duration,
    pub idle: Duration,
    pub quantum: Duration,
    /// Chance of a fault in each quantum of the fault phase.
    pub fault_rate: f64,
    /// Chance of a fault of the kept decisions in each quantum of the fault phase, drawn from
    /// a stream of its own so the other faults of a seed stay what they were before these
    /// existed (seeds named in tests and notes replay as they did).
    pub kept_fault_rate: f64,
    /// Chance in each quantum that every member but one dies at once (a region going dark),
    /// from a stream of its own too.
    pub region_fault_rate: f64,
    /// Chance that one member exports the [`BULK`] services too (see [`bulk_exports`]).
    pub bulk_exports: f64,
    /// Chance in each quantum of a fault of how an apiserver answers writes (landed without
    /// an answer, collections refused or landing late, restores of other kinds, a member
    /// unexporting everything at once), from a stream of its own too.
    pub write_fault_rate: f64,
    /// Chance in each quantum that a member unexports everything at once (moving many services
    /// to new names), from a stream of its own.
    pub mass_unexport_rate: f64,
}

impl Default for Shape {
    fn default() -> Self {
        Self {
            warmup: Duration::from_secs(6),
            faults: Duration::from_secs(30),
            // Longer than the batch of kept epochs (30 s), the last write a change may cause.
            quiet: Duration::from_secs(40),
            idle: Duration::from_secs(8),
            quantum: Duration::from_millis(250),
            fault_rate: 0.08,
            kept_fault_rate: 0.04,
            // Off in the default shape for now: at 0.01, seed 20261203's 10,000 schedules found
            // one (6478179011419130752) where an importer whose kept-decision writes were
            // refused, restarted with the hub restored from a backup, keeps an outdated
            // withdrawal and deletes a member that died 12 s before, within its 15 s grace: a
            // finding of its own. The region test turns it on.
            region_fault_rate: 0.0,
            // Each such schedule plans four times the services: 10,000 schedules took 226 s
            // on 2 cores without them, 280 s at 0.15, 327 s at 0.3.
            bulk_exports: 0.1,
            write_fault_rate: 0.03,
            // Off in the default shape for now: at 0.005, seed 20261203's 10,000 schedules found
            // schedule 9384347452971000236, where an importer restarted while a cluster was
            // not yet confirmed (pinned) deletes an import that cluster exports once its other
            // exporter leaves: the pin keeps the cluster's part of the service, not the
            // import's existence. Open; `write_faults_hold_every_invariant` and
            // SIM_MASS_UNEXPORT_RATE turn it on.
            mass_unexport_rate: 0.0,
        }
    }
}

const REPLICAS: usize = 2;

fn rhythms() -> [(&'static str, Rhythm); 3] {
    let fast = Rhythm {
        interval: Duration::from_secs(1),
        grace: Duration::from_secs(6),
    };
    let slow = Rhythm {
        interval: Duration::from_secs(3),
        grace: Duration::from_secs(15),
    };
    [("c1", fast), ("c2", fast), ("c3", slow)]
}

fn timings() -> Timings {
    Timings {
        lease_duration: Duration::from_secs(3),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_secs(1),
    }
}

/// The faults a schedule injects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    CrashReplica,
    CrashMember,
    Partition,
    FailWrites,
    WipeHub,
    Backup,
    RestoreHub,
    ClockJump,
    SlowWrites,
    Relist,
    ChangeExports,
    RefuseCopy,
    RefuseKept,
    LoseKept,
    GarbleKept,
    UnreadableKept,
    /// Every member but one crashes in the same step (all their replicas), and all come back
    /// together later.
    CrashRegion,
    /// The member's next writes land, but the client times out before the answer comes.
    Unanswered,
    /// The member's apiserver refuses collections for a while (RBAC without the verb).
    RefuseCollections,
    /// The member's apiserver answers no collection in time and deletes after the client
    /// gave up.
    LateCollections,
    /// The hub's etcd restored from a snapshot: resourceVersions go back.
    EtcdRestore,
    /// The hub restored by a tool that creates every object anew.
    RecreatingRestore,
    /// The member unexports everything at once (a namespace emptied), and exports some of it
    /// again moments later.
    MassUnexport,
    /// The member's apiserver refuses Events for a while.
    RefuseEvents,
}

const FAULTS: [Fault; 12] = [
    Fault::CrashReplica,
    Fault::CrashMember,
    Fault::Partition,
    Fault::FailWrites,
    Fault::WipeHub,
    Fault::Backup,
    Fault::RestoreHub,
    Fault::ClockJump,
    Fault::SlowWrites,
    Fault::Relist,
    Fault::ChangeExports,
    Fault::RefuseCopy,
];

/// The faults of a member's kept liveness decisions (drawn with `Shape::kept_fault_rate`).
const KEPT_FAULTS: [Fault; 4] = [
    Fault::RefuseKept,
    Fault::LoseKept,
    Fault::GarbleKept,
    Fault::UnreadableKept,
];

/// The faults of how apiservers answer writes (drawn with `Shape::write_fault_rate`).
const WRITE_FAULTS: [Fault; 6] = [
    Fault::Unanswered,
    Fault::RefuseCollections,
    Fault::LateCollections,
    Fault::EtcdRestore,
    Fault::RecreatingRestore,
    Fault::RefuseEvents,
];

/// Something a fault undoes later.
#[derive(Clone, Copy, Debug)]
enum Heal {
    Restart(usize),
    Reconnect(usize),
    FastWrites(usize),
    AcceptKept(usize),
    ReadableKept(usize),
    AllowCollections(usize),
    TimelyCollections(usize),
    AcceptEvents(usize),
    /// Member, index into [`SERVICES`] then [`BULK`]: exported again.
    Export(usize, usize),
}

/// What one schedule did.
#[derive(Debug, Default)]
pub struct Report {
    pub violations: Vec<Violation>,
    pub faults: usize,
    pub steps: u64,
    /// Spells of repeated beat numbers (the README's triple fault), excused in (i).
    pub repeats: u64,
    /// What the schedule exercised (see `World::exercised`).
    pub exercised: BTreeMap<String, u64>,
}

/// The fault-free results per final scenario (schedules often end in the same one).
pub type References = Mutex<BTreeMap<Scenario, BTreeMap<String, Vec<String>>>>;

/// Runs the schedule of `seed`.
pub fn run(seed: u64, shape: &Shape, references: &References) -> Report {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut world = World::new(&rhythms(), REPLICAS, timings());
    world.checks.begin(world.origin());
    initial_exports(&mut world, &mut rng);
    bulk_exports(&mut world, seed, shape.bulk_exports);
    extra_exports(&mut world, seed);
    let mut report = Report::default();

    world.checks.quiet = true;
    regular(
        &mut world,
        &mut rng,
        shape.warmup,
        shape.quantum,
        true,
        &mut report,
    );
    world.checks.quiet = false;

    let mut heals: Vec<(Duration, Heal)> = Vec::new();
    let mut backups: Vec<Hub> = Vec::new();
    // The fault streams besides the main one: (stream, chance per quantum, faults).
    let mut streams: [(StdRng, f64, &[Fault]); 4] = [
        (
            StdRng::seed_from_u64(seed ^ KEPT_STREAM),
            shape.kept_fault_rate,
            &KEPT_FAULTS,
        ),
        (
            StdRng::seed_from_u64(seed ^ REGION_STREAM),
            shape.region_fault_rate,
            &[Fault::CrashRegion],
        ),
        (
            StdRng::seed_from_u64(seed ^ WRITE_STREAM),
            shape.write_fault_rate,
            &WRITE_FAULTS,
        ),
        (
            StdRng::seed_from_u64(seed ^ MASS_STREAM),
            shape.mass_unexport_rate,
            &[Fault::MassUnexport],
        ),
    ];
    let quanta = (shape.faults.as_millis() / shape.quantum.as_millis().max(1)) as usize;
    for _ in 0..quanta {
        if rng.random_bool(shape.fault_rate) {
            inject(&mut world, &mut rng, &FAULTS, &mut heals, &mut backups);
            report.faults += 1;
        }
        // In the order the streams were added: each seed replays what it did before.
        for (stream_rng, rate, faults) in &mut streams {
            if stream_rng.random_bool(*rate) {
                inject(&mut world, stream_rng, faults, &mut heals, &mut backups);
                report.faults += 1;
            }
        }
        let now = world.elapsed;
        heals.retain(|(at, heal)| {
            if *at <= now {
                apply_heal(&mut world, *heal);
                false
            } else {
                true
            }
        });
        regular(
            &mut world,
            &mut rng,
            shape.quantum,
            shape.quantum,
            false,
            &mut report,
        );
    }

    // Every fault ends.
    for (_, heal) in heals.drain(..) {
        apply_heal(&mut world, heal);
    }
    for m in 0..world.members.len() {
        let now = world.now();
        let member = &mut world.members[m];
        if member.write_latency > Duration::ZERO {
            member.slow_ended_at = Some(now);
        }
        if member.partitioned {
            member.reconnected_at = Some(now);
        }
        member.partitioned = false;
        member.failing_writes = 0;
        member.write_latency = Duration::ZERO;
        member.refuse_kept = false;
        member.unreadable_kept = false;
        member.unanswered_writes = 0;
        member.late_collections = false;
        member.refuse_events = false;
        while world.members[m].replicas.len() < REPLICAS {
            world.start_replica(m);
        }
    }
    regular(
        &mut world,
        &mut rng,
        shape.quiet,
        shape.quantum,
        true,
        &mut report,
    );

    // (ix) Every Event refused is published again by the replica that holds it while it leads.
    let leading: Vec<(String, String)> = world
        .members
        .iter()
        .flat_map(|m| {
            let now = world.now();
            m.replicas
                .iter()
                .filter(move |r| r.elector.leading(now))
                .map(move |r| (m.name.clone(), r.identity.clone()))
        })
        .collect();
    world.checks.events_left(&leading);
    // (iv) What a fault-free run of the final scenario holds.
    let got = world.normalized();
    let want = reference(&world.scenario, shape, references);
    // A member still repeating beat numbers (the README's triple fault, counted in the
    // summary) is rightly not taken back yet: nothing converges while it repeats.
    let repeating = world
        .checks
        .repeated
        .values()
        .any(|(_, ended)| ended.is_none());
    for (member, lines) in want.iter().filter(|_| !repeating) {
        let have = got.get(member).cloned().unwrap_or_default();
        if &have != lines {
            world.checks.violate(
                4,
                format!("{member} holds {have:?} where a fault-free run holds {lines:?}"),
            );
        }
    }
    // (v) Nothing written while idle (heartbeats and elections aside).
    let before = world.checks.writes.clone();
    regular(
        &mut world,
        &mut rng,
        shape.idle,
        shape.quantum,
        true,
        &mut report,
    );
    let after = world.checks.writes.clone();
    for (member, count) in &after {
        let was = before.get(member).copied().unwrap_or(0);
        if *count > was {
            world.checks.violate(
                5,
                format!("{member} wrote {} objects while idle", count - was),
            );
        }
    }
    report.violations = std::mem::take(&mut world.checks.violations);
    report.repeats = world.checks.repeats;
    report.exercised = std::mem::take(&mut world.exercised);
    if tracing() {
        for record in world.apis.hub.records.all() {
            eprintln!(
                "hub record {}",
                atoll_api::keys::ObjectKey::of(&record.metadata)
            );
        }
        for lease in world.apis.hub.leases.all() {
            eprintln!("hub lease {:?}", lease.metadata.annotations);
        }
        eprintln!(
            "planned {} services, {} full passes, {} steps",
            world.planned, world.full_passes, report.steps
        );
    }
    report
}

fn initial_exports(world: &mut World, rng: &mut StdRng) {
    for m in 0..world.members.len() {
        for service in SERVICES {
            if rng.random_bool(0.5) {
                world.export(m, service, 1);
            }
        }
    }
    // At least one service exported by two members.
    world.export(0, SERVICES[0], 1);
    world.export(2, SERVICES[0], 1);
}

/// With chance `rate`, one member exports [`BULK`] services too: more MCS slices of one source
/// cluster than `atoll_core::plan::COLLECT_AT_LEAST`, so withdrawing it deletes them with a
/// collection. Drawn from a stream of its own (the other draws of a seed stay as they were).
fn bulk_exports(world: &mut World, seed: u64, rate: f64) {
    let mut rng = StdRng::seed_from_u64(seed ^ BULK_STREAM);
    if !rng.random_bool(rate) {
        return;
    }
    let m = pick(&mut rng, world.members.len());
    for service in BULK {
        world.export(m, service, 1);
    }
    // Some members' agents have RBAC without `deletecollection` (installed before it was
    // needed), for the whole schedule: their withdrawals delete slice by slice. Some members'
    // apiservers answer collections late until the faults end (an etcd slow to commit).
    for member in &mut world.members {
        if rng.random_bool(0.3) {
            member.refuse_collections = Some(if rng.random_bool(0.5) { 403 } else { 405 });
        } else if rng.random_bool(0.4) {
            member.late_collections = true;
        }
    }
}

/// In a third of the schedules, each member exports each of [`EXTRA`] (another namespace,
/// headless, two ports) with even chance, drawn from a stream of its own. (In every schedule
/// they cost a third more time: 10,000 schedules took 309 s.)
fn extra_exports(world: &mut World, seed: u64) {
    let mut rng = StdRng::seed_from_u64(seed ^ EXTRA_STREAM);
    if !rng.random_bool(0.35) {
        return;
    }
    for m in 0..world.members.len() {
        for service in EXTRA {
            if rng.random_bool(0.5) {
                world.export(m, service, 1);
            }
        }
    }
}

/// Regular operation for `span`: each quantum, watch events reach each replica (all of them
/// with `full`, else late, in part or twice, but never more than a second late) and each
/// replica steps when due.
fn regular(
    world: &mut World,
    rng: &mut StdRng,
    span: Duration,
    quantum: Duration,
    full: bool,
    report: &mut Report,
) {
    let quanta = (span.as_millis() / quantum.as_millis().max(1)).max(1) as usize;
    for _ in 0..quanta {
        world.quanta += 1;
        // Watches lag at most a second behind their apiserver.
        let catch_up = full || world.elapsed >= world.caught_up + Duration::from_secs(1);
        if catch_up {
            world.caught_up = world.elapsed;
        }
        for m in 0..world.members.len() {
            for r in 0..world.members[m].replicas.len() {
                for which in Which::ALL {
                    if catch_up || rng.random_bool(0.5) {
                        let count = if catch_up {
                            usize::MAX
                        } else {
                            rng.random_range(1..4)
                        };
                        let duplicate = !full && rng.random_bool(0.05);
                        world.deliver(m, r, which, count, duplicate);
                    }
                }
            }
        }
        let mut order: Vec<(usize, usize)> = (0..world.members.len())
            .flat_map(|m| (0..world.members[m].replicas.len()).map(move |r| (m, r)))
            .collect();
        shuffle(&mut order, rng);
        // A replica whose writes are slow moves the clock; in a real ClusterSet the others run
        // concurrently: their watches go on receiving (delivered here before their turn), and
        // what they could not do meanwhile (step) is not held against them (see World::run).
        let mut delivered_at = world.elapsed;
        for (m, r) in order {
            if world.elapsed > delivered_at + Duration::from_millis(100) {
                world.deliver_all();
                delivered_at = world.elapsed;
                world.caught_up = world.elapsed;
            }
            if world.due(m, r, Duration::from_secs(1)) {
                if let Some(step) = world.run(m, r) {
                    let began = world.elapsed;
                    let outcome = crate::executing::execute(world, m, r, &step);
                    world.learn(m, r, outcome, began);
                }
                report.steps += 1;
            }
        }
        world.advance(quantum);
        world.land_late();
        world.note_leaderless();
        let (sources, origin, now) = (world.slice_sources(), world.origin(), world.now());
        world
            .checks
            .dead_gone(&world.members, &sources, origin, now);
        world.checks.beating(&world.members, now);
    }
}

fn shuffle<T>(items: &mut [T], rng: &mut StdRng) {
    for i in (1..items.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        items.swap(i, j);
    }
}

fn pick(rng: &mut StdRng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

fn seconds(rng: &mut StdRng, from: u64, to: u64) -> Duration {
    Duration::from_millis(rng.random_range(from * 1000..=to * 1000))
}

/// Seeds the stream of kept-decision faults from a schedule's seed.
const KEPT_STREAM: u64 = 0x6b65_7074_6661_756c;
/// Seeds the stream of region faults.
/// The stream of [`bulk_exports`].
const BULK_STREAM: u64 = 0x6275_6c6b_6578_7073;
const REGION_STREAM: u64 = 0x7265_6769_6f6e_2121;
/// Seeds the stream of [`extra_exports`].
const EXTRA_STREAM: u64 = 0x6578_7472_6173_2121;
/// Seeds the stream of mass unexports.
const MASS_STREAM: u64 = 0x6d61_7373_2121_2121;
/// Seeds the stream of write faults.
const WRITE_STREAM: u64 = 0x7772_6974_6573_2121;

fn inject(
    world: &mut World,
    rng: &mut StdRng,
    faults: &[Fault],
    heals: &mut Vec<(Duration, Heal)>,
    backups: &mut Vec<Hub>,
) {
    let m = pick(rng, world.members.len());
    let now = world.elapsed;
    let fault = faults[pick(rng, faults.len())];
    world.exercise(&format!("fault {fault:?}"), 1);
    if tracing() {
        eprintln!(
            "{:>6.2} s  fault {fault:?} on {}",
            now.as_secs_f64(),
            world.members[m].name
        );
    }
    match fault {
        Fault::CrashReplica => {
            let r = pick(rng, world.members[m].replicas.len());
            world.crash(m, r);
            heals.push((now + seconds(rng, 0, 8), Heal::Restart(m)));
        }
        Fault::CrashMember => {
            while !world.members[m].replicas.is_empty() {
                world.crash(m, 0);
            }
            let back = now + seconds(rng, 2, 25);
            heals.push((back, Heal::Restart(m)));
            heals.push((back, Heal::Restart(m)));
        }
        Fault::CrashRegion => {
            // `m` survives; every other member dies in this step, for longer than most graces
            // (withdrawn, then taken back). Not while a region is down already: the survivor
            // must live to be checked.
            if world
                .members
                .iter()
                .any(|member| member.replicas.is_empty())
            {
                return;
            }
            let back = now + seconds(rng, 8, 25);
            for other in (0..world.members.len()).filter(|o| *o != m) {
                while !world.members[other].replicas.is_empty() {
                    world.crash(other, 0);
                }
                heals.push((back, Heal::Restart(other)));
                heals.push((back, Heal::Restart(other)));
            }
        }
        Fault::Partition => {
            world.members[m].partitioned = true;
            world.members[m].disturbed_at = world.now();
            heals.push((now + seconds(rng, 1, 20), Heal::Reconnect(m)));
        }
        Fault::FailWrites => {
            let codes = [403, 409, 422, 0];
            world.members[m].failing_writes = rng.random_range(1..=10);
            world.members[m].fail_code = codes[pick(rng, codes.len())];
            world.members[m].disturbed_at = world.now();
        }
        Fault::WipeHub => {
            let name = world.members[m].name.clone();
            world.apis.hub.wipe(&name);
        }
        Fault::Backup => backups.push(world.apis.hub.snapshot()),
        Fault::RestoreHub => restore_hub(world, rng, backups, Restore::Replay),
        Fault::EtcdRestore => restore_hub(world, rng, backups, Restore::Etcd),
        Fault::RecreatingRestore => {
            let now = world.hub_wall();
            restore_hub(world, rng, backups, Restore::Recreate(now));
        }
        Fault::Unanswered => world.members[m].unanswered_writes = rng.random_range(1..=6),
        Fault::RefuseCollections => {
            world.members[m].refuse_collections =
                Some(if rng.random_bool(0.5) { 403 } else { 405 });
            heals.push((now + seconds(rng, 5, 40), Heal::AllowCollections(m)));
        }
        Fault::LateCollections => {
            world.members[m].late_collections = true;
            heals.push((now + seconds(rng, 5, 30), Heal::TimelyCollections(m)));
        }
        Fault::RefuseEvents => {
            world.members[m].refuse_events = true;
            heals.push((now + seconds(rng, 2, 20), Heal::AcceptEvents(m)));
        }
        Fault::MassUnexport => {
            let name = world.members[m].name.clone();
            let exported: Vec<usize> = SERVICES
                .iter()
                .chain(BULK.iter())
                .chain(RENAMED.iter())
                .chain(EXTRA.iter())
                .enumerate()
                .filter(|(_, s)| {
                    world
                        .scenario
                        .exports
                        .get(&name)
                        .is_some_and(|e| e.contains_key(**s))
                })
                .map(|(i, _)| i)
                .collect();
            for i in &exported {
                world.unexport(m, exported_name(*i));
            }
            // Many services: moved to new names at the same moment (a rename), which the
            // importers' watches may deliver in two parts: a pass writing the new names'
            // slices, then one deleting every old one while the new are not observed yet.
            if exported.len() >= atoll_core::plan::COLLECT_AT_LEAST {
                for service in RENAMED {
                    world.export(m, service, 1);
                }
            }
            for i in exported {
                if rng.random_bool(0.5) {
                    heals.push((
                        now + Duration::from_millis(rng.random_range(250..3000)),
                        Heal::Export(m, i),
                    ));
                }
            }
        }
        Fault::ClockJump => {
            world.members[m].skew = seconds(rng, 60, 3600);
            world.members[m].skew_ahead = rng.random_bool(0.5);
        }
        Fault::SlowWrites => {
            world.members[m].write_latency = Duration::from_millis(rng.random_range(200..1500));
            world.members[m].disturbed_at = world.now();
            heals.push((now + seconds(rng, 3, 12), Heal::FastWrites(m)));
        }
        Fault::RefuseCopy => {
            // From now on the hub refuses, for good, this member's copy of a service it never
            // exported (its name is too long, say): once it exports it, that write fails. Not
            // one it exported before: a backup of the hub may hold its copy, and a restore
            // would bring back what a fault-free run never has.
            let service = SERVICES[pick(rng, SERVICES.len())];
            let name = world.members[m].name.clone();
            let exported = world
                .exported_ever
                .contains(&(name.clone(), service.to_owned()));
            if !exported {
                world.scenario.refused.insert((name, service.to_owned()));
            }
        }
        Fault::RefuseKept => {
            // An admission policy or a quota refuses the member's kept decisions for a while.
            world.members[m].refuse_kept = true;
            heals.push((now + seconds(rng, 3, 40), Heal::AcceptKept(m)));
        }
        Fault::UnreadableKept => {
            world.members[m].unreadable_kept = true;
            heals.push((now + seconds(rng, 2, 20), Heal::ReadableKept(m)));
        }
        Fault::LoseKept => {
            let name = world.members[m].name.clone();
            if let Some(member) = world.apis.members.get_mut(&name) {
                member.kept = None;
            }
        }
        Fault::GarbleKept => {
            let name = world.members[m].name.clone();
            let how = pick(rng, 3);
            if let Some(member) = world.apis.members.get_mut(&name) {
                member.kept = Some(garbled(member.kept.as_deref().unwrap_or("{}"), how));
            }
        }
        Fault::Relist => {
            let r = pick(rng, world.members[m].replicas.len());
            let which = Which::ALL[pick(rng, Which::ALL.len())];
            world.relist(m, r, which);
        }
        Fault::ChangeExports => {
            let service = SERVICES[pick(rng, SERVICES.len())];
            let exports = world
                .scenario
                .exports
                .get(&world.members[m].name)
                .is_some_and(|e| e.contains_key(service));
            match (exports, rng.random_range(0..3)) {
                (true, 0) => world.unexport(m, service),
                (_, _) => {
                    let octet = rng.random_range(1..200);
                    world.export(m, service, octet);
                }
            }
        }
    }
}

/// Service `i` of [`SERVICES`], then [`BULK`], [`RENAMED`] and [`EXTRA`].
fn exported_name(i: usize) -> &'static str {
    SERVICES
        .iter()
        .chain(BULK.iter())
        .chain(RENAMED.iter())
        .chain(EXTRA.iter())
        .nth(i)
        .copied()
        .unwrap_or(SERVICES[0])
}

/// The hub restored, `how`, from one of the backups taken so far (if any).
fn restore_hub(world: &mut World, rng: &mut StdRng, backups: &[Hub], how: Restore) {
    let Some(backup) = backups.get(pick(rng, backups.len())).cloned() else {
        return;
    };
    world.apis.hub.restore(&backup, &how);
    let now = world.now();
    let last_steps = world
        .members
        .iter()
        .filter_map(|m| {
            let oldest = m.replicas.iter().filter_map(|r| r.last_step).min()?;
            Some((m.name.clone(), oldest))
        })
        .collect();
    world.checks.restored(now, &last_steps);
    // Watches of a restored apiserver get 410 Gone and relist.
    for m in 0..world.members.len() {
        for r in 0..world.members[m].replicas.len() {
            for which in [Which::Records, Which::Copies, Which::Leases] {
                world.relist(m, r, which);
            }
        }
    }
}

/// The kept text `text` made unreadable (`how` 0: not JSON; 1: cut in half, as a write torn by
/// a tool) or absurd (2: counters near the top of the range, as a hand edit).
fn garbled(text: &str, how: usize) -> String {
    match how {
        0 => "not json".to_owned(),
        1 => text.chars().take(text.chars().count() / 2).collect(),
        _ => {
            let mut value: serde_json::Value =
                serde_json::from_str(text).unwrap_or(serde_json::Value::Null);
            let huge = serde_json::Value::from(u64::MAX - 1);
            if let Some(object) = value.as_object_mut() {
                object.insert("reserved".to_owned(), huge.clone());
                if let Some(sources) = object.get_mut("sources").and_then(|s| s.as_object_mut()) {
                    for source in sources.values_mut() {
                        if let Some(source) = source.as_object_mut() {
                            source.insert("beat".to_owned(), huge.clone());
                            source.insert("acceptedEpoch".to_owned(), huge.clone());
                        }
                    }
                }
            }
            value.to_string()
        }
    }
}

fn apply_heal(world: &mut World, heal: Heal) {
    if tracing() {
        eprintln!("{:>6.2} s  heal {heal:?}", world.elapsed.as_secs_f64());
    }
    match heal {
        Heal::Restart(m) => {
            if world.members[m].replicas.len() < REPLICAS {
                world.start_replica(m);
            }
        }
        Heal::Reconnect(m) => {
            world.members[m].partitioned = false;
            world.members[m].reconnected_at = Some(world.now());
            world.members[m].disturbed_at = world.now();
        }
        Heal::AcceptKept(m) => world.members[m].refuse_kept = false,
        Heal::AllowCollections(m) => world.members[m].refuse_collections = None,
        Heal::TimelyCollections(m) => world.members[m].late_collections = false,
        Heal::AcceptEvents(m) => world.members[m].refuse_events = false,
        Heal::Export(m, i) => world.export(m, exported_name(i), 1),
        Heal::ReadableKept(m) => world.members[m].unreadable_kept = false,
        Heal::FastWrites(m) => {
            world.members[m].write_latency = Duration::ZERO;
            world.members[m].slow_ended_at = Some(world.now());
            world.members[m].disturbed_at = world.now();
        }
    }
}

/// What a fault-free run of `scenario` converges to.
fn reference(
    scenario: &Scenario,
    shape: &Shape,
    references: &References,
) -> BTreeMap<String, Vec<String>> {
    if let Some(known) = references
        .lock()
        .ok()
        .and_then(|r| r.get(scenario).cloned())
    {
        return known;
    }
    let mut world = World::new(&rhythms(), REPLICAS, timings());
    world.scenario.refused = scenario.refused.clone();
    for (member, services) in &scenario.exports {
        let Some(m) = world.members.iter().position(|s| &s.name == member) else {
            continue;
        };
        for (service, octet) in services {
            world.export(m, service, *octet);
        }
    }
    let mut rng = StdRng::seed_from_u64(0);
    let mut report = Report::default();
    world.checks.quiet = true;
    regular(
        &mut world,
        &mut rng,
        shape.quiet,
        shape.quantum,
        true,
        &mut report,
    );
    let result = world.normalized();
    if let Ok(mut r) = references.lock() {
        r.insert(scenario.clone(), result.clone());
    }
    result
}
