//! Liveness across restarts, restored hubs and members of different rhythms.

use std::collections::BTreeMap;

use atoll_api::hub::{BEAT_ANNOTATION, INTERVAL_ANNOTATION};
use k8s_openapi::api::coordination::v1::LeaseSpec;

use super::tests::{GRACE, Hub, lease, services, settings, wall};
use super::*;

/// `lease` with a beat counter (and optionally the rhythm the member asks for).
fn beating(base: Arc<Lease>, beat: u64, rhythm: Option<(u64, i32)>) -> Arc<Lease> {
    let mut l = (*base).clone();
    let annotations = l.metadata.annotations.get_or_insert_with(BTreeMap::new);
    annotations.insert(BEAT_ANNOTATION.into(), beat.to_string());
    if let Some((interval, grace)) = rhythm {
        annotations.insert(INTERVAL_ANNOTATION.into(), interval.to_string());
        l.spec = Some(LeaseSpec {
            lease_duration_seconds: Some(grace),
            ..LeaseSpec::default()
        });
    }
    Arc::new(l)
}

/// Runs `tracker` from `from` to `to` seconds in steps of `step`, c1 (us) renewing every step
/// and c2's Lease as `c2` makes it for each second; returns the last view.
fn run(
    tracker: &mut Tracker,
    hub: &mut Hub,
    start: Instant,
    (from, to, step): (u64, u64, u64),
    c2: impl Fn(u64, &Hub) -> Arc<Lease>,
) -> View {
    let mut last = View::default();
    let mut t = from;
    while t <= to {
        let mut leases = hub.renew(&["c1"]);
        leases.push(c2(t, hub));
        last = tracker.update(
            start + Duration::from_secs(t),
            &wall(t),
            &leases,
            &hub.records,
            &hub.copies,
        );
        t += step;
    }
    last
}

/// c2 claiming what it publishes now, at beat `beat` and claim epoch 1.
fn c2_at(hub: &Hub, beat: u64) -> Arc<Lease> {
    let (r, s) = hub.of("c2");
    beating(lease("c2", 7, Some((1, &r, &s))), beat, None)
}

#[test]
fn a_restarted_importer_keeps_a_withdrawn_cluster_withdrawn_until_it_beats_again() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut first = Tracker::new("c1", settings());
    // c2 beats until 10 s, then stops: withdrawn after the grace.
    let view = run(&mut first, &mut hub, start, (0, 80, 10), |t, h| {
        c2_at(h, t.min(10) + 1)
    });
    assert!(view.liveness.withdrawn.contains_key("c2"));
    let kept = first.persisted();
    assert_eq!(kept.sources["c2"].standing, Some(Standing::Withdrawn));

    // A new process (restart, new leader) continues from what was kept: c2's Lease, unchanged,
    // does not bring it back.
    let restart = start + Duration::from_secs(85);
    let mut second = Tracker::restored("c1", settings(), &kept, restart, &wall(85));
    let view = run(&mut second, &mut hub, restart, (0, 30, 5), |_, h| {
        c2_at(h, 11)
    });
    assert_eq!(services(&view), ["a"], "no resurrection");
    assert!(view.liveness.withdrawn.contains_key("c2"));
    assert!(
        view.liveness.withdrawn["c2"]
            .services
            .contains(&ServiceKey::new("demo", "b")),
        "the services it exported are still named"
    );
    // It beats again: back.
    let view = run(&mut second, &mut hub, restart, (35, 35, 5), |_, h| {
        c2_at(h, 12)
    });
    assert_eq!(services(&view), ["a", "b"]);
}

#[test]
fn without_the_kept_decisions_a_restart_brings_no_dead_cluster_back() {
    // The kept decisions are lost (ConfigMap deleted, unreadable, refused): a fresh tracker
    // sees a dead cluster's Lease for the first time. It takes nothing of it before it sees it
    // beat (it is pinned: what it took part in stays as it is) and withdraws it after the grace.
    // Counting a first sighting as a beat (the defect this replaced) fails at the first look.
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut fresh = Tracker::new("c1", settings());
    for t in (0..=80).step_by(10) {
        let view = run(&mut fresh, &mut hub, start, (t, t, 1), |_, h| c2_at(h, 11));
        assert!(
            !services(&view).contains(&"b".to_owned()),
            "at {t} s: {:?}",
            view.liveness
        );
        if t <= 60 {
            assert!(view.liveness.pinned.contains("c2"), "at {t} s");
        } else {
            assert!(view.liveness.withdrawn.contains_key("c2"), "at {t} s");
            assert!(view.liveness.pinned.is_empty(), "withdrawn, not pinned");
        }
    }
}

