use super::*;
use crate::test_support::port;
use atoll_api::multicluster::{ClientIpConfig, ServiceImportType, SessionAffinityConfig};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

fn mk_record(cluster: &str, created_secs: i64, ports: Vec<ServicePort>) -> ExportedServiceSpec {
    ExportedServiceSpec {
        cluster: cluster.to_owned(),
        namespace: "demo".to_owned(),
        name: "hello".to_owned(),
        export_created: Time(Timestamp::from_second(1_700_000_000 + created_secs).unwrap()),
        type_: ServiceImportType::ClusterSetIP,
        ports,
        session_affinity: Some("ClientIP".to_owned()),
        session_affinity_config: Some(SessionAffinityConfig {
            client_ip: Some(ClientIpConfig {
                timeout_seconds: Some(10),
            }),
        }),
        ip_families: vec!["IPv4".to_owned()],
        internal_traffic_policy: Some("Cluster".to_owned()),
        traffic_distribution: None,
        exported_labels: BTreeMap::new(),
        exported_annotations: BTreeMap::new(),
        cluster_selectors: Vec::new(),
    }
}

fn hello_ports() -> Vec<ServicePort> {
    vec![port("tcp", "TCP", 42), port("udp", "UDP", 42)]
}

#[test]
fn single_export_copies_the_service() {
    let r = mk_record("c1", 0, hello_ports());
    let m = merge(&[&r]).unwrap();
    assert_eq!(m.spec.ports, hello_ports());
    assert_eq!(m.spec.session_affinity.as_deref(), Some("ClientIP"));
    assert_eq!(m.spec.internal_traffic_policy.as_deref(), Some("Cluster"));
    assert!(m.spec.ips.is_empty());
    assert_eq!(m.clusters, vec!["c1"]);
    assert!(!m.conflicts.any());
    assert_eq!(m.conflicts.reason(), "NoConflicts");
}

#[test]
fn no_records_no_import() {
    assert!(merge(&[]).is_none());
}

#[test]
fn same_name_different_port_keeps_the_oldest_and_conflicts() {
    // Conformance C10: c0 {tcp/42, udp/42} + c1 {tcp/43} -> {tcp/42, udp/42}, Conflict on both.
    let c0 = mk_record("c0", 0, hello_ports());
    let c1 = mk_record("c1", 2, vec![port("tcp", "TCP", 43)]);
    let m = merge(&[&c1, &c0]).unwrap();
    assert_eq!(m.spec.ports, hello_ports());
    assert_eq!(m.conflicts.reason(), "PortConflict");
    assert_eq!(m.winner, "c0");
    assert_eq!(m.cluster_ports["c1"], Vec::<ServicePort>::new());
    assert!(m.conflicts.message("c0").contains("ports"));
}

#[test]
fn distinct_ports_are_a_union_sorted_by_name() {
    // Conformance C11: + c1 {tcp/42, stcp/142 SCTP} -> {stcp/142, tcp/42, udp/42}.
    let c0 = mk_record("c0", 0, hello_ports());
    let c1 = mk_record(
        "c1",
        2,
        vec![port("tcp", "TCP", 42), port("stcp", "SCTP", 142)],
    );
    let m = merge(&[&c0, &c1]).unwrap();
    let names: Vec<_> = m
        .spec
        .ports
        .iter()
        .map(|p| p.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["stcp", "tcp", "udp"]);
    assert!(m.conflicts.kinds.contains(&ConflictKind::Port));
    assert_eq!(
        m.cluster_ports["c1"],
        vec![port("stcp", "SCTP", 142), port("tcp", "TCP", 42)]
    );
    assert_eq!(
        m.cluster_ports["c0"],
        vec![port("tcp", "TCP", 42), port("udp", "UDP", 42)]
    );
}

#[test]
fn strict_ports_route_each_port_only_to_clusters_exposing_it() {
    // Conformance C27: c1 exposes tcp2/4242 instead of tcp/42.
    let c0 = mk_record("c0", 0, vec![port("tcp", "TCP", 42)]);
    let c1 = mk_record("c1", 1, vec![port("tcp2", "TCP", 4242)]);
    let m = merge(&[&c0, &c1]).unwrap();
    assert_eq!(m.cluster_ports["c0"], vec![port("tcp", "TCP", 42)]);
    assert_eq!(m.cluster_ports["c1"], vec![port("tcp2", "TCP", 4242)]);
}

