//! Liveness of source clusters, judged by each importer on its own monotonic clock, and the
//! view of the hub the plan works from.
//!
//! Every member renews a Lease `atoll-heartbeat` in its hub namespace. An importer notes *when
//! it saw* each Lease change; it never compares the remote `renewTime` with its own clock, so
//! clock skew between clusters cannot withdraw anything. A cluster whose Lease has not changed
//! for longer than the grace is withdrawn: its records and endpoint copies leave the view (its
//! ports, its endpoints, its vote in conflicts); when its Lease moves again, they return.
//!
//! Withdrawal needs positive evidence or elapsed grace:
//! * while this importer cannot see the hub (its own Lease, renewed by itself, stops changing in
//!   its view) the clock of every cluster is paused, and restarted in full once it sees again;
//! * a member's Lease carries a claim (an epoch and a digest of the names of the records and
//!   copies it publishes). Its objects are taken as they are only when they match its newest
//!   claim; otherwise (a hub wiped or restored from an older backup, or a change still on its
//!   way) the importer keeps the last set that matched. So a member deletes an export by
//!   deleting the record *and* claiming the smaller set, and a hub that comes back empty
//!   withdraws nothing until the grace has passed.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ServiceKey;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use sha2::{Digest, Sha256};

use crate::keys::{of_copy, of_record};

/// How liveness is judged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    /// A cluster whose Lease has not changed for this long is withdrawn.
    pub grace: Duration,
    /// A cluster whose Lease has not changed for this long is reported stale.
    pub stale_after: Duration,
    /// This importer is blind (cannot see the hub) once its own Lease has not changed for this
    /// long.
    pub blind_after: Duration,
}

impl Settings {
    /// Settings for heartbeats every `interval` and the withdrawal grace `grace`.
    pub fn new(interval: Duration, grace: Duration) -> Self {
        Self {
            grace,
            stale_after: interval * 3,
            blind_after: interval * 3,
        }
    }
}

/// What a member claims to publish: an epoch that only grows, and a digest of names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Claim {
    pub epoch: u64,
    pub digest: String,
}

impl Claim {
    /// The annotation value.
    pub fn encode(&self) -> String {
        format!("{}:{}", self.epoch, self.digest)
    }

    /// Parses an annotation value; `None` when malformed.
    pub fn parse(value: &str) -> Option<Self> {
        let (epoch, digest) = value.split_once(':')?;
        Some(Self {
            epoch: epoch.parse().ok()?,
            digest: digest.to_owned(),
        })
    }
}

/// The next epoch of a member's claims: above the last one, and at least the wall clock in
/// milliseconds, so it keeps growing across restarts and is not fooled by a Lease restored from
/// a backup.
pub fn next_epoch(last: u64, now_millis: u64) -> u64 {
    (last + 1).max(now_millis)
}

/// The digest of a set of object names (order does not matter).
pub fn digest<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let mut sorted: Vec<&str> = names.collect();
    sorted.sort_unstable();
    sorted.dedup();
    let mut hasher = Sha256::new();
    for name in sorted {
        hasher.update(name.as_bytes());
        hasher.update([0]);
    }
    data_encoding::HEXLOWER.encode(&hasher.finalize()[..12])
}

/// The names a claim covers: records and copies, kind-prefixed.
fn claimed_names<'a>(
    records: &'a [Arc<ExportedService>],
    copies: &'a [Arc<ExportedEndpointSlice>],
) -> Vec<String> {
    let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.clone().unwrap_or_default()
    };
    records
        .iter()
        .map(|r| format!("r/{}", name(&r.metadata)))
        .chain(copies.iter().map(|c| format!("s/{}", name(&c.metadata))))
        .collect()
}

/// The digest a member claims for the records and copies it publishes.
pub fn publication_digest(
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
) -> String {
    let names = claimed_names(records, copies);
    digest(names.iter().map(String::as_str))
}

/// A withdrawn source cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Withdrawal {
    /// When its Lease last changed, as this importer saw it (wall clock of the sighting).
    pub last_seen: Time,
    /// The services it exported when it was withdrawn.
    pub services: BTreeSet<ServiceKey>,
}

/// What the plan needs to know about source clusters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Liveness {
    /// Withdrawn clusters.
    pub withdrawn: BTreeMap<String, Withdrawal>,
    /// Clusters whose Lease is late but within the grace: when it last changed.
    pub stale: BTreeMap<String, Time>,
    /// This importer cannot see the hub: nothing is withdrawn meanwhile.
    pub blind: bool,
    /// Seconds since each cluster's Lease last changed, as seen here.
    pub last_seen_seconds: BTreeMap<String, f64>,
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
    /// cluster was withdrawn, restored or went stale.
    pub touched: BTreeSet<ServiceKey>,
    /// Every service's part may have changed (this importer stopped or started seeing the hub).
    pub touched_everything: bool,
}

