use std::collections::BTreeMap;

use atoll_api::hub::{
    CLAIM_ANNOTATION, ExportedEndpointSlice, ExportedEndpointSliceSpec, ExportedService, LEASE_NAME,
};
use k8s_openapi::jiff::Timestamp;

use super::*;

pub(super) const GRACE: Duration = Duration::from_secs(60);

pub(super) fn settings() -> Settings {
    Settings::new(Duration::from_secs(10), GRACE)
}

pub(super) fn wall(seconds: u64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds as i64).unwrap())
}

pub(super) fn record(cluster: &str, name: &str) -> Arc<ExportedService> {
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": cluster, "namespace": "demo", "name": name,
        "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP", "ports": []
    }))
    .unwrap();
    let mut r = ExportedService::new(&format!("demo.{name}"), spec);
    r.metadata.namespace = Some(format!("atoll-{cluster}"));
    Arc::new(r)
}

pub(super) fn copy(cluster: &str, name: &str) -> Arc<ExportedEndpointSlice> {
    let mut c = ExportedEndpointSlice::new(
        &format!("demo.{name}-abcde"),
        ExportedEndpointSliceSpec {
            cluster: cluster.into(),
            namespace: "demo".into(),
            service: name.into(),
            address_type: "IPv4".into(),
            endpoints: Vec::new(),
            ports: Vec::new(),
        },
    );
    c.metadata.namespace = Some(format!("atoll-{cluster}"));
    Arc::new(c)
}

/// An epoch and the records and copies claimed with it.
pub(super) type Claimed<'a> = (
    u64,
    &'a [Arc<ExportedService>],
    &'a [Arc<ExportedEndpointSlice>],
);

/// A member's Lease at `version`, claiming what `records` and `copies` hold (epoch `epoch`).
pub(super) fn lease(cluster: &str, version: u32, claim: Option<Claimed<'_>>) -> Arc<Lease> {
    let mut l = Lease::default();
    l.metadata.name = Some(LEASE_NAME.into());
    l.metadata.namespace = Some(format!("atoll-{cluster}"));
    l.metadata.resource_version = Some(version.to_string());
    if let Some((epoch, records, copies)) = claim {
        let c = Claim {
            epoch,
            digest: publication_digest(records, copies),
        };
        l.metadata.annotations = Some(BTreeMap::from([(CLAIM_ANNOTATION.into(), c.encode())]));
    }
    Arc::new(l)
}

/// A hub with members c1 (us) and c2, each publishing one service, both claiming it.
pub(super) struct Hub {
    pub(super) records: Vec<Arc<ExportedService>>,
    pub(super) copies: Vec<Arc<ExportedEndpointSlice>>,
    pub(super) version: u32,
}

impl Hub {
    pub(super) fn new() -> Self {
        Self {
            records: vec![record("c1", "a"), record("c2", "b")],
            copies: vec![copy("c2", "b")],
            version: 1,
        }
    }

    pub(super) fn of(
        &self,
        cluster: &str,
    ) -> (Vec<Arc<ExportedService>>, Vec<Arc<ExportedEndpointSlice>>) {
        let ns = format!("atoll-{cluster}");
        (
            self.records
                .iter()
                .filter(|r| r.metadata.namespace.as_deref() == Some(ns.as_str()))
                .cloned()
                .collect(),
            self.copies
                .iter()
                .filter(|c| c.metadata.namespace.as_deref() == Some(ns.as_str()))
                .cloned()
                .collect(),
        )
    }

    /// Both members renew (their Leases change) and claim what they publish now.
    pub(super) fn renew(&mut self, who: &[&str]) -> Vec<Arc<Lease>> {
        self.version += 1;
        who.iter()
            .map(|c| {
                let (r, s) = self.of(c);
                lease(c, self.version, Some((u64::from(self.version), &r, &s)))
            })
            .collect()
    }
}

