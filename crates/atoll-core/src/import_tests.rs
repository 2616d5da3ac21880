use super::*;
use crate::merge::merge;
use crate::test_support::port;
use atoll_api::hub::ExportedServiceSpec;
use k8s_openapi::api::discovery::v1::EndpointConditions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

fn mk_record(
    cluster: &str,
    created: i64,
    ports: Vec<ServicePort>,
    type_: ServiceImportType,
) -> ExportedServiceSpec {
    ExportedServiceSpec {
        cluster: cluster.to_owned(),
        namespace: "demo".to_owned(),
        name: "hello".to_owned(),
        export_created: Time(Timestamp::from_second(1_700_000_000 + created).unwrap()),
        type_,
        ports,
        session_affinity: None,
        session_affinity_config: None,
        ip_families: vec!["IPv4".to_owned()],
        internal_traffic_policy: None,
        traffic_distribution: None,
        exported_labels: BTreeMap::from([("team".to_owned(), "a".to_owned())]),
        exported_annotations: BTreeMap::new(),
        cluster_selectors: Vec::new(),
    }
}

fn mk_copy(
    name: &str,
    addresses: &[&str],
    ports: &[(&str, &str, i32)],
) -> atoll_api::hub::ExportedEndpointSlice {
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        address_type: "IPv4".to_owned(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![(*a).to_owned()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..Default::default()
                }),
                hostname: Some(format!("host-{}", a.replace(['.', ':'], "-"))),
                ..Default::default()
            })
            .collect(),
        ports: Some(
            ports
                .iter()
                .map(|(n, p, num)| EndpointPort {
                    name: Some((*n).to_owned()),
                    protocol: Some((*p).to_owned()),
                    port: Some(*num),
                    app_protocol: None,
                })
                .collect(),
        ),
    };
    crate::export::hub_slice("c1", "demo", "hello", &slice)
}

/// A ClusterSetIP record of `cluster` with one port, tcp/42.
fn tcp42(cluster: &str) -> ExportedServiceSpec {
    mk_record(
        cluster,
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::ClusterSetIP,
    )
}

/// The copies with the family their own check gives them.
fn checked<'a>(
    copies: &[&'a atoll_api::hub::ExportedEndpointSlice],
) -> Vec<(
    &'a atoll_api::hub::ExportedEndpointSlice,
    crate::validate::Family,
)> {
    copies
        .iter()
        .map(|c| (*c, crate::trust::copy_family(c).unwrap()))
        .collect()
}

/// The importer's own endpoints: no range refused.
fn local() -> EndpointCheck<'static> {
    static NONE: std::sync::LazyLock<AddressPolicy> = std::sync::LazyLock::new(Default::default);
    EndpointCheck {
        policy: &NONE,
        remote: false,
    }
}

fn slices_of(
    m: &MergedService,
    cluster: &str,
    copies: &[&atoll_api::hub::ExportedEndpointSlice],
) -> Vec<EndpointSlice> {
    let (slices, dropped) = mcs_slices(m, cluster, &checked(copies), &local());
    assert!(dropped.is_empty(), "{dropped:?}");
    slices
}

#[test]
fn clusterset_ip_import_has_derived_service_with_the_import_ports() {
    let r = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42), port("udp", "UDP", 42)],
        ServiceImportType::ClusterSetIP,
    );
    let m = merge(&[&r]).unwrap();
    let svc = derived_service(&m).unwrap();
    assert_eq!(
        svc.metadata.name,
        Some(crate::derived::derived_service_name("demo", "hello"))
    );
    let spec = svc.spec.unwrap();
    assert_eq!(
        spec.selector, None,
        "derived Services must be selector-less"
    );
    let names: Vec<_> = spec.ports.unwrap().into_iter().map(|p| p.name).collect();
    assert_eq!(names, vec![Some("tcp".to_owned()), Some("udp".to_owned())]);
    let import = service_import(&m, vec!["10.101.0.9".into()], vec!["IPv4".into()]);
    let annotations = import.metadata.annotations.unwrap();
    assert_eq!(
        annotations[labels::DERIVED_SERVICE],
        crate::derived::derived_service_name("demo", "hello")
    );
    assert_eq!(import.metadata.labels.unwrap()["team"], "a");
    assert_eq!(import.spec.unwrap().ips, vec!["10.101.0.9"]);
    assert!(
        !annotations.contains_key(crate::selection::SELECTORS_ANNOTATION),
        "no selectors, no annotation"
    );
}

const SELECTORS: &str = r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#;

/// A ClusterSetIP record of c1 with [`SELECTORS`].
fn record_with_selectors() -> ExportedServiceSpec {
    let mut r = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::ClusterSetIP,
    );
    r.cluster_selectors = crate::selection::parse(SELECTORS).unwrap();
    r
}

