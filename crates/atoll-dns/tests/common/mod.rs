//! Helpers shared by the server tests: a zone built in the test, queries, and clients on
//! loopback sockets.
#![allow(dead_code, clippy::unwrap_used)]

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use atoll_dns::zone::{Zone, ZoneConfig};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A zone with one headless service, `web.demo`, of `endpoints` ready IPv4 endpoints.
pub fn zone(config: &ZoneConfig, endpoints: usize) -> Zone {
    let import: atoll_api::v1beta1::ServiceImport = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "demo"},
        "spec": {"type": "Headless", "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]}
    }))
    .unwrap();
    let addresses: Vec<serde_json::Value> = (0..endpoints)
        .map(|i| json!({"addresses": [format!("10.201.{}.{}", i / 250, i % 250 + 1)], "conditions": {"ready": true}}))
        .collect();
    let slice: k8s_openapi::api::discovery::v1::EndpointSlice = serde_json::from_value(json!({
        "metadata": {"name": "web-c1", "namespace": "demo", "labels": {
            "multicluster.kubernetes.io/service-name": "web", "multicluster.kubernetes.io/source-cluster": "c1"}},
        "addressType": "IPv4", "endpoints": addresses,
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]
    }))
    .unwrap();
    Zone::build(config, &[&import], &[&slice])
}

/// The name of the service of [`zone`].
pub const WEB: &str = "web.demo.svc.clusterset.local.";

/// An A query for `name`, with an OPT record claiming `edns` bytes if given.
pub fn query_with(name: &str, edns: Option<u16>) -> Vec<u8> {
    let mut m = Message::query();
    m.metadata.id = 7;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), RecordType::A));
    if let Some(size) = edns {
        let mut e = hickory_proto::op::Edns::new();
        e.set_max_payload(size);
        m.set_edns(e);
    }
    m.to_vec().unwrap()
}

/// An A query for `name` without EDNS.
pub fn query(name: &str) -> Vec<u8> {
    query_with(name, None)
}

/// Sends `packet` over UDP and returns the raw answer.
pub fn udp_raw(server: SocketAddr, packet: &[u8]) -> Vec<u8> {
    let client = UdpSocket::bind("127.0.0.1:0").unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    client.send_to(packet, server).unwrap();
    let mut buf = [0u8; 65535];
    let (len, _) = client.recv_from(&mut buf).unwrap();
    buf[..len].to_vec()
}

/// Sends `packet` over UDP and decodes the answer.
pub fn udp_ask(server: SocketAddr, packet: &[u8]) -> Message {
    Message::from_vec(&udp_raw(server, packet)).unwrap()
}

/// Sends one length-prefixed query on `stream` and reads its answer.
pub async fn tcp_exchange(stream: &mut TcpStream, packet: &[u8]) -> std::io::Result<Message> {
    let mut framed = (packet.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(packet);
    stream.write_all(&framed).await?;
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await?;
    let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut buf).await?;
    Ok(Message::from_vec(&buf).unwrap())
}

/// Connects to `server` and asks `packet` once.
pub async fn tcp_ask(server: SocketAddr, packet: &[u8]) -> Message {
    let mut stream = TcpStream::connect(server).await.unwrap();
    tcp_exchange(&mut stream, packet).await.unwrap()
}

/// Whether the server closes `stream` within `within`: a read returns end of file (or a reset)
/// rather than data or nothing.
pub async fn closed_by_server(stream: &mut TcpStream, within: Duration) -> bool {
    let mut byte = [0u8; 1];
    match tokio::time::timeout(within, stream.read(&mut byte)).await {
        Ok(Ok(0)) => true,
        Ok(Ok(_)) => false,
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Err(_) => false,
    }
}

/// Polls `condition` every 10 ms until it holds or `within` passes; returns whether it held.
pub async fn eventually(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if condition() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