#[test]
fn headless_joining_clusterset_ip_keeps_the_oldest_type() {
    // Conformance C15.
    let c0 = mk_record("c0", 0, hello_ports());
    let mut c1 = mk_record("c1", 1, hello_ports());
    c1.type_ = ServiceImportType::Headless;
    let m = merge(&[&c1, &c0]).unwrap();
    assert_eq!(m.spec.type_, ServiceImportType::ClusterSetIP);
    assert_eq!(m.conflicts.reason(), "TypeConflict");
    assert_eq!(m.conflicts.disagreeing, BTreeSet::from(["c1".to_owned()]));
}

#[test]
fn every_property_conflict_is_reported_with_comma_joined_reasons() {
    let c0 = mk_record("c0", 0, hello_ports());
    let mut c1 = mk_record("c1", 1, hello_ports());
    c1.session_affinity = None;
    c1.session_affinity_config = None;
    c1.internal_traffic_policy = Some("Local".to_owned());
    c1.traffic_distribution = Some("PreferClose".to_owned());
    c1.ip_families = vec!["IPv6".to_owned()];
    c1.exported_labels.insert("a".to_owned(), "b".to_owned());
    c1.exported_annotations
        .insert("a".to_owned(), "b".to_owned());
    let m = merge(&[&c0, &c1]).unwrap();
    let reason = m.conflicts.reason();
    assert_eq!(
        reason,
        "SessionAffinityConflict,SessionAffinityConfigConflict,InternalTrafficPolicyConflict,\
         TrafficDistributionConflict,IPFamilyConflict,LabelsConflict,AnnotationsConflict"
    );
    assert!(atoll_api::Condition::reason_is_valid(&reason));
    // The winner's values stay.
    assert_eq!(m.spec.session_affinity.as_deref(), Some("ClientIP"));
    assert_eq!(m.spec.traffic_distribution, None);
    assert!(m.labels.is_empty());
}

#[test]
fn default_and_unset_policies_do_not_conflict() {
    let c0 = mk_record("c0", 0, hello_ports());
    let mut c1 = mk_record("c1", 1, hello_ports());
    c1.internal_traffic_policy = None;
    let mut c2 = mk_record("c2", 1, hello_ports());
    c2.session_affinity = Some("ClientIP".to_owned());
    assert!(!merge(&[&c0, &c1, &c2]).unwrap().conflicts.any());
}

#[test]
fn ties_on_creation_time_break_by_cluster_id() {
    let mut a = mk_record("b-cluster", 5, vec![port("x", "TCP", 1)]);
    let b = mk_record("a-cluster", 5, vec![port("x", "TCP", 2)]);
    a.type_ = ServiceImportType::ClusterSetIP;
    let m = merge(&[&a, &b]).unwrap();
    assert_eq!(m.winner, "a-cluster");
    assert_eq!(m.spec.ports, vec![port("x", "TCP", 2)]);
}

fn arb_port() -> impl Strategy<Value = ServicePort> {
    (
        prop_oneof![Just(""), Just("a"), Just("b"), Just("c"), Just("a-b")],
        prop_oneof![Just("TCP"), Just("UDP")],
        // Out-of-range numbers too: the merge itself must stay sound on what validation drops.
        prop_oneof![Just(1), Just(2), Just(3), Just(0), Just(70000)],
    )
        .prop_map(|(n, p, num)| port(n, p, num))
}

/// Cluster ids that are prefixes and suffixes of each other.
const CLUSTERS: [&str; 5] = ["c", "c-1", "x-c", "x-c-1", "c1"];

fn arb_records() -> impl Strategy<Value = Vec<ExportedServiceSpec>> {
    proptest::collection::vec(
        (
            // Backdated claims (1970 and before) among ordinary ones.
            prop_oneof![0..4i64, Just(-1_700_000_000i64), Just(-1_800_000_000i64)],
            proptest::collection::vec(arb_port(), 0..4),
            any::<bool>(),
            any::<bool>(),
        ),
        1..5,
    )
    .prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (created, ports, headless, local))| {
                let mut r = mk_record(CLUSTERS[i], created, ports);
                if headless {
                    r.type_ = ServiceImportType::Headless;
                }
                if local {
                    r.internal_traffic_policy = Some("Local".to_owned());
                }
                r
            })
            .collect()
    })
}

