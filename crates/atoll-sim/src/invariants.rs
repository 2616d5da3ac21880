//! The invariants checked while a schedule runs:
//! (i) no import, derived Service or MCS slice of a service with a live exporter is deleted
//!     (or, then, re-created), live meaning: it has exported the service for a while and its
//!     last heartbeat is younger than the grace (a cluster leaves only after its grace,
//!     whatever the hub lost and whether the importer ran throughout or just started);
//! (ii) a dead cluster's endpoints leave every importer within its grace plus [`BOUND`] and
//!      never return until it heartbeats again;
//! (iii) never two writers at once (checked by the simulated writer at each write);
//! (iv) once faults stop, every member converges to what a fault-free run holds;
//! (v) no writes while idle;
//! (vi) a member whose only trouble is its kept liveness decisions (writes refused, reads
//!      failing, the ConfigMap lost or garbled) never stops beating, so nobody withdraws it;
//! (vii) a collection deletes nothing its plan did not name (a selector also matches slices
//!       written after the plan saw the member's);
//! (viii) an import's status is written after its data plane's writes of the same step were
//!        answered, and never for an import whose apply failed (see `crate::ordering`);
//! (ix) an Event the API refused is published later, by the replica that holds it, if that
//!      replica still leads once the faults are over (a crashed one's memory is gone).
//!
//! "Live" and "healthy" are judged from what the simulation knows for certain: an exporter is
//! live while it has exported the service, heartbeated and suffered no fault for a whole
//! window (its grace plus three intervals); an importer is healthy while it suffered no fault.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use atoll_core::reconciler::News;

use crate::member::MemberState;

/// How much later than its grace an importer may withdraw a dead cluster: its own step
/// cadence, the watch delivery lag and the liveness view's rounding.
pub const BOUND: Duration = Duration::from_secs(3);

/// How far a watch of the simulation lags behind its apiserver at most.
pub const WATCH_LAG: Duration = Duration::from_secs(1);

/// A broken invariant.
#[derive(Clone, Debug, PartialEq)]
pub struct Violation {
    /// 1 to 9.
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
    /// member -> every heartbeat the hub accepted, oldest first.
    history: BTreeMap<String, Vec<Instant>>,
    /// (importer, member) -> the member's last heartbeat the importer surely took in, when a
    /// restore of the hub may have erased the later ones before it did.
    /// With it, the beat that ended that stretch, while a later restore may erase it too
    /// before the importer takes it in (two restores in a row: the beat between them ends
    /// nothing the importer saw).
    erasable: BTreeMap<(String, String), (Instant, Option<Instant>)>,
    /// member -> its silences between heartbeats (last beat before, first beat after) of more
    /// than two seconds: an importer may act on one until it sees the member beat again.
    silences: BTreeMap<String, Vec<(Instant, Instant)>>,
    /// Writes other than heartbeats, by member.
    pub writes: BTreeMap<String, u64>,
    /// Simulated time of the schedule's start, for the report.
    origin: Option<Instant>,
    /// While set, checks (i) and (ii) are off (the schedule is still warming up).
    pub quiet: bool,
    /// member -> the highest beat number it wrote.
    highest_beat: BTreeMap<String, u64>,
    /// member -> when it began repeating beat numbers (stated in the README: its kept
    /// decisions lost, the hub restored from an older backup *and* its clock set back, all
    /// before one start), and when it wrote above its old highest again. Importers rightly
    /// ignore repeated numbers: withdrawing it meanwhile is not held against them in (i), nor
    /// (while it lasts at the end) the comparison of (iv).
    pub repeated: BTreeMap<String, (Instant, Option<Instant>)>,
    /// How many times a member repeated beat numbers (the summary shows it).
    pub repeats: u64,
    /// Events refused and not published since: (member, replica, Event).
    unpublished: Vec<(String, String, atoll_core::events::Event)>,
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

