//! What an importer decided about its source clusters, kept in the member so that a restarted
//! or newly elected agent continues from it instead of starting blind: which clusters are
//! withdrawn or stale and since when (with the beat they were judged at), and the newest claim
//! epoch it accepted from each. Only decisions are kept, nothing that moves while clusters are
//! healthy, so keeping it costs no writes while nothing changes.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::keys::ServiceKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::{Deserialize, Serialize};

use super::heartbeat::Beat;

/// The format's version; a newer one is ignored (the agent then starts as if new).
pub const FORMAT: u32 = 1;

/// Services kept per withdrawn cluster at most (for its imports' conditions; the rest are
/// still withdrawn, only not named).
pub const MAX_SERVICES: usize = 500;

/// Services kept for all withdrawn clusters together: they share this budget, so the kept
/// decisions stay far below a ConfigMap's 1 MiB when a region of a large fleet is withdrawn
/// (250 clusters withdrawn keep 8 services each).
pub const KEPT_SERVICES: usize = 2_000;

/// The largest beat, epoch or reservation taken from what was kept, or from a Lease: far above
/// any wall clock in milliseconds (about the year 287,000), far below where `u64` arithmetic
/// could wrap. A larger value is absurd (a hand edit, or corruption) and is refused: taken as
/// is, it would make beats saturate and never move again.
pub const MAX_COUNTER: u64 = 1 << 53;

/// Encoded kept decisions larger than this drop the services they name, then the epochs
/// alone: a ConfigMap holds 1 MiB at most, and nothing kept may stop the agent writing it.
pub const MAX_ENCODED: usize = 256 * 1024;

/// The importer's decisions, as kept in the member.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Persisted {
    pub format: u32,
    #[serde(default)]
    pub sources: BTreeMap<String, PersistedSource>,
    /// The end of the last block of beats and claim epochs this member's leaders reserved:
    /// every later leader starts above it, so what the member writes on its heartbeat Lease
    /// only grows, whatever happens to the hub or to its clocks.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reserved: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How a source cluster stands, beyond live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Standing {
    Stale,
    Withdrawn,
}

/// Why kept decisions could not be taken.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("not the kept liveness decisions (malformed JSON: {0})")]
    Malformed(String),
    #[error("kept in format {0}, this agent reads format {FORMAT}")]
    Format(u32),
}

/// One source cluster's entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PersistedSource {
    /// Its beat counter when judged (withdrawn and stale clusters only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub beat: Option<u64>,
    /// Its Lease's resourceVersion when judged, for members that write no beat counter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standing: Option<Standing>,
    /// When its heartbeat last changed, on the importer's wall clock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The newest claim epoch accepted from it; older claims are never taken again.
    #[serde(default)]
    pub accepted_epoch: u64,
    /// Since when its hub objects have not matched its claim, once that lasted longer than
    /// the grace (the importer imports the last matching set meanwhile).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unmatched: Option<Time>,
    /// The services it exported when withdrawn.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub services: BTreeSet<ServiceKey>,
}

impl PersistedSource {
    /// The beat it was judged at.
    pub fn judged_beat(&self) -> Beat {
        match (&self.beat, &self.lease_version) {
            (Some(counter), _) => Beat::Counter(*counter),
            (None, Some(version)) => Beat::Version(version.clone()),
            (None, None) => Beat::Missing,
        }
    }
}

/// How the agent that kept the decisions judges a source cluster (what `atoll status` and
/// `atoll explain` report: the agent's verdict, never one recomputed from remote clocks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Imported; nothing kept about it.
    Live,
    /// Late but imported, since (the importer's wall clock) its heartbeat last moved.
    Stale(Option<Time>),
    /// Not imported; its heartbeat last moved then.
    Withdrawn(Option<Time>),
    /// Its hub objects have not matched its claim since then; the last matching set is imported.
    Unmatched(Time),
}

impl Persisted {
    /// The verdict on `cluster`.
    pub fn verdict(&self, cluster: &str) -> Verdict {
        let Some(s) = self.sources.get(cluster) else {
            return Verdict::Live;
        };
        match (s.standing, &s.unmatched) {
            (Some(Standing::Withdrawn), _) => Verdict::Withdrawn(s.since.clone()),
            (Some(Standing::Stale), _) => Verdict::Stale(s.since.clone()),
            (None, Some(since)) => Verdict::Unmatched(since.clone()),
            (None, None) => Verdict::Live,
        }
    }

    /// Parses what an agent kept; `None` when it is not ours to read (malformed, or a newer
    /// format).
    pub fn parse(text: &str) -> Option<Self> {
        Self::parse_checked(text).ok().map(|(p, _)| p)
    }

