//! When the leader renews its member's heartbeat Lease on the hub, and what it writes: every
//! interval, and at once when what it claims changes.
//!
//! What a member writes there only grows: each leadership term takes a block of beats starting
//! above the last block kept in the member's own ConfigMap (the kept state: the hub can be
//! restored from a backup, the member's cluster is the member's), above what the Lease holds
//! and at least at the wall clock in milliseconds (so a member that never kept a block, or was
//! joined by `atoll join`, still starts above what came before). Beats count up within the
//! block; a claim's epoch is the beat it was first written with. So importers can hold beats and
//! epochs to "only ever higher" without stranding a live member: restarts, new leaders,
//! restored hubs and clocks set back all leave them growing.
//!
//! The block is kept in the member when it can be, but a renewal never waits for that write: a
//! refused, lost or oversized ConfigMap must not stop the heartbeat (every importer would
//! withdraw a healthy cluster). Without it, the Lease and the wall clock still keep beats
//! growing; only a hub restored from a backup *and* a clock set back *and* a lost ConfigMap
//! together could make a beat repeat, and an importer then waits for the next one.

use std::time::{Duration, Instant};

use atoll_api::hub::{
    BEAT_ANNOTATION, CLAIM_ANNOTATION, INTERVAL_ANNOTATION, KEPT_ANNOTATION, LABEL_CLUSTER,
    LAST_ERROR_ANNOTATION, LEASE_NAME,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde_json::{Value, json};

use crate::liveness::{Beat, Claim, Heartbeat, MAX_COUNTER};

/// Beats (and epochs) one leadership term may use before it reserves more: at one renewal a
/// second, twelve days.
pub const BLOCK: u64 = 1 << 20;

/// A renewal to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    pub claim: Claim,
    pub beat: u64,
}

/// A reserved run of beats: the next one to use, and the last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Block {
    next: u64,
    last: u64,
}

/// What the heartbeat has written, and the beats it may still use.
#[derive(Clone, Debug, Default)]
pub struct HeartbeatBook {
    /// The last renewal the hub accepted, and when.
    written: Option<(Renewal, Instant)>,
    /// A renewal handed to the writer and not yet answered.
    pending: Option<Renewal>,
    /// When the pending renewal was handed over.
    pending_since: Option<Instant>,
    /// The block in use (kept in the member when that write succeeds; used at once either way).
    block: Option<Block>,
    /// Renewals refused or unanswered in a row, and when the last one was: the next is tried
    /// after a delay that doubles from [`FIRST_RETRY`] up to the interval, not at every step
    /// (an unreachable hub would otherwise be asked many times a second).
    failed: Option<(u32, Instant)>,
}

/// How soon a renewal that failed once is tried again.
pub const FIRST_RETRY: Duration = Duration::from_millis(250);

/// The wait before retrying after `failures` failed renewals in a row.
fn retry_after(failures: u32, interval: Duration) -> Duration {
    let doubled = FIRST_RETRY.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(interval.max(FIRST_RETRY))
}

/// The lowest beat a term starting at `wall` may use: one block per second of the wall clock.
/// A term starts above the last block it knows of, so beats run ahead of this floor by at most
/// a block for each term started within the same second; a start that knows of no block (its
/// kept decisions lost *and* its Lease restored from an older backup) therefore still lands
/// above every earlier beat once two seconds have passed since the last term began, as long as
/// the clock did not go back. (A floor of milliseconds fell behind after a few terms: each
/// added a whole block, about 17 minutes' worth, and such a start repeated old beats, which
/// importers rightly ignore — a live member was withdrawn.)
fn floor(wall: &Time) -> u64 {
    u64::try_from(wall.0.as_second())
        .unwrap_or(0)
        .saturating_mul(BLOCK)
}

