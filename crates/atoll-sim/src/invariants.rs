//! The invariants checked while a schedule runs:
//! (i) no import, derived Service or MCS slice of a service with a live exporter is deleted
//!     (or, then, re-created);
//! (ii) a dead cluster's endpoints leave every importer within its grace plus [`BOUND`] and
//!      never return until it heartbeats again;
//! (iii) never two writers at once (checked by the simulated writer at each write);
//! (iv) once faults stop, every member converges to what a fault-free run holds;
//! (v) no writes while idle.
//!
//! "Live" and "healthy" are judged from what the simulation knows for certain: an exporter is
//! live while it has exported the service, heartbeated and suffered no fault for a whole
//! window (its grace plus three intervals); an importer is healthy while it suffered no fault.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use atoll_core::reconciler::News;

use crate::world::MemberState;

/// How much later than its grace an importer may withdraw a dead cluster: its own step
/// cadence, the watch delivery lag and the liveness view's rounding.
pub const BOUND: Duration = Duration::from_secs(3);

/// A broken invariant.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// 1 to 5.
    pub invariant: u8,
    pub what: String,
    /// Simulated seconds since the schedule began.
    pub at: f64,
}

/// What a write was, for counting writes while idle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    Member,
    Hub,
    Kept,
}

/// What the checks remember while a schedule runs.
#[derive(Debug, Default)]
pub struct Checks {
    pub violations: Vec<Violation>,
    /// member -> service -> since when it has exported it.
    exported_since: BTreeMap<String, BTreeMap<String, Instant>>,
    /// (importer, source) -> when the importer withdrew the source.
    withdrawn: BTreeMap<(String, String), Instant>,
    /// member -> its last heartbeat the hub accepted.
    beats: BTreeMap<String, Instant>,
    /// Writes other than heartbeats, by member.
    pub writes: BTreeMap<String, u64>,
    /// Simulated time of the schedule's start, for the report.
    origin: Option<Instant>,
    /// While set, checks (i) and (ii) are off (the schedule is still warming up).
    pub quiet: bool,
}

impl Checks {
    pub fn begin(&mut self, origin: Instant) {
        self.origin = Some(origin);
    }

    fn at(&self, now: Instant) -> f64 {
        self.origin
            .map_or(0.0, |o| now.saturating_duration_since(o).as_secs_f64())
    }

    pub fn violate(&mut self, invariant: u8, what: String) {
        self.violations.push(Violation {
            invariant,
            what,
            at: 0.0,
        });
    }

    fn violate_at(&mut self, invariant: u8, what: String, now: Instant) {
        let at = self.at(now);
        self.violations.push(Violation {
            invariant,
            what,
            at,
        });
    }

    pub fn exported(&mut self, member: &str, service: &str, at: Instant) {
        self.exported_since
            .entry(member.to_owned())
            .or_default()
            .insert(service.to_owned(), at);
    }

    pub fn unexported(&mut self, member: &str, service: &str) {
        if let Some(s) = self.exported_since.get_mut(member) {
            s.remove(service);
        }
    }

    pub fn beat(&mut self, member: &str, at: Instant) {
        self.beats.insert(member.to_owned(), at);
    }

    pub fn news(&mut self, importer: &str, news: &News, at: Instant) {
        for source in &news.withdrawn {
            self.withdrawn
                .insert((importer.to_owned(), source.clone()), at);
        }
        for source in &news.restored {
            self.withdrawn
                .remove(&(importer.to_owned(), source.clone()));
        }
    }

    pub fn wrote(&mut self, member: &str, _kind: WriteKind, _at: Instant) {
        *self.writes.entry(member.to_owned()).or_default() += 1;
    }

    pub fn created(&mut self, _importer: &str, _kind: &str, _name: &str, _at: Instant) {}

    /// (ii), second half: an importer writes a slice of `source` after withdrawing it, and the
    /// source has not heartbeated since.
    pub fn slice_written(&mut self, importer: &str, source: &str, now: Instant) {
        let key = (importer.to_owned(), source.to_owned());
        if let Some(withdrawn) = self.withdrawn.get(&key).copied() {
            let beat_since = self.beats.get(source).is_some_and(|b| *b > withdrawn);
            if !beat_since && !self.quiet {
                self.violate_at(
                    2,
                    format!("{importer} imports {source}'s endpoints again although {source} has not heartbeated since {importer} withdrew it"),
                    now,
                );
            }
            self.withdrawn.remove(&key);
        }
    }

    /// (i): `importer` deleted `kind` `name` of `service` (an MCS slice of cluster `source`).
    #[allow(clippy::too_many_arguments)]
    pub fn deleted(
        &mut self,
        importer: &str,
        kind: &str,
        name: &str,
        service: Option<&str>,
        source: Option<&str>,
        now: Instant,
        members: &[MemberState],
    ) {
        let Some(service) = service else {
            return;
        };
        if self.quiet {
            return;
        }
        let window = window(members);
        for exporter in members {
            if source.is_some_and(|s| s != exporter.name) {
                continue;
            }
            let since = self
                .exported_since
                .get(&exporter.name)
                .and_then(|s| s.get(service))
                .copied();
            let exported_long = since.is_some_and(|t| now.saturating_duration_since(t) >= window);
            let undisturbed = now.saturating_duration_since(exporter.disturbed_at) >= window;
            let beating = self.beats.get(&exporter.name).is_some_and(|b| {
                now.saturating_duration_since(*b)
                    <= exporter.rhythm.interval + Duration::from_secs(1)
            });
            if exported_long && undisturbed && beating && !exporter.replicas.is_empty() {
                self.violate_at(
                    1,
                    format!(
                        "{importer} deleted {kind} {name} of {service}, which {} exports and is live",
                        exporter.name
                    ),
                    now,
                );
            }
        }
    }

    /// (ii), first half: every healthy importer holds no slice of a cluster whose last
    /// heartbeat is older than the grace plus [`BOUND`]. `slices` lists each member's MCS
    /// slices' sources.
    pub fn dead_gone(
        &mut self,
        members: &[MemberState],
        slices: &BTreeMap<String, Vec<String>>,
        origin: Instant,
        now: Instant,
    ) {
        if self.quiet {
            return;
        }
        for importer in members {
            let healthy_since = importer.disturbed_at;
            for source in members {
                if source.name == importer.name {
                    continue;
                }
                let last_beat = self.beats.get(&source.name).copied().unwrap_or(origin);
                let grace = importer
                    .rhythm
                    .grace
                    .max(source.rhythm.grace)
                    .max(source.rhythm.interval * 3);
                let deadline = last_beat.max(healthy_since) + grace + BOUND;
                if now <= deadline {
                    continue;
                }
                let holds = slices
                    .get(&importer.name)
                    .is_some_and(|s| s.iter().any(|c| c == &source.name));
                if holds {
                    self.violate_at(
                        2,
                        format!(
                            "{} still imports {}'s endpoints {:.1} s after its last heartbeat (grace {} s)",
                            importer.name,
                            source.name,
                            now.saturating_duration_since(last_beat).as_secs_f64(),
                            grace.as_secs()
                        ),
                        now,
                    );
                }
            }
        }
    }
}

/// How long an exporter must have been exporting and undisturbed to count as live: the
/// longest grace plus three of the longest intervals.
fn window(members: &[MemberState]) -> Duration {
    let grace = members
        .iter()
        .map(|m| m.rhythm.grace)
        .max()
        .unwrap_or_default();
    let interval = members
        .iter()
        .map(|m| m.rhythm.interval)
        .max()
        .unwrap_or_default();
    grace + interval * 3 + Duration::from_secs(2)
}