/// Two looks at the hub while both members renew, at `seconds`: the first is this importer's
/// baseline, the second shows their beats moving (positive evidence), so both count from then
/// on. Returns the view and the Leases of the second look.
pub(super) fn confirmed(
    tracker: &mut Tracker,
    hub: &mut Hub,
    now: Instant,
    seconds: u64,
) -> (View, Vec<Arc<Lease>>) {
    let leases = hub.renew(&["c1", "c2"]);
    let first = tracker.update(now, &wall(seconds), &leases, &hub.records, &hub.copies);
    assert!(first.records.is_empty(), "nothing before a beat is seen");
    let leases = hub.renew(&["c1", "c2"]);
    let view = tracker.update(now, &wall(seconds), &leases, &hub.records, &hub.copies);
    (view, leases)
}

pub(super) fn services(view: &View) -> Vec<String> {
    let mut names: Vec<String> = view.records.iter().map(|r| r.spec.name.clone()).collect();
    names.sort();
    names
}

#[test]
fn a_silent_cluster_is_withdrawn_after_the_grace_and_restored_when_it_renews() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let (view, _) = confirmed(&mut tracker, &mut hub, at(0), 0);
    assert_eq!(services(&view), ["a", "b"]);
    // c2 stops renewing (its Lease stays as last seen); we keep renewing.
    let silent = hub.version;
    let mut t = 0;
    let mut last = view;
    while t < 70 {
        t += 10;
        let mut leases = hub.renew(&["c1"]);
        let (r, s) = hub.of("c2");
        leases.push(lease("c2", silent, Some((u64::from(silent), &r, &s))));
        last = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
        if t == 50 {
            assert_eq!(services(&last), ["a", "b"], "within the grace c2 stays");
            assert!(
                last.liveness.stale.contains_key("c2"),
                "but is stale: {:?}",
                last.liveness
            );
        }
    }
    assert_eq!(services(&last), ["a"], "withdrawn after the grace");
    let withdrawn = &last.liveness.withdrawn["c2"];
    assert_eq!(withdrawn.last_seen, wall(0));
    assert!(withdrawn.services.contains(&ServiceKey::new("demo", "b")));
    assert!(last.copies.is_empty());
    // c2 renews again: back at once.
    let leases = hub.renew(&["c1", "c2"]);
    let back = tracker.update(at(80), &wall(80), &leases, &hub.records, &hub.copies);
    assert_eq!(services(&back), ["a", "b"]);
    assert!(back.liveness.withdrawn.is_empty() && back.liveness.stale.is_empty());
}

#[test]
fn nothing_is_withdrawn_while_this_importer_cannot_see_the_hub() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let (_, leases) = confirmed(&mut tracker, &mut hub, at(0), 0);
    // The hub is unreachable for 5 minutes: the view is frozen, no Lease moves, not even ours.
    let view = tracker.update(at(300), &wall(300), &leases, &hub.records, &hub.copies);
    assert!(view.liveness.blind);
    assert_eq!(services(&view), ["a", "b"], "frozen, not withdrawn");
    // Back: our Lease moves first; everybody gets a fresh grace.
    let mut leases = hub.renew(&["c1"]);
    let (r, s) = hub.of("c2");
    leases.push(lease("c2", 1, Some((1, &r, &s))));
    let view = tracker.update(at(301), &wall(301), &leases, &hub.records, &hub.copies);
    assert!(!view.liveness.blind);
    assert_eq!(services(&view), ["a", "b"]);
    let view = tracker.update(at(350), &wall(350), &leases, &hub.records, &hub.copies);
    assert_eq!(services(&view), ["a", "b"], "still within the fresh grace");
}