    /// Parses what an agent kept and refuses absurd values (see [`MAX_COUNTER`]): what was
    /// refused is named in the second part, the rest is taken.
    pub fn parse_checked(text: &str) -> Result<(Self, Vec<String>), ParseError> {
        let mut persisted: Self =
            serde_json::from_str(text).map_err(|e| ParseError::Malformed(e.to_string()))?;
        if persisted.format != FORMAT {
            return Err(ParseError::Format(persisted.format));
        }
        let mut refused = Vec::new();
        if persisted.reserved > MAX_COUNTER {
            refused.push(format!("reserved {}", persisted.reserved));
            persisted.reserved = 0;
        }
        for (cluster, source) in &mut persisted.sources {
            if source.accepted_epoch > MAX_COUNTER {
                refused.push(format!(
                    "{cluster}: acceptedEpoch {}",
                    source.accepted_epoch
                ));
                source.accepted_epoch = 0;
            }
            if source.beat.is_some_and(|b| b > MAX_COUNTER) {
                // Judged at an impossible beat: nothing about when it was judged is believed,
                // nor the verdict. A withdrawal kept without the beat it was judged at cannot
                // be told outdated (the cluster beat since, and its restoration was never
                // kept): enforced, it deleted a live cluster's objects after a restart (the
                // simulation's schedule 2064625328921680939). Without it, the cluster is
                // judged afresh: left as it is until it beats, withdrawn after a grace if not.
                refused.push(format!("{cluster}: beat {:?}", source.beat));
                source.beat = None;
                source.since = None;
                source.standing = None;
            }
        }
        Ok((persisted, refused))
    }

    /// The text to keep, at most [`MAX_ENCODED`] bytes: the services withdrawn clusters
    /// exported go first, then entries that hold only an accepted epoch (an importer loses no
    /// decision with them: at worst it takes an older claim once after a restart).
    pub fn encode(&self) -> String {
        let text = serde_json::to_string(self).unwrap_or_default();
        if text.len() <= MAX_ENCODED {
            return text;
        }
        let mut smaller = self.clone();
        for source in smaller.sources.values_mut() {
            source.services.clear();
        }
        let text = serde_json::to_string(&smaller).unwrap_or_default();
        if text.len() <= MAX_ENCODED {
            return text;
        }
        smaller
            .sources
            .retain(|_, s| s.standing.is_some() || s.unmatched.is_some() || s.since.is_some());
        serde_json::to_string(&smaller).unwrap_or_default()
    }

    /// Whether `other` differs in a decision a successor must not lose: a standing, or the beat
    /// or time it was judged at, an unmatched claim, a reservation, or a baseline (a cluster not
    /// seen to beat since some time) that is not kept yet. (Accepted epochs alone, and baselines
    /// that end because the cluster beat, may be kept later, in a batch.)
    pub fn decisions_differ(&self, other: &Self) -> bool {
        if self.reserved != other.reserved {
            return true;
        }
        type Decision = (String, Option<Standing>, Beat, Option<Time>, Option<Time>);
        let decisions = |p: &Self| -> Vec<Decision> {
            p.sources
                .iter()
                .filter(|(_, s)| s.standing.is_some() || s.unmatched.is_some())
                .map(|(c, s)| {
                    let beat = if s.standing.is_some() {
                        s.judged_beat()
                    } else {
                        Beat::Missing
                    };
                    (
                        c.clone(),
                        s.standing,
                        beat,
                        s.since.clone(),
                        s.unmatched.clone(),
                    )
                })
                .collect()
        };
        type Baseline = (String, Option<u64>, Option<String>, i64);
        let baselines = |p: &Self| -> BTreeSet<Baseline> {
            p.sources
                .iter()
                .filter(|(_, s)| s.standing.is_none())
                .filter_map(|(c, s)| {
                    let since = s.since.as_ref()?.0.as_millisecond();
                    Some((c.clone(), s.beat, s.lease_version.clone(), since))
                })
                .collect()
        };
        decisions(self) != decisions(other) || !baselines(other).is_subset(&baselines(self))
    }

    /// Beat of a source as kept.
    pub fn beat_of(beat: &Beat) -> (Option<u64>, Option<String>) {
        match beat {
            Beat::Counter(c) => (Some(*c), None),
            Beat::Version(v) => (None, Some(v.clone())),
            Beat::Missing => (None, None),
        }
    }
}

/// The key of the kept text in its ConfigMap.
pub const KEPT_DATA_KEY: &str = "liveness.json";

impl Persisted {
    /// The ConfigMap `name` in `namespace` that keeps these decisions, as the agent applies it.
    pub fn config_map(&self, namespace: &str, name: &str) -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": { "app.kubernetes.io/managed-by": "atoll" },
            },
            "data": { KEPT_DATA_KEY: self.encode() },
        })
    }
}