/// How a source cluster counts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Verdict {
    #[default]
    Live,
    Stale,
    Withdrawn,
}

/// The services of the objects in one of `a` and `b` but not the other (by identity: the
/// stores hand out the same `Arc` for an object until it changes).
fn changed_services(a: Option<&Published>, b: Option<&Published>, into: &mut BTreeSet<ServiceKey>) {
    let empty = (Vec::new(), Vec::new());
    let (a, b) = (a.unwrap_or(&empty), b.unwrap_or(&empty));
    fn one_side<T>(
        from: &[Arc<T>],
        other: &[Arc<T>],
        key: impl Fn(&T) -> ServiceKey,
        into: &mut BTreeSet<ServiceKey>,
    ) {
        let other: std::collections::HashSet<*const T> = other.iter().map(Arc::as_ptr).collect();
        into.extend(
            from.iter()
                .filter(|o| !other.contains(&Arc::as_ptr(o)))
                .map(|o| key(o)),
        );
    }
    one_side(&a.0, &b.0, of_record, into);
    one_side(&b.0, &a.0, of_record, into);
    one_side(&a.1, &b.1, of_copy, into);
    one_side(&b.1, &a.1, of_copy, into);
}

/// Every service of `published`.
fn services_of(published: Option<&Published>, into: &mut BTreeSet<ServiceKey>) {
    changed_services(published, None, into);
}

/// The digest of a cluster's objects, recomputed only when the objects changed: identities,
/// sorted, say whether they did (the objects are kept, so no identity is reused meanwhile).
#[derive(Clone, Debug, Default)]
struct DigestCache {
    identities: Vec<usize>,
    objects: Published,
    digest: String,
}

impl DigestCache {
    fn digest(&mut self, current: &Published) -> &str {
        let mut identities: Vec<usize> = current
            .0
            .iter()
            .map(|r| Arc::as_ptr(r) as usize)
            .chain(current.1.iter().map(|c| Arc::as_ptr(c) as usize))
            .collect();
        identities.sort_unstable();
        if identities != self.identities || self.digest.is_empty() {
            self.digest = publication_digest(&current.0, &current.1);
            self.identities = identities;
            self.objects = current.clone();
        }
        &self.digest
    }
}

/// One cluster's records and endpoint copies.
type Published = (Vec<Arc<ExportedService>>, Vec<Arc<ExportedEndpointSlice>>);

#[derive(Clone, Debug)]
struct Source {
    last_change: Instant,
    last_change_wall: Time,
    lease_version: Option<String>,
    accepted_epoch: u64,
    /// The newest claim seen, kept when the Lease itself is gone (deleted with the rest of the
    /// member's namespace, or by a wipe).
    claim: Option<Claim>,
    /// Records and copies as they last matched the member's claim.
    held: Option<Published>,
    verdict: Verdict,
    digest: DigestCache,
}

/// Per-importer memory of every source cluster.
#[derive(Clone, Debug)]
pub struct Tracker {
    settings: Settings,
    own: String,
    sources: BTreeMap<String, Source>,
    blind: bool,
}

/// The cluster a hub object belongs to, by the member namespace it is stored in.
fn cluster_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Option<&str> {
    meta.namespace
        .as_deref()?
        .strip_prefix(hub::NAMESPACE_PREFIX)
}