#[test]
fn a_wiped_or_restored_hub_withdraws_nothing_and_claimed_deletions_apply_at_once() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    confirmed(&mut tracker, &mut hub, at(0), 0);
    // Wiped: records, copies and Leases gone.
    let view = tracker.update(at(1), &wall(1), &[], &[], &[]);
    assert_eq!(services(&view), ["a", "b"], "the last claimed set is kept");
    assert_eq!(view.copies.len(), 1);
    // Restored from an old backup: an older claim over an older set (c2 also had "old").
    let old = vec![record("c2", "b"), record("c2", "old")];
    let stale_lease = lease("c2", 1, Some((1, &old, &[])));
    let view = tracker.update(at(2), &wall(2), &[stale_lease], &old, &[]);
    assert_eq!(
        services(&view),
        ["a", "b"],
        "an older claim is not believed"
    );
    // Members re-publish and claim again: the view follows.
    let leases = hub.renew(&["c1", "c2"]);
    let view = tracker.update(at(3), &wall(3), &leases, &hub.records, &hub.copies);
    assert_eq!(services(&view), ["a", "b"]);
    // c2 unexports "b": deletes it and claims the empty set; it goes at once.
    hub.records.retain(|r| r.spec.name != "b");
    hub.copies.clear();
    let deleted_not_claimed = tracker.update(
        at(4),
        &wall(4),
        &[leases[0].clone(), leases[1].clone()],
        &hub.records,
        &hub.copies,
    );
    assert_eq!(
        services(&deleted_not_claimed),
        ["a", "b"],
        "not yet claimed: kept"
    );
    let leases = hub.renew(&["c1", "c2"]);
    let view = tracker.update(at(5), &wall(5), &leases, &hub.records, &hub.copies);
    assert_eq!(services(&view), ["a"]);
}

#[test]
fn skewed_clocks_do_not_matter_and_unclaimed_members_are_taken_as_they_are_once_they_beat() {
    let start = Instant::now();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let records = vec![record("c9", "x")];
    // c9's Lease says nothing about its renewTime that we use; it changes every 10 s.
    for step in 0..20u64 {
        let mut own = lease("c1", 100 + step as u32, None);
        Arc::make_mut(&mut own).metadata.annotations = None;
        let mut skewed = (*lease("c9", step as u32, None)).clone();
        skewed.spec = Some(k8s_openapi::api::coordination::v1::LeaseSpec {
            renew_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                Timestamp::from_second(1_000_000_000).unwrap(),
            )),
            ..Default::default()
        });
        let view = tracker.update(
            at(step * 10),
            &wall(step * 10),
            &[own, Arc::new(skewed)],
            &records,
            &[],
        );
        let want: &[&str] = if step == 0 { &[] } else { &["x"] };
        assert_eq!(services(&view), want, "step {step}");
    }
}

#[test]
fn the_next_check_is_when_a_grace_runs_out() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let (view, _) = confirmed(&mut tracker, &mut hub, start, 0);
    let next = view.next_check.unwrap();
    assert!(next <= Duration::from_secs(31), "{next:?}");
    assert!(next >= Duration::from_secs(29), "{next:?}");
}

#[test]
fn claims_round_trip_and_digests_ignore_order() {
    let c = Claim {
        epoch: 42,
        digest: "abc".into(),
    };
    assert_eq!(Claim::parse(&c.encode()), Some(c));
    assert_eq!(Claim::parse("x:y"), None);
    assert_eq!(
        digest(["a", "b"].into_iter()),
        digest(["b", "a"].into_iter())
    );
    assert_ne!(digest(["a"].into_iter()), digest(["a", "b"].into_iter()));
}

#[test]
fn a_member_that_leaves_claims_nothing_and_is_withdrawn_at_once_whatever_goes_first() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let (_, leases) = confirmed(&mut tracker, &mut hub, at(0), 0);
    // `atoll leave` claims the empty set, then deletes the namespace: the Lease goes first.
    let empty = lease("c2", 99, Some((99, &[], &[])));
    let own = leases[0].clone();
    let view = tracker.update(
        at(1),
        &wall(1),
        &[own.clone(), empty],
        &hub.records,
        &hub.copies,
    );
    assert_eq!(services(&view), ["a", "b"], "records still there");
    let view = tracker.update(
        at(2),
        &wall(2),
        std::slice::from_ref(&own),
        &hub.records,
        &hub.copies,
    );
    assert_eq!(
        services(&view),
        ["a", "b"],
        "the Lease is gone, its claim is remembered"
    );
    hub.records.retain(|r| r.spec.cluster != "c2");
    hub.copies.clear();
    let view = tracker.update(at(3), &wall(3), &[own], &hub.records, &hub.copies);
    assert_eq!(services(&view), ["a"]);
}

