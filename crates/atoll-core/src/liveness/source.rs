//! One source cluster as an importer remembers it: when its beat last moved, the claims it
//! made, the last set of objects that matched one, and how it stands.

use std::collections::{BTreeSet, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ServiceKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::heartbeat::{Beat, Claim, Heartbeat, publication_digest};
use super::persisted::{MAX_SERVICES, Persisted, PersistedSource, Standing};
use crate::keys;

/// One cluster's records and endpoint copies.
pub(super) type Published = (Vec<Arc<ExportedService>>, Vec<Arc<ExportedEndpointSlice>>);

/// How a source cluster counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum State {
    #[default]
    Live,
    Stale,
    Withdrawn,
}

/// The services of the objects in one of `a` and `b` but not the other (by identity: the
/// stores hand out the same `Arc` for an object until it changes).
pub(super) fn changed_services(
    a: Option<&Published>,
    b: Option<&Published>,
    into: &mut BTreeSet<ServiceKey>,
) {
    let empty = Published::default();
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    fn one_side<T>(
        from: &[Arc<T>],
        other: &[Arc<T>],
        key: impl Fn(&T) -> ServiceKey,
        into: &mut BTreeSet<ServiceKey>,
    ) {
        let other: HashSet<*const T> = other.iter().map(Arc::as_ptr).collect();
        into.extend(
            from.iter()
                .filter(|o| !other.contains(&Arc::as_ptr(o)))
                .map(|o| key(o)),
        );
    }
    one_side(&a.0, &b.0, keys::of_record, into);
    one_side(&b.0, &a.0, keys::of_record, into);
    one_side(&a.1, &b.1, keys::of_copy, into);
    one_side(&b.1, &a.1, keys::of_copy, into);
}

/// Every service of `published`.
pub(super) fn services_of(published: Option<&Published>, into: &mut BTreeSet<ServiceKey>) {
    changed_services(published, None, into);
}

/// The identities of a cluster's objects, sorted: the stores hand out the same `Arc` for an
/// object until it changes, so equal identities mean the same objects (as long as the objects
/// are kept, no identity is reused).
fn identities(current: &Published) -> Vec<usize> {
    let mut identities: Vec<usize> = current
        .0
        .iter()
        .map(|r| Arc::as_ptr(r) as usize)
        .chain(current.1.iter().map(|c| Arc::as_ptr(c) as usize))
        .collect();
    identities.sort_unstable();
    identities
}

/// The digest of a cluster's objects, recomputed only when the objects changed.
#[derive(Clone, Debug, Default)]
struct DigestCache {
    identities: Vec<usize>,
    objects: Published,
    digest: String,
}

impl DigestCache {
    fn digest(&mut self, current: &Published, identities: &[usize]) -> &str {
        if identities != self.identities.as_slice() || self.digest.is_empty() {
            self.digest = publication_digest(&current.0, &current.1);
            self.identities = identities.to_vec();
            self.objects = current.clone();
        }
        &self.digest
    }
}

/// When the tracker must look again for what [`Source::judge_objects`] decided.
#[derive(Clone, Debug, Default)]
pub(super) struct Judged {
    /// A pin runs out (the grace passes without a matching set).
    pub pin_ends_in: Option<Duration>,
    /// An unmatched claim is due to be reported.
    pub unmatched_report_in: Option<Duration>,
    /// The held set was replaced: what it held before (`Some(None)`: nothing).
    pub replaced: Option<Option<Published>>,
}

