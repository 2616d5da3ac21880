//! Liveness of source clusters, judged by each importer on its own monotonic clock, and the
//! view of the hub the plan works from.
//!
//! Every member renews a Lease `atoll-heartbeat` in its hub namespace, raising a beat counter
//! each time. An importer notes *when it saw* each beat; it never compares the remote
//! `renewTime` with its own clock, so clock skew between clusters cannot withdraw anything, and
//! a Lease restored from a backup (an older beat) is no heartbeat. A cluster whose beat has not
//! moved for longer than its grace is withdrawn: its records and endpoint copies leave the view
//! (its ports, its endpoints, its vote in conflicts); when it beats again, they return. Each
//! cluster is judged by its own rhythm: staleness and grace are the larger of this importer's
//! settings and what the member's Lease asks for (bounded), so members with slow heartbeats do
//! not flap.
//!
//! Withdrawal needs positive evidence or elapsed grace:
//! * while this importer cannot see the hub (its own Lease, renewed by itself, stops changing in
//!   its view) the clock of every cluster is paused, and restarted in full once it sees again;
//! * a member's Lease carries a claim (an epoch and a digest of the names of the records and
//!   copies it publishes). Its objects are taken as they are only when they match its newest
//!   claim; otherwise (a hub wiped or restored from an older backup, or a change still on its
//!   way) the importer keeps the last set that matched. An importer that has no such set (it
//!   just started) leaves the services the cluster takes part in as they are (*pinned*) until
//!   the objects match or the grace has passed. A claim that stays unmatched longer than the
//!   grace is reported.
//!
//! What the tracker decided survives restarts ([`Persisted`]): a restarted or newly elected
//! agent never uses a cluster its predecessor withdrew until that cluster beats again, carries
//! a staleness on from when it began, and takes no claim older than one already accepted.

mod heartbeat;
mod persisted;
mod source;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService, LEASE_NAME};
use atoll_api::keys::ServiceKey;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use heartbeat::{
    Beat, Claim, Heartbeat, MAX_ADVERTISED, copy_claim_name, digest, next_beat, next_epoch,
    publication_digest, record_claim_name,
};
pub use persisted::{
    KEPT_DATA_KEY, KEPT_SERVICES, MAX_COUNTER, MAX_SERVICES, Persisted, PersistedSource, Standing,
    Verdict,
};
use source::{Published, Source, State, changed_services, services_of};

/// How liveness is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// This importer's own heartbeat interval.
    pub interval: Duration,
    /// A cluster whose beat has not moved for this long is withdrawn.
    pub grace: Duration,
    /// A cluster whose beat has not moved for this long is reported stale.
    pub stale_after: Duration,
    /// This importer is blind (cannot see the hub) once its own Lease has not changed for this
    /// long.
    pub blind_after: Duration,
    /// A cluster goes stale or is withdrawn only at instants this far apart (see
    /// [`JUDGE_EVERY`]); zero judges at every step.
    pub judge_every: Duration,
}

/// How much later than its interval this importer's own Lease may move in its view while the
/// view is current: the watch's delivery and the step that reads it.
pub const VIEW_LAG: Duration = Duration::from_secs(1);

/// How far apart the instants are at which clusters go stale or are withdrawn. Clusters that
/// die together (a region) stop beating within one of their intervals of each other, so their
/// deadlines spread over it; judged at every step, each would take a pass of its own, each
/// rewriting the status of every import it took part in (a third of 250 clusters of 200
/// services: up to 83 passes and 16,600 status writes, twice over with going stale first).
/// Judged on this grid, those whose deadlines fall within one step of it go in one pass, for
/// at most this much past the grace.
pub const JUDGE_EVERY: Duration = Duration::from_secs(1);

