//! The simulated ClusterSet: the apiservers, each member's replicas and what the faults
//! currently do to them, the clock, and the writer that carries out a replica's step.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use atoll_api::keys::ObjectKey;
use atoll_core::leader::{Observed as LeaseSeen, Step as ElectionStep, Timings};
use atoll_core::reconciler::{Outcome, Step, Tick};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::apiserver::{Apis, ElectionLease, Member};
use crate::invariants::Checks;
use crate::member::MemberState;
use crate::replica::{Replica, Rhythm, Which};
use crate::scenario::{self, Scenario};

/// Shortest time left of a leadership in which a write still starts (as the agent's fence).
const MIN_BUDGET: Duration = Duration::from_millis(100);

/// Whether to print what a schedule does (SIM_TRACE=1, with SIM_SCHEDULE).
pub fn tracing() -> bool {
    static TRACING: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *TRACING.get_or_init(|| std::env::var_os("SIM_TRACE").is_some())
}

/// The simulated ClusterSet.
#[derive(Debug)]
pub struct World {
    pub apis: Apis,
    pub members: Vec<MemberState>,
    pub scenario: Scenario,
    pub timings: Timings,
    start: Instant,
    pub elapsed: Duration,
    pub checks: Checks,
    replica_counter: u32,
    /// Services planned, and full passes, so far (what the simulation costs).
    pub planned: u64,
    pub full_passes: u64,
    /// Quanta of regular operation so far.
    pub quanta: u64,
    /// When every watch last received everything.
    pub caught_up: Duration,
    /// What the schedule exercised, by name (`write DeleteSlices`, `fault Partition`,
    /// `withdrawal`, ...): `make simulate` prints the totals and fails when a feature it must
    /// reach never was.
    pub exercised: BTreeMap<String, u64>,
    /// Collections the client gave up on that their apiserver still carries out: when, in
    /// whose apiserver, the names it listed when the request came (it deletes them by name,
    /// one after another, as the apiserver does), and the request.
    pub late: Vec<LateCollection>,
    /// (member, service) for every service a member exported at some point: a backup of the
    /// hub may hold its objects.
    pub exported_ever: std::collections::BTreeSet<(String, String)>,
}

/// A `deletecollection` still running after its client timed out.
#[derive(Clone, Debug)]
pub struct LateCollection {
    pub lands: Duration,
    /// When it was sent (what (i) judges it by).
    pub sent: std::time::Instant,
    pub member: String,
    /// The names it listed when the request came, with their uids then.
    pub listed: Vec<(ObjectKey, Option<String>)>,
    pub collection: atoll_core::plan::SliceCollection,
}

fn wall_at(elapsed: Duration, skew: Duration, ahead: bool) -> Time {
    let base: i64 = 1_800_000_000_000;
    let offset = i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX);
    let skew = i64::try_from(skew.as_millis()).unwrap_or(0) * if ahead { 1 } else { -1 };
    Time(Timestamp::from_millisecond(base + offset + skew).unwrap_or(Timestamp::UNIX_EPOCH))
}

impl World {
    /// Members named after `rhythms`' keys, each with `replicas` agent replicas.
    pub fn new(rhythms: &[(&str, Rhythm)], replicas: usize, timings: Timings) -> Self {
        let start = Instant::now();
        let mut apis = Apis::default();
        let now = wall_at(Duration::ZERO, Duration::ZERO, true);
        for (i, (name, _)) in rhythms.iter().enumerate() {
            let index = u32::try_from(i + 1).unwrap_or(1);
            apis.members
                .insert((*name).to_owned(), Member::new(index, &now));
        }
        let mut world = Self {
            apis,
            members: Vec::new(),
            scenario: Scenario::default(),
            timings,
            start,
            elapsed: Duration::ZERO,
            checks: Checks::default(),
            replica_counter: 0,
            planned: 0,
            full_passes: 0,
            quanta: 0,
            caught_up: Duration::ZERO,
            exercised: BTreeMap::new(),
            late: Vec::new(),
            exported_ever: std::collections::BTreeSet::new(),
        };
        for (name, rhythm) in rhythms {
            world.members.push(MemberState {
                name: (*name).to_owned(),
                rhythm: *rhythm,
                replicas: Vec::new(),
                partitioned: false,
                slow_ended_at: None,
                reconnected_at: None,
                failing_writes: 0,
                fail_code: 0,
                skew: Duration::ZERO,
                skew_ahead: true,
                write_latency: Duration::ZERO,
                last_beat: None,
                disturbed_at: start,
                refuse_kept: false,
                unreadable_kept: false,
                unanswered_writes: 0,
                refuse_collections: None,
                late_collections: false,
                refuse_events: false,
            });
        }
        for m in 0..world.members.len() {
            for _ in 0..replicas {
                world.start_replica(m);
            }
        }
        world
    }

