//! Any bytes as a DNS query: the answer function must not panic, and whatever it sends back
//! must echo the query id, set QR and stay within the transport's size limit: over UDP, the
//! requester's EDNS size (512 without EDNS, sizes under 512 count as 512) and never more than
//! the zone's maximum UDP payload (1232 with the default configuration used here); over TCP,
//! 65,535 bytes.
#![no_main]

use std::sync::OnceLock;

use atoll_dns::answer::answer;
use atoll_dns::wire::parse_query;
use atoll_dns::zone::{DEFAULT_MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, Zone, ZoneConfig};
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
    // What the requester accepts over UDP; a packet that does not parse gets a bare header.
    let udp_limit = match parse_query(data) {
        Ok(query) => usize::from(
            query
                .edns_payload
                .unwrap_or(MIN_UDP_PAYLOAD)
                .min(DEFAULT_MAX_UDP_PAYLOAD),
        ),
        Err(_) => 12,
    };
    let mut out = Vec::new();
    for tcp in [false, true] {
        answer(zone(), data, tcp, &mut out);
        if !out.is_empty() {
            assert_eq!(&out[..2], &data[..2], "response id must echo the query id");
            assert!(out[2] & 0x80 != 0, "QR bit must be set");
            // A TCP message carries at most 65,535 bytes: a larger answer is trimmed, never
            // sent empty or cut.
            assert!(out.len() <= usize::from(u16::MAX), "TCP answer of {} bytes", out.len());
            if !tcp {
                assert!(
                    out.len() <= usize::from(DEFAULT_MAX_UDP_PAYLOAD),
                    "UDP answer of {} bytes, over the server's maximum",
                    out.len()
                );
                assert!(
                    out.len() <= udp_limit,
                    "UDP answer of {} bytes, over the requester's {udp_limit}",
                    out.len()
                );
            }
        }
    }
});