#[test]
fn a_lease_that_appears_is_no_beat() {
    // A restore brings a dead member's Lease back where there was none: that is a baseline,
    // not a beat; only a change after it counts.
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let view = run(&mut tracker, &mut hub, start, (0, 0, 1), |_, h| {
        let mut gone = (*c2_at(h, 5)).clone();
        gone.metadata.name = Some("not-the-heartbeat".into());
        Arc::new(gone)
    });
    assert!(
        view.records.is_empty(),
        "nothing is seen to beat at the first look"
    );
    let view = run(&mut tracker, &mut hub, start, (10, 10, 1), |_, h| {
        c2_at(h, 5)
    });
    assert_eq!(services(&view), ["a"], "appeared: {:?}", view.liveness);
    let view = run(&mut tracker, &mut hub, start, (20, 20, 1), |_, h| {
        c2_at(h, 6)
    });
    assert_eq!(services(&view), ["a", "b"], "then beat");
}

#[test]
fn a_silence_carries_across_restarts_while_the_lease_shows_the_same_beat() {
    // An importer restarting every 12 s (a crash loop; heartbeats every 10 s, grace 60 s): each
    // process keeps when it first saw c2 quiet, and the next carries that silence on while
    // c2's Lease still holds the same beat, so c2 is withdrawn within the grace plus one
    // restart period after it went quiet. A clock set forward across a restart carries at most
    // the grace less one interval: a process waits one interval itself before it withdraws
    // anything (one that lives less than an interval confirms nothing alive or dead, and
    // leaves what it imports as it is). Without the carried silence (today's defect: a stale
    // cluster's clock restarted at every restart) no process withdraws c2.
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut kept = Persisted::default();
    let mut withdrawn_at = None;
    for restart in (0..=96).step_by(12) {
        let now = start + Duration::from_secs(restart);
        let mut process = Tracker::restored("c1", settings(), &kept, now, &wall(restart));
        // Each process lives 11 s: it looks at the hub at its start and 11 s later.
        for t in [restart, restart + 11] {
            let mut leases = hub.renew(&["c1"]);
            leases.push(c2_at(&hub, 7));
            let view = process.update(
                start + Duration::from_secs(t),
                &wall(t),
                &leases,
                &hub.records,
                &hub.copies,
            );
            assert!(!services(&view).contains(&"b".to_owned()), "at {t} s");
            if withdrawn_at.is_none() && view.liveness.withdrawn.contains_key("c2") {
                withdrawn_at = Some(t);
            }
        }
        kept = process.persisted();
        if withdrawn_at.is_none() {
            assert_eq!(kept.sources["c2"].since, Some(wall(0)), "at {restart} s");
        }
    }
    let at = withdrawn_at.expect("withdrawn in the crash loop");
    assert!((61..=72).contains(&at), "withdrawn at {at} s (grace 60 s)");

    // The same, but c2 beat during the restart: its silence starts again.
    let beaten = Tracker::restored("c1", settings(), &kept, start, &wall(100));
    let mut beaten = beaten;
    let mut leases = hub.renew(&["c1"]);
    leases.push(c2_at(&hub, 8));
    let view = beaten.update(start, &wall(100), &leases, &hub.records, &hub.copies);
    // The withdrawal is outdated (c2 beat after it was decided; its restoration may simply
    // not have been kept): c2 is not withdrawn again, and not used before this process sees it
    // beat either.
    assert!(
        !view.liveness.withdrawn.contains_key("c2"),
        "an outdated withdrawal is not enforced"
    );
    assert!(!services(&view).contains(&"b".to_owned()), "nor is c2 used");

    // A clock an hour ahead at the restart: the carried silence is capped.
    let quiet = Persisted {
        format: 1,
        reserved: 0,
        sources: BTreeMap::from([(
            "c2".to_owned(),
            PersistedSource {
                beat: Some(7),
                since: Some(wall(0)),
                ..PersistedSource::default()
            },
        )]),
    };
    let mut ahead = Tracker::restored("c1", settings(), &quiet, start, &wall(3_600));
    for t in [0, 5, 9] {
        let mut leases = hub.renew(&["c1"]);
        leases.push(c2_at(&hub, 7));
        let view = ahead.update(
            start + Duration::from_secs(t),
            &wall(3_600 + t),
            &leases,
            &hub.records,
            &hub.copies,
        );
        assert!(
            view.liveness.withdrawn.is_empty(),
            "at {t} s: not before one interval of its own: {:?}",
            view.liveness
        );
    }
    let mut leases = hub.renew(&["c1"]);
    leases.push(c2_at(&hub, 7));
    let view = ahead.update(
        start + Duration::from_secs(11),
        &wall(3_611),
        &leases,
        &hub.records,
        &hub.copies,
    );
    assert!(view.liveness.withdrawn.contains_key("c2"));
}

