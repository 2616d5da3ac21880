//! Any bytes as a DNS query: the answer function must not panic, and whatever it sends back
//! must echo the query id and stay within the transport's size limit.
#![no_main]

use std::sync::OnceLock;

use atoll_core::dns::{Zone, ZoneConfig, answer};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fn zone() -> &'static Zone {
    static ZONE: OnceLock<Zone> = OnceLock::new();
    ZONE.get_or_init(|| {
        let imports: Vec<atoll_api::v1beta1::ServiceImport> = [
            json!({"metadata": {"name": "hello", "namespace": "demo"}, "spec": {"type": "ClusterSetIP",
                "ips": ["10.96.0.10", "fd00::10"], "ports": [{"name": "tcp", "protocol": "TCP", "port": 42}, {"name": "udp", "protocol": "UDP", "port": 42}]}}),
            json!({"metadata": {"name": "web", "namespace": "demo"}, "spec": {"type": "Headless",
                "ports": [{"name": "http", "protocol": "TCP", "port": 80}]}}),
        ]
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
        let endpoints: Vec<serde_json::Value> =
            (1..40).map(|i| json!({"addresses": [format!("10.201.0.{i}")], "hostname": format!("web-{i}"), "conditions": {"ready": true}})).collect();
        let slices: Vec<k8s_openapi::api::discovery::v1::EndpointSlice> = [json!({
            "metadata": {"name": "web-c1", "namespace": "demo", "labels": {
                "multicluster.kubernetes.io/service-name": "web", "multicluster.kubernetes.io/source-cluster": "c1"}},
            "addressType": "IPv4", "endpoints": endpoints, "ports": [{"name": "http", "protocol": "TCP", "port": 8080}]
        })]
        .into_iter()
        .filter_map(|v| serde_json::from_value(v).ok())
        .collect();
        let import_refs: Vec<_> = imports.iter().collect();
        let slice_refs: Vec<_> = slices.iter().collect();
        Zone::build(&ZoneConfig::default(), &import_refs, &slice_refs)
    })
}

fuzz_target!(|data: &[u8]| {
    let mut out = Vec::new();
    for tcp in [false, true] {
        answer(zone(), data, tcp, &mut out);
        if !out.is_empty() {
            assert_eq!(&out[..2], &data[..2], "response id must echo the query id");
            assert!(tcp || out.len() <= 4096, "UDP answer larger than any advertised size");
            assert!(out[2] & 0x80 != 0, "QR bit must be set");
        }
    }
});