impl Settings {
    /// Settings for heartbeats every `interval` and the withdrawal grace `grace`. A source is
    /// stale one interval later than this importer would know itself blind: when the hub goes
    /// away, every heartbeat stops at once, and blindness (which changes nothing) must be
    /// noticed before any staleness (which would rewrite conditions during the outage).
    pub fn new(interval: Duration, grace: Duration) -> Self {
        Self {
            interval,
            grace,
            stale_after: interval * 4,
            blind_after: interval * 3,
            judge_every: JUDGE_EVERY,
        }
    }

    /// Staleness and grace for a cluster whose Lease says `heartbeat`: never shorter than ours,
    /// never shorter than what it asks for, and the grace at least three of its intervals.
    pub fn for_source(&self, heartbeat: &Heartbeat) -> (Duration, Duration) {
        let interval = heartbeat.interval.unwrap_or_default();
        let stale_after = self.stale_after.max(interval * 4);
        let grace = self
            .grace
            .max(heartbeat.grace.unwrap_or_default())
            .max(interval * 3);
        (stale_after, grace)
    }
}

/// A withdrawn source cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Withdrawal {
    /// When its beat last moved, as this importer saw it (wall clock of the sighting).
    pub last_seen: Time,
    /// The services it exported when it was withdrawn.
    pub services: BTreeSet<ServiceKey>,
}

/// When this importer's Lease watch saw each cluster's beat, by cluster: a beat is taken as
/// seen then rather than at the step that reads it, so heartbeats need not wake the reconciler
/// (a renewal that changes nothing else costs a map entry, not a pass) and a withdrawal still
/// counts the grace from the last beat seen.
pub type BeatsSeen = HashMap<String, (Beat, Instant)>;

/// What the plan needs to know about source clusters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Liveness {
    /// Withdrawn clusters.
    pub withdrawn: BTreeMap<String, Withdrawal>,
    /// Clusters whose beat is late but within the grace: when it last moved.
    pub stale: BTreeMap<String, Time>,
    /// Clusters whose hub objects have not matched their claim for longer than the grace: since
    /// when (the last matching set is what is imported meanwhile).
    pub unmatched: BTreeMap<String, Time>,
    /// Clusters whose objects this importer cannot judge yet (no set matched their claim since
    /// it started): the services they take part in are left as they are.
    pub pinned: BTreeSet<String>,
    /// Of the pinned clusters, those pinned only because this process has not seen them beat
    /// yet: what of theirs this member holds stays as it is, but their hub records alone pin
    /// nothing (a member that holds nothing of them, a new one, imports the other clusters'
    /// part of a shared service at once, and theirs once they beat).
    pub unconfirmed: BTreeSet<String>,
    /// This importer cannot see the hub: nothing is withdrawn meanwhile.
    pub blind: bool,
    /// Seconds since each cluster's beat last moved, as seen here.
    pub last_seen_seconds: BTreeMap<String, f64>,
}

/// `wall` less `ago` (the wall time of a moment `ago` before it).
fn wall_before(wall: &Time, ago: Duration) -> Time {
    k8s_openapi::jiff::SignedDuration::try_from(ago)
        .ok()
        .and_then(|ago| wall.0.checked_sub(ago).ok())
        .map_or_else(|| wall.clone(), Time)
}

/// The instants at which verdicts change: `origin` + k·`step` (every instant if `step` is 0).
#[derive(Clone, Copy, Debug)]
struct Grid {
    origin: Instant,
    step: Duration,
}

impl Grid {
    /// The latest instant of the grid not after `now`.
    fn floor(self, now: Instant) -> Instant {
        let Ok(step) = u64::try_from(self.step.as_nanos()) else {
            return now;
        };
        if step == 0 {
            return now;
        }
        let since = u64::try_from(now.saturating_duration_since(self.origin).as_nanos())
            .unwrap_or(u64::MAX);
        self.origin + Duration::from_nanos(since - since % step)
    }

    /// How long from `now` until a verdict due in `due` is taken: the first instant of the
    /// grid after it.
    fn until_judged(self, now: Instant, due: Duration) -> Duration {
        if self.step.is_zero() {
            return due;
        }
        let deadline = now + due;
        (self.floor(deadline) + self.step).saturating_duration_since(now)
    }
}

