//! Objects written by upstream tools deserialize, and ours serialize the way upstream's do.

use atoll_api::multicluster::{
    ClientIpConfig, ServiceImportSpec, ServiceImportType, ServicePort, SessionAffinityConfig,
};
use atoll_api::{v1alpha1, v1beta1};
use proptest::prelude::*;
use serde_json::json;

#[test]
fn bare_service_export_round_trips_without_inventing_a_spec() {
    let upstream = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": { "name": "hello", "namespace": "demo" }
    });
    let export: v1beta1::ServiceExport = serde_json::from_value(upstream.clone()).unwrap();
    assert!(export.spec.is_none());
    assert_eq!(serde_json::to_value(&export).unwrap(), upstream);
}

#[test]
fn unknown_fields_are_ignored_and_missing_optionals_are_fine() {
    let upstream = json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1",
        "kind": "ServiceImport",
        "metadata": { "name": "hello", "namespace": "demo" },
        "spec": { "ports": [{ "port": 42, "futureField": true }], "type": "Headless", "newThing": {} },
        "status": { "endpointSliceObjects": "Present" }
    });
    let import: v1alpha1::ServiceImport = serde_json::from_value(upstream).unwrap();
    let spec = import.spec.unwrap();
    assert_eq!(spec.type_, ServiceImportType::Headless);
    assert_eq!(
        spec.ports,
        vec![ServicePort {
            port: 42,
            ..Default::default()
        }]
    );
    assert!(spec.ips.is_empty() && spec.ip_families.is_empty());
}

#[test]
fn ports_and_type_are_always_serialized() {
    let spec = ServiceImportSpec::new(ServiceImportType::ClusterSetIP);
    assert_eq!(
        serde_json::to_value(&spec).unwrap(),
        json!({ "ports": [], "type": "ClusterSetIP" })
    );
}

#[test]
fn full_service_import_uses_upstream_field_names() {
    let upstream = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": { "name": "hello", "namespace": "demo" },
        "spec": {
            "ports": [
                { "name": "tcp", "protocol": "TCP", "appProtocol": "kubernetes.io/h2c", "port": 42 },
                { "name": "udp", "protocol": "UDP", "port": 42 }
            ],
            "ips": ["10.96.0.10", "fd00::10"],
            "type": "ClusterSetIP",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": { "clientIP": { "timeoutSeconds": 10 } },
            "ipFamilies": ["IPv4", "IPv6"],
            "internalTrafficPolicy": "Cluster",
            "trafficDistribution": "PreferClose"
        },
        "status": {
            "clusters": [{ "cluster": "c1" }, { "cluster": "c2" }],
            "conditions": [{
                "type": "Ready", "status": "True", "lastTransitionTime": "2026-12-01T10:00:00Z",
                "reason": "Ready", "message": ""
            }],
            "endpointSliceObjects": "Present"
        }
    });
    let import: v1beta1::ServiceImport = serde_json::from_value(upstream.clone()).unwrap();
    let spec = import.spec.as_ref().unwrap();
    assert_eq!(
        spec.session_affinity_config,
        Some(SessionAffinityConfig {
            client_ip: Some(ClientIpConfig {
                timeout_seconds: Some(10)
            })
        })
    );
    assert_eq!(serde_json::to_value(&import).unwrap(), upstream);
}

#[test]
fn versions_convert_losslessly() {
    let mut import = v1beta1::ServiceImport::new(
        "hello",
        Some(ServiceImportSpec::new(ServiceImportType::Headless)),
    );
    import.metadata.namespace = Some("demo".into());
    let alpha: v1alpha1::ServiceImport = import.clone().into();
    let alpha_json = serde_json::to_value(&alpha).unwrap();
    assert_eq!(alpha_json["apiVersion"], "multicluster.x-k8s.io/v1alpha1");
    assert_eq!(v1beta1::ServiceImport::from(alpha), import);
}

fn port() -> impl Strategy<Value = ServicePort> {
    (
        proptest::option::of("[a-z]{1,8}"),
        proptest::option::of(prop_oneof![
            Just("TCP".to_owned()),
            Just("UDP".to_owned()),
            Just("SCTP".to_owned())
        ]),
        proptest::option::of("[a-z./0-9]{1,12}"),
        1..65536i32,
    )
        .prop_map(|(name, protocol, app_protocol, port)| ServicePort {
            name,
            protocol,
            app_protocol,
            port,
        })
}

proptest! {
    #[test]
    fn any_spec_survives_json(
        ports in proptest::collection::vec(port(), 0..5),
        headless in any::<bool>(),
        ips in proptest::collection::vec("[0-9a-f.:]{1,20}", 0..3),
        affinity in proptest::option::of("(None|ClientIP)"),
        timeout in proptest::option::of(proptest::option::of(0..86400i32)),
        itp in proptest::option::of("(Cluster|Local)"),
    ) {
        let mut spec = ServiceImportSpec::new(if headless { ServiceImportType::Headless } else { ServiceImportType::ClusterSetIP });
        spec.ports = ports;
        spec.ips = ips;
        spec.session_affinity = affinity;
        spec.session_affinity_config = timeout.map(|t| SessionAffinityConfig { client_ip: Some(ClientIpConfig { timeout_seconds: t }) });
        spec.internal_traffic_policy = itp;
        let text = serde_json::to_string(&spec).unwrap();
        let back: ServiceImportSpec = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, spec);
    }
}
