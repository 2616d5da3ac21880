//! The agent's loop as a pure state machine: watch marks, clock ticks, leadership and write
//! outcomes in; plans, heartbeat renewals, kept liveness decisions and Events out. The agent's
//! loop around it only reads the stores, calls [`Reconciler::step`], hands the [`Step`] to the
//! writer and the writer's answer back to [`Reconciler::outcome`]; everything it decides can be
//! driven, and checked, without an apiserver (the unit tests here, and the fault simulation).
//!
//! A step plans the services watch events marked (at most a batch, longest waiting first),
//! those the liveness view changed without an event, those whose retry is due and those a pin
//! released; every service when it first runs, after a relist, when this replica becomes the
//! leader, and every safety-net interval. Every replica steps (a standby stays warm); only the
//! leader's steps carry writes.

mod books;
mod claims;
mod heartbeat;
mod keep;
mod landing;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::hub::{ExportedEndpointSlice, ExportedService, LEASE_NAME};
use atoll_api::keys::ServiceKey;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

pub use books::Books;
pub use claims::{Answer, ClaimBook, HubWriteResult};
pub use heartbeat::{HeartbeatBook, Renewal, lease as heartbeat_lease};
pub use keep::{EPOCH_BATCH, KeepBook, Keeping, keeping_text};

use crate::caps::{Caps, Limits, OverLimit};
use crate::dirty::{Batch, DirtyQueue, Retries};
use crate::liveness::{
    self, Heartbeat, Liveness, Persisted, Tracker, copy_claim_name, record_claim_name,
};
use crate::plan::{
    Feedback, Member, Observed, Plan, Rejected, Report, Sources, collect_slice_deletions, plan,
};

/// How the reconciler runs.
#[derive(Clone, Debug)]
pub struct Config {
    pub member: Member,
    pub liveness: liveness::Settings,
    /// Services one pass plans at most: a burst over many services is worked off a batch at a
    /// time, so a change to any other service waits for at most the batches queued before it.
    pub batch: usize,
    /// How often a full pass re-checks every service even if no event said so.
    pub safety_net: Duration,
    /// How much this importer takes from each member.
    pub limits: Limits,
}

impl Config {
    pub const BATCH: usize = 256;
    pub const SAFETY_NET: Duration = Duration::from_secs(300);

    /// The defaults for `member` judging liveness with `liveness`.
    pub fn new(member: Member, liveness: liveness::Settings) -> Self {
        Self {
            member,
            liveness,
            batch: Self::BATCH,
            safety_net: Self::SAFETY_NET,
            limits: Limits::default(),
        }
    }
}

/// The moment of a step: the monotonic clock, the wall clock, and whether this replica leads
/// (its leadership still valid now).
#[derive(Clone, Debug)]
pub struct Tick {
    pub now: Instant,
    pub wall: Time,
    pub leading: bool,
}

/// What changed in the liveness view since the last step (for log lines and counters).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct News {
    pub withdrawn: Vec<String>,
    /// Withdrawn clusters that beat again.
    pub restored: Vec<String>,
    /// Withdrawn clusters that left the hub (no Lease, no objects): forgotten, not restored.
    pub forgotten: Vec<String>,
    /// Whether this importer became blind (`Some(true)`) or sees again (`Some(false)`).
    pub blind: Option<bool>,
    /// Clusters whose claim has just been reported unmatched.
    pub unmatched: Vec<String>,
}

/// What one step decided.
#[derive(Clone, Debug)]
pub struct Step {
    /// The services the pass covered (`None`: every service).
    pub scope: Option<BTreeSet<ServiceKey>>,
    /// How many services it covered.
    pub services: usize,
    /// Every write of the pass; carried out only when `lead` is true.
    pub plan: Plan,
    pub lead: bool,
    /// Rejected hub records to announce with an Event (by the leader, each version once).
    pub announce: Vec<Rejected>,
    /// Events refused before, published again (after the plan's writes).
    pub events_again: Vec<crate::events::Event>,
    /// This member's last failed write, when, as its heartbeat Lease shows it (`atoll
    /// status`), at most 512 characters; empty if none failed.
    pub last_error: String,
    /// Members over this importer's limits, and what of theirs is left out.
    pub over: Vec<OverLimit>,
    /// The heartbeat renewal to write after the plan's writes.
    pub renewal: Option<Renewal>,
    /// The liveness decisions to keep in the member.
    pub keep: Option<Persisted>,
    /// How keeping them stands (for the agent's status, metrics and Events).
    pub keeping: Keeping,
    /// The liveness view of this step and what changed since the last.
    pub liveness: Liveness,
    pub news: News,
}