#[test]
fn a_lease_restored_from_a_backup_is_no_heartbeat() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    run(&mut tracker, &mut hub, start, (0, 10, 10), |t, h| {
        c2_at(h, 100 + t)
    });
    // c2 is dead; the hub is restored from an older backup: its Lease comes back with an older
    // beat (and a new resourceVersion). The clock keeps running: withdrawn on time.
    let view = run(&mut tracker, &mut hub, start, (20, 80, 10), |_, h| {
        beating(
            lease("c2", 1000, Some((1, &h.of("c2").0, &h.of("c2").1))),
            95,
            None,
        )
    });
    assert!(view.liveness.withdrawn.contains_key("c2"));
    assert_eq!(view.liveness.withdrawn["c2"].last_seen, wall(10));
}

#[test]
fn a_restarted_importer_pins_a_cluster_whose_objects_do_not_match_its_claim() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut first = Tracker::new("c1", settings());
    let claimed = hub.of("c2");
    let claim_lease = move |beat: u64| {
        beating(
            lease("c2", 7, Some((5, &claimed.0, &claimed.1))),
            beat,
            None,
        )
    };
    let l = claim_lease.clone();
    run(&mut first, &mut hub, start, (0, 10, 10), move |t, _| {
        l(t + 1)
    });
    let kept = first.persisted();
    assert_eq!(kept.sources["c2"].accepted_epoch, 5);

    // c2's objects are wiped from the hub while it keeps beating and claiming them; a new
    // agent starts: it cannot tell what c2 publishes, so c2's services stay as they are.
    hub.records.retain(|r| r.spec.cluster != "c2");
    hub.copies.clear();
    let restart = start + Duration::from_secs(20);
    let mut second = Tracker::restored("c1", settings(), &kept, restart, &wall(20));
    let l = claim_lease.clone();
    let view = run(&mut second, &mut hub, restart, (0, 50, 10), move |t, _| {
        l(100 + t)
    });
    assert!(view.liveness.pinned.contains("c2"), "{:?}", view.liveness);
    assert!(view.liveness.withdrawn.is_empty() && view.liveness.unmatched.is_empty());
    assert_eq!(
        services(&view),
        ["a"],
        "pinned clusters contribute nothing to merge"
    );
    // Past the grace, what is there is taken, and the unmatched claim reported.
    let l = claim_lease.clone();
    let view = run(&mut second, &mut hub, restart, (80, 80, 10), move |t, _| {
        l(100 + t)
    });
    assert!(view.liveness.pinned.is_empty());
    // Unmatched since this process first saw it beat (this run's clock reads wall(10) then).
    assert_eq!(view.liveness.unmatched.get("c2"), Some(&wall(10)));
}

#[test]
fn a_pin_ends_as_soon_as_the_objects_match() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let c2 = hub.of("c2");
    hub.records.retain(|r| r.spec.cluster != "c2");
    let mut tracker = Tracker::new("c1", settings());
    let (r, s) = c2.clone();
    let view = run(&mut tracker, &mut hub, start, (0, 0, 1), move |_, _| {
        beating(lease("c2", 7, Some((5, &r, &s))), 1, None)
    });
    assert!(view.liveness.pinned.contains("c2"));
    hub.records.extend(c2.0.clone());
    let (r, s) = c2.clone();
    let view = run(&mut tracker, &mut hub, start, (1, 1, 1), move |_, _| {
        beating(lease("c2", 8, Some((5, &r, &s))), 2, None)
    });
    assert!(view.liveness.pinned.is_empty());
    assert_eq!(services(&view), ["a", "b"]);
}