    pub(crate) fn violate_at(&mut self, invariant: u8, what: String, now: Instant) {
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

    /// The hub was restored from a backup at `at`. Watches lag up to [`WATCH_LAG`] behind the
    /// hub and an importer takes in a heartbeat only when it steps, so every heartbeat written
    /// after `min(at, its last step) - WATCH_LAG` may be gone before `importer` saw it: an
    /// importer that withdraws the member as if it had not beaten since is not held to those
    /// beats in (i), until the member beats again. `last_steps` names each importer's oldest
    /// last step over its replicas (the simulation runs one replica at a time, so a member
    /// whose writes are slow can keep the others from stepping for seconds).
    pub fn restored(&mut self, at: Instant, last_steps: &BTreeMap<String, Instant>) {
        let origin = self.origin.unwrap_or(at);
        for (importer, last_step) in last_steps {
            let taken_in_by = at.min(*last_step).checked_sub(WATCH_LAG).unwrap_or(origin);
            for (member, beats) in &self.history {
                if member == importer || beats.last().is_none_or(|b| *b <= taken_in_by) {
                    continue;
                }
                let seen = beats
                    .iter()
                    .rev()
                    .find(|b| **b <= taken_in_by)
                    .copied()
                    .unwrap_or(origin);
                let key = (importer.clone(), member.clone());
                // A stretch ended by a beat the importer may not have taken in yet goes on.
                let earlier = self
                    .erasable
                    .get(&key)
                    .filter(|(_, ended)| ended.is_none_or(|b| b > taken_in_by))
                    .map(|(e, _)| *e);
                let earliest = earlier.map_or(seen, |e| e.min(seen));
                self.erasable.insert(key, (earliest, None));
            }
        }
    }

    pub fn beat(&mut self, member: &str, at: Instant) {
        // A beat that ends an erased stretch ends, for that importer, a silence that began at
        // the last beat it took in.
        let mut before: Vec<Instant> = Vec::new();
        for ((_, source), (seen, ended)) in &mut self.erasable {
            if source == member && ended.is_none() {
                before.push(*seen);
                *ended = Some(at);
            }
        }
        before.extend(self.beats.insert(member.to_owned(), at));
        self.history.entry(member.to_owned()).or_default().push(at);
        let silences = self.silences.entry(member.to_owned()).or_default();
        for from in before {
            if at.saturating_duration_since(from) > Duration::from_secs(2)
                && !silences.contains(&(from, at))
            {
                silences.push((from, at));
            }
        }
    }

    /// `member` wrote beat number `beat` at `at`, its wall clock set back (`clock_back`) or
    /// not. A number at or below one it wrote before is a violation of (vi) unless its clock
    /// is back (the one case the README states).
    pub fn numbered(&mut self, member: &str, beat: u64, clock_back: bool, at: Instant) {
        let highest = self.highest_beat.get(member).copied().unwrap_or(0);
        if beat > highest {
            self.highest_beat.insert(member.to_owned(), beat);
            if let Some((_, ended)) = self.repeated.get_mut(member) {
                ended.get_or_insert(at);
            }
            return;
        }
        // A spell goes on until the member writes above its highest again, whatever its clock
        // does meanwhile (the term that repeats began while the clock was back).
        let open = self.repeated.get(member).is_some_and(|(_, e)| e.is_none());
        if open {
            return;
        }
        if clock_back {
            self.repeats += 1;
            self.repeated.insert(member.to_owned(), (at, None));
        } else {
            self.violate_at(
                6,
                format!("{member} wrote beat {beat}, not above its highest {highest}, with its clock not set back"),
                at,
            );
        }
    }

    /// Whether `member` repeats beat numbers now, or stopped less than `window` ago.
    fn repeating(&self, member: &str, now: Instant, window: Duration) -> bool {
        self.repeated.get(member).is_some_and(|(_, ended)| {
            ended.is_none_or(|e| now.saturating_duration_since(e) <= window)
        })
    }

    pub fn news(&mut self, importer: &str, news: &News, at: Instant) {
        for source in &news.withdrawn {
            self.withdrawn
                .insert((importer.to_owned(), source.clone()), at);
        }
        for source in news.restored.iter().chain(&news.forgotten) {
            self.withdrawn
                .remove(&(importer.to_owned(), source.clone()));
        }
    }

    /// Replica `replica` of `member` asked for `event`; whether it was published.
    pub fn event(
        &mut self,
        member: &str,
        replica: &str,
        event: &atoll_core::events::Event,
        published: bool,
    ) {
        if published {
            self.unpublished
                .retain(|(m, _, e)| !(m == member && e == event));
        } else if !self
            .unpublished
            .iter()
            .any(|(m, r, e)| m == member && r == replica && e == event)
        {
            self.unpublished
                .push((member.to_owned(), replica.to_owned(), event.clone()));
        }
    }

    /// (ix) at the end of the quiet phase: `leading` names (member, replica) of the leaders.
    pub fn events_left(&mut self, leading: &[(String, String)]) {
        let left: Vec<String> = self
            .unpublished
            .iter()
            .filter(|(m, r, _)| leading.iter().any(|(lm, lr)| lm == m && lr == r))
            .map(|(m, r, e)| format!("{m} ({r}): {} on {:?}", e.announcement.reason, e.about))
            .collect();
        if !left.is_empty() {
            self.violate(
                9,
                format!(
                    "Events refused and never published again: {}",
                    left.join("; ")
                ),
            );
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
        let Some(deleting) = members.iter().find(|m| m.name == importer) else {
            return;
        };
        // Writes that land seconds after their decision because the importer's apiserver
        // answers slowly are not held against it. Nothing else of the importer's is: cut off
        // from the hub, it must notice (its own heartbeat stops moving in its view) before any
        // grace runs out, and a fault of one member never justifies deleting what another
        // exports.
        let cut_off = deleting.write_latency > Duration::ZERO
            || deleting
                .slow_ended_at
                .is_some_and(|at| now.saturating_duration_since(at) <= window);
        if cut_off {
            return;
        }
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
            // The shortest grace the importer may give it, less a second for the importer's
            // view to lag behind the hub.
            let grace = deleting
                .rhythm
                .grace
                .max(exporter.rhythm.grace)
                .max(exporter.rhythm.interval * 3)
                .saturating_sub(Duration::from_secs(1));
            // An erased stretch counts until the importer may have taken in the beat that ended
            // it.
            let last_seen_beat = self
                .erasable
                .get(&(importer.to_owned(), exporter.name.clone()))
                .filter(|(_, ended)| ended.is_none_or(|b| now <= b + BOUND))
                .map(|(seen, _)| seen)
                .or_else(|| self.beats.get(&exporter.name));
            let within_grace =
                last_seen_beat.is_some_and(|b| now.saturating_duration_since(*b) < grace);
            // A silence longer than the grace that ended moments ago: the importer may not
            // have seen the beat that ended it yet.
            let just_back = self.silences.get(&exporter.name).is_some_and(|s| {
                s.iter().any(|(from, to)| {
                    to.saturating_duration_since(*from) >= grace
                        && now.saturating_duration_since(*to) <= BOUND
                })
            });
            let repeating = self.repeating(&exporter.name, now, window);
            // Back from a partition, the importer restores a cluster only once it has seen it
            // beat again (positive evidence): until one of its intervals (and the watch's lag)
            // has passed, a withdrawal decided before the partition still stands.
            let reconnecting = deleting.reconnected_at.is_some_and(|at| {
                now.saturating_duration_since(at) <= exporter.rhythm.interval + WATCH_LAG + BOUND
            });
            if exported_long && within_grace && !just_back && !repeating && !reconnecting {
                let last = self.beats.get(&exporter.name).map_or(0.0, |b| self.at(*b));
                let silence = self
                    .silences
                    .get(&exporter.name)
                    .and_then(|s| s.last())
                    .map(|(f, t)| format!("{:.2}-{:.2}", self.at(*f), self.at(*t)))
                    .unwrap_or_default();
                self.violate_at(
                    1,
                    format!(
                        "{importer} deleted {kind} {name} of {service}, which {} exports and is live (last heartbeat at {last:.2} s, last silence {silence})",
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

impl Checks {
    /// (vi): every member that runs a replica and suffered no fault but troubles with its
    /// kept decisions for [`SETTLE`] (an election decided, a first beat renewed) beats at
    /// least every interval plus [`BEAT_SLACK`].
    pub fn beating(&mut self, members: &[MemberState], now: Instant) {
        if self.quiet {
            return;
        }
        for member in members {
            // A fault still going on (cut off, slow or failing writes) is trouble of another kind.
            let troubled = member.partitioned
                || member.write_latency > Duration::ZERO
                || member.failing_writes > 0;
            let settled = !troubled && now.saturating_duration_since(member.disturbed_at) >= SETTLE;
            if member.replicas.is_empty() || !settled {
                continue;
            }
            let since = member
                .last_beat
                .map_or(Duration::MAX, |b| now.saturating_duration_since(b));
            if since > member.rhythm.interval + BEAT_SLACK {
                self.violate_at(
                    6,
                    format!(
                        "{} has not beaten for {:.1} s although nothing but its kept decisions ({}) troubled it",
                        member.name,
                        since.as_secs_f64().min(1e6),
                        kept_trouble(member)
                    ),
                    now,
                );
            }
        }
    }
}

/// What troubles a member's kept decisions now, for a violation's text.
fn kept_trouble(member: &MemberState) -> String {
    let mut trouble = Vec::new();
    if member.refuse_kept {
        trouble.push("writes refused");
    }
    if member.unreadable_kept {
        trouble.push("reads failing");
    }
    if trouble.is_empty() {
        "none now".to_owned()
    } else {
        trouble.join(", ")
    }
}

/// How long after its last disturbance a member must beat regularly: a lost election's lease
/// running out, a retry, an interval and a step.
pub const SETTLE: Duration = Duration::from_secs(9);

/// How much later than its interval a beat may come: a quantum, the replica's step cadence.
pub const BEAT_SLACK: Duration = Duration::from_secs(2);

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
