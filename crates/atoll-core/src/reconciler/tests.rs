//! The reconciler's decisions step by step, without an apiserver.

use std::collections::BTreeMap;

use atoll_api::hub::{ExportedService, LEASE_NAME};
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::ClusterId;

const INTERVAL: Duration = Duration::from_secs(2);
const GRACE: Duration = Duration::from_secs(12);

fn wall(seconds: u64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds as i64).unwrap_or(Timestamp::UNIX_EPOCH))
}

fn config(id: &str) -> Config {
    Config::new(
        Member::new(ClusterId::new(id).unwrap_or_else(|_| panic!("{id}"))),
        liveness::Settings::new(INTERVAL, GRACE),
    )
}

fn service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some("demo".into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ips: Some(vec!["10.0.0.1".into()]),
            ip_families: Some(vec!["IPv4".into()]),
            ports: Some(vec![ServicePort {
                name: Some("tcp".into()),
                port: 42,
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

fn record(cluster: &str, name: &str) -> Arc<ExportedService> {
    let mut export = atoll_api::v1beta1::ServiceExport::new(name, None);
    export.metadata.namespace = Some("demo".into());
    export.metadata.creation_timestamp = Some(wall(0));
    Arc::new(crate::export::record(cluster, &export, &service(name)))
}

fn observed(records: Vec<Arc<ExportedService>>) -> Observed {
    Observed {
        namespaces: vec![Arc::new(Namespace {
            metadata: ObjectMeta {
                name: Some("demo".into()),
                ..Default::default()
            },
            ..Default::default()
        })],
        records,
        ..Default::default()
    }
}

fn beat_lease(cluster: &str, beat: u64) -> Arc<Lease> {
    let mut l = Lease::default();
    l.metadata.name = Some(LEASE_NAME.into());
    l.metadata.namespace = Some(atoll_api::hub::namespace_for(cluster));
    l.metadata.annotations = Some(BTreeMap::from([(
        atoll_api::hub::BEAT_ANNOTATION.into(),
        beat.to_string(),
    )]));
    Arc::new(l)
}

fn tick(start: Instant, seconds: u64, leading: bool) -> Tick {
    Tick {
        now: start + Duration::from_secs(seconds),
        wall: wall(seconds),
        leading,
    }
}

#[test]
fn a_standby_plans_but_carries_no_write_and_a_new_leader_covers_everything() {
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    // The stores hand out the same object until it changes.
    let records = vec![record("c2", "a")];
    let leases = |beat: u64| [beat_lease("c1", beat), beat_lease("c2", beat)];
    let step = r.step(
        &tick(start, 0, false),
        observed(records.clone()),
        &leases(1),
    );
    assert!(!step.lead && step.renewal.is_none() && step.keep.is_none());
    assert!(step.scope.is_none(), "the first step covers everything");
    assert!(
        step.liveness.pinned.contains("c2"),
        "not seen to beat yet: {:?}",
        step.liveness
    );
    let step = r.step(
        &tick(start, 1, false),
        observed(records.clone()),
        &leases(1),
    );
    assert_eq!(
        step.scope,
        Some(BTreeSet::new()),
        "nothing marked: nothing to plan"
    );
    let step = r.step(&tick(start, 2, true), observed(records), &leases(2));
    assert!(
        step.lead && step.scope.is_none(),
        "leadership gained: everything"
    );
    assert!(step.liveness.pinned.is_empty(), "both seen to beat");
    assert!(step.plan.writes() > 0);
    // The term renews at once; it keeps nothing before it has read what its predecessor
    // kept (a write now could overwrite decisions it never saw).
    let renewal = step
        .renewal
        .expect("the leader renews the heartbeat at once");
    assert!(step.keep.is_none());
    assert_eq!(step.keeping, Keeping::Unread);
    r.outcome(
        Outcome {
            renewal: Some(true),
            ..Default::default()
        },
        start + Duration::from_secs(2),
    );
    r.kept_read(KeptRead::Absent);
    let step = r.step(
        &tick(start, 3, true),
        observed(vec![record("c2", "a")]),
        &leases(3),
    );
    // Then it keeps its block of beats, the one the renewal came from.
    let reserved = step.keep.as_ref().map_or(0, |k| k.reserved);
    assert!(renewal.beat + super::heartbeat::BLOCK > reserved && renewal.beat <= reserved);
}

#[test]
fn a_refused_keep_write_stops_no_renewal() {
    // The member's ConfigMap refuses every write (an admission policy): renewals go on every
    // interval, keeping is retried with a growing delay and reported. A renewal that waits
    // for the keep write (the defect this replaces) fails this test.
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let mut renewals = 0;
    let mut keeps = 0;
    for s in 0..30 {
        let step = r.step(
            &tick(start, s, true),
            observed(vec![]),
            &[beat_lease("c1", s + 1)],
        );
        renewals += usize::from(step.renewal.is_some());
        keeps += usize::from(step.keep.is_some());
        r.outcome(
            Outcome {
                renewal: step.renewal.as_ref().map(|_| true),
                kept: step
                    .keep
                    .as_ref()
                    .map(|_| Err("denied by policy".to_owned())),
                ..Default::default()
            },
            start + Duration::from_secs(s),
        );
    }
    assert_eq!(renewals, 15, "one per 2 s interval");
    assert!(
        (3..=8).contains(&keeps),
        "retried with a growing delay: {keeps}"
    );
    assert!(
        matches!(r.keeping(), Keeping::Failing { failures, .. } if failures as usize == keeps),
        "{:?}",
        r.keeping()
    );
}

#[test]
fn a_restarted_agent_continues_from_the_kept_decisions() {
    let start = Instant::now();
    let mut first = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let records = vec![record("c2", "a")];
    first.step(
        &tick(start, 0, true),
        observed(records.clone()),
        &[beat_lease("c1", 1), beat_lease("c2", 1)],
    );
    first.outcome(
        Outcome {
            renewal: Some(true),
            kept: Some(Ok(())),
            ..Default::default()
        },
        start,
    );
    // c2 goes silent; c1 keeps beating. After the grace c2 is withdrawn, and that is kept.
    let mut kept = None;
    for s in (2..=16).step_by(2) {
        let step = first.step(
            &tick(start, s, true),
            observed(records.clone()),
            &[beat_lease("c1", 1 + s), beat_lease("c2", 1)],
        );
        if step.keep.is_some() {
            kept = step.keep.clone();
        }
        first.outcome(
            Outcome {
                renewal: Some(true),
                kept: step.keep.as_ref().map(|_| Ok(())),
                ..Default::default()
            },
            start + Duration::from_secs(s),
        );
    }
    let kept = kept.expect("the withdrawal is kept");
    let kept_before = kept.clone();
    assert_eq!(
        kept.sources["c2"].standing,
        Some(liveness::Standing::Withdrawn)
    );

    // A new process starts from it: c2 stays withdrawn.
    let restart = start + Duration::from_secs(20);
    let mut second = Reconciler::new(config("c1"), KeptRead::Found(kept), restart, &wall(20));
    let step = second.step(
        &Tick {
            now: restart,
            wall: wall(20),
            leading: true,
        },
        observed(records),
        &[beat_lease("c1", 30), beat_lease("c2", 1)],
    );
    assert!(step.liveness.withdrawn.contains_key("c2"));
    assert!(
        step.plan.member.apply_imports.is_empty(),
        "{:?}",
        step.plan.member.apply_imports
    );
    // What is kept is still true; the new term only adds its own block of beats, above the
    // last one.
    let keep = step.keep.expect("the new term reserves its beats");
    assert_eq!(keep.sources, kept_before.sources);
    assert!(keep.reserved > kept_before.reserved);
}

#[test]
fn failed_writes_are_retried_on_their_own_schedule_and_change_the_next_plan_at_once() {
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let step = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(step.scope.is_none());
    let key = ServiceKey::new("demo", "a");
    let mut feedback = Feedback::default();
    feedback.publish_failures.insert(
        key.clone(),
        crate::plan::Refusal {
            code: 403,
            message: "quota".into(),
        },
    );
    r.outcome(
        Outcome {
            feedback,
            errors: 1,
            ..Default::default()
        },
        start,
    );
    assert!(r.ready(), "a new failure is planned again at once");
    assert!(r.next_wake(start).is_some());
}

#[test]
fn idle_steps_write_nothing_but_the_heartbeat() {
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let mut writes = Vec::new();
    for s in 0..10 {
        let step = r.step(
            &tick(start, s, true),
            observed(vec![]),
            &[beat_lease("c1", s + 1)],
        );
        writes.push((
            step.plan.writes(),
            step.renewal.is_some(),
            step.keep.is_some(),
        ));
        r.outcome(
            Outcome {
                renewal: step.renewal.as_ref().map(|_| true),
                kept: step.keep.as_ref().map(|_| Ok(())),
                ..Default::default()
            },
            start + Duration::from_secs(s),
        );
    }
    // The first step renews and keeps the term's block of beats (and the accepted epochs);
    // after that, nothing but a renewal per interval.
    assert_eq!(writes[0], (0, true, true), "{writes:?}");
    assert!(
        writes[1..].iter().all(|(w, _, k)| *w == 0 && !k),
        "{writes:?}"
    );
    let renewals = writes.iter().filter(|(_, h, _)| *h).count();
    assert_eq!(
        renewals, 5,
        "one renewal per 2 s interval from 0 s to 10 s: {writes:?}"
    );
}

#[test]
fn a_change_of_the_members_node_addresses_covers_every_service() {
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let records = vec![record("c2", "a"), record("c2", "b")];
    let with_nodes = |nodes: &[(&str, &str)]| Observed {
        node_addresses: nodes
            .iter()
            .map(|(ip, node)| {
                (
                    ip.parse().unwrap_or_else(|_| panic!("{ip}")),
                    (*node).to_owned(),
                )
            })
            .collect(),
        ..observed(records.clone())
    };
    let step = r.step(&tick(start, 0, false), with_nodes(&[]), &[]);
    assert!(step.scope.is_none(), "the first step covers everything");
    let step = r.step(&tick(start, 1, false), with_nodes(&[]), &[]);
    assert_eq!(step.scope, Some(BTreeSet::new()), "nothing changed");
    let step = r.step(
        &tick(start, 2, false),
        with_nodes(&[("172.18.0.3", "n1")]),
        &[],
    );
    assert!(step.scope.is_none(), "a new Node address: every service");
    let step = r.step(
        &tick(start, 3, false),
        with_nodes(&[("172.18.0.3", "n1")]),
        &[],
    );
    assert_eq!(
        step.scope,
        Some(BTreeSet::new()),
        "the same addresses again"
    );
    let step = r.step(&tick(start, 4, false), with_nodes(&[]), &[]);
    assert!(step.scope.is_none(), "an address gone: every service");
}

/// An MCS slice Atoll wrote in "demo" for `service` from `source`.
fn mcs_slice(service: &str, source: &str) -> Arc<atoll_api::mcs_slice::McsSlice> {
    mcs_slice_of(Some(service), service, source)
}

/// An MCS slice named for `name` from `source`, labelled with `service` if any.
fn mcs_slice_of(
    service: Option<&str>,
    name: &str,
    source: &str,
) -> Arc<atoll_api::mcs_slice::McsSlice> {
    use atoll_api::labels;
    let mut labels = BTreeMap::from([
        (
            labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
            labels::ATOLL_ENDPOINTSLICE_MANAGER.to_owned(),
        ),
        (labels::SOURCE_CLUSTER.to_owned(), source.to_owned()),
    ]);
    if let Some(service) = service {
        labels.insert(labels::SERVICE_NAME.to_owned(), service.to_owned());
    }
    let slice = k8s_openapi::api::discovery::v1::EndpointSlice {
        metadata: ObjectMeta {
            namespace: Some("demo".into()),
            name: Some(format!("{name}-{source}-ipv4")),
            labels: Some(labels),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: Vec::new(),
        ports: None,
    };
    Arc::new((&slice).into())
}

#[test]
fn a_scoped_step_collects_slice_deletions_only_from_every_slice_held() {
    // c2 and c3 export s0..s9 (with no endpoints on the hub: no slice is wanted, every one held
    // goes). c2's beat stops; withdrawn after the grace, a step over its ten services deletes
    // c2's and c3's slices of them (a withdrawal brings every service holding a slice of c2
    // into the step). A slice of c2 that names no service (so no step looks at it) holds the
    // labels a collection selects by, so a collection would take it too: c2's deletions stay
    // named. Planning the collection from the scope's slices (a mutation of `step`) fails this
    // test; c3 is not withdrawn, so its deletions are never collected.
    let start = Instant::now();
    let names: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
    let world = |outside: bool| {
        let mut slices: Vec<_> = names
            .iter()
            .flat_map(|n| [mcs_slice(n, "c2"), mcs_slice(n, "c3")])
            .collect();
        if outside {
            // Atoll's labels and c2's, but no service's: no step looks at it.
            slices.push(mcs_slice_of(None, "outside", "c2"));
        }
        let records = ["c2", "c3"]
            .iter()
            .flat_map(|c| names.iter().map(move |n| record(c, n)))
            .collect();
        Observed {
            mcs_slices: slices,
            ..observed(records)
        }
    };
    // This member's own beat moves too: an importer that cannot see its own withdraws nothing.
    // c2 beats once (so this importer has seen it alive) and stops.
    let leases = |seconds: u64| {
        [
            beat_lease("c1", seconds + 1),
            beat_lease("c2", seconds.min(1) + 1),
            beat_lease("c3", seconds + 1),
        ]
    };
    let keys = |source: &str| -> Vec<atoll_api::keys::ObjectKey> {
        names
            .iter()
            .map(|n| atoll_api::keys::ObjectKey::new("demo", &format!("{n}-{source}-ipv4")))
            .collect()
    };
    let withdrawal_step = |outside: bool| {
        let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
        let step = r.step(&tick(start, 0, false), world(outside), &leases(0));
        assert!(step.scope.is_none(), "the first step covers everything");
        r.step(&tick(start, 1, false), world(outside), &leases(1));
        let later = GRACE.as_secs() + 8;
        let step = r.step(&tick(start, later, false), world(outside), &leases(later));
        assert!(
            step.liveness.withdrawn.contains_key("c2"),
            "{:?}",
            step.liveness
        );
        let scope: BTreeSet<ServiceKey> =
            names.iter().map(|n| ServiceKey::new("demo", n)).collect();
        assert_eq!(step.scope, Some(scope));
        step.plan.member
    };

    let member = withdrawal_step(true);
    assert_eq!(member.delete_slice_collections, [], "{member:#?}");
    let named: BTreeSet<_> = member.delete_slices.iter().cloned().collect();
    assert_eq!(
        named,
        [keys("c2"), keys("c3")].concat().into_iter().collect()
    );

    // Without that slice, the same step's deletions are every c2 slice in "demo": one
    // collection.
    let member = withdrawal_step(false);
    assert_eq!(
        member.delete_slice_collections,
        [crate::plan::SliceCollection {
            namespace: "demo".into(),
            source_clusters: vec!["c2".into()],
            slices: keys("c2"),
        }],
        "{member:#?}"
    );
    assert_eq!(member.delete_slices, keys("c3"));
}

#[test]
fn a_withdrawal_takes_a_clusters_slices_out_of_services_the_hub_no_longer_names_for_it() {
    // c2 exported s0 and "wiped" (its record for "wiped" gone from the hub: a wipe, a restore);
    // this importer still holds c2's slices of both. When c2 is withdrawn, the step covers
    // every service holding a slice of c2 and deletes both. Without that (found by the fault
    // simulation, schedule 5790425083526546775) the slice of "wiped" stayed until something
    // else marked its service.
    let start = Instant::now();
    let world = || Observed {
        mcs_slices: vec![mcs_slice("s0", "c2"), mcs_slice("wiped", "c2")],
        ..observed(vec![record("c2", "s0")])
    };
    let leases = |seconds: u64| {
        [
            beat_lease("c1", seconds + 1),
            beat_lease("c2", seconds.min(1) + 1),
        ]
    };
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    r.step(&tick(start, 0, false), world(), &leases(0));
    r.step(&tick(start, 1, false), world(), &leases(1));
    let later = GRACE.as_secs() + 8;
    let step = r.step(&tick(start, later, false), world(), &leases(later));
    assert!(step.liveness.withdrawn.contains_key("c2"));
    let deleted: BTreeSet<String> = step
        .plan
        .member
        .delete_slices
        .iter()
        .map(|k| k.name.clone())
        .chain(
            step.plan
                .member
                .delete_slice_collections
                .iter()
                .flat_map(|c| c.slices.iter().map(|k| k.name.clone())),
        )
        .collect();
    assert_eq!(
        deleted,
        BTreeSet::from(["s0-c2-ipv4".to_owned(), "wiped-c2-ipv4".to_owned()])
    );
}

#[test]
fn a_member_whose_export_watch_has_not_listed_claims_what_the_hub_holds_and_plans_nothing() {
    // c1's ServiceExport CRD is not served (an upgrade, version skew): its exports store is
    // empty, not known to be. Planning from it would delete c1's records and claim nothing,
    // and every importer would drop c1's exports (a peer's real incident). Held, it plans
    // nothing and its heartbeat claims what the hub holds. Without `unlisted` (the mutation
    // that reintroduces it) the same step deletes the record.
    let start = Instant::now();
    let own = record("c1", "a");
    let world = |unlisted: Vec<&'static str>| Observed {
        unlisted,
        ..observed(vec![own.clone()])
    };
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let step = r.step(
        &tick(start, 0, true),
        world(vec!["ServiceExports"]),
        &[beat_lease("c1", 1)],
    );
    assert_eq!(step.plan.writes(), 0, "{:?}", step.plan.hub);
    let renewal = step.renewal.expect("the heartbeat goes on");
    assert_eq!(
        renewal.claim.digest,
        liveness::publication_digest(std::slice::from_ref(&own), &[])
    );
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let step = r.step(&tick(start, 0, true), world(vec![]), &[beat_lease("c1", 1)]);
    assert_eq!(
        step.plan.hub.delete_records.len(),
        1,
        "listed: the export is gone"
    );
}

#[test]
fn a_withdrawn_cluster_that_leaves_the_hub_is_forgotten_not_restored() {
    // c2 is withdrawn, then its hub namespace goes (Lease and records): the step reports it
    // forgotten. Before, it was logged and counted as "restoring: its heartbeat moves again".
    let start = Instant::now();
    let leases = |seconds: u64, c2: bool| {
        let mut leases = vec![beat_lease("c1", seconds + 1)];
        if c2 {
            leases.push(beat_lease("c2", seconds.min(1) + 1));
        }
        leases
    };
    let with_c2 = || observed(vec![record("c2", "s0")]);
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    r.step(&tick(start, 0, false), with_c2(), &leases(0, true));
    r.step(&tick(start, 1, false), with_c2(), &leases(1, true));
    let later = GRACE.as_secs() + 8;
    let step = r.step(&tick(start, later, false), with_c2(), &leases(later, true));
    assert_eq!(step.news.withdrawn, ["c2"]);
    // The step that sees it gone still judges it once; the next no longer does.
    let (mut restored, mut forgotten) = (Vec::new(), Vec::new());
    for s in 1..=2 {
        let step = r.step(
            &tick(start, later + s, false),
            observed(Vec::new()),
            &leases(later + s, false),
        );
        restored.extend(step.news.restored);
        forgotten.extend(step.news.forgotten);
    }
    assert_eq!(restored, Vec::<String>::new());
    assert_eq!(forgotten, ["c2"]);
}

#[test]
fn refused_events_and_the_last_error_are_carried_by_later_leading_steps() {
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let step = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(step.events_again.is_empty() && step.last_error.is_empty());
    let refused = crate::events::Event {
        about: crate::events::About::Import(atoll_api::keys::ObjectKey::new("demo", "a")),
        announcement: crate::announce::Announcement {
            warning: false,
            reason: "SourceClusterRestored".into(),
            note: "c2 is back".into(),
            action: "Import",
        },
    };
    r.outcome(
        Outcome {
            events_published: true,
            unpublished: vec![refused.clone()],
            last_error: Some("Slice: refused 503".into()),
            ..Default::default()
        },
        start,
    );
    // Mutation: a reconciler that drops refused Events (or never carries them) fails here.
    let soon = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(soon.events_again.is_empty(), "not before the retry delay");
    r.outcome(Outcome::default(), start);
    let later = r.step(&tick(start, 2, true), observed(vec![]), &[]);
    assert_eq!(later.events_again, [refused]);
    assert!(
        later.last_error.ends_with(" Slice: refused 503"),
        "{}",
        later.last_error
    );
}

#[test]
fn retries_are_expedited_once_a_pass_writes_everything_after_unanswered_writes() {
    // Mutation: without the expedite, the full pass waits for its retry delay.
    let start = Instant::now();
    let mut r = Reconciler::new(config("c1"), KeptRead::Absent, start, &wall(0));
    let full = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(full.scope.is_none());
    r.outcome(
        Outcome {
            errors: 1,
            writes: 1,
            unanswered: 1,
            ..Default::default()
        },
        start,
    );
    let waiting = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(
        waiting.scope.is_some(),
        "the failed full pass waits for its delay"
    );
    // The apiserver answers again: a pass writes everything; what failed is due now.
    r.outcome(
        Outcome {
            writes: 3,
            ..Default::default()
        },
        start,
    );
    let retried = r.step(&tick(start, 0, true), observed(vec![]), &[]);
    assert!(retried.scope.is_none(), "the full pass is retried at once");
}