/// The hub as the plan should see it.
#[derive(Clone, Debug, Default)]
pub struct View {
    pub records: Vec<Arc<ExportedService>>,
    pub copies: Vec<Arc<ExportedEndpointSlice>>,
    pub liveness: Liveness,
    /// When to look again even if nothing changes (a grace or a staleness may run out).
    pub next_check: Option<Duration>,
    /// Services whose part of the view changed in this update for reasons no watch event of
    /// theirs shows: a member's objects came to match its claim (or stopped counting), a
    /// cluster was withdrawn, restored, went stale, or was pinned or unpinned.
    pub touched: BTreeSet<ServiceKey>,
    /// Every service's part may have changed (this importer stopped or started seeing the hub).
    pub touched_everything: bool,
    /// What each cluster in the view publishes, counted.
    pub published: BTreeMap<String, crate::caps::Counts>,
    /// This importer's own records and copies as the hub holds them, whatever the view says
    /// of them (the export side compares with these).
    pub own: (Vec<Arc<ExportedService>>, Vec<Arc<ExportedEndpointSlice>>),
}

/// Per-importer memory of every source cluster.
#[derive(Clone, Debug)]
pub struct Tracker {
    settings: Settings,
    own: String,
    sources: BTreeMap<String, Source>,
    blind: bool,
    /// The origin of the judging grid (the first update).
    grid: Option<Instant>,
    /// When this member's own heartbeat renewal first failed, until its Lease is seen to move
    /// again: silences are judged only up to then (see [`Tracker::renewal_failed`]).
    renewal_failed_at: Option<Instant>,
}

/// The cluster a hub object belongs to, by the member namespace it is stored in.
fn cluster_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.namespace
        .as_deref()?
        .strip_prefix(hub::NAMESPACE_PREFIX)
}

/// Hub objects grouped by cluster: every step groups every hub object, so the names are
/// borrowed and hashed (one hash and one comparison an object; a B-tree compared each name
/// with eight others at 250 clusters).
type ByCluster<'a> = HashMap<&'a str, Published, foldhash::fast::RandomState>;

/// Records and copies by the cluster whose namespace holds them; records outside any member
/// namespace apart.
fn by_cluster<'a>(
    records: &'a [Arc<ExportedService>],
    copies: &'a [Arc<ExportedEndpointSlice>],
) -> (ByCluster<'a>, Vec<Arc<ExportedService>>) {
    let mut clusters = ByCluster::default();
    let mut unowned = Vec::new();
    for record in records {
        match cluster_of(&record.metadata) {
            Some(c) => clusters.entry(c).or_default().0.push(record.clone()),
            None => unowned.push(record.clone()),
        }
    }
    for copy in copies {
        if let Some(c) = cluster_of(&copy.metadata) {
            clusters.entry(c).or_default().1.push(copy.clone());
        }
    }
    (clusters, unowned)
}

impl Tracker {
    /// A tracker for the importer `own`.
    pub fn new(own: &str, settings: Settings) -> Self {
        Self {
            settings,
            own: own.to_owned(),
            sources: BTreeMap::new(),
            blind: false,
            grid: None,
            renewal_failed_at: None,
        }
    }

    /// A tracker that continues from what a predecessor decided (`persisted`), started at
    /// `now` (`wall` the same moment on the wall clock).
    pub fn restored(
        own: &str,
        settings: Settings,
        persisted: &Persisted,
        now: Instant,
        wall: &Time,
    ) -> Self {
        let mut tracker = Self::new(own, settings);
        for (cluster, kept) in &persisted.sources {
            if cluster == own {
                continue;
            }
            tracker
                .sources
                .insert(cluster.clone(), Source::restored(kept, now, wall));
        }
        tracker
    }

