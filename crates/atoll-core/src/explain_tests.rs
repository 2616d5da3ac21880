use serde_json::json;

use super::*;

fn record(cluster: &str, port: i32, created: &str) -> ExportedService {
    serde_json::from_value(json!({
        "apiVersion": "hub.atoll.dev/v1alpha1", "kind": "ExportedService",
        "metadata": { "name": "shop.web", "namespace": format!("atoll-{cluster}") },
        "spec": { "cluster": cluster, "namespace": "shop", "name": "web", "exportCreated": created,
                  "type": "ClusterSetIP", "ports": [{"name": "http", "protocol": "TCP", "port": port}],
                  "ipFamilies": ["IPv4"] }
    }))
    .unwrap()
}

fn export(valid: (&str, &str)) -> ServiceExport {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "shop" },
        "status": { "conditions": [{ "type": "Valid", "status": valid.0, "reason": valid.1,
                    "message": "m", "lastTransitionTime": "2026-01-01T00:00:00Z" }] }
    }))
    .unwrap()
}

fn import(ready: bool) -> ServiceImport {
    serde_json::from_value(json!({
        "metadata": { "name": "web", "namespace": "shop" },
        "spec": { "type": "ClusterSetIP", "ips": ["10.101.0.9"], "ports": [] },
        "status": { "clusters": [{"cluster": "c2"}], "conditions": [
            { "type": "Ready", "status": if ready { "True" } else { "False" }, "reason": if ready { "Ready" } else { "Pending" },
              "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z" },
            { "type": "hub.atoll.dev/SourceClusters", "status": "True", "reason": "AllLive",
              "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z" }] }
    }))
    .unwrap()
}

fn slice() -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": { "name": "web.c2.ipv4.0", "namespace": "shop" },
        "addressType": "IPv4",
        "endpoints": [{ "addresses": ["10.202.0.5"], "conditions": { "ready": true } }]
    }))
    .unwrap()
}

/// A healthy service exported by c2, seen from c3.
fn healthy() -> Facts {
    Facts {
        namespace: "shop".into(),
        name: "web".into(),
        member: "c3".into(),
        members: vec![MemberView {
            cluster: "c2".into(),
            service: Some(Service::default()),
            export: Some(export(("True", "Valid"))),
        }],
        records: vec![record("c2", 80, "2026-01-01T00:00:00Z")],
        leases: ["c2".to_owned()].into(),
        kept: None,
        policy: NamespacePolicySpec::default(),
        namespace_exists: true,
        import: Some(import(true)),
        slices: vec![slice()],
        dns: Some(("NOERROR".into(), vec!["10.101.0.9".parse().unwrap()])),
        properties: Default::default(),
    }
}

fn first_broken(f: &Facts) -> Option<Hop> {
    explain(f).into_iter().find(|h| !h.ok)
}

#[test]
fn a_healthy_service_has_no_broken_hop_and_ends_with_its_dns_answer() {
    let hops = explain(&healthy());
    assert!(hops.iter().all(|h| h.ok), "{hops:#?}");
    assert_eq!(hops.last().unwrap().name, "DNS");
    assert!(hops.last().unwrap().detail.contains("10.101.0.9"));
}

#[test]
fn a_missing_namespace_in_the_importer_is_named_with_the_command_to_fix_it() {
    let mut f = healthy();
    f.namespace_exists = false;
    f.import = None;
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "namespace in c3");
    assert_eq!(hop.detail, "namespace shop does not exist in c3");
    assert!(hop.fix.unwrap().contains("kubectl create namespace shop"));
}

#[test]
fn an_invalid_export_is_named_first() {
    let mut f = healthy();
    f.members[0].export = Some(export(("False", "NoService")));
    f.members[0].service = None;
    f.records.clear();
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "export in c2");
    assert!(hop.detail.contains("NoService"));
    assert_eq!(
        hop.fix.as_deref(),
        Some("create the Service shop/web in c2")
    );
}

#[test]
fn a_conflict_is_named_with_the_winner() {
    let mut f = healthy();
    f.records.push(record("c1", 8080, "2025-01-01T00:00:00Z"));
    f.leases.insert("c1".into());
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "merge");
    assert!(hop.detail.starts_with("PortConflict"), "{}", hop.detail);
    assert!(
        hop.detail.contains("from cluster c1, wins"),
        "{}",
        hop.detail
    );
}

fn kept(cluster: &str, source: crate::liveness::PersistedSource) -> crate::liveness::Persisted {
    crate::liveness::Persisted {
        format: 1,
        reserved: 0,
        sources: [(cluster.to_owned(), source)].into(),
    }
}

fn at(rfc3339: &str) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    serde_json::from_value(serde_json::json!(rfc3339)).unwrap()
}

#[test]
fn a_withdrawn_source_cluster_is_named_as_the_agent_judged_it() {
    let mut f = healthy();
    f.kept = Some(kept(
        "c2",
        crate::liveness::PersistedSource {
            standing: Some(crate::liveness::Standing::Withdrawn),
            since: Some(at("2026-12-03T10:00:00Z")),
            ..Default::default()
        },
    ));
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "source cluster c2");
    assert_eq!(
        hop.detail,
        "c2 withdrawn by the agent of c3: no heartbeat within its grace (heartbeat last seen moving at 2026-12-03T10:00:00Z)"
    );
}