impl Step {
    /// A leading step that carries out `plan` and nothing else (no renewal, nothing to keep):
    /// what the executor's tests hand it.
    pub fn carrying(plan: Plan) -> Self {
        Self {
            scope: None,
            services: 0,
            plan,
            lead: true,
            announce: Vec::new(),
            events_again: Vec::new(),
            last_error: String::new(),
            over: Vec::new(),
            renewal: None,
            keep: None,
            keeping: Keeping::Kept,
            liveness: Liveness::default(),
            news: News::default(),
        }
    }
}

/// What carrying out a step did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The failures the next plan must know about.
    pub feedback: Feedback,
    /// Failed writes of the plan.
    pub errors: usize,
    /// The member's own hub writes, name by name.
    pub hub: Vec<HubWriteResult>,
    /// Whether the renewal was written (`None`: there was none, or it was not attempted).
    pub renewal: Option<bool>,
    /// Whether the kept decisions were written (`Err`: the API's message).
    pub kept: Option<Result<(), String>>,
    /// Writes of the plan sent (the renewal and the kept decisions aside), and how many of
    /// them got no answer or one to try again (a timeout, 409, 429, 5xx).
    pub writes: usize,
    pub unanswered: usize,
    /// Whether any Event was to be published, whether some were refused ones again, and those
    /// that were not published.
    pub events_published: bool,
    pub events_retried: bool,
    /// The API's message for the last write that failed, if one did.
    pub last_error: Option<String>,
    /// Collections that got no answer (they may still be deleting).
    pub unanswered_collections: Vec<crate::plan::SliceCollection>,
    pub unpublished: Vec<crate::events::Event>,
}

/// The agent's decisions across passes.
#[derive(Debug)]
pub struct Reconciler {
    config: Config,
    queue: DirtyQueue,
    retries: Retries,
    /// Some write of a failed pass went unanswered, and no pass has written everything since.
    api_unanswered: bool,
    /// Events the API refused, to publish again.
    unpublished: crate::events::Unpublished,
    /// Collections that may still be landing.
    landing: landing::Landing,
    /// The last failed write (see `Step::last_error`), and the wall clock of the last step.
    last_error: String,
    step_wall: Time,
    /// Services whose cluster selection is held (`crate::selection::hold`): planned again when
    /// the hold ends.
    revisits: BTreeMap<ServiceKey, Instant>,
    books: Books,
    tracker: Tracker,
    claims: ClaimBook,
    heartbeat: HeartbeatBook,
    keep: KeepBook,
    caps: Caps,
    /// The member's Node addresses at the last step: when they change, which endpoints every
    /// import may hold changes, so the step covers every service.
    node_addresses: BTreeMap<IpAddr, String>,
    announced: BTreeSet<String>,
    /// When the last full pass ran.
    last_full: Option<Instant>,
    /// Whether this replica led at the last step.
    led: bool,
    /// When a grace or staleness runs out even if no watch event comes.
    next_check: Option<Duration>,
    /// The services a pinned source took part in at the last step.
    pinned: BTreeSet<ServiceKey>,
    last_liveness: Liveness,
    /// The scope of the step whose outcome is awaited.
    awaiting: Option<Option<BTreeSet<ServiceKey>>>,
    /// Whether a step has run (a replica that leads from its first step has just read what
    /// the member holds).
    stepped: bool,
    /// Whether what the member holds was read since the last step (a new leader that read it
    /// just before its first leading step need not wait for another read).
    read_since_step: bool,
}

/// What reading the kept decisions in the member gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptRead {
    /// What a predecessor kept.
    Found(Persisted),
    /// Nothing: a new member (the ConfigMap is not there).
    Absent,
    /// It could not be read (an error, a timeout, no permission) or not taken yet: every
    /// cluster is judged afresh, and nothing is kept until a read succeeds.
    Unreadable,
}