#[derive(Clone, Debug)]
pub(super) struct Source {
    pub last_change: Instant,
    pub last_change_wall: Time,
    /// The newest beat seen.
    pub last_beat: Beat,
    /// Withdrawn by a predecessor of this process: stays withdrawn until it beats again.
    pub withdrawn_until_beat: bool,
    pub accepted_epoch: u64,
    /// The newest claim seen, kept when the Lease itself is gone (deleted with the rest of the
    /// member's namespace, or by a wipe).
    pub claim: Option<Claim>,
    /// Records and copies as they last matched the member's claim.
    pub held: Option<Published>,
    /// The identities of `held` (see [`identities`]): a step whose objects are the held ones
    /// replaces nothing, so an importer of a large fleet pays per cluster, not per object.
    held_identities: Vec<usize>,
    /// No set of its objects has matched its claim since this importer started: the services
    /// it takes part in are left as they are.
    pub pinned: bool,
    /// Since when its objects have not matched its claim (monotonic, wall).
    pub unmatched_since: Option<(Instant, Time)>,
    /// Set once they have not matched for longer than the grace: since when (wall).
    pub unmatched_reported: Option<Time>,
    pub verdict: State,
    /// The rhythm it last asked for (its Lease's interval and grace), kept while the Lease is
    /// gone.
    pub rhythm: Heartbeat,
    /// Not seen to beat by this process yet. Positive evidence: nothing of it is taken until
    /// this process has seen its Lease change, whatever a predecessor kept or failed to keep (a
    /// lost, unreadable or refused ConfigMap must not bring a dead cluster back), and the
    /// services it takes part in stay as they are meanwhile (pinned). What the hub holds may
    /// also be a restored backup whose claim is the very one accepted before (same names, older
    /// contents); the member writes its objects before each heartbeat.
    awaiting_beat: bool,
    /// Whether this process has looked at its Lease yet: the first look is a baseline, never a
    /// beat.
    observed: bool,
    /// Quiet since then at that beat, as a predecessor kept it: if its Lease still holds that
    /// beat at the first look, the silence counts on (an importer restarting every few seconds
    /// still withdraws a dead cluster).
    carry: Option<(Beat, Time)>,
    /// Silence carried over from a predecessor, added to its age until it beats.
    carried: Duration,
    /// The services a predecessor recorded for it when withdrawing it.
    restored_services: BTreeSet<ServiceKey>,
    digest: DigestCache,
}

impl Source {
    /// A cluster seen for the first time: its clock starts now.
    pub fn first_seen(heartbeat: &Heartbeat, now: Instant, wall: &Time) -> Self {
        Self {
            last_change: now,
            last_change_wall: wall.clone(),
            last_beat: heartbeat.beat.clone(),
            withdrawn_until_beat: false,
            accepted_epoch: 0,
            claim: None,
            held: None,
            held_identities: Vec::new(),
            pinned: false,
            unmatched_since: None,
            unmatched_reported: None,
            verdict: State::Live,
            rhythm: heartbeat.clone(),
            awaiting_beat: true,
            observed: false,
            carry: None,
            carried: Duration::ZERO,
            restored_services: BTreeSet::new(),
            digest: DigestCache::default(),
        }
    }

    /// A cluster as a predecessor left it: withdrawn until it beats again, no claim older than
    /// one it accepted, and a silence it recorded carried on if the Lease still shows it.
    pub fn restored(kept: &PersistedSource, now: Instant, wall: &Time) -> Self {
        let mut source = Self::first_seen(&Heartbeat::missing(), now, wall);
        source.last_beat = kept.judged_beat();
        source.accepted_epoch = kept.accepted_epoch;
        match kept.standing {
            Some(Standing::Withdrawn) => {
                source.withdrawn_until_beat = true;
                source.verdict = State::Withdrawn;
                source.restored_services = kept.services.clone();
                if let Some(since) = &kept.since {
                    source.last_change_wall = since.clone();
                }
            }
            // Stale, or not seen to beat by the predecessor: the silence goes on from when it
            // began only if the Lease still holds the beat it was judged at (the hub itself
            // shows no beat since), and never to more than the grace less one interval, so a
            // clock set forward across a restart cannot withdraw a cluster that beats on time.
            Some(Standing::Stale) | None => {
                if let Some(since) = &kept.since
                    && kept.judged_beat() != Beat::Missing
                {
                    source.carry = Some((kept.judged_beat(), since.clone()));
                }
            }
        }
        source
    }

    /// Takes over a predecessor's decision on this cluster: withdrawn, unless it has beaten
    /// since the predecessor judged it; its accepted epoch, if higher.
    pub fn adopt(&mut self, kept: &PersistedSource) {
        if kept.standing == Some(Standing::Withdrawn) && !self.last_beat.renews(&kept.judged_beat())
        {
            self.withdrawn_until_beat = true;
        }
        if kept.accepted_epoch > self.accepted_epoch {
            self.accepted_epoch = kept.accepted_epoch;
        }
    }