impl HeartbeatBook {
    /// Takes a new block of beats when this term has none left, starting above `reserved` (the
    /// end of the last block kept in the member) and above `lease` (the member's own Lease as
    /// the hub holds it now); returns the end of the block in use, for keeping. Values above
    /// [`MAX_COUNTER`] are absurd (a hand edit) and do not count.
    pub fn reserve(&mut self, reserved: u64, lease: &Heartbeat, wall: &Time) -> u64 {
        if let Some(block) = self.block.filter(|b| b.next <= b.last) {
            return block.last;
        }
        let sane = |n: u64| if n > MAX_COUNTER { 0 } else { n };
        let on_lease = match lease.beat {
            Beat::Counter(b) => sane(b),
            _ => 0,
        };
        let claimed = lease.claim.as_ref().map_or(0, |c| sane(c.epoch));
        let written = self.written.as_ref().map_or(0, |(r, _)| r.beat);
        let start = sane(reserved)
            .max(on_lease)
            .max(claimed)
            .max(written)
            .saturating_add(1)
            .max(floor(wall));
        let block = Block {
            next: start,
            last: start.saturating_add(BLOCK - 1),
        };
        self.block = Some(block);
        block.last
    }

    /// Drops the block in use if its next beat is not above `reserved` (a block a predecessor
    /// kept, read only now): the next renewal takes a new block above it.
    pub fn above(&mut self, reserved: u64) {
        if self.block.is_some_and(|b| b.next <= reserved) {
            self.block = None;
        }
    }

    /// The renewal due at `now`, if one is (and the term has beats left): none was accepted
    /// yet, the interval passed, or the claimed digest differs from the last one written.
    pub fn due(&mut self, digest: &str, interval: Duration, now: Instant) -> Option<Renewal> {
        let last = self.written.as_ref();
        let on_time = last.is_some_and(|(r, at)| {
            r.claim.digest == digest && now.saturating_duration_since(*at) < interval
        });
        if on_time {
            return None;
        }
        if let Some((failures, at)) = self.failed
            && now.saturating_duration_since(at) < retry_after(failures, interval)
        {
            return None;
        }
        let block = self.block.as_mut().filter(|b| b.next <= b.last)?;
        let beat = block.next;
        block.next = block.next.saturating_add(1);
        let claim = match last {
            Some((r, _)) if r.claim.digest == digest => r.claim.clone(),
            _ => Claim {
                epoch: beat,
                digest: digest.to_owned(),
            },
        };
        let renewal = Renewal { claim, beat };
        self.pending = Some(renewal.clone());
        self.pending_since = Some(now);
        Some(renewal)
    }

    /// The writer's answer to the pending renewal.
    /// A renewal while a pass's writes still run, when the last one written is an interval
    /// old: the claim of the step's renewal (pending) or of the last written, the next beat. A
    /// pass writing thousands of objects takes longer than an interval; without these its
    /// member's beat stopped meanwhile, others saw it stale, and it judged itself blind.
    pub fn interim(&mut self, interval: Duration, now: Instant) -> Option<Renewal> {
        let (last, written_at) = self.written.as_ref()?;
        // The step's own renewal is written early in its pass: it counts from when it was due.
        let at = self
            .pending
            .as_ref()
            .and(self.pending_since)
            .map_or(*written_at, |due| due.max(*written_at));
        if now.saturating_duration_since(at) < interval {
            return None;
        }
        let claim = self.pending.as_ref().unwrap_or(last).claim.clone();
        let block = self.block.as_mut().filter(|b| b.next <= b.last)?;
        let beat = block.next;
        block.next = block.next.saturating_add(1);
        Some(Renewal { claim, beat })
    }

    /// What writing an [`interim`](Self::interim) renewal gave.
    pub fn interim_answered(&mut self, renewal: Renewal, ok: bool, now: Instant) {
        if ok {
            self.written = Some((renewal, now));
        }
    }