    pub fn now(&self) -> Instant {
        self.start + self.elapsed
    }

    /// The wall clock of member `m`.
    pub fn wall(&self, m: usize) -> Time {
        let s = &self.members[m];
        wall_at(self.elapsed, s.skew, s.skew_ahead)
    }

    /// The hub's wall clock (never skewed).
    pub fn hub_wall(&self) -> Time {
        wall_at(self.elapsed, Duration::ZERO, true)
    }

    pub fn advance(&mut self, by: Duration) {
        self.elapsed += by;
    }

    /// A new replica of member `m` (a start, or a restart after a crash).
    pub fn start_replica(&mut self, m: usize) {
        self.replica_counter += 1;
        let identity = format!("{}-r{}", self.members[m].name, self.replica_counter);
        let (now, wall) = (self.now(), self.wall(m));
        let name = self.members[m].name.clone();
        let rhythm = self.members[m].rhythm;
        let replica = Replica::start(
            identity,
            &name,
            rhythm,
            self.timings,
            (&self.apis.members[&name], &self.apis.hub),
            (now, &wall),
            !self.members[m].unreadable_kept,
        );
        if tracing() {
            eprintln!(
                "{:>6.2} s  start {} kept={:?}",
                self.elapsed.as_secs_f64(),
                replica.identity,
                self.apis.members[&name].kept
            );
        }
        self.members[m].replicas.push(replica);
        self.members[m].disturbed_at = now;
    }

    /// Member `m`'s replica `r` crashes (its process and memory are gone).
    pub fn crash(&mut self, m: usize, r: usize) {
        if tracing() && r < self.members[m].replicas.len() {
            eprintln!(
                "{:>6.2} s  crash {}",
                self.elapsed.as_secs_f64(),
                self.members[m].replicas[r].identity
            );
        }
        if r < self.members[m].replicas.len() {
            self.members[m].replicas.remove(r);
            self.members[m].disturbed_at = self.now();
        }
    }

    /// Exports, unexports or changes an endpoint, as a user would.
    pub fn export(&mut self, m: usize, service: &str, octet: u8) {
        let now = self.wall(m);
        let name = self.members[m].name.clone();
        if let Some(member) = self.apis.members.get_mut(&name) {
            scenario::export(member, service, octet, &now);
        }
        self.exported_ever
            .insert((name.clone(), service.to_owned()));
        let exports = self.scenario.exports.entry(name.clone()).or_default();
        if !exports.contains_key(service) {
            self.checks
                .exported(&name, service, self.start + self.elapsed);
        }
        exports.insert(service.to_owned(), octet);
    }

    pub fn unexport(&mut self, m: usize, service: &str) {
        let name = self.members[m].name.clone();
        if let Some(member) = self.apis.members.get_mut(&name) {
            scenario::unexport(member, service);
        }
        if let Some(e) = self.scenario.exports.get_mut(&name) {
            e.remove(service);
        }
        self.checks.unexported(&name, service);
    }

    /// Delivers watch events to replica `r` of member `m`: `count` changes of `which` (a hub
    /// watch gets nothing while the member is partitioned), the last one again if `duplicate`.
    pub fn deliver(&mut self, m: usize, r: usize, which: Which, count: usize, duplicate: bool) {
        if which.on_hub() && self.members[m].partitioned {
            return;
        }
        let name = &self.members[m].name;
        let (Some(member), Some(replica)) = (
            self.apis.members.get(name),
            self.members[m].replicas.get_mut(r),
        ) else {
            return;
        };
        replica.deliver(which, count, duplicate, member, &self.apis.hub);
    }

    /// Every pending event to every replica that can receive it.
    pub fn deliver_all(&mut self) {
        for m in 0..self.members.len() {
            for r in 0..self.members[m].replicas.len() {
                for which in Which::ALL {
                    self.deliver(m, r, which, usize::MAX, false);
                }
            }
        }
    }