    /// What a successor must know of this cluster, if anything: its standing, or, while this
    /// process has not seen it beat, the beat and time its silence began (a *baseline*; never
    /// for this importer's own cluster), at most `services` of the services it exported when
    /// withdrawn, and the newest epoch accepted.
    pub fn persisted(&self, own: bool, services: usize) -> Option<PersistedSource> {
        let standing = match self.verdict {
            State::Live => None,
            State::Stale => Some(Standing::Stale),
            State::Withdrawn => Some(Standing::Withdrawn),
        };
        let baseline = standing.is_none() && self.awaiting_beat && !own;
        if standing.is_none()
            && !baseline
            && self.accepted_epoch == 0
            && self.unmatched_reported.is_none()
        {
            return None;
        }
        let (beat, lease_version) = if standing.is_some() || baseline {
            Persisted::beat_of(&self.last_beat)
        } else {
            (None, None)
        };
        let dated = standing.is_some() || (baseline && (beat.is_some() || lease_version.is_some()));
        Some(PersistedSource {
            beat,
            lease_version,
            standing,
            since: dated.then(|| self.last_change_wall.clone()),
            accepted_epoch: self.accepted_epoch,
            unmatched: self.unmatched_reported.clone(),
            services: if standing == Some(Standing::Withdrawn) {
                self.exported_services()
                    .into_iter()
                    .take(services.min(MAX_SERVICES))
                    .collect()
            } else {
                BTreeSet::new()
            },
        })
    }

    /// Takes in its Lease as seen now: a renewal (a beat above every one seen before) restarts
    /// its clock. A Lease restored from a backup, however many times, carries a beat seen
    /// before and is no heartbeat; the member's own beats only grow, across restarts, new
    /// leaders and restores (see `crate::reconciler::HeartbeatBook`). What this process sees
    /// first is a baseline, not a beat, and so is a Lease that appears where there was none
    /// (a restore may bring back a dead member's): only a change after it is evidence.
    pub fn observe_beat(&mut self, heartbeat: &Heartbeat, now: Instant, wall: &Time) {
        if !self.observed {
            self.observed = true;
            if let Some((beat, since)) = self.carry.take()
                && heartbeat.beat == beat
            {
                self.carried = elapsed(&since, wall);
                self.last_change_wall = since;
            }
            if heartbeat.beat.renews(&self.last_beat) {
                // A beat above the one a kept withdrawal was judged at: the cluster beat after
                // that decision (a later restoration was never kept: its write refused). The
                // withdrawal is outdated; the cluster still waits for a beat this process sees
                // (left as it is meanwhile), it is not withdrawn again.
                if self.last_beat != Beat::Missing {
                    self.withdrawn_until_beat = false;
                }
                self.last_beat = heartbeat.beat.clone();
            }
            return;
        }
        if heartbeat.beat.renews(&self.last_beat) {
            let appeared = self.last_beat == Beat::Missing;
            self.last_beat = heartbeat.beat.clone();
            if appeared {
                return;
            }
            // The clock never goes back: a beat the watch saw before the clock last restarted
            // (the hub seen again) leaves it at the restart.
            if now >= self.last_change {
                self.last_change = now;
                self.last_change_wall = wall.clone();
            }
            self.carried = Duration::ZERO;
            self.withdrawn_until_beat = false;
            self.awaiting_beat = false;
        }
    }

    /// Caps the silence carried over from a predecessor at `most`.
    pub fn cap_carried(&mut self, most: Duration) {
        self.carried = self.carried.min(most);
    }

    /// Takes in the rhythm its Lease asks for, when it asks for one.
    pub fn remember_rhythm(&mut self, heartbeat: &Heartbeat) {
        if heartbeat.interval.is_some() {
            self.rhythm.interval = heartbeat.interval;
        }
        if heartbeat.grace.is_some() {
            self.rhythm.grace = heartbeat.grace;
        }
    }