#[test]
fn the_import_shows_the_cluster_selectors_it_uses() {
    let text = SELECTORS;
    let r = record_with_selectors();
    let m = merge(&[&r]).unwrap();
    let import = service_import(&m, vec!["10.101.0.9".into()], vec!["IPv4".into()]);
    let annotations = import.metadata.annotations.unwrap();
    assert_eq!(annotations[crate::selection::SELECTORS_ANNOTATION], text);
}

#[test]
fn an_import_never_carries_more_annotations_than_an_object_may() {
    // A member exports as many annotation bytes as validation lets through, and selectors: the
    // import (with Atoll's own keys) stays within the apiserver's 256 KiB. Checking exported
    // annotations alone against 256 KiB (the defect) let the import be refused in every
    // importer.
    use crate::validate::names::{MAX_ANNOTATION_BYTES, MAX_EXPORTED_ANNOTATION_BYTES};
    let mut r = record_with_selectors();
    let exported = BTreeMap::from([(
        "big".to_owned(),
        "x".repeat(MAX_EXPORTED_ANNOTATION_BYTES - 3),
    )]);
    assert_eq!(crate::validate::names::annotations(&exported), Ok(()));
    r.exported_annotations = exported;
    let m = merge(&[&r]).unwrap();
    let import = service_import(&m, vec!["10.101.0.9".into()], vec!["IPv4".into()]);
    let annotations = import.metadata.annotations.unwrap();
    let bytes: usize = annotations.iter().map(|(k, v)| k.len() + v.len()).sum();
    assert!(bytes <= MAX_ANNOTATION_BYTES, "{bytes} bytes");
    assert!(annotations.contains_key(labels::DERIVED_SERVICE));
    assert!(annotations.contains_key(crate::selection::SELECTORS_ANNOTATION));
}

#[test]
fn headless_import_has_no_derived_service_and_no_ips() {
    let r = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::Headless,
    );
    let m = merge(&[&r]).unwrap();
    assert!(derived_service(&m).is_none());
    let import = service_import(&m, vec![], m.spec.ip_families.clone());
    let spec = import.spec.unwrap();
    assert!(spec.ips.is_empty());
    assert_eq!(spec.ip_families, vec!["IPv4"]);
    assert!(import.metadata.annotations.is_none());
}

#[test]
fn unnamed_port_gets_a_name_only_when_the_service_has_several() {
    let unnamed = port("", "UDP", 53);
    assert_eq!(
        derived_port_name(&unnamed, std::slice::from_ref(&unnamed)),
        None
    );
    let two = [unnamed.clone(), port("web", "TCP", 80)];
    assert_eq!(
        derived_port_name(&unnamed, &two).as_deref(),
        Some("port-53-udp")
    );
    assert_eq!(derived_port_name(&two[1], &two).as_deref(), Some("web"));
}

#[test]
fn a_generated_port_name_never_takes_a_members_port_name() {
    // Another member names a port like the generated one: the derived Service would have the
    // name twice and the apiserver would refuse the whole import.
    let unnamed = port("", "UDP", 53);
    let ports = [
        unnamed.clone(),
        port("port-53-udp", "TCP", 80),
        port("port-53-udp-1", "TCP", 81),
    ];
    assert_eq!(
        derived_port_name(&unnamed, &ports).as_deref(),
        Some("port-53-udp-2")
    );
}

#[test]
fn slices_carry_mcs_labels_and_only_the_clusters_own_ports() {
    let c1 = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::ClusterSetIP,
    );
    let c2 = mk_record(
        "c2",
        1,
        vec![port("tcp2", "TCP", 4242)],
        ServiceImportType::ClusterSetIP,
    );
    let m = merge(&[&c1, &c2]).unwrap();
    let copy = mk_copy(
        "demo.hello-x",
        &["10.202.0.1", "10.202.0.2"],
        &[("tcp2", "TCP", 42)],
    );
    let slices = slices_of(&m, "c2", &[&copy]);
    assert_eq!(slices.len(), 1);
    let s = &slices[0];
    let l = s.metadata.labels.as_ref().unwrap();
    assert_eq!(l[labels::SERVICE_NAME], "hello");
    assert_eq!(l[labels::SOURCE_CLUSTER], "c2");
    assert_ne!(
        l[labels::ENDPOINTSLICE_MANAGED_BY],
        labels::CORE_ENDPOINTSLICE_MANAGER
    );
    assert_eq!(
        l[labels::KUBERNETES_SERVICE_NAME],
        crate::derived::derived_service_name("demo", "hello")
    );
    // Only tcp2 (service port 4242 -> target 42): c2 must not receive clusterset port 42.
    let ports = s.ports.as_ref().unwrap();
    assert_eq!(ports.len(), 1);
    assert_eq!(ports[0].name.as_deref(), Some("tcp2"));
    assert_eq!(ports[0].port, Some(42));
    assert_eq!(s.endpoints.len(), 2);
    assert_eq!(s.endpoints[0].hostname.as_deref(), Some("host-10-202-0-1"));
}