    /// Takes over what a predecessor decided since this tracker last looked (a standby that
    /// becomes the leader): clusters it withdrew stay withdrawn until they beat again, and no
    /// claim older than one it accepted counts.
    pub fn adopt(&mut self, persisted: &Persisted) {
        for (cluster, kept) in &persisted.sources {
            if cluster == &self.own {
                continue;
            }
            if let Some(source) = self.sources.get_mut(cluster) {
                source.adopt(kept);
            }
        }
    }

    /// What a successor needs to continue from this tracker's decisions. The services kept for
    /// withdrawn clusters share one budget ([`KEPT_SERVICES`]), so what is kept stays small
    /// whatever the fleet (a regional outage withdraws many clusters at once).
    pub fn persisted(&self) -> Persisted {
        let withdrawn = self
            .sources
            .values()
            .filter(|s| s.verdict == State::Withdrawn)
            .count();
        let share = KEPT_SERVICES / withdrawn.max(1);
        Persisted {
            format: persisted::FORMAT,
            reserved: 0,
            sources: self
                .sources
                .iter()
                .filter_map(|(c, s)| Some((c.clone(), s.persisted(c == &self.own, share)?)))
                .collect(),
        }
    }

    /// The clusters this process has not seen beat yet (their services are left as they are).
    pub fn unconfirmed(&self) -> Vec<&str> {
        self.sources
            .iter()
            .filter(|(c, s)| *c != &self.own && s.unconfirmed() && s.verdict != State::Withdrawn)
            .map(|(c, _)| c.as_str())
            .collect()
    }

    /// This member's own heartbeat renewal failed at `at`: until its Lease is seen to move
    /// again, no cluster's silence counts past the first such failure. Cut off from the hub,
    /// an importer sees no heartbeat and its own stops moving only in the view it can no
    /// longer refresh; without this, a cluster whose grace ran out while the importer could
    /// not see it beat was withdrawn before the importer knew itself blind (the simulation's
    /// schedule 11523643528560866252, once a partition stopped excusing the partitioned
    /// importer's deletions).
    pub fn renewal_failed(&mut self, at: Instant) {
        self.renewal_failed_at.get_or_insert(at);
    }

    /// Takes in what the hub holds now (`now` on this importer's monotonic clock, `wall` the
    /// same moment on its wall clock) and returns the view to plan from.
    pub fn update(
        &mut self,
        now: Instant,
        wall: &Time,
        leases: &[Arc<Lease>],
        records: &[Arc<ExportedService>],
        copies: &[Arc<ExportedEndpointSlice>],
    ) -> View {
        self.update_seen(now, wall, leases, records, copies, &BeatsSeen::new())
    }