#[test]
fn claims_older_than_one_accepted_before_a_restart_are_not_taken() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut first = Tracker::new("c1", settings());
    let now_claimed = hub.of("c2");
    let l = move |beat: u64| {
        beating(
            lease("c2", 7, Some((50, &now_claimed.0, &now_claimed.1))),
            beat,
            None,
        )
    };
    run(&mut first, &mut hub, start, (0, 0, 1), move |t, _| l(t + 1));
    let kept = first.persisted();

    // The hub comes back from an older backup: c2 had no service then, and its Lease claimed
    // that (epoch 10). A restarted importer must not take it.
    hub.records.retain(|r| r.spec.cluster != "c2");
    hub.copies.clear();
    let restart = start + Duration::from_secs(5);
    let mut second = Tracker::restored("c1", settings(), &kept, restart, &wall(5));
    let view = run(&mut second, &mut hub, restart, (0, 0, 1), |_, _| {
        beating(lease("c2", 9, Some((10, &[], &[]))), 2, None)
    });
    assert!(view.liveness.pinned.contains("c2"), "{:?}", view.liveness);
}

#[test]
fn a_stale_cluster_is_withdrawn_within_one_grace_of_a_restart_whatever_the_clocks_say() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut first = Tracker::new("c1", settings());
    let view = run(&mut first, &mut hub, start, (0, 50, 10), |_, h| c2_at(h, 1));
    assert!(view.liveness.stale.contains_key("c2"));
    let kept = first.persisted();
    assert_eq!(kept.sources["c2"].standing, Some(Standing::Stale));
    // Restarted at 45 s, on a wall clock an hour ahead: nothing is withdrawn early (the
    // predecessor's wall clock is not compared with this one's).
    let restart = start + Duration::from_secs(45);
    let mut second = Tracker::restored("c1", settings(), &kept, restart, &wall(3_645));
    let view = run(&mut second, &mut hub, restart, (0, 50, 5), |_, h| {
        c2_at(h, 1)
    });
    assert!(view.liveness.withdrawn.is_empty(), "{:?}", view.liveness);
    let view = run(&mut second, &mut hub, restart, (65, 65, 5), |_, h| {
        c2_at(h, 1)
    });
    assert!(
        view.liveness.withdrawn.contains_key("c2"),
        "withdrawn one grace after the restart: {:?}",
        view.liveness
    );
}

#[test]
fn members_are_judged_by_their_own_rhythm() {
    // We beat every 2 s with a 12 s grace; c2 beats every 10 s and asks for 60 s.
    let ours = Settings::new(Duration::from_secs(2), Duration::from_secs(12));
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", ours);
    let mut standings = Vec::new();
    let mut t = 0;
    while t <= 120 {
        let mut leases = hub.renew(&["c1"]);
        let (r, s) = hub.of("c2");
        leases.push(beating(
            lease("c2", 7, Some((1, &r, &s))),
            t / 10 + 1,
            Some((10, 60)),
        ));
        let view = tracker.update(
            start + Duration::from_secs(t),
            &wall(t),
            &leases,
            &hub.records,
            &hub.copies,
        );
        standings.push(tracker.persisted());
        assert!(
            view.liveness.stale.is_empty() && view.liveness.withdrawn.is_empty(),
            "c2 is on time by its own rhythm at {t} s: {:?}",
            view.liveness
        );
        t += 2;
    }
    assert!(
        standings.windows(2).all(|w| !w[0].decisions_differ(&w[1])),
        "nothing to keep while nothing changes"
    );
    // Silent from 120 s: stale after four of its intervals, not withdrawn 12 s (our grace)
    // after its last beat.
    let mut t = 122;
    let mut view = View::default();
    while t <= 164 {
        let mut leases = hub.renew(&["c1"]);
        let (r, s) = hub.of("c2");
        leases.push(beating(
            lease("c2", 7, Some((1, &r, &s))),
            13,
            Some((10, 60)),
        ));
        view = tracker.update(
            start + Duration::from_secs(t),
            &wall(t),
            &leases,
            &hub.records,
            &hub.copies,
        );
        t += 2;
    }
    assert!(view.liveness.withdrawn.is_empty(), "{:?}", view.liveness);
    assert!(
        view.liveness.stale.contains_key("c2"),
        "stale after 4 of its intervals"
    );
}

#[test]
fn an_advertised_rhythm_is_bounded() {
    let ours = settings();
    let huge = Heartbeat {
        beat: Beat::Counter(1),
        claim: None,
        interval: Some(MAX_ADVERTISED),
        grace: Some(MAX_ADVERTISED),
    };
    let (stale_after, grace) = ours.for_source(&huge);
    assert_eq!(grace, MAX_ADVERTISED * 3);
    assert_eq!(stale_after, MAX_ADVERTISED * 4);
    let mut lease = Lease::default();
    lease.metadata.annotations = Some(BTreeMap::from([(
        INTERVAL_ANNOTATION.to_owned(),
        "99999999999".to_owned(),
    )]));
    lease.spec = Some(LeaseSpec {
        lease_duration_seconds: Some(i32::MAX),
        ..LeaseSpec::default()
    });
    let read = Heartbeat::read(&lease);
    assert_eq!(
        (read.interval, read.grace),
        (Some(MAX_ADVERTISED), Some(MAX_ADVERTISED))
    );
    assert_eq!(
        ours.for_source(&Heartbeat::missing()),
        (ours.stale_after, GRACE)
    );
}