    /// A watch of replica `r` relists (410 Gone).
    pub fn relist(&mut self, m: usize, r: usize, which: Which) {
        if which.on_hub() && self.members[m].partitioned {
            return;
        }
        let name = &self.members[m].name;
        let (Some(member), Some(replica)) = (
            self.apis.members.get(name),
            self.members[m].replicas.get_mut(r),
        ) else {
            return;
        };
        replica.relist(which, member, &self.apis.hub);
    }

    /// Whether replica `r` of member `m` is due to step: it has marks waiting, or a deadline
    /// it named has passed, or it has not stepped for `max_idle`.
    pub fn due(&self, m: usize, r: usize, max_idle: Duration) -> bool {
        let now = self.now();
        let Some(replica) = self.members[m].replicas.get(r) else {
            return false;
        };
        let Some(reconciler) = &replica.reconciler else {
            return false;
        };
        let Some(last) = replica.last_step else {
            return true;
        };
        let since = now.saturating_duration_since(last);
        replica.woken
            || reconciler.ready()
            || reconciler.next_wake(last).is_some_and(|w| w <= since)
            || since >= max_idle
    }

    /// One turn of replica `r` of member `m`: its election, then a step of its reconciler,
    /// carried out by the simulated writer when it leads.
    pub fn run(&mut self, m: usize, r: usize) -> Option<Step> {
        if r >= self.members[m].replicas.len() {
            return None;
        }
        self.elect(m, r);
        let now = self.now();
        let wall = self.wall(m);
        let leading = self.fence(m, r).is_some();
        let state = &mut self.members[m];
        let kept_text = self
            .apis
            .members
            .get(&state.name)
            .and_then(|member| member.kept.as_deref());
        let readable = !state.unreadable_kept;
        let replica = &mut state.replicas[r];
        let (observed, leases) = replica.observed();
        let reconciler = replica.reconciler.as_mut()?;
        let tick = Tick {
            now,
            wall: wall.clone(),
            leading,
        };
        // As the agent: a new leader asks for what its predecessor kept; the read is answered
        // (here at once) once it succeeds.
        if reconciler.gains_leadership(&tick) {
            replica.read_pending = true;
        }
        // Parsed only when read: most steps read nothing.
        if replica.read_pending && readable {
            reconciler.kept_read(crate::replica::kept_read(kept_text));
            replica.read_pending = false;
        }
        let step = reconciler.step(&tick, observed, &leases);
        replica.last_step = Some(now);
        replica.woken = false;
        self.planned += step.services as u64;
        if step.scope.is_none() {
            self.full_passes += 1;
        }
        // Blind, or just seeing again (which restarts every cluster's clock in full).
        if step.liveness.blind || step.news.blind == Some(false) {
            self.members[m].disturbed_at = now;
        }
        let importer = self.members[m].name.clone();
        if tracing() && step.lead && (step.plan.writes() > 0 || step.news != Default::default()) {
            eprintln!(
                "{:>6.2} s  {} ({}) writes {} {:?} withdrawn={:?} stale={:?} pinned={:?} blind={}",
                self.elapsed.as_secs_f64(),
                importer,
                self.members[m].replicas[r].identity,
                step.plan.writes(),
                step.news,
                step.liveness.withdrawn.keys().collect::<Vec<_>>(),
                step.liveness.stale.keys().collect::<Vec<_>>(),
                step.liveness.pinned,
                step.liveness.blind,
            );
        }
        if !step.lead {
            return None;
        }
        self.checks.news(&importer, &step.news, now);
        self.exercise("withdrawal", step.news.withdrawn.len());
        self.exercise("restoration", step.news.restored.len());
        self.exercise("blind spell", usize::from(step.news.blind == Some(true)));
        Some(step)
    }

    /// Hands replica `r` of member `m` what carrying out its step did; `began`: when that
    /// started on the simulation's clock.
    pub fn learn(&mut self, m: usize, r: usize, outcome: Outcome, began: Duration) {
        // Slow writes moved the one clock of the simulation: every other member was kept from
        // stepping meanwhile (an artefact of running them one after another), so none is held
        // to a deadline that fell in that time.
        if self.elapsed > began + Duration::from_millis(100) {
            let now = self.now();
            for (i, other) in self.members.iter_mut().enumerate() {
                if i != m {
                    other.disturbed_at = now;
                }
            }
        }
        let now = self.now();
        if let Some(reconciler) = self.members[m]
            .replicas
            .get_mut(r)
            .and_then(|x| x.reconciler.as_mut())
        {
            reconciler.outcome(outcome, now);
        }
    }

