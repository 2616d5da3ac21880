//! KEP-5939 on the import side: the clusters an importer uses follow its own properties, the
//! exporters' properties (their ClusterProfiles) and their serving endpoints; inactive
//! clusters' MCS slices are marked and hidden from kube-proxy.

use super::*;
use crate::selection::{ACTIVE_LABEL, SAME_AS_IMPORTER};

const REGIONAL: &str = r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#;

fn property(name: &str, value: &str) -> Arc<atoll_api::about::v1beta1::ClusterProperty> {
    Arc::new(atoll_api::about::v1beta1::ClusterProperty::new(
        name,
        Some(atoll_api::about::ClusterPropertySpec {
            value: value.into(),
        }),
    ))
}

fn profile(cluster: &str, region: &str) -> Arc<atoll_api::inventory::ClusterProfile> {
    let mut p = atoll_api::inventory::ClusterProfile::new(cluster, Default::default());
    p.metadata.namespace = Some("atoll-inventory".into());
    p.status = Some(atoll_api::inventory::ClusterProfileStatus {
        properties: vec![atoll_api::inventory::Property {
            name: "region".into(),
            value: region.into(),
            last_observed_time: None,
        }],
        ..Default::default()
    });
    Arc::new(p)
}

/// Importer c1 in region `a`; c2 (region `a`) and c3 (region `b`) export `hello` with
/// `selectors`, each with one endpoint, ready or not.
fn regional_world(selectors: &str, c2_ready: bool) -> World {
    let mut world = World::new("c1");
    world.observed.properties = vec![property("region", "a")];
    world.observed.profiles = vec![profile("c1", "a"), profile("c2", "a"), profile("c3", "b")];
    let svc = service("hello", TCP42, &["IPv4"]);
    for (index, cluster) in ["c2", "c3"].into_iter().enumerate() {
        let created = i64::try_from(index).unwrap_or_default();
        let mut record = remote_record(cluster, "hello", created, &svc);
        record.spec.cluster_selectors = serde_json::from_str(selectors).unwrap();
        upsert(&mut world.observed.records, record, |r| &r.metadata);
        let mut local = local_slice("hello", &[&format!("10.9.{index}.1")], TCP42);
        if cluster == "c2" && !c2_ready {
            local.endpoints[0].conditions = Some(EndpointConditions {
                ready: Some(false),
                serving: Some(false),
                terminating: None,
            });
        }
        let copy = crate::export::hub_slice(cluster, NS, "hello", &local);
        upsert(&mut world.observed.hub_slices, copy, |c| &c.metadata);
    }
    world
}

/// `(source cluster, active label, kube-proxy's service-name label present)` of every MCS slice.
fn marks(world: &World) -> Vec<(String, Option<String>, bool)> {
    let mut out: Vec<_> = world
        .observed
        .mcs_slices
        .iter()
        .map(|s| {
            let l = s.metadata().labels.unwrap_or_default();
            (
                l[labels::SOURCE_CLUSTER].clone(),
                l.get(ACTIVE_LABEL).cloned(),
                l.contains_key(labels::KUBERNETES_SERVICE_NAME),
            )
        })
        .collect();
    out.sort();
    out
}

fn mark(cluster: &str, active: bool) -> (String, Option<String>, bool) {
    (cluster.into(), Some(active.to_string()), active)
}

#[test]
fn the_importers_region_is_used_while_it_serves_and_the_rest_when_it_does_not() {
    let mut world = regional_world(REGIONAL, true);
    world.converge();
    assert_eq!(marks(&world), [mark("c2", true), mark("c3", false)]);
    // An inactive slice has a name of its own: a cluster changing sides is a delete (which
    // kube-proxy honours) and a create, never a relabelling kube-proxy would ignore.
    let mut slice_names = slice_names_of(&world);
    slice_names.sort();
    assert_eq!(
        slice_names,
        ["demo/hello.c2.ipv4.0", "demo/hello.c3.ipv4.0.inactive"]
    );
    let plan = world.plan();
    assert_eq!(plan.writes(), 0, "settled: {plan:#?}");
    let selection = &plan.report.selections[&ServiceKey::new(NS, "hello")];
    assert_eq!(selection.decided_by, Some(0));
    assert_eq!(
        selection.active,
        std::collections::BTreeSet::from(["c2".to_owned()])
    );

    // c2's only endpoint goes not ready: no selector picks a cluster that serves, so every
    // cluster is active; exactly the two slices are rewritten.
    let mut failed = regional_world(REGIONAL, false);
    failed.observed.mcs_slices = world.observed.mcs_slices.clone();
    failed.observed.imports = world.observed.imports.clone();
    failed.observed.services = world.observed.services.clone();
    let plan = failed.plan();
    let rewritten: Vec<String> = plan
        .member
        .apply_slices
        .iter()
        .map(|s| s.metadata.labels.as_ref().unwrap()[labels::SOURCE_CLUSTER].clone())
        .collect();
    assert_eq!(rewritten, ["c2", "c3"]);
    assert_eq!(plan.writes(), 2, "{plan:#?}");
    failed.converge();
    assert_eq!(marks(&failed), [mark("c2", true), mark("c3", true)]);
    let mut slice_names = slice_names_of(&failed);
    slice_names.sort();
    assert_eq!(
        slice_names,
        ["demo/hello.c2.ipv4.0", "demo/hello.c3.ipv4.0"],
        "the inactive slice is gone once its active successor is observed"
    );
    assert_eq!(
        failed.plan().report.selections[&ServiceKey::new(NS, "hello")].decided_by,
        None
    );
}

#[test]
fn a_withdrawn_or_unexporting_cluster_is_no_candidate() {
    let mut world = regional_world(REGIONAL, true);
    world.converge();
    // c2 stops exporting (or is withdrawn: its records leave the import side's sources).
    world.observed.records.retain(|r| r.spec.cluster != "c2");
    world.converge();
    assert_eq!(marks(&world), [mark("c3", true)]);
}

#[test]
fn without_selectors_slices_are_unmarked_and_an_invalid_list_counts_as_none() {
    let mut world = regional_world("[]", true);
    world.converge();
    let unmarked = |w: &World| {
        w.observed
            .mcs_slices
            .iter()
            .all(|s| s.label(ACTIVE_LABEL).is_none())
    };
    assert!(unmarked(&world));
    assert!(world.plan().report.selections.is_empty());

    // A member that bypassed its own validation: importers check the list again.
    let bad = format!(
        r#"[{{"propertySelector":{{"matchExpressions":[{{"key":"region","operator":"Near","values":["{SAME_AS_IMPORTER}"]}}]}}}}]"#
    );
    let mut world = regional_world(&bad, true);
    world.converge();
    assert!(unmarked(&world));
    assert_eq!(world.observed.mcs_slices.len(), 2);
}

#[test]
fn an_importer_in_another_region_uses_its_own() {
    let mut world = regional_world(REGIONAL, true);
    world.observed.properties = vec![property("region", "b")];
    world.converge();
    assert_eq!(marks(&world), [mark("c2", false), mark("c3", true)]);
    // Its region changes: the selection follows at the next pass.
    world.observed.properties = vec![property("region", "a")];
    world.converge();
    assert_eq!(marks(&world), [mark("c2", true), mark("c3", false)]);
}

/// `namespace/name` of every MCS slice `world` holds.
fn slice_names_of(world: &World) -> Vec<String> {
    world
        .observed
        .mcs_slices
        .iter()
        .map(|s| s.key().to_string())
        .collect()
}
