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
                hostname: Some(format!("host-{a}")),
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
    assert_eq!(derived_port_name(&port("", "TCP", 80), 1), None);
    assert_eq!(
        derived_port_name(&port("", "UDP", 53), 2).as_deref(),
        Some("port-53-udp")
    );
    assert_eq!(
        derived_port_name(&port("web", "TCP", 80), 2).as_deref(),
        Some("web")
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
    let slices = mcs_slices(&m, "c2", &[&copy]);
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
    assert_eq!(s.endpoints[0].hostname.as_deref(), Some("host-10.202.0.1"));
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
    let slices = mcs_slices(&m, "c1", &[&copy]);
    let addresses: Vec<_> = slices
        .iter()
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
        .collect();
    assert_eq!(addresses, vec!["10.201.0.4"]);
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
    let slices = mcs_slices(&m, "c1", &[&copy]);
    let sizes: Vec<usize> = slices.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, vec![100, 100, 50]);
    let names: Vec<_> = slices
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        vec!["hello-c1-ipv4-0", "hello-c1-ipv4-1", "hello-c1-ipv4-2"]
    );
}