impl Reconciler {
    /// A reconciler that continues from the liveness decisions `kept` in the member, started
    /// at `now`. Whatever they say or lack, no cluster is used before this process has seen it
    /// beat (see `crate::liveness`): they carry history, safety does not depend on them.
    pub fn new(config: Config, kept: KeptRead, now: Instant, wall: &Time) -> Self {
        let own = config.member.id.as_str().to_owned();
        let (tracker, keep) = match kept {
            KeptRead::Found(p) => (
                Tracker::restored(&own, config.liveness, &p, now, wall),
                KeepBook::found(Some(p)),
            ),
            KeptRead::Absent => (Tracker::new(&own, config.liveness), KeepBook::found(None)),
            KeptRead::Unreadable => (Tracker::new(&own, config.liveness), KeepBook::unread()),
        };
        let mut queue = DirtyQueue::default();
        queue.mark_everything();
        let caps = Caps::new(config.limits);
        Self {
            config,
            queue,
            retries: Retries::default(),
            api_unanswered: false,
            unpublished: crate::events::Unpublished::default(),
            last_error: String::new(),
            step_wall: wall.clone(),
            landing: landing::Landing::default(),
            revisits: BTreeMap::new(),
            books: Books::default(),
            tracker,
            claims: ClaimBook::default(),
            heartbeat: HeartbeatBook::default(),
            keep,
            caps,
            node_addresses: BTreeMap::new(),
            announced: BTreeSet::new(),
            last_full: None,
            led: false,
            next_check: None,
            pinned: BTreeSet::new(),
            last_liveness: Liveness::default(),
            awaiting: None,
            stepped: false,
            read_since_step: false,
        }
    }

    /// Whether a step at `tick` makes this replica the leader after it stood by (it then reads
    /// what its predecessor kept and hands it to [`kept_read`](Self::kept_read); nothing is
    /// kept until then).
    pub fn gains_leadership(&self, tick: &Tick) -> bool {
        tick.leading && !self.led && self.stepped
    }

    /// What a (new) read of the kept decisions gave: a predecessor's decisions are taken over
    /// (clusters it withdrew stay withdrawn until they beat, no claim older than one it
    /// accepted counts), and keeping may write again.
    pub fn kept_read(&mut self, kept: KeptRead) {
        match kept {
            KeptRead::Found(p) => {
                self.tracker.adopt(&p);
                // Beats continue above the block a predecessor kept, if this term's are below.
                self.heartbeat.above(p.reserved);
                self.keep = KeepBook::found(Some(p));
            }
            KeptRead::Absent => self.keep = KeepBook::found(None),
            KeptRead::Unreadable => return,
        }
        self.read_since_step = true;
    }

    /// How keeping the liveness decisions stands.
    pub fn keeping(&self) -> Keeping {
        self.keep.keeping()
    }

    /// The source clusters this process has not seen beat yet.
    pub fn unconfirmed(&self) -> Vec<&str> {
        self.tracker.unconfirmed()
    }

    /// The marks of watch events since the last step.
    pub fn marks(&mut self) -> &mut DirtyQueue {
        &mut self.queue
    }

    /// What the passes so far found.
    pub fn report(&self) -> &Report {
        &self.books.report
    }

    /// Services waiting for a pass (`None`: everything).
    pub fn waiting(&self) -> Option<usize> {
        self.queue.len()
    }

    /// This member's last failed write, as its heartbeat Lease shows it.
    pub fn last_error(&self) -> &str {
        &self.last_error
    }

    /// Names this member does not claim because their write keeps failing.
    pub fn unpublishable(&self) -> usize {
        self.claims.unpublishable()
    }

    /// Whether a step is due without waiting (marks wait, or a full pass is due).
    pub fn ready(&self) -> bool {
        !self.queue.is_empty()
    }