    /// As [`update`](Self::update), each beat taken as seen when `seen` says its watch saw it
    /// (when that is the beat the Lease holds now, and not later than `now`).
    pub fn update_seen(
        &mut self,
        now: Instant,
        wall: &Time,
        leases: &[Arc<Lease>],
        records: &[Arc<ExportedService>],
        copies: &[Arc<ExportedEndpointSlice>],
        seen: &BeatsSeen,
    ) -> View {
        let (by_cluster, unowned) = by_cluster(records, copies);
        let leases: BTreeMap<String, Heartbeat> = leases
            .iter()
            .filter(|l| l.metadata.name.as_deref() == Some(LEASE_NAME))
            .filter_map(|l| Some((cluster_of(&l.metadata)?.to_owned(), Heartbeat::read(l))))
            .collect();

        // Beats, as seen now.
        let mut clusters: BTreeSet<String> = self.sources.keys().cloned().collect();
        clusters.extend(by_cluster.keys().map(|c| (*c).to_owned()));
        clusters.extend(leases.keys().cloned());
        clusters.insert(self.own.clone());
        let missing = Heartbeat::missing();
        for cluster in &clusters {
            let heartbeat = leases.get(cluster).unwrap_or(&missing);
            let (at, at_wall) = match seen.get(cluster) {
                Some((beat, at)) if *beat == heartbeat.beat && *at < now => {
                    (*at, wall_before(wall, now.saturating_duration_since(*at)))
                }
                _ => (now, wall.clone()),
            };
            self.sources
                .entry(cluster.clone())
                .or_insert_with(|| Source::first_seen(heartbeat, at, &at_wall))
                .observe_beat(heartbeat, at, &at_wall);
        }

        // Blind while our own Lease does not move in our view; seeing again restarts every
        // cluster's clock, so an outage of the hub (or of our view of it) withdraws nothing.
        let own_age = self
            .sources
            .get(&self.own)
            .map_or(Duration::ZERO, |s| s.age(now));
        let blind = own_age > self.settings.blind_after;
        // Our own Lease moved after the failure: our writes reach the hub and our view of it
        // is current past that moment again.
        if self
            .renewal_failed_at
            .is_some_and(|failed| now.saturating_duration_since(failed) > own_age)
        {
            self.renewal_failed_at = None;
        }
        let mut view = View {
            records: unowned,
            own: by_cluster
                .get(self.own.as_str())
                .cloned()
                .unwrap_or_default(),
            touched_everything: self.blind != blind,
            ..View::default()
        };
        if self.blind && !blind {
            for source in self.sources.values_mut() {
                source.seen_again(now, wall);
            }
        }
        self.blind = blind;
        view.liveness.blind = blind;

        let mut next: Option<Duration> = None;
        let mut soonest = |d: Duration| next = Some(next.map_or(d, |n: Duration| n.min(d)));
        let grid = Grid {
            origin: *self.grid.get_or_insert(now),
            step: self.settings.judge_every,
        };
        // A silence counts only as far as this view is known to be current: one interval (and
        // a second for the watch and the step) past the last time our own Lease moved in it (a partition cuts watches and writes alike,
        // and is noticed as blindness only three intervals later; a standby, which writes
        // nothing, knows it only by the leader's renewals), and, while our own renewals fail,
        // up to the first failure. Otherwise a cluster whose grace ran out while this view
        // could not see it beat was withdrawn before blindness froze the verdicts.
        let current_until = now
            .checked_sub(own_age.saturating_sub(self.settings.interval + VIEW_LAG))
            .unwrap_or(now);
        let horizon = self
            .renewal_failed_at
            .map_or(current_until, |failed| failed.min(current_until));
        let judged_at = grid.floor(horizon);
        // Going stale changes no endpoint, only every import's condition text: on a grid as
        // coarse as this importer's interval, so a region going stale is one rewrite of those
        // statuses, not one per grid step its beats spread over.
        let stale_grid = Grid {
            step: grid.step.max(self.settings.interval),
            ..grid
        };
        let stale_judged_at = stale_grid.floor(horizon);
        let empty = Published::default();
        for (cluster, source) in &mut self.sources {
            let own = cluster == &self.own;
            let heartbeat = leases.get(cluster).unwrap_or(&missing);
            // The rhythm it last asked for counts while its Lease is gone (wiped, or restored
            // from a backup older than the Lease): a slow member is not judged by ours then.
            source.remember_rhythm(heartbeat);
            let (stale_after, grace) = self.settings.for_source(&source.rhythm);
            let current = by_cluster.get(cluster.as_str()).unwrap_or(&empty);
            let was_pinned = source.pinned;
            // A silence carried over from a predecessor never withdraws before this process has
            // itself waited one of the cluster's intervals.
            source.cap_carried(
                grace.saturating_sub(
                    self.settings
                        .interval
                        .max(source.rhythm.interval.unwrap_or_default()),
                ),
            );
            let was_unmatched = source.unmatched_reported.is_some();
            let judged = source.judge_objects(heartbeat, current, blind, now, wall, grace);
            if let Some(before) = &judged.replaced {
                changed_services(before.as_ref(), source.held.as_ref(), &mut view.touched);
            }
            // Reported unmatched, or matched again: every import this cluster takes part in
            // says so in its status (`conditions::source_clusters`), not only those whose
            // objects changed. Planned only when the objects changed, "unmatched" stayed in the
            // others' statuses after the cluster matched again, until a restart rewrote them.
            if source.unmatched_reported.is_some() != was_unmatched {
                services_of(source.held.as_ref(), &mut view.touched);
            }
            if let Some(wait) = judged.pin_ends_in {
                soonest(wait);
            }
            if let Some(wait) = judged.unmatched_report_in {
                soonest(wait);
            }
            if let Some(since) = &source.unmatched_reported {
                view.liveness
                    .unmatched
                    .insert(cluster.clone(), since.clone());
            }

            let age = source.age(now);
            // Verdicts as of the last instant of the grid: clusters whose deadlines fall in one
            // step of it change state in the same pass.
            let judged_age = source.age(judged_at);
            let stale_judged_age = source.age(stale_judged_at);
            view.liveness
                .last_seen_seconds
                .insert(cluster.clone(), age.as_secs_f64());
            if own && !blind {
                soonest(self.settings.blind_after.saturating_sub(age));
            }
            // A withdrawn cluster stays withdrawn until it beats again, whatever else happens
            // (this importer blind, seeing again, restarting); while blind, nothing else
            // changes either.
            let verdict = if own {
                State::Live
            } else if source.withdrawn_until_beat {
                State::Withdrawn
            } else if blind {
                source.verdict
            } else if judged_age > grace {
                State::Withdrawn
            } else if stale_judged_age > stale_after {
                State::Stale
            } else {
                State::Live
            };
            if verdict == State::Withdrawn {
                source.withdrawn_until_beat = true;
                // Withdrawn, not pinned: what it took part in is planned without it.
                source.unpin();
            }
            if source.pinned != was_pinned {
                services_of(Some(current), &mut view.touched);
            }
            if source.pinned {
                view.liveness.pinned.insert(cluster.clone());
                if source.unconfirmed() {
                    view.liveness.unconfirmed.insert(cluster.clone());
                }
            }
            if verdict != source.verdict {
                // Going stale changes no endpoint, only the text of a condition: it waits for
                // the next pass over those services (a withdrawal rewrites them anyway).
                // Planned at once, a region going stale was a rewrite of every import's status
                // just before the withdrawal, which then waited for it (seconds at 200
                // services). Live again, the services are planned at once, so no status says
                // "stale" of a live cluster (a pass that finds nothing stale writes nothing).
                let back = source.verdict == State::Stale && verdict == State::Live;
                if verdict == State::Withdrawn || source.verdict == State::Withdrawn || back {
                    services_of(source.held.as_ref(), &mut view.touched);
                }
                source.verdict = verdict;
            }
            if verdict == State::Withdrawn {
                view.liveness.withdrawn.insert(
                    cluster.clone(),
                    Withdrawal {
                        last_seen: source.last_change_wall.clone(),
                        services: source.exported_services_or(current),
                    },
                );
                continue;
            }
            if verdict == State::Stale {
                view.liveness
                    .stale
                    .insert(cluster.clone(), source.last_change_wall.clone());
            } else {
                soonest(stale_grid.until_judged(now, stale_after.saturating_sub(age)));
            }
            soonest(grid.until_judged(now, grace.saturating_sub(age)));
            if source.pinned {
                continue;
            }
            if let Some((records, copies)) = &source.held {
                view.published
                    .insert(cluster.clone(), crate::caps::Counts::of(records, copies));
                view.records.extend(records.iter().cloned());
                view.copies.extend(copies.iter().cloned());
            }
        }
        // Forget clusters that left nothing behind: no Lease, no objects, nothing held (or
        // withdrawn), so memory follows the hub.
        self.sources.retain(|cluster, source| {
            cluster == &self.own
                || leases.contains_key(cluster)
                || by_cluster.contains_key(cluster.as_str())
                || (source.holds_something() && !view.liveness.withdrawn.contains_key(cluster))
        });
        // Never sooner than a quarter second: a deadline that just passed is handled by this
        // pass.
        view.next_check =
            next.map(|d| d.max(Duration::from_millis(200)) + Duration::from_millis(50));
        view
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod restart_tests;