    pub fn answered(&mut self, ok: bool, now: Instant) {
        let Some(renewal) = self.pending.take() else {
            return;
        };
        if ok {
            self.written = Some((renewal, now));
            self.failed = None;
        } else {
            let failures = self.failed.map_or(0, |(n, _)| n).saturating_add(1);
            self.failed = Some((failures, now));
        }
    }

    /// When the next renewal is due (`None` before the first).
    pub fn next_due(&self, interval: Duration, now: Instant) -> Option<Duration> {
        let regular = self
            .written
            .as_ref()
            .map(|(_, at)| (*at + interval).saturating_duration_since(now));
        let retry = self.failed.map(|(failures, at)| {
            (at + retry_after(failures, interval)).saturating_duration_since(now)
        });
        match (regular, retry) {
            (Some(r), Some(t)) => Some(r.max(t)),
            (r, t) => r.or(t),
        }
    }

    /// Leadership lost: a successor reserves its own block and continues from the Lease.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

/// The heartbeat Lease of member `id` as the leader applies it (server-side apply).
pub fn lease(
    id: &str,
    renewal: &Renewal,
    interval: Duration,
    grace: Duration,
    wall: &Time,
    last_error: &str,
    kept: &str,
) -> Value {
    json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {
            "name": LEASE_NAME,
            "namespace": atoll_api::hub::namespace_for(id),
            "labels": { LABEL_CLUSTER: id },
            "annotations": {
                CLAIM_ANNOTATION: renewal.claim.encode(),
                BEAT_ANNOTATION: renewal.beat.to_string(),
                INTERVAL_ANNOTATION: interval.as_secs().max(1).to_string(),
                LAST_ERROR_ANNOTATION: last_error,
                KEPT_ANNOTATION: kept,
            },
        },
        "spec": {
            "holderIdentity": id,
            "leaseDurationSeconds": i32::try_from(grace.as_secs()).unwrap_or(i32::MAX),
            "renewTime": MicroTime(wall.0),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn wall(ms: i64) -> Time {
        Time(Timestamp::from_millisecond(ms).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    const INTERVAL: Duration = Duration::from_secs(2);

    fn started(reserved: u64, lease: &Heartbeat, wall_ms: i64) -> (HeartbeatBook, u64) {
        let mut book = HeartbeatBook::default();
        let end = book.reserve(reserved, lease, &wall(wall_ms));
        (book, end)
    }

    #[test]
    fn a_term_renews_at_once_whether_or_not_its_block_is_kept() {
        // The block is kept in the member's ConfigMap when that write succeeds; a refused write
        // (an admission policy, a quota, RBAC from an older join) must not stop the heartbeat.
        let start = Instant::now();
        let mut book = HeartbeatBook::default();
        let end = book.reserve(0, &Heartbeat::missing(), &wall(1_000));
        assert_eq!(end, 2 * BLOCK - 1);
        let first = book.due("d1", INTERVAL, start);
        assert_eq!(
            first.map(|r| r.beat),
            Some(BLOCK),
            "renewed before any keep write"
        );
        assert_eq!(
            book.reserve(0, &Heartbeat::missing(), &wall(2_001)),
            end,
            "the block in use is kept, not a new one"
        );
    }

    #[test]
    fn absurd_counters_do_not_count_and_nothing_wraps() {
        let absurd = Heartbeat {
            beat: Beat::Counter(u64::MAX),
            claim: Some(Claim {
                epoch: u64::MAX,
                digest: "d0".into(),
            }),
            interval: None,
            grace: None,
        };
        let (mut book, end) = started(u64::MAX, &absurd, 5_000);
        assert_eq!(end, 6 * BLOCK - 1, "starts at the wall clock");
        let r = book.due("d1", INTERVAL, Instant::now()).unwrap();
        assert_eq!(r.beat, 5 * BLOCK);
        // At the top of the sane range, blocks and beats still grow without wrapping.
        let top = Heartbeat {
            beat: Beat::Counter(MAX_COUNTER),
            ..absurd
        };
        let (mut book, end) = started(0, &top, 0);
        assert_eq!(end, MAX_COUNTER + BLOCK);
        assert_eq!(
            book.due("d1", INTERVAL, Instant::now()).unwrap().beat,
            MAX_COUNTER + 1
        );
    }

    #[test]
    fn renewals_come_every_interval_and_at_once_when_the_claim_changes() {
        let start = Instant::now();
        let (mut book, _) = started(0, &Heartbeat::missing(), 1_000);
        let first = book.due("d1", INTERVAL, start).unwrap();
        assert_eq!((first.claim.epoch, first.beat), (BLOCK, BLOCK));
        book.answered(true, start);
        assert!(
            book.due("d1", INTERVAL, start + Duration::from_secs(1))
                .is_none()
        );
        let second = book.due("d1", INTERVAL, start + INTERVAL).unwrap();
        assert_eq!(second.claim, first.claim, "same claim, same epoch");
        assert_eq!(second.beat, BLOCK + 1);
        book.answered(true, start + INTERVAL);
        let changed = book.due("d2", INTERVAL, start + INTERVAL).unwrap();
        assert_eq!((changed.claim.epoch, changed.beat), (BLOCK + 2, BLOCK + 2));
    }

    #[test]
    fn a_long_pass_renews_every_interval_with_the_steps_claim() {
        // A step's renewal (claim d2) is pending while its pass writes for 7 s; the last
        // written renewal (d1) is from the step before. Mutation: no interim renewals leaves
        // the beat still for the whole pass (importers saw this member stale, it saw itself
        // blind).
        let start = Instant::now();
        let (mut book, _) = started(0, &Heartbeat::missing(), 1_000);
        book.due("d1", INTERVAL, start).unwrap();
        book.answered(true, start);
        let step = book.due("d2", INTERVAL, start + INTERVAL).unwrap();
        let mut beats = vec![step.beat];
        let mut t = start + INTERVAL;
        let end = t + Duration::from_secs(7);
        while t < end {
            t += Duration::from_millis(250);
            if let Some(r) = book.interim(INTERVAL, t) {
                assert_eq!(r.claim, step.claim, "the step's claim, not the one before");
                beats.push(r.beat);
                book.interim_answered(r, true, t);
            }
        }
        assert_eq!(
            beats.len(),
            4,
            "renewed at 2, 4, 6 s into the pass: {beats:?}"
        );
        assert!(
            beats.windows(2).all(|w| w[0] < w[1]),
            "beats grow: {beats:?}"
        );
        // Not within an interval of the last renewal written.
        assert!(book.interim(INTERVAL, t).is_none());
        // The step's own answer comes last and keeps the next regular renewal an interval on.
        book.answered(true, t);
        assert!(
            book.due("d2", INTERVAL, t + Duration::from_secs(1))
                .is_none()
        );
    }

    #[test]
    fn every_term_writes_above_everything_before_whatever_the_hub_and_the_clock_say() {
        // A term started at second 5 (its block ends at 6 * BLOCK - 1, kept).
        let (mut first, reserved) = started(0, &Heartbeat::missing(), 5_000);
        let start = Instant::now();
        let r = first.due("d1", INTERVAL, start).unwrap();
        assert_eq!(r.beat, 5 * BLOCK);
        // The hub is restored from a backup (the Lease says beat 10, epoch 10) and the next
        // leader's clock is an hour behind: it still starts above the kept block.
        let restored = Heartbeat {
            beat: Beat::Counter(10),
            claim: Some(Claim {
                epoch: 10,
                digest: "d0".into(),
            }),
            interval: None,
            grace: None,
        };
        let (mut second, _) = started(reserved, &restored, 1_000);
        let r2 = second.due("d1", INTERVAL, start).unwrap();
        assert!(
            r2.beat > reserved && r2.claim.epoch > r.claim.epoch,
            "{r2:?} after {r:?}"
        );
        // A member that never kept a block (joined by `atoll join`, or an older agent) starts
        // above what its Lease holds.
        let joined = Heartbeat {
            beat: Beat::Missing,
            claim: Some(Claim {
                epoch: 1_800_000_000_000,
                digest: "d0".into(),
            }),
            interval: None,
            grace: None,
        };
        let (mut third, _) = started(0, &joined, 5);
        assert!(third.due("d1", INTERVAL, start).unwrap().claim.epoch > 1_800_000_000_000);
    }

    #[test]
    fn a_start_that_knows_of_no_block_lands_above_every_earlier_beat_two_seconds_on() {
        // Terms in a crash loop, each knowing the block its predecessor kept, then one whose
        // kept decisions are lost while the hub is restored from a backup older than all of
        // them (the Lease shows none of their beats). With a floor of milliseconds the last
        // one started below what its predecessors wrote (found by the fault simulation).
        let start = Instant::now();
        let mut reserved = 0;
        let mut highest = 0;
        for second in 100..110 {
            let (mut term, end) = started(reserved, &Heartbeat::missing(), second * 1_000);
            for _ in 0..3 {
                let r = term.due(&format!("d{highest}"), INTERVAL, start).unwrap();
                assert!(r.beat > highest, "beats grow within and across terms");
                highest = r.beat;
                term.answered(true, start);
            }
            reserved = end;
        }
        let (mut unaware, _) = started(0, &Heartbeat::missing(), 111_000);
        let first = unaware.due("d1", INTERVAL, start).unwrap();
        assert!(
            first.beat > highest && first.claim.epoch > highest,
            "{first:?} after {highest}"
        );
    }

    #[test]
    fn a_refused_renewal_is_tried_again_after_a_delay_that_doubles_up_to_the_interval() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let (mut book, _) = started(0, &Heartbeat::missing(), 1);
        assert!(book.due("d1", INTERVAL, start).is_some());
        book.answered(false, start);
        assert!(
            book.due("d1", INTERVAL, ms(100)).is_none(),
            "not at every step"
        );
        assert_eq!(
            book.next_due(INTERVAL, ms(100)),
            Some(Duration::from_millis(150))
        );
        assert!(book.due("d1", INTERVAL, ms(250)).is_some(), "after 250 ms");
        book.answered(false, ms(250));
        assert!(book.due("d1", INTERVAL, ms(700)).is_none());
        assert!(
            book.due("d1", INTERVAL, ms(750)).is_some(),
            "then after 500 ms"
        );
        let mut at = ms(750);
        for _ in 0..10 {
            assert!(book.due("d1", INTERVAL, at).is_some());
            book.answered(false, at);
            at += INTERVAL;
        }
        assert_eq!(
            book.next_due(INTERVAL, at - INTERVAL),
            Some(INTERVAL),
            "never longer than the interval"
        );
        assert!(book.due("d1", INTERVAL, at).is_some());
        book.answered(true, at);
        assert_eq!(
            book.next_due(INTERVAL, at),
            Some(INTERVAL),
            "a success resets the delay"
        );
    }

    #[test]
    fn the_lease_carries_claim_beat_rhythm_and_grace() {
        let renewal = Renewal {
            claim: Claim {
                epoch: 5,
                digest: "abc".into(),
            },
            beat: 7,
        };
        let l = lease(
            "c2",
            &renewal,
            INTERVAL,
            Duration::from_secs(60),
            &wall(0),
            "",
            "kept",
        );
        let parsed: k8s_openapi::api::coordination::v1::Lease =
            serde_json::from_value(l).unwrap_or_default();
        let read = Heartbeat::read(&parsed);
        assert_eq!(read.beat, Beat::Counter(7));
        assert_eq!(read.claim, Some(renewal.claim));
        assert_eq!(read.interval, Some(INTERVAL));
        assert_eq!(read.grace, Some(Duration::from_secs(60)));
    }
}