    /// The election: the replica reads its member's Lease and writes it when it creates,
    /// acquires or renews it.
    fn elect(&mut self, m: usize, r: usize) {
        let now = self.now();
        let name = self.members[m].name.clone();
        let Some(member) = self.apis.members.get_mut(&name) else {
            return;
        };
        let replica = &mut self.members[m].replicas[r];
        let seen = member.election.as_ref().map(|l| LeaseSeen {
            holder: l.holder.clone(),
            renew_time: Some(l.renewals.to_string()),
            duration_seconds: Some(l.duration_seconds),
            transitions: l.transitions,
        });
        let step = replica.elector.decide(now, seen.as_ref());
        let duration = i32::try_from(self.timings.lease_duration.as_secs()).unwrap_or(i32::MAX);
        let holder = Some(replica.identity.clone());
        match step {
            ElectionStep::Follow { .. } => {}
            ElectionStep::Create => {
                member.election = Some(ElectionLease {
                    holder,
                    renewals: 1,
                    duration_seconds: duration,
                    transitions: 0,
                    version: 1,
                });
                replica.elector.wrote(now);
            }
            ElectionStep::Acquire { transitions } => {
                let lease = member.election.get_or_insert_with(ElectionLease::default);
                lease.holder = holder;
                lease.renewals += 1;
                lease.transitions = transitions;
                lease.duration_seconds = duration;
                lease.version += 1;
                replica.elector.wrote(now);
            }
            ElectionStep::Renew => {
                let lease = member.election.get_or_insert_with(ElectionLease::default);
                lease.renewals += 1;
                lease.version += 1;
                replica.elector.wrote(now);
            }
        }
    }

    /// What is left of replica `r`'s leadership now, if a write may start (the agent's fence).
    fn fence(&self, m: usize, r: usize) -> Option<Duration> {
        let now = self.now();
        let replica = self.members[m].replicas.get(r)?;
        replica.reconciler.as_ref()?;
        if !replica.elector.leading(now) {
            return None;
        }
        let left = replica.elector.lapses_at()?.saturating_duration_since(now);
        (left >= MIN_BUDGET).then_some(left)
    }

    /// One write of replica `r`: fenced, maybe failed by a fault, taking the member's write
    /// latency; `Err` with an HTTP status (0: no answer) when it did not happen.
    pub(crate) fn write(&mut self, m: usize, r: usize, to_hub: bool) -> Result<(), u16> {
        if self.fence(m, r).is_none() {
            return Err(0);
        }
        let latency = self.members[m].write_latency;
        self.advance(latency);
        // Two writers at once: any other replica of the member that leads now.
        let now = self.now();
        let others = self.members[m]
            .replicas
            .iter()
            .enumerate()
            .filter(|(i, x)| *i != r && x.reconciler.is_some() && x.elector.leading(now))
            .count();
        if others > 0 {
            self.checks.violate(
                3,
                format!("{}: two replicas write at once", self.members[m].name),
            );
        }
        let state = &mut self.members[m];
        if to_hub && state.partitioned {
            return Err(0);
        }
        if state.failing_writes > 0 {
            state.failing_writes -= 1;
            state.disturbed_at = now;
            return Err(state.fail_code);
        }
        Ok(())
    }

    /// Counts `times` more of `what` exercised.
    pub fn exercise(&mut self, what: &str, times: usize) {
        if times > 0 {
            *self.exercised.entry(what.to_owned()).or_default() += times as u64;
        }
    }

    /// Deletes `key` of `kind` from `member`'s apiserver and tells the invariant checks.
    pub(crate) fn delete_checked(&mut self, member: &str, kind: &str, key: &ObjectKey) {
        self.delete_decided(member, kind, key, self.now());
    }

    /// [`Self::delete_checked`] for a deletion decided at `decided` (a collection landing
    /// after its client gave up is judged by when it was sent).
    pub(crate) fn delete_decided(
        &mut self,
        member: &str,
        kind: &str,
        key: &ObjectKey,
        decided: Instant,
    ) {
        let (service, source) = self.deleted(member, kind, key).unwrap_or_default();
        let source = (kind == "EndpointSlice").then_some(source.as_str());
        self.checks.deleted(
            member,
            kind,
            &key.name,
            Some(service.as_str()).filter(|s| !s.is_empty()),
            source,
            decided,
            &self.members,
        );
    }

