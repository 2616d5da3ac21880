// Helpers here run only inside tests, where a panic is the failure report.
#![allow(clippy::unwrap_used)]

//! The UDP and TCP servers on real loopback sockets, with a zone built in the test: answers
//! arrive, large answers truncate over UDP and come whole over TCP, a new snapshot is served as
//! soon as it is swapped in, and garbage does not stop a worker.

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use atoll_core::dns::{Zone, ZoneConfig};
use atoll_dns::metrics::DnsMetrics;
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};
use serde_json::json;

fn zone(endpoints: usize) -> Zone {
    let import: atoll_api::v1beta1::ServiceImport = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {"type": "Headless", "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap();
    let addresses: Vec<serde_json::Value> = (0..endpoints)
        .map(|i| json!({"addresses": [format!("10.201.0.{}", i + 1)], "conditions": {"ready": true}}))
        .collect();
    let slice: k8s_openapi::api::discovery::v1::EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-c1", "namespace": "demo", "labels": {
            "multicluster.kubernetes.io/service-name": "web", "multicluster.kubernetes.io/source-cluster": "c1"}},
        "addressType": "IPv4", "endpoints": addresses,
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]
    }))
    .unwrap();
    Zone::build(&ZoneConfig::default(), &[&import], &[&slice])
}

fn query(name: &str) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 7;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    m.to_vec().unwrap()
}

fn udp_ask(server: SocketAddr, packet: &[u8]) -> Message {
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    client.send_to(packet, server).unwrap();
    let mut buf = [0u8; 65535];
    let (len, _) = client.recv_from(&mut buf).unwrap();
    Message::from_vec(&buf[..len]).unwrap()
}

async fn tcp_ask(server: SocketAddr, packet: &[u8]) -> Message {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server).await.unwrap();
    stream
        .write_all(&(packet.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(packet).await.unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await.unwrap();
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut buf).await.unwrap();
    Message::from_vec(&buf).unwrap()
}

#[tokio::test]
async fn udp_and_tcp_serve_the_current_snapshot() {
    let shared = atoll_dns::initial_zone(&ZoneConfig::default());
    let stop = Arc::new(AtomicBool::new(false));
    let metrics = DnsMetrics::default();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let udp = atoll_dns::udp::start(any, 2, shared.clone(), metrics.clone(), stop.clone()).unwrap();
    let tcp = atoll_dns::tcp::start(any, shared.clone(), metrics.clone())
        .await
        .unwrap();

    // Before the first sync: SERVFAIL.
    let q = query("web.demo.svc.clusterset.local.");
    assert_eq!(
        udp_ask(udp, &q).metadata.response_code,
        ResponseCode::ServFail
    );

    // After a swap the new snapshot answers at once.
    shared.store(Arc::new(zone(3)));
    let m = udp_ask(udp, &q);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(m.answers.len(), 3);

    // Garbage is ignored and the worker keeps serving.
    let junk = UdpSocket::bind("127.0.0.1:0").unwrap();
    for _ in 0..20 {
        junk.send_to(&[0xff; 7], udp).unwrap();
    }
    assert_eq!(udp_ask(udp, &q).answers.len(), 3);

    // 100 endpoints do not fit in 512 bytes: TC over UDP, everything over TCP.
    shared.store(Arc::new(zone(100)));
    let truncated = udp_ask(udp, &q);
    assert!(truncated.metadata.truncation);
    let full = tcp_ask(tcp, &q).await;
    assert_eq!(full.answers.len(), 100);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
}