#[test]
fn epochs_only_grow() {
    assert_eq!(next_epoch(0, 1_000), 1_000);
    assert_eq!(next_epoch(1_000, 1_000), 1_001);
    assert_eq!(
        next_epoch(5_000, 1_000),
        5_001,
        "a clock that went back changes nothing"
    );
}

fn touched(view: &View) -> Vec<String> {
    view.touched.iter().map(|key| key.name.clone()).collect()
}

#[test]
fn the_view_names_the_services_whose_part_changed_without_an_event_of_theirs() {
    let start = Instant::now();
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let at = |s: u64| start + Duration::from_secs(s);
    let leases = hub.renew(&["c1", "c2"]);
    let first = tracker.update(at(0), &wall(0), &leases, &hub.records, &hub.copies);
    assert_eq!(touched(&first), ["a", "b"], "everything is pinned at first");
    let leases = hub.renew(&["c1", "c2"]);
    let beat = tracker.update(at(0), &wall(0), &leases, &hub.records, &hub.copies);
    assert_eq!(touched(&beat), ["a", "b"], "then seen to beat, taken");
    let leases = hub.renew(&["c1", "c2"]);
    let steady = tracker.update(at(1), &wall(1), &leases, &hub.records, &hub.copies);
    assert!(steady.touched.is_empty() && !steady.touched_everything);

    // c2 adds "c" but its Lease does not claim it yet: the view keeps the old set.
    hub.records.push(record("c2", "c"));
    let (before_r, before_s) = (hub.records[..2].to_vec(), hub.copies.clone());
    let mut leases = hub.renew(&["c1"]);
    let epoch = u64::from(hub.version);
    leases.push(lease(
        "c2",
        hub.version,
        Some((epoch, &before_r[1..], &before_s)),
    ));
    let early = tracker.update(at(2), &wall(2), &leases, &hub.records, &hub.copies);
    assert!(early.touched.is_empty(), "{:?}", early.touched);
    // Its claim comes: "c" enters the view without an event of its own.
    let leases = hub.renew(&["c1", "c2"]);
    let claimed = tracker.update(at(3), &wall(3), &leases, &hub.records, &hub.copies);
    assert_eq!(touched(&claimed), ["c"]);

    // c2 goes silent: stale (a condition's text only: no pass of its own), then withdrawn,
    // which touches c2's services.
    let (r, s) = hub.of("c2");
    let silent = lease("c2", 999, Some((999, &r, &s)));
    let mut seen = Vec::new();
    for t in [4, 50, 80] {
        let mut leases = hub.renew(&["c1"]);
        leases.push(silent.clone());
        let view = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
        seen.push(touched(&view));
    }
    assert!(seen[0].is_empty(), "a renewal alone changes nothing");
    assert!(seen[1].is_empty(), "stale touches nothing: {:?}", seen[1]);
    assert_eq!(seen[2], ["b", "c"], "withdrawn");
}