impl Tracker {
    /// A tracker for the importer `own`, started at `now`.
    pub fn new(own: &str, settings: Settings) -> Self {
        Self {
            settings,
            own: own.to_owned(),
            sources: BTreeMap::new(),
            blind: false,
        }
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
        let mut by_cluster: BTreeMap<String, Published> = BTreeMap::new();
        let mut unowned_records = Vec::new();
        for record in records {
            match cluster_of(&record.metadata) {
                Some(c) => by_cluster
                    .entry(c.to_owned())
                    .or_default()
                    .0
                    .push(record.clone()),
                None => unowned_records.push(record.clone()),
            }
        }
        for copy in copies {
            if let Some(c) = cluster_of(&copy.metadata) {
                by_cluster
                    .entry(c.to_owned())
                    .or_default()
                    .1
                    .push(copy.clone());
            }
        }
        let leases: BTreeMap<String, &Lease> = leases
            .iter()
            .filter(|l| l.metadata.name.as_deref() == Some(hub::LEASE_NAME))
            .filter_map(|l| Some((cluster_of(&l.metadata)?.to_owned(), l.as_ref())))
            .collect();

        // Lease changes, as seen now.
        let mut clusters: BTreeSet<String> = self.sources.keys().cloned().collect();
        clusters.extend(by_cluster.keys().cloned());
        clusters.extend(leases.keys().cloned());
        clusters.insert(self.own.clone());
        for cluster in &clusters {
            let version = leases
                .get(cluster)
                .and_then(|l| l.metadata.resource_version.clone());
            let source = self
                .sources
                .entry(cluster.clone())
                .or_insert_with(|| Source {
                    last_change: now,
                    last_change_wall: wall.clone(),
                    lease_version: version.clone(),
                    accepted_epoch: 0,
                    claim: None,
                    held: None,
                    verdict: Verdict::Live,
                    digest: DigestCache::default(),
                });
            if version.is_some() && version != source.lease_version {
                source.last_change = now;
                source.last_change_wall = wall.clone();
                source.lease_version = version;
            }
        }

        // Blind while our own Lease does not move in our view; seeing again restarts every
        // cluster's clock, so an outage of the hub (or of our view of it) withdraws nothing.
        let own_age = self.sources.get(&self.own).map_or(Duration::ZERO, |s| {
            now.saturating_duration_since(s.last_change)
        });
        let blind = own_age > self.settings.blind_after;
        let mut view = View {
            records: unowned_records,
            touched_everything: self.blind != blind,
            ..View::default()
        };
        if self.blind && !blind {
            for source in self.sources.values_mut() {
                source.last_change = source.last_change.max(now);
                source.last_change_wall = wall.clone();
            }
        }
        self.blind = blind;

        view.liveness.blind = blind;
        let mut next: Option<Duration> = None;
        let mut soonest = |d: Duration| next = Some(next.map_or(d, |n: Duration| n.min(d)));
        let empty = (Vec::new(), Vec::new());
        for (cluster, source) in &mut self.sources {
            let current = by_cluster.get(cluster).unwrap_or(&empty);
            let seen = leases
                .get(cluster)
                .and_then(|l| l.metadata.annotations.as_ref())
                .and_then(|a| a.get(hub::CLAIM_ANNOTATION))
                .and_then(|v| Claim::parse(v));
            // The newest claim wins; an older one (a Lease restored from a backup) is ignored.
            if let Some(seen) = seen
                && source.claim.as_ref().is_none_or(|c| seen.epoch >= c.epoch)
            {
                source.claim = Some(seen);
            }
            // Which objects count for this cluster.
            let matches = match &source.claim {
                Some(c) if c.epoch >= source.accepted_epoch => {
                    c.digest == source.digest.digest(current)
                }
                _ => false,
            };
            let before = source.held.clone();
            if matches && !blind {
                source.accepted_epoch = source.claim.as_ref().map_or(0, |c| c.epoch);
                source.held = Some(current.clone());
            } else if source.accepted_epoch == 0 && !blind {
                // A member that never claimed anything (no Atoll heartbeat yet) is taken as it
                // is. While we are blind nothing changes: what we see may be a hub that is
                // coming back, some kinds of objects before others.
                source.held = Some(current.clone());
            }
            changed_services(before.as_ref(), source.held.as_ref(), &mut view.touched);
            let (records, copies) = source.held.clone().unwrap_or_default();

            let age = now.saturating_duration_since(source.last_change);
            view.liveness
                .last_seen_seconds
                .insert(cluster.clone(), age.as_secs_f64());
            if cluster == &self.own && !blind {
                soonest(self.settings.blind_after.saturating_sub(age));
            }
            let verdict = if blind || cluster == &self.own {
                Verdict::Live
            } else if age > self.settings.grace {
                Verdict::Withdrawn
            } else if age > self.settings.stale_after {
                Verdict::Stale
            } else {
                Verdict::Live
            };
            if verdict != source.verdict {
                services_of(source.held.as_ref(), &mut view.touched);
                source.verdict = verdict;
            }
            if verdict == Verdict::Withdrawn {
                view.liveness.withdrawn.insert(
                    cluster.clone(),
                    Withdrawal {
                        last_seen: source.last_change_wall.clone(),
                        services: records.iter().map(|r| of_record(r)).collect(),
                    },
                );
                continue;
            }
            if verdict == Verdict::Stale {
                view.liveness
                    .stale
                    .insert(cluster.clone(), source.last_change_wall.clone());
            } else {
                soonest(self.settings.stale_after.saturating_sub(age));
            }
            soonest(self.settings.grace.saturating_sub(age));
            view.records.extend(records);
            view.copies.extend(copies);
        }
        // Forget clusters that left nothing behind: no Lease, no objects, nothing held (or
        // withdrawn), so memory follows the hub.
        self.sources.retain(|cluster, source| {
            cluster == &self.own
                || leases.contains_key(cluster)
                || by_cluster.contains_key(cluster)
                || (source
                    .held
                    .as_ref()
                    .is_some_and(|(r, c)| !r.is_empty() || !c.is_empty())
                    && !view.liveness.withdrawn.contains_key(cluster))
        });
        // Never sooner than a quarter second: a deadline that just passed is handled by this
        // pass.
        view.next_check =
            next.map(|d| d.max(Duration::from_millis(200)) + Duration::from_millis(50));
        view
    }
}

#[cfg(test)]
#[path = "liveness_tests.rs"]
mod tests;