    /// How long until a step is due even if no watch event comes: a liveness deadline, a
    /// retry, the safety net, a heartbeat renewal or a batch of kept epochs.
    pub fn next_wake(&self, now: Instant) -> Option<Duration> {
        let safety = self
            .last_full
            .map(|at| (at + self.config.safety_net).saturating_duration_since(now));
        let revisit = self
            .revisits
            .values()
            .min()
            .map(|at| at.saturating_duration_since(now));
        let mut wake = [self.next_check, self.retries.next(now), safety, revisit]
            .into_iter()
            .flatten()
            .min();
        if self.led {
            let leader = [
                self.heartbeat.next_due(self.config.liveness.interval, now),
                self.keep.next_due(&self.tracker.persisted(), now),
                self.unpublished.next(now),
                self.landing.next(now),
            ];
            wake = wake.into_iter().chain(leader.into_iter().flatten()).min();
        }
        wake
    }

    /// One pass over what the stores hold now (`observed`, and every member's heartbeat Lease
    /// on the hub in `leases`).
    pub fn step(&mut self, tick: &Tick, mut observed: Observed, leases: &[Arc<Lease>]) -> Step {
        let now = tick.now;
        let (due, everything_due) = self.retries.take_due(now);
        for key in due {
            self.queue.mark(key);
        }
        let revisits = std::mem::take(&mut self.revisits);
        for (key, at) in revisits {
            if at <= now {
                self.queue.mark(key);
            } else {
                self.revisits.insert(key, at);
            }
        }
        // A replica that becomes the leader plans and writes everything at once: what it
        // planned while standing by was never written.
        let safety_due = self
            .last_full
            .is_none_or(|at| now.saturating_duration_since(at) >= self.config.safety_net);
        if everything_due || (tick.leading && !self.led) || safety_due {
            self.queue.mark_everything();
        }
        if self.gains_leadership(tick) && !self.read_since_step {
            // A predecessor may have kept decisions since this replica read them.
            self.keep = KeepBook::unread();
        }
        self.stepped = true;
        self.read_since_step = false;
        if !tick.leading {
            // A successor continues from what the hub holds.
            self.heartbeat.reset();
        }
        self.led = tick.leading;
        // The batch is taken before anything is read: a change that arrives later marks its
        // service again for the next pass, never into this pass's view.
        let held = !observed.unlisted.is_empty();
        let batch = if held {
            // Nothing is planned while a member watch has not listed: every service waits for
            // the first pass after it has.
            self.queue.mark_everything();
            None
        } else {
            self.queue.take(self.config.batch)
        };

        let view = self.tracker.update_seen(
            now,
            &tick.wall,
            leases,
            &observed.records,
            &observed.hub_slices,
            &observed.beats_seen,
        );
        self.next_check = view.next_check;
        // Per-member caps, on the whole view before it is restricted to some services.
        let capped = self
            .caps
            .admit_counted(view.records, view.copies, &view.published);
        observed.sources = Some(Sources {
            records: capped.records,
            copies: capped.copies,
        });
        observed.liveness = view.liveness;
        observed.selections = Arc::new(self.books.report.selections.clone());
        let news = self.news(&observed.liveness);
        // A newly withdrawn cluster's slices leave every service that holds them, including
        // services the hub no longer names for it (its records wiped or restored away). Only
        // on a withdrawal: every slice held is looked at then, never on an ordinary step.
        let emptied: BTreeSet<ServiceKey> = if news.withdrawn.is_empty() {
            BTreeSet::new()
        } else {
            observed
                .mcs_slices
                .iter()
                .filter(|s| {
                    s.label(atoll_api::labels::SOURCE_CLUSTER)
                        .is_some_and(|c| news.withdrawn.iter().any(|w| w == c))
                })
                .filter_map(|s| crate::keys::of_mcs_slice(s))
                .collect()
        };

        let pinned = crate::plan::pinned_services(&observed);
        let released: BTreeSet<ServiceKey> = self.pinned.difference(&pinned).cloned().collect();
        self.pinned = pinned;

        let scope: Option<BTreeSet<ServiceKey>> = match batch {
            None => Some(BTreeSet::new()),
            Some(Batch::Everything) => None,
            Some(Batch::Some {
                mut services,
                namespaces,
            }) => {
                if !namespaces.is_empty() {
                    services.extend(
                        observed
                            .service_keys()
                            .into_iter()
                            .filter(|k| namespaces.contains(&k.namespace)),
                    );
                }
                Some(services)
            }
        };
        let nodes_changed = observed.node_addresses != self.node_addresses;
        if nodes_changed {
            self.node_addresses = observed.node_addresses.clone();
        }
        let scope = match scope {
            Some(_) if held => Some(BTreeSet::new()),
            Some(_) if view.touched_everything || nodes_changed => None,
            Some(mut keys) => {
                keys.extend(view.touched);
                keys.extend(capped.touched);
                keys.extend(released);
                keys.extend(emptied);
                Some(keys)
            }
            None => None,
        };
        // The tracker grouped the hub's objects by cluster: ours are a few, not the fleet's.
        let own_names = own_names(&view.own.0, &view.own.1);
        let own_lease = own_lease(self.config.member.id.as_str(), leases);
        let restricted = scope.as_ref().map(|keys| observed.restrict(keys));
        let input = restricted.as_ref().unwrap_or(&observed);
        let services = scope
            .as_ref()
            .map_or_else(|| observed.service_keys().len(), BTreeSet::len);
        let mut planned = plan(&self.config.member, input, &self.books.feedback, &tick.wall);
        let wall = tick.wall.0.as_second();
        for (key, selection) in &planned.report.selections {
            if let Some(until) = selection.held_until {
                // A second past the hold's end: the plan then sees it over.
                let wait = u64::try_from(until.saturating_sub(wall)).unwrap_or(0) + 1;
                self.revisits
                    .insert(key.clone(), now + Duration::from_secs(wait));
            }
        }
        // From every slice held, not the scope's: a collection must match only what is deleted.
        let withdrawn = &observed.liveness.withdrawn;
        collect_slice_deletions(&mut planned.member, &observed.mcs_slices, |c| {
            withdrawn.contains_key(c)
        });
        // Nothing a collection may still delete is written again before it is over.
        for key in self
            .landing
            .hold(&mut planned.member, &observed.mcs_slices, now)
        {
            self.queue.mark(key);
        }
        let liveness = restricted.map_or(observed.liveness, |r| r.liveness);
        self.books.absorb_plan(scope.as_ref(), &planned);
        if scope.is_none() {
            self.last_full = Some(now);
        }
        self.claims.observe(&self.books.published, &own_names);

        let mut step = Step {
            scope,
            services,
            plan: planned,
            lead: tick.leading,
            announce: Vec::new(),
            events_again: Vec::new(),
            last_error: String::new(),
            over: capped.over,
            renewal: None,
            keep: None,
            keeping: self.keep.keeping(),
            liveness,
            news,
        };
        self.step_wall = tick.wall.clone();
        if tick.leading {
            step.events_again = self.unpublished.take_due(now);
            step.last_error = self.last_error.clone();
            step.announce = self
                .books
                .report
                .rejected
                .iter()
                .filter(|r| !self.announced.contains(&r.version))
                .cloned()
                .collect();
            self.announced = self
                .books
                .report
                .rejected
                .iter()
                .map(|r| r.version.clone())
                .collect();
            let mut current = self.tracker.persisted();
            // The term's block of beats is kept with the decisions, but the renewal never waits
            // for that write (see `heartbeat`).
            let kept_reserved = self.keep.reserved();
            let block_end = self
                .heartbeat
                .reserve(kept_reserved, &own_lease, &tick.wall);
            current.reserved = kept_reserved.max(block_end);
            // While a member watch has not listed, what this member publishes is unknown: the
            // claim holds what the hub holds for it, never less (an empty store would read as
            // every export deleted, and every importer would drop them).
            let digest = if held {
                liveness::digest(own_names.iter().map(String::as_str))
            } else {
                self.claims.digest(&self.books.published)
            };
            step.renewal = self
                .heartbeat
                .due(&digest, self.config.liveness.interval, now);
            step.keep = self.keep.due(&current, now);
            step.keeping = self.keep.keeping();
            self.awaiting = Some(step.scope.clone());
        }
        step
    }