#[test]
fn a_beat_counts_from_when_the_watch_saw_it_not_from_the_step_that_reads_it() {
    // Steps come late (heartbeats no longer wake the reconciler): c2's last beat, seen at 5 s,
    // is read only at 20 s. It is withdrawn a grace after 5 s, not after 20 s.
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    confirmed(&mut tracker, &mut hub, at(0), 0);
    let mut leases = hub.renew(&["c1", "c2"]);
    let c2_beat = Heartbeat::read(&leases[1]).beat;
    let seen = BeatsSeen::from([("c2".to_owned(), (c2_beat, at(5)))]);
    let mut t = 20;
    let view = tracker.update_seen(at(t), &wall(t), &leases, &hub.records, &hub.copies, &seen);
    assert_eq!(view.liveness.last_seen_seconds.get("c2"), Some(&15.0));
    // From here only c1 renews.
    let silent = hub.version;
    let mut withdrawn_at = None;
    while t < 100 && withdrawn_at.is_none() {
        t += 1;
        let (r, s) = hub.of("c2");
        let c2 = lease("c2", silent, Some((u64::from(silent), &r, &s)));
        leases = hub.renew(&["c1"]);
        leases.push(c2);
        let view = tracker.update_seen(at(t), &wall(t), &leases, &hub.records, &hub.copies, &seen);
        if view.liveness.withdrawn.contains_key("c2") {
            withdrawn_at = Some(t);
            assert_eq!(view.liveness.withdrawn["c2"].last_seen, wall(5));
        }
    }
    assert_eq!(withdrawn_at, Some(5 + GRACE.as_secs() + 1));
    // A seen time for another beat than the Lease holds is not used (the step's time is).
    let mut tracker = Tracker::new("c1", settings());
    confirmed(&mut tracker, &mut hub, at(200), 200);
    let leases = hub.renew(&["c1", "c2"]);
    let stale_seen = BeatsSeen::from([("c2".to_owned(), (Beat::Counter(1), at(201)))]);
    let view = tracker.update_seen(
        at(230),
        &wall(230),
        &leases,
        &hub.records,
        &hub.copies,
        &stale_seen,
    );
    assert_eq!(view.liveness.last_seen_seconds.get("c2"), Some(&0.0));
}

#[test]
fn clusters_whose_deadlines_fall_in_one_step_of_the_grid_are_withdrawn_in_one_update() {
    // c2, c3 and c4 die together: their last beats were seen at 10.1, 10.5 and 10.9 s, so
    // their graces run out at 70.1, 70.5 and 70.9 s. Steps come every 100 ms. Each is withdrawn
    // after its own grace, at most one grid step later, and all three in the same update (one
    // pass, one status write per import). Mutation: `judge_every` zero withdraws c2 at 70.2 s
    // alone.
    let start = Instant::now();
    let at = |ms: u64| start + Duration::from_millis(ms);
    let mut hub = Hub::new();
    for (cluster, name) in [("c3", "c"), ("c4", "d")] {
        hub.records.push(record(cluster, name));
        hub.copies.push(copy(cluster, name));
    }
    let all = ["c1", "c2", "c3", "c4"];
    let mut tracker = Tracker::new("c1", settings());
    for _ in 0..2 {
        let leases = hub.renew(&all);
        tracker.update(at(0), &wall(0), &leases, &hub.records, &hub.copies);
    }
    let last = hub.renew(&all);
    let beat = |i: usize| Heartbeat::read(&last[i]).beat;
    let deaths = [("c2", 10_100), ("c3", 10_500), ("c4", 10_900)];
    let seen: BeatsSeen = deaths
        .iter()
        .enumerate()
        .map(|(i, (c, ms))| ((*c).to_owned(), (beat(i + 1), at(*ms))))
        .collect();
    let mut withdrawn_at: BTreeMap<String, u64> = BTreeMap::new();
    let mut stale_at: BTreeMap<String, u64> = BTreeMap::new();
    let mut ms = 11_000;
    while ms < 75_000 {
        let mut leases = hub.renew(&["c1"]);
        leases.extend(last[1..].iter().cloned());
        let view = tracker.update_seen(
            at(ms),
            &wall(ms / 1000),
            &leases,
            &hub.records,
            &hub.copies,
            &seen,
        );
        for cluster in view.liveness.withdrawn.keys() {
            withdrawn_at.entry(cluster.clone()).or_insert(ms);
        }
        for cluster in view.liveness.stale.keys() {
            stale_at.entry(cluster.clone()).or_insert(ms);
        }
        if withdrawn_at.is_empty() && ms > 60_000 {
            // The next look is due on the grid (plus the 50 ms margin), or a quarter second on
            // when the grid's next instant is nearer.
            let due = ms + view.next_check.map_or(0, |d| d.as_millis() as u64);
            assert!(
                (due - 50).is_multiple_of(1000) || due - ms == 250,
                "next check at {due} ms, from {ms} ms"
            );
        }
        ms += 100;
    }
    for (cluster, died) in deaths {
        let when = withdrawn_at.get(cluster).copied();
        let deadline = died + GRACE.as_millis() as u64;
        assert!(
            when.is_some_and(|w| w > deadline && w <= deadline + 1000),
            "{cluster}: withdrawn at {when:?} ms, its grace ran out at {deadline} ms"
        );
    }
    let moments: BTreeSet<u64> = withdrawn_at.values().copied().collect();
    assert_eq!(
        moments.len(),
        1,
        "withdrawn in one update: {withdrawn_at:?}"
    );
    // Stale (a condition's text only) on the interval's grid (10 s): in one update too, after
    // their staleness (40 s) and at most an interval later. Mutation: the 1 s grid for it
    // makes it one update per second of their deaths' spread.
    let moments: BTreeSet<u64> = stale_at.values().copied().collect();
    assert_eq!(moments.len(), 1, "stale in one update: {stale_at:?}");
    assert!(
        moments.iter().all(|m| (50_900..=60_200).contains(m)),
        "{stale_at:?}"
    );
}

