//! When the leader renews its member's heartbeat Lease on the hub, and what it writes: every
//! interval, and at once when what it claims changes. The claim's epoch continues from the
//! newest one written or found on the Lease (a new leader takes over from its predecessor's),
//! and the beat only grows (see `crate::liveness`).

use std::time::{Duration, Instant};

use atoll_api::hub::{
    BEAT_ANNOTATION, CLAIM_ANNOTATION, INTERVAL_ANNOTATION, LABEL_CLUSTER, LAST_ERROR_ANNOTATION,
    LEASE_NAME,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde_json::{Value, json};

use crate::liveness::{Beat, Claim, Heartbeat, next_beat, next_epoch};

/// A renewal to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Renewal {
    pub claim: Claim,
    pub beat: u64,
}

/// What the heartbeat has written.
#[derive(Clone, Debug, Default)]
pub struct HeartbeatBook {
    /// The last renewal the hub accepted, and when.
    written: Option<(Renewal, Instant)>,
    /// A renewal handed to the writer and not yet answered.
    pending: Option<Renewal>,
}

fn millis(wall: &Time) -> u64 {
    u64::try_from(wall.0.as_millisecond()).unwrap_or(0)
}

impl HeartbeatBook {
    /// The renewal due at `now`, if one is: none was accepted yet, the interval passed, or
    /// the claimed digest differs from the last one written. `lease` is the member's own Lease
    /// as the hub holds it now.
    pub fn due(
        &mut self,
        digest: &str,
        lease: &Heartbeat,
        interval: Duration,
        now: Instant,
        wall: &Time,
    ) -> Option<Renewal> {
        let last = self.written.as_ref();
        let on_time = last.is_some_and(|(r, at)| {
            r.claim.digest == digest && now.saturating_duration_since(*at) < interval
        });
        if on_time {
            return None;
        }
        let written_epoch = last.map_or(0, |(r, _)| r.claim.epoch);
        let found = lease.claim.as_ref();
        let claim = match (last, found) {
            (Some((r, _)), _) if r.claim.digest == digest => r.claim.clone(),
            (None, Some(f)) if f.digest == digest => f.clone(),
            _ => Claim {
                epoch: next_epoch(
                    written_epoch.max(found.map_or(0, |f| f.epoch)),
                    millis(wall),
                ),
                digest: digest.to_owned(),
            },
        };
        let found_beat = match lease.beat {
            Beat::Counter(b) => b,
            _ => 0,
        };
        let renewal = Renewal {
            claim,
            beat: next_beat(last.map_or(0, |(r, _)| r.beat), found_beat, millis(wall)),
        };
        self.pending = Some(renewal.clone());
        Some(renewal)
    }

    /// The writer's answer to the pending renewal.
    pub fn answered(&mut self, ok: bool, now: Instant) {
        if let Some(renewal) = self.pending.take()
            && ok
        {
            self.written = Some((renewal, now));
        }
    }

    /// When the next renewal is due (`None` before the first).
    pub fn next_due(&self, interval: Duration, now: Instant) -> Option<Duration> {
        self.written
            .as_ref()
            .map(|(_, at)| (*at + interval).saturating_duration_since(now))
    }

    /// Forgets what was written (leadership lost: a successor continues from the Lease).
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

    #[test]
    fn renewals_come_every_interval_and_at_once_when_the_claim_changes() {
        let start = Instant::now();
        let mut book = HeartbeatBook::default();
        let none = Heartbeat::missing();
        let first = book
            .due("d1", &none, INTERVAL, start, &wall(1_000))
            .unwrap();
        assert_eq!((first.claim.epoch, first.beat), (1_000, 1_000));
        book.answered(true, start);
        assert!(
            book.due(
                "d1",
                &none,
                INTERVAL,
                start + Duration::from_secs(1),
                &wall(2_000)
            )
            .is_none()
        );
        let second = book
            .due("d1", &none, INTERVAL, start + INTERVAL, &wall(3_000))
            .unwrap();
        assert_eq!(second.claim, first.claim, "same claim, same epoch");
        assert_eq!(second.beat, 3_000);
        book.answered(true, start + INTERVAL);
        let changed = book
            .due("d2", &none, INTERVAL, start + INTERVAL, &wall(3_001))
            .unwrap();
        assert_eq!(changed.claim.epoch, 3_001);
    }

    #[test]
    fn a_new_leader_continues_from_the_lease_and_beats_pass_a_restored_one() {
        let start = Instant::now();
        let mut book = HeartbeatBook::default();
        let found = Heartbeat {
            beat: Beat::Counter(9_000),
            claim: Some(Claim {
                epoch: 8_000,
                digest: "d1".into(),
            }),
            interval: None,
            grace: None,
        };
        // The wall clock is behind what the Lease holds (set back, or another node's).
        let r = book
            .due("d1", &found, INTERVAL, start, &wall(5_000))
            .unwrap();
        assert_eq!(r.claim.epoch, 8_000, "the same claim is kept");
        assert_eq!(r.beat, 9_001, "the beat grows past the Lease's");
        book.answered(true, start);
        let r = book
            .due("d2", &found, INTERVAL, start, &wall(5_001))
            .unwrap();
        assert_eq!(r.claim.epoch, 8_001);
    }

    #[test]
    fn a_refused_renewal_is_tried_again() {
        let start = Instant::now();
        let mut book = HeartbeatBook::default();
        let none = Heartbeat::missing();
        assert!(book.due("d1", &none, INTERVAL, start, &wall(1)).is_some());
        book.answered(false, start);
        assert!(book.due("d1", &none, INTERVAL, start, &wall(2)).is_some());
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