    /// How long its beat has not moved (with what a predecessor saw of that silence).
    pub fn age(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_change)
            .saturating_add(self.carried)
    }

    /// This importer sees the hub again after being blind: the clock restarts in full.
    pub fn seen_again(&mut self, now: Instant, wall: &Time) {
        self.last_change = self.last_change.max(now);
        self.last_change_wall = wall.clone();
        self.carried = Duration::ZERO;
    }

    /// Decides which of its objects count: those of `current` when they match its newest claim
    /// (or it never claimed anything), else the last set that matched; with no such set it is
    /// pinned until the grace passes, then `current` is taken. Nothing changes while blind.
    pub fn judge_objects(
        &mut self,
        heartbeat: &Heartbeat,
        current: &Published,
        blind: bool,
        now: Instant,
        wall: &Time,
        grace: Duration,
    ) -> Judged {
        // What the member claims now is on the Lease with the newest beat this process has
        // taken: beat counters only grow, so no restore brings such a Lease back, and a Lease
        // with an older beat (restored from a backup) is ignored whatever epoch it names. A
        // member whose kept block was lost while the hub was restored and its clock set back
        // (the README's triple fault) repeats epochs as well as beats: judged by epochs, its
        // claim never counted again once its beats passed the highest, and the objects held
        // for it stayed as they were for good (the simulation's schedule 9898988215644743632:
        // an importer kept a service the member had stopped exporting); and a restore then
        // brought back a higher epoch. Leases without beat counters (agents that predate
        // them) are judged by epochs: the newest wins, and none older than one accepted
        // counts (so objects restored with it are never taken).
        let on_newest_beat =
            matches!(heartbeat.beat, Beat::Counter(_)) && heartbeat.beat == self.last_beat;
        let newest_claim = |seen: &Claim| match heartbeat.beat {
            Beat::Counter(_) => on_newest_beat,
            _ => self.claim.as_ref().is_none_or(|c| seen.epoch >= c.epoch),
        };
        if let Some(seen) = &heartbeat.claim
            && newest_claim(seen)
        {
            self.claim = Some(seen.clone());
        }
        let mut judged = Judged::default();
        if blind {
            return judged;
        }
        if self.awaiting_beat {
            // Positive evidence: nothing of it counts before this process sees it beat; what it
            // took part in stays as it is until then, or until the grace withdraws it.
            if self.held.is_none() {
                self.pinned = true;
            }
            return judged;
        }
        let ids = identities(current);
        let matches = match &self.claim {
            Some(c) if c.epoch >= self.accepted_epoch || on_newest_beat => {
                c.digest == self.digest.digest(current, &ids)
            }
            _ => false,
        };
        if matches || self.claim.is_none() {
            // A member that never claimed anything (no Atoll heartbeat yet) is taken as it is.
            if let Some(c) = &self.claim {
                self.accepted_epoch = c.epoch;
            }
            self.hold(current, ids, &mut judged);
            self.pinned = false;
            self.unmatched_since = None;
            self.unmatched_reported = None;
            return judged;
        }
        let (since, since_wall) = self
            .unmatched_since
            .get_or_insert_with(|| (now, wall.clone()))
            .clone();
        let unmatched_for = now.saturating_duration_since(since);
        if unmatched_for > grace {
            if self.unmatched_reported.is_none() {
                self.unmatched_reported = Some(since_wall);
            }
            if self.held.is_none() {
                // Pinned for a whole grace: take what is there (and it is reported).
                self.hold(current, ids, &mut judged);
                self.pinned = false;
            }
        } else {
            let left = grace - unmatched_for;
            judged.unmatched_report_in = Some(left);
            if self.held.is_none() {
                self.pinned = true;
                judged.pin_ends_in = Some(left);
            }
        }
        judged
    }

    /// Holds `current` (whose identities are `ids`) unless it holds exactly that already.
    fn hold(&mut self, current: &Published, ids: Vec<usize>, judged: &mut Judged) {
        if self.held.is_some() && ids == self.held_identities {
            return;
        }
        judged.replaced = Some(self.held.replace(current.clone()));
        self.held_identities = ids;
    }

    /// The services it exports (or exported when a predecessor withdrew it).
    pub fn exported_services(&self) -> BTreeSet<ServiceKey> {
        match &self.held {
            Some((records, _)) => records.iter().map(|r| keys::of_record(r)).collect(),
            None => self.restored_services.clone(),
        }
    }

    /// The services it exports, or, if it never counted in this process and no predecessor
    /// recorded them, those its objects on the hub name.
    pub fn exported_services_or(&self, current: &Published) -> BTreeSet<ServiceKey> {
        let services = self.exported_services();
        if services.is_empty() && self.held.is_none() {
            return current.0.iter().map(|r| keys::of_record(r)).collect();
        }
        services
    }

    /// Whether it is pinned only because this process has not seen it beat yet.
    pub fn unconfirmed(&self) -> bool {
        self.awaiting_beat && self.held.is_none()
    }

    /// No longer pinned (withdrawn: its objects leave, nothing of it stays as it was).
    pub fn unpin(&mut self) {
        self.pinned = false;
    }

    /// Whether it holds any object.
    pub fn holds_something(&self) -> bool {
        self.held
            .as_ref()
            .is_some_and(|(r, c)| !r.is_empty() || !c.is_empty())
    }
}

/// How long before `wall` the moment `since` was, on this process's wall clock (zero if it lies
/// ahead: a clock set back).
fn elapsed(since: &Time, wall: &Time) -> Duration {
    let millis = wall
        .0
        .as_millisecond()
        .saturating_sub(since.0.as_millisecond());
    Duration::from_millis(u64::try_from(millis).unwrap_or(0))
}