#[test]
fn a_stale_cluster_beating_again_plans_its_services_and_going_stale_does_not() {
    // Mutation: planning nothing on the way back leaves "stale: c2" in statuses written while
    // it was stale, until the next full pass (the benchmark's idle writes).
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let (_, leases) = confirmed(&mut tracker, &mut hub, at(0), 0);
    let c2 = leases[1].clone();
    let mut stale = None;
    for t in [10, 20, 30, 41, 42, 50] {
        let mut leases = hub.renew(&["c1"]);
        leases.push(c2.clone());
        let view = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
        if view.liveness.stale.contains_key("c2") && stale.is_none() {
            stale = Some(t);
            assert!(touched(&view).is_empty(), "going stale: {:?}", view.touched);
        }
    }
    assert!(stale.is_some(), "c2 went stale");
    let leases = hub.renew(&["c1", "c2"]);
    let back = tracker.update(at(51), &wall(51), &leases, &hub.records, &hub.copies);
    assert!(back.liveness.stale.is_empty());
    assert_eq!(touched(&back), ["b"], "live again: its services planned");
}

#[test]
fn a_cluster_unmatched_and_matched_again_plans_all_its_services() {
    // Mutation: planning only the services whose objects changed left "unmatched: c2" in the
    // statuses of c2's other services for good (found by `make bench-scale`: a restarted
    // importer rewrote 84 statuses the running one held for current).
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    let (_, _) = confirmed(&mut tracker, &mut hub, at(0), 0);
    // c2 publishes "c" but keeps claiming only "b", beyond the grace.
    let (claimed_r, claimed_s) = hub.of("c2");
    hub.records.push(record("c2", "c"));
    let mut unmatched_at = None;
    for t in (5..=80).step_by(5) {
        let mut leases = hub.renew(&["c1"]);
        leases.push(lease(
            "c2",
            hub.version,
            Some((u64::from(hub.version), &claimed_r, &claimed_s)),
        ));
        let view = tracker.update(at(t), &wall(t), &leases, &hub.records, &hub.copies);
        if view.liveness.unmatched.contains_key("c2") && unmatched_at.is_none() {
            unmatched_at = Some(t);
            assert_eq!(
                touched(&view),
                ["b"],
                "reported unmatched: its services planned"
            );
        }
    }
    assert!(unmatched_at.is_some(), "c2 was reported unmatched");
    let leases = hub.renew(&["c1", "c2"]);
    let matched = tracker.update(at(85), &wall(85), &leases, &hub.records, &hub.copies);
    assert!(matched.liveness.unmatched.is_empty());
    assert_eq!(
        touched(&matched),
        ["b", "c"],
        "matched again: all its services planned"
    );
}

/// c2's Lease with beat counter `beat`, claiming `records` with epoch `epoch`.
fn beating(beat: u64, epoch: u64, records: &[Arc<ExportedService>]) -> Arc<Lease> {
    let mut l = Lease::default();
    l.metadata.name = Some(LEASE_NAME.into());
    l.metadata.namespace = Some("atoll-c2".into());
    let claim = Claim {
        epoch,
        digest: publication_digest(records, &[]),
    };
    l.metadata.annotations = Some(BTreeMap::from([
        (CLAIM_ANNOTATION.into(), claim.encode()),
        (atoll_api::hub::BEAT_ANNOTATION.into(), beat.to_string()),
    ]));
    Arc::new(l)
}