#[test]
fn implausible_addresses_from_the_hub_are_dropped() {
    let r = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::Headless,
    );
    let m = merge(&[&r]).unwrap();
    let copy = mk_copy(
        "demo.hello-x",
        &[
            "127.0.0.1",
            "169.254.1.1",
            "224.0.0.1",
            "not-an-ip",
            "10.201.0.4",
        ],
        &[("tcp", "TCP", 42)],
    );
    let (slices, dropped) = mcs_slices(&m, "c1", &checked(&[&copy]), &local());
    let addresses: Vec<_> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect();
    assert_eq!(addresses, vec!["10.201.0.4"]);
    // Reported per reason, with how many were left out.
    assert_eq!(dropped.len(), 1);
    assert_eq!(dropped[0].problem.reason, crate::validate::Reason::Address);
    assert_eq!(dropped[0].count, 4);
    assert!(
        !slices[0]
            .metadata
            .labels
            .as_ref()
            .unwrap()
            .contains_key(labels::KUBERNETES_SERVICE_NAME)
    );
}

#[test]
fn large_endpoint_sets_are_chunked() {
    let r = mk_record(
        "c1",
        0,
        vec![port("tcp", "TCP", 42)],
        ServiceImportType::ClusterSetIP,
    );
    let m = merge(&[&r]).unwrap();
    let addresses: Vec<String> = (0..250)
        .map(|i| format!("10.201.{}.{}", i / 200, i % 200 + 1))
        .collect();
    let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let copy = mk_copy("demo.hello-x", &refs, &[("tcp", "TCP", 42)]);
    let slices = slices_of(&m, "c1", &[&copy]);
    let sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, vec![100, 100, 50]);
    let names: Vec<_> = slices
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["hello.c1.ipv4.0", "hello.c1.ipv4.1", "hello.c1.ipv4.2"]
    );
}

#[test]
fn another_members_endpoints_in_this_clusters_service_cidr_are_dropped() {
    let m = merge(&[&tcp42("c1")]).unwrap();
    let copy = mk_copy(
        "demo.hello-x",
        &["10.101.0.1", "10.203.0.9"],
        &[("tcp", "TCP", 42)],
    );
    let policy = AddressPolicy {
        service_cidrs: vec!["10.101.0.0/16".parse().unwrap()],
        ..Default::default()
    };
    let remote = EndpointCheck {
        policy: &policy,
        remote: true,
    };
    let (slices, dropped) = mcs_slices(&m, "c1", &checked(&[&copy]), &remote);
    assert_eq!(slices[0].endpoints.len(), 1);
    assert_eq!(slices[0].endpoints[0].addresses, ["10.203.0.9"]);
    assert_eq!(
        dropped[0].problem.reason,
        crate::validate::Reason::ServiceCidr
    );
    // The same copy, as the importer's own: kept whole.
    let own = EndpointCheck {
        policy: &policy,
        remote: false,
    };
    let (slices, dropped) = mcs_slices(&m, "c1", &checked(&[&copy]), &own);
    assert_eq!(slices[0].endpoints.len(), 2);
    assert!(dropped.is_empty());
}

mod names {
    use super::*;
    use proptest::prelude::*;

    /// Cluster ids and service names with dashes, often prefixes and suffixes of each other.
    fn part() -> impl Strategy<Value = &'static str> {
        prop::sample::select(vec![
            "a", "b", "a-b", "b-a", "web", "us", "east", "us-east", "web-us", "c3", "x-c3", "web-x",
        ])
    }

    proptest! {
        /// Whatever services and clusters are imported together, no two MCS slices share a
        /// name, and each slice's labels say whose it is.
        #[test]
        fn slices_of_different_services_and_clusters_never_share_a_name(
            pairs in prop::collection::btree_set((part(), part()), 1..8),
        ) {
            let mut seen = std::collections::BTreeMap::new();
            for (service, cluster) in pairs {
                let mut r = tcp42(cluster);
                r.name = service.to_owned();
                let m = merge(&[&r]).unwrap();
                let mut copy = mk_copy("demo.x", &["10.201.0.4"], &[("tcp", "TCP", 42)]);
                copy.spec.cluster = cluster.to_owned();
                copy.spec.service = service.to_owned();
                copy.metadata.namespace = Some(atoll_api::hub::namespace_for(cluster));
                for slice in slices_of(&m, cluster, &[&copy]) {
                    let labels = slice.metadata.labels.clone().unwrap();
                    prop_assert_eq!(&labels[labels::SERVICE_NAME], service);
                    prop_assert_eq!(&labels[labels::SOURCE_CLUSTER], cluster);
                    let name = slice.metadata.name.clone().unwrap();
                    if let Some(other) = seen.insert(name.clone(), (service, cluster)) {
                        prop_assert!(false, "{} is both {:?} and {:?}", name, other, (service, cluster));
                    }
                }
            }
        }
    }
}
