use std::time::{Duration, Instant};

use proptest::prelude::*;

use super::*;

fn lease(holder: &str, renew: &str, transitions: i32) -> Observed {
    Observed {
        holder: Some(holder.to_owned()),
        renew_time: Some(renew.to_owned()),
        duration_seconds: Some(6),
        transitions,
    }
}

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

#[test]
fn a_missing_lease_is_created() {
    let mut e = Elector::new("a", Timings::default());
    assert_eq!(e.decide(Instant::now(), None), Step::Create);
    assert!(!e.leading(Instant::now()), "creating is not leading yet");
}

#[test]
fn the_holder_renews_and_leads_until_the_renew_deadline() {
    let t0 = Instant::now();
    let mut e = Elector::new("a", Timings::default());
    assert_eq!(e.decide(t0, Some(&lease("a", "r1", 0))), Step::Renew);
    e.wrote(t0);
    assert!(e.leading(t0 + secs(3)));
    assert!(
        !e.leading(t0 + secs(4)),
        "without a renewal the leader stops at the deadline"
    );
    assert_eq!(e.lapses_at(), Some(t0 + secs(4)));
}

#[test]
fn a_live_lease_of_another_replica_is_followed() {
    let t0 = Instant::now();
    let mut e = Elector::new("b", Timings::default());
    let held = lease("a", "r1", 3);
    assert_eq!(
        e.decide(t0, Some(&held)),
        Step::Follow { holder: "a".into() }
    );
    // The holder keeps renewing: the record changes, so it never expires.
    for (i, r) in ["r2", "r3", "r4", "r5"].iter().enumerate() {
        let at = t0 + secs(5 * (i as u64 + 1));
        assert_eq!(
            e.decide(at, Some(&lease("a", r, 3))),
            Step::Follow { holder: "a".into() }
        );
    }
    assert!(!e.leading(t0 + secs(30)));
}

#[test]
fn a_lease_unchanged_for_longer_than_its_duration_is_taken() {
    let t0 = Instant::now();
    let mut e = Elector::new("b", Timings::default());
    let held = lease("a", "r1", 3);
    assert!(matches!(e.decide(t0, Some(&held)), Step::Follow { .. }));
    assert!(
        matches!(e.decide(t0 + secs(6), Some(&held)), Step::Follow { .. }),
        "exactly the duration is not yet expired"
    );
    assert_eq!(
        e.decide(t0 + secs(7), Some(&held)),
        Step::Acquire { transitions: 4 }
    );
}

#[test]
fn expiry_is_measured_from_when_this_replica_first_saw_the_record() {
    // A replica that starts late must wait a full duration, whatever renewTime says: it
    // cannot know how old the record is without trusting another node's clock.
    let t0 = Instant::now();
    let mut e = Elector::new("b", Timings::default());
    let held = lease("a", "2020-01-01T00:00:00Z", 0);
    assert!(matches!(e.decide(t0, Some(&held)), Step::Follow { .. }));
    assert!(matches!(
        e.decide(t0 + secs(5), Some(&held)),
        Step::Follow { .. }
    ));
}

#[test]
fn the_lease_duration_written_in_the_lease_counts() {
    let t0 = Instant::now();
    let mut e = Elector::new("b", Timings::default());
    let held = Observed {
        duration_seconds: Some(20),
        ..lease("a", "r1", 0)
    };
    e.decide(t0, Some(&held));
    assert!(matches!(
        e.decide(t0 + secs(10), Some(&held)),
        Step::Follow { .. }
    ));
    assert!(matches!(
        e.decide(t0 + secs(21), Some(&held)),
        Step::Acquire { .. }
    ));
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let mut e = Elector::new("b", Timings::default());
    let released = Observed {
        holder: Some(String::new()),
        ..lease("", "r9", 7)
    };
    assert_eq!(
        e.decide(Instant::now(), Some(&released)),
        Step::Acquire { transitions: 8 }
    );
}

#[test]
fn a_leader_that_sees_another_holder_stops_leading_at_once() {
    let t0 = Instant::now();
    let mut e = Elector::new("a", Timings::default());
    e.decide(t0, Some(&lease("a", "r1", 0)));
    e.wrote(t0);
    assert!(e.leading(t0 + secs(1)));
    assert!(matches!(
        e.decide(t0 + secs(1), Some(&lease("b", "x1", 1))),
        Step::Follow { .. }
    ));
    assert!(!e.leading(t0 + secs(1)));
}

#[test]
fn losing_a_race_is_not_leading() {
    let t0 = Instant::now();
    let mut e = Elector::new("a", Timings::default());
    e.wrote(t0);
    e.lost();
    assert!(!e.leading(t0));
}

#[test]
fn timings_must_keep_two_leaders_apart() {
    assert_eq!(Timings::default().validate(), Ok(()));
    let bad = Timings {
        renew_deadline: secs(6),
        ..Timings::default()
    };
    assert!(matches!(
        bad.validate(),
        Err(TimingsError::DeadlineNotShorter { .. })
    ));
    let bad = Timings {
        retry_period: secs(4),
        ..Timings::default()
    };
    assert!(matches!(
        bad.validate(),
        Err(TimingsError::RetryNotShorter { .. })
    ));
}

#[test]
fn a_zero_retry_period_and_an_endless_lease_are_refused() {
    let spinning = Timings {
        retry_period: Duration::ZERO,
        ..Timings::default()
    };
    assert!(matches!(
        spinning.validate(),
        Err(TimingsError::RetryTooShort { .. })
    ));
    let endless = Timings {
        lease_duration: Duration::from_secs(u64::MAX),
        ..Timings::default()
    };
    assert!(matches!(
        endless.validate(),
        Err(TimingsError::LeaseTooLong { .. })
    ));
}

proptest! {
    /// Two replicas reading the same Lease history never both lead at the same instant, as
    /// long as each write is a compare-and-swap (only one of two racing Acquires succeeds).
    #[test]
    fn two_replicas_never_lead_at_once(
        steps in proptest::collection::vec((0u8..2, 0u64..3000, any::<bool>()), 1..200)
    ) {
        let t0 = Instant::now();
        let timings = Timings::default();
        let mut replicas = [Elector::new("a", timings), Elector::new("b", timings)];
        let mut alive = [true, true];
        let mut current: Option<Observed> = None;
        let mut version = 0u64;
        let mut now = t0;
        for (who, advance_ms, crash_or_revive) in steps {
            now += Duration::from_millis(advance_ms);
            let i = usize::from(who);
            if crash_or_revive && advance_ms % 7 == 0 {
                alive[i] = !alive[i];
                if !alive[i] {
                    replicas[i] = Elector::new(if i == 0 { "a" } else { "b" }, timings);
                }
                continue;
            }
            if !alive[i] {
                continue;
            }
            let id = replicas[i].identity().to_owned();
            match replicas[i].decide(now, current.as_ref()) {
                Step::Create | Step::Acquire { .. } | Step::Renew => {
                    version += 1;
                    current = Some(Observed {
                        holder: Some(id),
                        renew_time: Some(version.to_string()),
                        duration_seconds: Some(6),
                        transitions: 0,
                    });
                    replicas[i].wrote(now);
                }
                Step::Follow { .. } => {}
            }
            let leading = replicas.iter().zip(alive).filter(|(r, a)| *a && r.leading(now)).count();
            prop_assert!(leading <= 1, "two leaders at once");
        }
    }
}