    /// A heartbeat renewal due while the last leading step's writes still run (see
    /// `HeartbeatBook::interim`); `None` when not leading or not due.
    pub fn interim_renewal(&mut self, now: Instant) -> Option<Renewal> {
        if !self.led {
            return None;
        }
        self.heartbeat.interim(self.config.liveness.interval, now)
    }

    /// What writing an interim renewal gave.
    pub fn interim_answered(&mut self, renewal: Renewal, ok: bool, now: Instant) {
        self.heartbeat.interim_answered(renewal, ok, now);
        if !ok {
            self.tracker.renewal_failed(now);
        }
    }

    /// What carrying out the last leading step did.
    pub fn outcome(&mut self, outcome: Outcome, now: Instant) {
        let Some(scope) = self.awaiting.take() else {
            return;
        };
        self.claims.record(&outcome.hub, now);
        if let Some(ok) = outcome.renewal {
            self.heartbeat.answered(ok, now);
            if !ok {
                self.tracker.renewal_failed(now);
            }
            if ok {
                // The hub takes this member's writes: a name whose own write keeps failing
                // (a webhook down) is bounded like a refusal (`claims`).
                self.claims.hub_took_write(now);
            }
        }
        if let Some(result) = outcome.kept {
            self.keep.answered(result, now);
        }
        self.landing.unanswered(outcome.unanswered_collections, now);
        if let Some(error) = outcome.last_error {
            let when = self.step_wall.0;
            self.last_error = format!("{when} {error}").chars().take(512).collect();
        }
        self.unpublished.answered(
            outcome.unpublished,
            outcome.events_published,
            outcome.events_retried,
            now,
        );
        // A new kind of failure changes what the next plan says (a condition): plan those
        // services again at once rather than after the retry delay.
        let previous = self.books.feedback.clone();
        self.books.feedback.absorb(scope.as_ref(), outcome.feedback);
        if !previous.same_failures(&self.books.feedback) {
            match &scope {
                None => self.queue.mark_everything(),
                Some(keys) => keys.iter().cloned().for_each(|k| self.queue.mark(k)),
            }
        }
        if outcome.errors > 0 {
            self.retries.failed(scope.as_ref(), now);
            self.api_unanswered |= outcome.unanswered > 0;
        } else {
            self.retries.succeeded(scope.as_ref());
            // The apiservers answer again after writes went unanswered (slow, restarting,
            // cut off): what failed for that is tried now, not when its doubled delay (up to
            // 30 s) ends.
            if self.api_unanswered && outcome.writes > 0 {
                self.api_unanswered = false;
                self.retries.expedite(now);
            }
        }
    }