#[test]
fn an_unmatched_claim_is_reported_after_the_grace_while_the_last_matching_set_stays() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    run(&mut tracker, &mut hub, start, (0, 1, 1), |t, h| c2_at(h, t));
    // c2 publishes a new service but keeps claiming the old set (its write keeps failing, say).
    let old = hub.of("c2");
    hub.records.push(super::tests::record("c2", "c"));
    let l = move |t: u64| beating(lease("c2", 7, Some((1, &old.0, &old.1))), t + 2, None);
    let view = run(&mut tracker, &mut hub, start, (10, 50, 10), {
        let l = l.clone();
        move |t, _| l(t)
    });
    assert!(view.liveness.unmatched.is_empty(), "within the grace");
    assert_eq!(services(&view), ["a", "b"]);
    let view = run(&mut tracker, &mut hub, start, (80, 80, 10), move |t, _| {
        l(t)
    });
    assert_eq!(view.liveness.unmatched.get("c2"), Some(&wall(10)));
    assert_eq!(services(&view), ["a", "b"], "the last matching set stays");
}

#[test]
fn kept_decisions_round_trip_and_epochs_alone_are_no_decision() {
    let mut kept = Persisted {
        format: 1,
        reserved: 0,
        sources: BTreeMap::from([(
            "c2".to_owned(),
            PersistedSource {
                beat: Some(42),
                standing: Some(Standing::Withdrawn),
                since: Some(wall(3)),
                accepted_epoch: 7,
                services: [ServiceKey::new("demo", "b")].into(),
                ..PersistedSource::default()
            },
        )]),
    };
    assert_eq!(Persisted::parse(&kept.encode()), Some(kept.clone()));
    // The ConfigMap the agent applies (and the simulation keeps) holds that text.
    let body: k8s_openapi::api::core::v1::ConfigMap =
        serde_json::from_value(kept.config_map("atoll-system", "atoll-kept")).unwrap();
    let text = &body.data.unwrap_or_default()[super::KEPT_DATA_KEY];
    assert_eq!(Persisted::parse(text), Some(kept.clone()));
    assert_eq!(
        Persisted::parse("{\"format\": 2}"),
        None,
        "a newer format is not ours"
    );
    assert_eq!(Persisted::parse("not json"), None);
    let mut later = kept.clone();
    if let Some(s) = later.sources.get_mut("c2") {
        s.accepted_epoch = 8;
    }
    assert!(!kept.decisions_differ(&later));
    if let Some(s) = kept.sources.get_mut("c2") {
        s.standing = None;
    }
    assert!(kept.decisions_differ(&later));
}

#[test]
fn a_withdrawn_cluster_stays_withdrawn_through_blindness_until_it_beats() {
    // Found by the fault simulation: this importer's own heartbeat stopped (no leader for a
    // while), so it was blind; blindness counted every cluster live and seeing again restarted
    // every clock, so a dead cluster's endpoints came back.
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let c2 = |h: &Hub| c2_at(h, 1);
    let mut view = View::default();
    for t in (0..=80).step_by(10) {
        let mut leases = hub.renew(&["c1"]);
        leases.push(c2(&hub));
        view = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
    }
    assert!(view.liveness.withdrawn.contains_key("c2"));
    // Blind: our own Lease stops moving for 40 s.
    let own_frozen = hub.renew(&["c1"]);
    for t in (90..=130).step_by(10) {
        let mut leases = own_frozen.clone();
        leases.push(c2(&hub));
        view = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
        assert!(
            view.liveness.withdrawn.contains_key("c2"),
            "at {t} s (blind: {})",
            view.liveness.blind
        );
    }
    assert!(view.liveness.blind);
    // Seeing again: still withdrawn.
    let mut leases = hub.renew(&["c1"]);
    leases.push(c2(&hub));
    let view = tracker.update(at(140), &wall(140), &leases, &hub.records, &hub.copies);
    assert!(!view.liveness.blind);
    assert!(view.liveness.withdrawn.contains_key("c2"));
    assert_eq!(services(&view), ["a"]);
    // It beats: back.
    let mut leases = hub.renew(&["c1"]);
    leases.push(c2_at(&hub, 2));
    let view = tracker.update(at(141), &wall(141), &leases, &hub.records, &hub.copies);
    assert_eq!(services(&view), ["a", "b"]);
}

