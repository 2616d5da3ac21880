//! What a member's heartbeat Lease says, as importers read it and members write it: the claim
//! (an epoch and a digest of the names it publishes), the beat (a counter that only grows), and
//! the rhythm it asks to be judged by (its renewal interval and grace).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use atoll_api::hub::{
    BEAT_ANNOTATION, CLAIM_ANNOTATION, ExportedEndpointSlice, ExportedService, INTERVAL_ANNOTATION,
};
use k8s_openapi::api::coordination::v1::Lease;
use sha2::{Digest, Sha256};

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

/// The next beat of a member's heartbeat: above the last one it wrote and the one the Lease
/// holds, and at least its wall clock in milliseconds. So beats only grow, across restarts, a
/// clock set back, and a Lease restored from a backup (whose older beat the next renewal passes
/// at once).
pub fn next_beat(last_written: u64, on_the_lease: u64, now_millis: u64) -> u64 {
    (last_written.max(on_the_lease) + 1).max(now_millis)
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

/// The claimed name of a record (`r/<name>`).
pub fn record_claim_name(name: &str) -> String {
    format!("r/{name}")
}

/// The claimed name of an endpoint copy (`s/<name>`).
pub fn copy_claim_name(name: &str) -> String {
    format!("s/{name}")
}

/// The digest a member claims for the records and copies it publishes.
pub fn publication_digest(
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
) -> String {
    let name = |m: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        m.name.clone().unwrap_or_default()
    };
    let names: Vec<String> = records
        .iter()
        .map(|r| record_claim_name(&name(&r.metadata)))
        .chain(copies.iter().map(|c| copy_claim_name(&name(&c.metadata))))
        .collect();
    digest(names.iter().map(String::as_str))
}

/// Longest interval or grace a member may ask for: a member cannot make itself unwithdrawable.
pub const MAX_ADVERTISED: Duration = Duration::from_secs(15 * 60);

/// What shows that a member renewed its heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Beat {
    /// The member's beat counter.
    Counter(u64),
    /// Members that write no counter: the Lease's resourceVersion (any change counts).
    Version(String),
    /// No Lease.
    Missing,
}

impl Beat {
    /// Whether `self`, seen now, is a renewal after `last`. A counter must grow: a Lease
    /// restored from a backup, or re-created by a restore, carries an older one and is no
    /// heartbeat.
    pub fn renews(&self, last: &Beat) -> bool {
        match (self, last) {
            (Beat::Counter(now), Beat::Counter(before)) => now > before,
            (Beat::Counter(_), _) => true,
            (Beat::Version(now), Beat::Version(before)) => now != before,
            (Beat::Version(_), _) => true,
            (Beat::Missing, _) => false,
        }
    }
}

/// A member's heartbeat Lease as an importer reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    pub beat: Beat,
    pub claim: Option<Claim>,
    /// The interval it renews at, as it says (at most [`MAX_ADVERTISED`]).
    pub interval: Option<Duration>,
    /// The grace it asks for (`leaseDurationSeconds`, at most [`MAX_ADVERTISED`]).
    pub grace: Option<Duration>,
}

impl Heartbeat {
    /// No Lease at all.
    pub fn missing() -> Self {
        Self {
            beat: Beat::Missing,
            claim: None,
            interval: None,
            grace: None,
        }
    }

    /// Reads a member's Lease; malformed values count as absent.
    pub fn read(lease: &Lease) -> Self {
        let empty = BTreeMap::new();
        let annotations = lease.metadata.annotations.as_ref().unwrap_or(&empty);
        let seconds = |s: u64| Duration::from_secs(s).min(MAX_ADVERTISED);
        let beat = match annotations
            .get(BEAT_ANNOTATION)
            .and_then(|b| b.parse().ok())
        {
            Some(counter) => Beat::Counter(counter),
            None => lease
                .metadata
                .resource_version
                .clone()
                .map_or(Beat::Missing, Beat::Version),
        };
        Self {
            beat,
            claim: annotations
                .get(CLAIM_ANNOTATION)
                .and_then(|v| Claim::parse(v)),
            interval: annotations
                .get(INTERVAL_ANNOTATION)
                .and_then(|v| v.parse::<u64>().ok())
                .filter(|s| *s > 0)
                .map(seconds),
            grace: lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .filter(|s| *s > 0)
                .map(seconds),
        }
    }
}
