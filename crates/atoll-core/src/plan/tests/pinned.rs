//! A pinned source (an importer that cannot judge its hub objects yet) leaves the services it
//! takes part in exactly as they are.

use super::*;

#[test]
fn a_pinned_source_leaves_its_services_as_they_are_until_it_is_judged() {
    let mut world = World::new("c1");
    let svc = service("hello", TCP42, &["IPv4"]);
    let other = service("other", TCP42, &["IPv4"]);
    for cluster in ["c2", "c3"] {
        upsert(
            &mut world.observed.records,
            remote_record(cluster, "hello", 0, &svc),
            |r| &r.metadata,
        );
    }
    upsert(
        &mut world.observed.records,
        remote_record("c2", "other", 0, &other),
        |r| &r.metadata,
    );
    world.converge();
    let before = world.observed.clone();

    // c3's records are gone from the hub (wiped) and the importer, just started, cannot tell
    // whether that is what c3 claims: c3 is pinned. Nothing of "hello" changes.
    world.observed.records.retain(|r| r.spec.cluster != "c3");
    world.observed.liveness.pinned.insert("c3".to_owned());
    let plan = world.plan();
    assert_eq!(plan.writes(), 0, "{plan:#?}");
    // A change to a service c3 has no part in goes through.
    world
        .observed
        .records
        .retain(|r| !(r.spec.cluster == "c2" && r.spec.name == "other"));
    let plan = world.plan();
    let deleted: Vec<&str> = plan
        .member
        .delete_imports
        .iter()
        .map(|k| k.name.as_str())
        .collect();
    assert_eq!(deleted, ["other"], "{plan:#?}");
    assert!(
        plan.member
            .delete_slices
            .iter()
            .all(|k| k.name.starts_with("other"))
    );

    // Judged (the pin ends, c3 publishes nothing): only now does "hello" lose c3.
    world.observed.liveness.pinned.clear();
    world.step();
    let clusters: Vec<String> = world
        .import("hello")
        .and_then(|i| i.status.as_ref())
        .map(|s| s.clusters.iter().map(|c| c.cluster.clone()).collect())
        .unwrap_or_default();
    assert_eq!(clusters, ["c2"]);
    assert!(before.imports.len() >= 2);
}