#[test]
fn what_is_kept_stays_far_below_a_config_maps_limit_when_a_whole_fleet_is_withdrawn() {
    // 250 clusters of 200 services each, all withdrawn at once (a regional outage of a large
    // fleet): every withdrawn cluster used to keep up to 500 service keys, about 2.4 MB here.
    // Dropping the shared budget (each keeping its own 500) fails this test.
    let start = Instant::now();
    let clusters: Vec<String> = (0..250).map(|i| format!("member-{i:03}")).collect();
    let records: Vec<Arc<ExportedService>> = clusters
        .iter()
        .flat_map(|c| (0..200).map(move |s| super::tests::record(c, &format!("service-{s:03}"))))
        .collect();
    let mut tracker = Tracker::new("c1", settings());
    let leases = |beat: u64, all: bool| -> Vec<Arc<Lease>> {
        let mut l = vec![beating(lease("c1", 1, None), beat, None)];
        if all {
            l.extend(
                clusters
                    .iter()
                    .map(|c| beating(lease(c, 1, None), beat, None)),
            );
        }
        l
    };
    for (t, all) in [(0, true), (1, true), (2, false), (90, false)] {
        let view = tracker.update(
            start + Duration::from_secs(t),
            &wall(t),
            &leases(t + 1, all),
            &records,
            &[],
        );
        if t == 90 {
            assert_eq!(view.liveness.withdrawn.len(), 250);
        }
    }
    let kept = tracker.persisted();
    let text = kept.encode();
    eprintln!(
        "kept decisions, 250 clusters x 200 services all withdrawn: {} bytes",
        text.len()
    );
    assert!(text.len() < 200 * 1024, "{} bytes kept", text.len());
    let services: usize = kept.sources.values().map(|s| s.services.len()).sum();
    assert!(services <= KEPT_SERVICES, "{services} services kept");
    assert_eq!(Persisted::parse(&text), Some(kept));
}

#[test]
fn absurd_kept_values_are_refused_and_the_rest_taken() {
    let text = format!(
        r#"{{"format":1,"reserved":{max},"sources":{{
            "c2":{{"acceptedEpoch":{max},"beat":{max},"since":"2026-01-01T00:00:00Z","standing":"withdrawn"}},
            "c3":{{"acceptedEpoch":7,"beat":9,"standing":"withdrawn"}}}}}}"#,
        max = u64::MAX
    );
    let (kept, refused) = Persisted::parse_checked(&text).unwrap();
    assert_eq!(kept.reserved, 0);
    assert_eq!(kept.sources["c2"].accepted_epoch, 0);
    assert_eq!(
        (
            kept.sources["c2"].beat,
            &kept.sources["c2"].since,
            kept.sources["c2"].standing
        ),
        (None, &None, None),
        "no verdict without the beat it was judged at"
    );
    assert_eq!(kept.sources["c3"].accepted_epoch, 7, "the rest is taken");
    assert_eq!(refused.len(), 3, "{refused:?}");
    assert!(matches!(
        Persisted::parse_checked("garbage"),
        Err(super::persisted::ParseError::Malformed(_))
    ));
    assert_eq!(
        Persisted::parse_checked(r#"{"format":2}"#).err(),
        Some(super::persisted::ParseError::Format(2))
    );
}

#[test]
fn a_new_baseline_is_a_decision_and_one_that_ends_is_not() {
    let quiet = |since: u64| PersistedSource {
        beat: Some(7),
        since: Some(wall(since)),
        ..PersistedSource::default()
    };
    let with = |sources: Vec<(&str, PersistedSource)>| Persisted {
        format: 1,
        reserved: 0,
        sources: sources
            .into_iter()
            .map(|(c, s)| (c.to_owned(), s))
            .collect(),
    };
    let none = with(vec![]);
    let one = with(vec![("c2", quiet(0))]);
    assert!(
        none.decisions_differ(&one),
        "a cluster gone quiet is kept at once"
    );
    assert!(
        !one.decisions_differ(&none),
        "one that beat again may wait for a batch"
    );
    assert!(one.decisions_differ(&with(vec![("c2", quiet(5))])));
}
