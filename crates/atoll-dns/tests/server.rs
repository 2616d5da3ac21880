// Helpers here run only inside tests, where a panic is the failure report.
#![allow(clippy::unwrap_used)]

//! The UDP and TCP servers on real loopback sockets, with a zone built in the test: answers
//! arrive, large answers truncate over UDP and come whole over TCP, a new snapshot is served as
//! soon as it is swapped in, and garbage does not stop a worker.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;

use atoll_dns::metrics::DnsMetrics;
use atoll_dns::server::tcp::TcpLimits;
use atoll_dns::zone::ZoneConfig;
use common::{WEB, query, query_with, tcp_ask, udp_ask, udp_raw, zone};
use hickory_proto::op::{Message, ResponseCode};
use tokio_util::sync::CancellationToken;

#[tokio::test]
async fn udp_and_tcp_serve_the_current_snapshot() {
    let config = ZoneConfig::default();
    let shared = atoll_dns::initial_zone(&config);
    let stop = CancellationToken::new();
    let metrics = DnsMetrics::default();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let udp = atoll_dns::server::udp::start(any, 2, shared.clone(), metrics.clone(), stop.clone())
        .unwrap();
    let tcp = atoll_dns::server::tcp::start(
        any,
        shared.clone(),
        metrics.clone(),
        TcpLimits::default(),
        stop.clone(),
    )
    .await
    .unwrap();

    // Before the first sync: SERVFAIL.
    let q = query(WEB);
    assert_eq!(
        udp_ask(udp, &q).metadata.response_code,
        ResponseCode::ServFail
    );

    // After a swap the new snapshot answers at once.
    shared.store(Arc::new(zone(&config, 3)));
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
    shared.store(Arc::new(zone(&config, 100)));
    let truncated = udp_ask(udp, &q);
    assert!(truncated.metadata.truncation);
    let full = tcp_ask(tcp.address(), &q).await;
    assert_eq!(full.answers.len(), 100);
    stop.cancel();
}

#[tokio::test]
async fn udp_answers_stay_within_the_server_maximum_whatever_edns_claims() {
    // 100 A records take about 1.7 KB: over the default maximum of 1232, under 4096.
    let config = ZoneConfig::default();
    let shared = atoll_dns::initial_zone(&config);
    shared.store(Arc::new(zone(&config, 100)));
    let stop = CancellationToken::new();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let udp =
        atoll_dns::server::udp::start(any, 1, shared.clone(), DnsMetrics::default(), stop.clone())
            .unwrap();
    let raw = udp_raw(udp, &query_with(WEB, Some(65535)));
    assert!(raw.len() <= 1232, "{} bytes", raw.len());
    let m = Message::from_vec(&raw).unwrap();
    assert!(m.metadata.truncation);
    assert_eq!(m.edns.map(|e| e.max_payload()), Some(1232));

    // A server configured for more sends the whole answer to a requester that takes it.
    let roomy = ZoneConfig {
        max_udp_payload: 4096,
        ..ZoneConfig::default()
    };
    shared.store(Arc::new(zone(&roomy, 100)));
    let m = udp_ask(udp, &query_with(WEB, Some(65535)));
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 100);
    stop.cancel();
}

#[tokio::test]
async fn an_srv_answer_larger_than_a_tcp_message_is_trimmed_not_emptied() {
    // 1,200 endpoints: 1,200 SRV records (about 75 KB) and their 1,200 addresses in the
    // additional section: more than the 65,535 bytes a TCP message can carry. Such an answer
    // used to be an empty TC reply over both transports.
    let config = ZoneConfig::default();
    let shared = atoll_dns::initial_zone(&config);
    shared.store(Arc::new(zone(&config, 1200)));
    let stop = CancellationToken::new();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let tcp = atoll_dns::server::tcp::start(
        any,
        shared.clone(),
        DnsMetrics::default(),
        TcpLimits::default(),
        stop.clone(),
    )
    .await
    .unwrap();
    let mut srv = hickory_proto::op::Message::query();
    srv.add_query(hickory_proto::op::Query::query(
        hickory_proto::rr::Name::from_ascii(WEB).unwrap(),
        hickory_proto::rr::RecordType::SRV,
    ));
    let m = tcp_ask(tcp.address(), &srv.to_vec().unwrap()).await;
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(!m.metadata.truncation);
    assert!(
        m.answers.len() > 900 && m.answers.len() < 1200,
        "{} SRV records",
        m.answers.len()
    );
    assert!(m.additionals.is_empty(), "the addresses are left out first");
    stop.cancel();
}