#[test]
fn a_claim_with_a_repeated_epoch_counts_once_its_beats_are_above_every_one_seen() {
    // The triple fault (kept block lost, hub restored, clock set back) makes a member repeat
    // epochs as well as beats. Mutation: believing only claims of a higher epoch kept the
    // service c2 stopped exporting in this importer for good (the simulation's schedule
    // 9898988215644743632).
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut tracker = Tracker::new("c1", settings());
    let c2 = |view: &View| -> Vec<String> {
        let mut names: Vec<String> = view
            .records
            .iter()
            .filter(|r| r.spec.cluster == "c2")
            .map(|r| r.spec.name.clone())
            .collect();
        names.sort();
        names
    };
    let both = vec![record("c2", "b"), record("c2", "c")];
    tracker.update(at(0), &wall(0), &[beating(10, 10, &both)], &both, &[]);
    let view = tracker.update(at(1), &wall(1), &[beating(11, 10, &both)], &both, &[]);
    assert_eq!(c2(&view), ["b", "c"]);
    let view = tracker.update(at(2), &wall(2), &[beating(12, 12, &both)], &both, &[]);
    assert_eq!(c2(&view), ["b", "c"], "epoch 12 accepted");
    // c2 restarts after the triple fault, no longer exports "c" and repeats beats and epochs.
    let only_b = vec![record("c2", "b")];
    for (t, beat) in [(3, 5), (4, 6)] {
        let view = tracker.update(at(t), &wall(t), &[beating(beat, 5, &only_b)], &only_b, &[]);
        assert_eq!(c2(&view), ["b", "c"], "repeated beats are no evidence");
    }
    // Its beats pass the highest seen: what it claims now counts, older epoch or not.
    let view = tracker.update(at(5), &wall(5), &[beating(13, 5, &only_b)], &only_b, &[]);
    assert_eq!(c2(&view), ["b"]);
    // A Lease restored from a backup afterwards (an older beat, the old claim) changes nothing.
    let view = tracker.update(at(6), &wall(6), &[beating(12, 12, &both)], &both, &[]);
    assert_eq!(c2(&view), ["b"]);
}

#[test]
fn a_silence_counts_only_while_this_view_is_known_to_be_current() {
    // Mutation: judging silences up to now withdrew c2 at 80 s, its last 20 s unseen by an
    // importer whose own Lease had stopped moving at 50 s (a partition), before blindness
    // froze every verdict (the simulation's schedule 18390326472941818663, a standby).
    let start = Instant::now();
    let at = |s: u64| start + Duration::from_secs(s);
    let mut hub = Hub::new();
    let mut tracker = Tracker::new("c1", settings());
    confirmed(&mut tracker, &mut hub, at(0), 0);
    // c2 beats last at 5 s (its grace runs out at 65 s); c1, this importer, goes on.
    let leases = hub.renew(&["c1", "c2"]);
    tracker.update(at(5), &wall(5), &leases, &hub.records, &hub.copies);
    let c2_silent = leases[1].clone();
    for t in (10..=45).step_by(5) {
        let mut now = hub.renew(&["c1"]);
        now.push(c2_silent.clone());
        tracker.update(at(t), &wall(t), &now, &hub.records, &hub.copies);
    }
    // Cut off after 50 s: neither Lease moves in this view any more; it is known current
    // until 61 s (an interval and a second later), when c2 was silent for 56 s.
    let frozen = [hub.renew(&["c1"]).remove(0), c2_silent];
    for t in [50, 65, 80] {
        let view = tracker.update(at(t), &wall(t), &frozen, &hub.records, &hub.copies);
        assert!(
            !view.liveness.withdrawn.contains_key("c2"),
            "c2 withdrawn at {t} s"
        );
    }
}