proptest! {
    #[test]
    fn result_does_not_depend_on_record_order(
        (records, shuffled) in arb_records()
            .prop_flat_map(|records| (Just(records.clone()), Just(records).prop_shuffle()))
    ) {
        let refs: Vec<&ExportedServiceSpec> = records.iter().collect();
        let shuffled: Vec<&ExportedServiceSpec> = shuffled.iter().collect();
        prop_assert_eq!(merge(&refs), merge(&shuffled));
    }

    #[test]
    fn ports_never_repeat_a_name_or_a_protocol_port_pair(records in arb_records()) {
        let refs: Vec<&ExportedServiceSpec> = records.iter().collect();
        let m = merge(&refs).unwrap();
        let names: BTreeSet<_> = m.spec.ports.iter().map(|p| p.name.clone()).collect();
        let pairs: BTreeSet<_> = m.spec.ports.iter().map(|p| (protocol(p).to_owned(), p.port)).collect();
        prop_assert_eq!(names.len(), m.spec.ports.len());
        prop_assert_eq!(pairs.len(), m.spec.ports.len());
    }

    #[test]
    fn merging_is_idempotent_on_its_own_output(records in arb_records()) {
        // Feeding the winner's record back in (as a newer export from a new cluster, with the
        // merged ports) changes neither the spec's type nor the winner.
        let refs: Vec<&ExportedServiceSpec> = records.iter().collect();
        let m = merge(&refs).unwrap();
        let mut echo = records.iter().find(|r| r.cluster == m.winner).unwrap().clone();
        echo.cluster = "zz-echo".to_owned();
        echo.export_created = Time(Timestamp::from_second(1_800_000_000).unwrap());
        let mut with_echo = refs.clone();
        with_echo.push(&echo);
        let again = merge(&with_echo).unwrap();
        prop_assert_eq!(&again.spec, &m.spec);
        prop_assert_eq!(&again.winner, &m.winner);
    }

    #[test]
    fn no_conflict_means_every_cluster_serves_every_port(records in arb_records()) {
        let refs: Vec<&ExportedServiceSpec> = records.iter().collect();
        let m = merge(&refs).unwrap();
        if !m.conflicts.any() {
            for ports in m.cluster_ports.values() {
                prop_assert_eq!(ports, &m.spec.ports);
            }
        }
        // Every port of the import is served by at least one cluster.
        for p in &m.spec.ports {
            prop_assert!(m.cluster_ports.values().any(|ps| ps.contains(p)));
        }
    }
}

#[test]
fn different_cluster_selector_lists_conflict_and_the_oldest_list_wins() {
    let regional = crate::selection::parse(
        r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#,
    )
    .unwrap();
    let zonal = crate::selection::parse(
        r#"[{"propertySelector":{"matchLabels":{"zone":"@SameAsImporter@"}}},{"propertySelector":{}}]"#,
    )
    .unwrap();
    let mut oldest = mk_record("c2", 0, hello_ports());
    oldest.cluster_selectors = regional.clone();
    let mut newer = mk_record("c1", 10, hello_ports());
    newer.cluster_selectors = zonal.clone();
    let m = merge(&[&newer, &oldest]).unwrap();
    assert_eq!(m.winner, "c2");
    assert_eq!(m.cluster_selectors, regional);
    assert_eq!(m.conflicts.reason(), "ClusterSelectorsConflict");
    assert!(m.conflicts.message("c2").contains("clusterSelectors"));
    assert_eq!(m.conflicts.disagreeing, BTreeSet::from(["c1".to_owned()]));

    // Lists are compared whole: the same entries in another order differ.
    let mut reordered = zonal.clone();
    reordered.reverse();
    newer.cluster_selectors = reordered;
    oldest.cluster_selectors = zonal.clone();
    assert_eq!(
        merge(&[&newer, &oldest]).unwrap().conflicts.reason(),
        "ClusterSelectorsConflict"
    );
    // Equal lists, and none on either side, do not conflict.
    newer.cluster_selectors = zonal;
    assert!(!merge(&[&newer, &oldest]).unwrap().conflicts.any());
    newer.cluster_selectors.clear();
    oldest.cluster_selectors.clear();
    assert!(!merge(&[&newer, &oldest]).unwrap().conflicts.any());
    // One side without selectors disagrees with one with them.
    oldest.cluster_selectors = regional;
    assert_eq!(
        merge(&[&newer, &oldest]).unwrap().conflicts.reason(),
        "ClusterSelectorsConflict"
    );
}