#[test]
fn an_unmatched_claim_is_named_with_where_to_look() {
    let mut f = healthy();
    f.kept = Some(kept(
        "c2",
        crate::liveness::PersistedSource {
            unmatched: Some(at("2026-12-03T10:00:00Z")),
            accepted_epoch: 4,
            ..Default::default()
        },
    ));
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "source cluster c2");
    assert!(
        hop.detail
            .contains("have not matched what it claims since 2026-12-03T10:00:00Z"),
        "{}",
        hop.detail
    );
    assert!(
        hop.fix
            .unwrap()
            .contains("atoll_agent_unpublishable_objects")
    );
}

#[test]
fn a_live_source_is_what_the_agent_says_never_a_lease_age() {
    // A member whose clock is far behind (its renewTime an hour old) is live if the agent
    // judges it so: explain reads no remote clock.
    let f = healthy();
    let hops = explain(&f);
    let hop = hops.iter().find(|h| h.name == "source cluster c2").unwrap();
    assert_eq!(hop.detail, "live, as the agent of c3 judges it");
}

#[test]
fn a_service_nobody_exports_says_where_to_export_it() {
    let mut f = healthy();
    f.records.clear();
    f.members[0].export = None;
    let hop = first_broken(&f).unwrap();
    assert_eq!(hop.name, "exports");
    assert_eq!(
        hop.fix.as_deref(),
        Some("create a ServiceExport shop/web next to the Service in c2")
    );
}

#[test]
fn a_dns_answer_without_the_vip_is_broken() {
    let mut f = healthy();
    f.dns = Some(("NXDOMAIN".into(), Vec::new()));
    assert_eq!(first_broken(&f).unwrap().name, "DNS");
}

/// c3 (region b) imports `web` from c2 (region a) and c4 (region b) with a regional selector;
/// each cluster's slice is marked `active` as given.
fn regional(c4_serving: bool, marks: (&str, &str)) -> Facts {
    let mut f = healthy();
    let mut import = import(true);
    import.metadata.annotations = Some(
        [(
            crate::selection::SELECTORS_ANNOTATION.to_owned(),
            r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#.to_owned(),
        )]
        .into(),
    );
    f.import = Some(import);
    let slice_of = |cluster: &str, active: &str, ready: bool| -> EndpointSlice {
        serde_json::from_value(json!({
            "metadata": { "name": format!("web.{cluster}.ipv4.0"), "namespace": "shop",
                          "labels": { "multicluster.kubernetes.io/service-name": "web",
                                      "multicluster.kubernetes.io/source-cluster": cluster,
                                      "multicluster.kubernetes.io/active": active } },
            "addressType": "IPv4",
            "endpoints": [{ "addresses": ["10.202.0.5"],
                            "conditions": { "ready": ready, "serving": ready } }]
        }))
        .unwrap()
    };
    f.slices = vec![
        slice_of("c2", marks.0, true),
        slice_of("c4", marks.1, c4_serving),
    ];
    let region = |r: &str| [("region".to_owned(), r.to_owned())].into();
    f.properties = [
        ("c2".to_owned(), region("a")),
        ("c3".to_owned(), region("b")),
        ("c4".to_owned(), region("b")),
    ]
    .into();
    f
}

fn selection_hop(f: &Facts) -> Hop {
    explain(f)
        .into_iter()
        .find(|h| h.name == "cluster selection in c3")
        .expect("a selection hop")
}

#[test]
fn the_selection_hop_names_the_deciding_selector_and_the_active_clusters() {
    let hop = selection_hop(&regional(true, ("false", "true")));
    assert!(hop.ok, "{hop:?}");
    assert!(hop.detail.contains("selector 1 of 1"), "{}", hop.detail);
    assert!(
        hop.detail.contains("active c4; inactive c2"),
        "{}",
        hop.detail
    );
    // c4 stops serving: nothing picks a serving cluster, every cluster is used.
    let hop = selection_hop(&regional(false, ("true", "true")));
    assert!(hop.ok, "{hop:?}");
    assert!(
        hop.detail.contains("every cluster is used"),
        "{}",
        hop.detail
    );
    assert!(
        hop.detail.contains("active c2, c4; inactive none"),
        "{}",
        hop.detail
    );
}

#[test]
fn slices_marked_otherwise_than_the_selectors_pick_are_a_broken_hop() {
    let f = regional(true, ("true", "true"));
    let hop = first_broken(&f).expect("a broken hop");
    assert_eq!(hop.name, "cluster selection in c3");
    assert!(hop.detail.contains("mark c2, c4 active"), "{}", hop.detail);
    assert!(hop.fix.unwrap().contains("ClusterProfile"));
    // Without selectors there is no selection hop.
    assert!(
        explain(&healthy())
            .iter()
            .all(|h| !h.name.starts_with("cluster selection"))
    );
}