    /// Deletes a member object; returns the service it belonged to and, for an MCS slice, its
    /// source cluster.
    fn deleted(&mut self, member: &str, kind: &str, key: &ObjectKey) -> Option<(String, String)> {
        let m = self.apis.members.get_mut(member)?;
        let label = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, l: &str| {
            meta.labels
                .as_ref()
                .and_then(|labels| labels.get(l))
                .cloned()
                .unwrap_or_default()
        };
        match kind {
            "ServiceImport" => m
                .imports
                .delete(key, &mut m.counters)
                .map(|_| (key.name.clone(), String::new())),
            "Service" => m.services.delete(key, &mut m.counters).map(|s| {
                (
                    label(&s.metadata, atoll_api::labels::SERVICE_NAME),
                    String::new(),
                )
            }),
            _ => m.slices.delete(key, &mut m.counters).map(|s| {
                (
                    label(&s.metadata, atoll_api::labels::SERVICE_NAME),
                    label(&s.metadata, atoll_api::labels::SOURCE_CLUSTER),
                )
            }),
        }
    }

    /// Each member's MCS slices' source clusters.
    pub fn slice_sources(&self) -> BTreeMap<String, Vec<String>> {
        self.apis
            .members
            .iter()
            .map(|(name, member)| {
                let sources = member
                    .slices
                    .all()
                    .filter_map(|s| {
                        s.metadata
                            .labels
                            .as_ref()?
                            .get(atoll_api::labels::SOURCE_CLUSTER)
                            .cloned()
                    })
                    .collect();
                (name.clone(), sources)
            })
            .collect()
    }

    /// A member none of whose replicas leads cannot act: it counts as disturbed (an importer
    /// without a leader withdraws nothing, an exporter without one publishes nothing).
    pub fn note_leaderless(&mut self) {
        let now = self.now();
        for member in &mut self.members {
            let leads = member
                .replicas
                .iter()
                .any(|r| r.reconciler.is_some() && r.elector.leading(now));
            if !leads {
                member.disturbed_at = now;
            }
        }
    }

    /// When the schedule began.
    pub fn origin(&self) -> Instant {
        self.start
    }

    /// Member states, for comparison: imports, MCS slices (source and endpoints), export
    /// conditions (type, status, reason); nothing the apiserver allocates.
    pub fn normalized(&self) -> BTreeMap<String, Vec<String>> {
        let mut out = BTreeMap::new();
        for (name, member) in &self.apis.members {
            let mut lines = Vec::new();
            for import in member.imports.all() {
                let (kind, ports) = import
                    .spec
                    .as_ref()
                    .map(|s| (format!("{:?}", s.type_), s.ports.len()))
                    .unwrap_or_default();
                let status = import.status.clone().unwrap_or_default();
                let mut sources: Vec<String> =
                    status.clusters.iter().map(|c| c.cluster.clone()).collect();
                sources.sort();
                lines.push(format!(
                    "import {} {kind} ports={ports} from={}",
                    import.metadata.name.as_deref().unwrap_or_default(),
                    sources.join(",")
                ));
            }
            for slice in member.slices.all() {
                let labels = slice.metadata.labels.clone().unwrap_or_default();
                if labels
                    .get(atoll_api::labels::ENDPOINTSLICE_MANAGED_BY)
                    .map(String::as_str)
                    != Some(atoll_api::labels::ATOLL_ENDPOINTSLICE_MANAGER)
                {
                    continue;
                }
                let mut addresses: Vec<String> = slice
                    .endpoints
                    .iter()
                    .flat_map(|e| e.addresses.clone())
                    .collect();
                addresses.sort();
                lines.push(format!(
                    "slice {} {}",
                    slice.metadata.name.as_deref().unwrap_or_default(),
                    addresses.join(",")
                ));
            }
            for export in member.exports.all() {
                let mut conditions: Vec<String> = export
                    .status
                    .as_ref()
                    .map(|s| {
                        s.conditions
                            .iter()
                            .map(|c| format!("{}={:?}/{}", c.type_, c.status, c.reason))
                            .collect()
                    })
                    .unwrap_or_default();
                conditions.sort();
                lines.push(format!(
                    "export {} {}",
                    export.metadata.name.as_deref().unwrap_or_default(),
                    conditions.join(" ")
                ));
            }
            lines.sort();
            out.insert(name.clone(), lines);
        }
        out
    }
}