    fn news(&mut self, now: &Liveness) -> News {
        let last = &self.last_liveness;
        let keys = |l: &Liveness| -> BTreeSet<String> { l.withdrawn.keys().cloned().collect() };
        let (before, after) = (keys(last), keys(now));
        // A cluster still judged left `withdrawn` because it beat; one no longer judged left the
        // hub altogether.
        let (restored, forgotten) = before
            .difference(&after)
            .cloned()
            .partition(|c| now.last_seen_seconds.contains_key(c));
        let news = News {
            withdrawn: after.difference(&before).cloned().collect(),
            restored,
            forgotten,
            blind: (last.blind != now.blind).then_some(now.blind),
            unmatched: now
                .unmatched
                .keys()
                .filter(|c| !last.unmatched.contains_key(*c))
                .cloned()
                .collect(),
        };
        self.last_liveness = now.clone();
        news
    }
}

/// The claimed names of this member's records and copies (the tracker's group of its own
/// namespace).
fn own_names(
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
) -> BTreeSet<String> {
    let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.clone().unwrap_or_default()
    };
    records
        .iter()
        .map(|r| record_claim_name(&name(&r.metadata)))
        .chain(copies.iter().map(|c| copy_claim_name(&name(&c.metadata))))
        .collect()
}

/// This member's own heartbeat Lease as the hub holds it.
fn own_lease(id: &str, leases: &[Arc<Lease>]) -> Heartbeat {
    let own = atoll_api::hub::namespace_for(id);
    leases
        .iter()
        .find(|l| {
            l.metadata.name.as_deref() == Some(LEASE_NAME)
                && l.metadata.namespace.as_deref() == Some(own.as_str())
        })
        .map_or_else(Heartbeat::missing, |l| Heartbeat::read(l))
}

#[cfg(test)]
mod tests;
