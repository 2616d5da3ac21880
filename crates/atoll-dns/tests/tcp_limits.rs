// Helpers here run only inside tests, where a panic is the failure report.
#![allow(clippy::unwrap_used, clippy::expect_used)]

//! The TCP server's limits on loopback sockets, with small values so each takes well under a
//! second: the connection cap closes the excess at once, and the idle timeout, the total-time
//! limit, the query limit and a stop each close connections and are counted.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_dns::metrics::{DnsMetrics, TcpClose, TcpReject};
use atoll_dns::server::tcp::{TcpLimits, TcpServer};
use atoll_dns::zone::ZoneConfig;
use common::{WEB, closed_by_server, eventually, query, tcp_exchange, zone};
use hickory_proto::op::ResponseCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

struct Server {
    tcp: TcpServer,
    metrics: DnsMetrics,
    stop: CancellationToken,
}

async fn serve(limits: TcpLimits) -> Server {
    let config = ZoneConfig::default();
    let shared = atoll_dns::initial_zone(&config);
    shared.store(Arc::new(zone(&config, 3)));
    let metrics = DnsMetrics::default();
    let stop = CancellationToken::new();
    let any: SocketAddr = "127.0.0.1:0".parse().unwrap();
    let tcp = atoll_dns::server::tcp::start(any, shared, metrics.clone(), limits, stop.clone())
        .await
        .unwrap();
    Server { tcp, metrics, stop }
}

#[tokio::test]
async fn connections_over_the_cap_are_closed_at_once_and_counted() {
    let server = serve(TcpLimits {
        max_connections: 100,
        max_per_source: 1000,
        ..TcpLimits::default()
    })
    .await;
    let address = server.tcp.address();
    let mut held = Vec::new();
    for _ in 0..100 {
        held.push(TcpStream::connect(address).await.unwrap());
    }
    let gauge = server.metrics.tcp_connections.clone();
    assert!(eventually(Duration::from_secs(5), || gauge.get() == 100).await);

    // Connections 101 to 110 are accepted and reset straight away.
    for i in 0..10 {
        let mut excess = TcpStream::connect(address).await.unwrap();
        let started = Instant::now();
        assert!(
            closed_by_server(&mut excess, Duration::from_secs(2)).await,
            "connection {} was not closed",
            101 + i
        );
        assert!(started.elapsed() < Duration::from_millis(500));
    }
    assert_eq!(server.metrics.tcp_rejected(TcpReject::Limit).get(), 10);
    assert_eq!(gauge.get(), 100);

    // The 100 held connections are served...
    let m = tcp_exchange(&mut held[0], &query(WEB)).await.unwrap();
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    // ...and a closed one frees its slot for a newcomer.
    drop(held.pop());
    assert!(eventually(Duration::from_secs(5), || gauge.get() == 99).await);
    let mut newcomer = TcpStream::connect(address).await.unwrap();
    let m = tcp_exchange(&mut newcomer, &query(WEB)).await.unwrap();
    assert_eq!(m.answers.len(), 3);
    assert_eq!(server.metrics.tcp_rejected(TcpReject::Limit).get(), 10);
    server.stop.cancel();
}

/// A connection to `server` from `source` (any address of 127.0.0.0/8 is this host).
async fn connect_from(source: &str, server: SocketAddr) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(server).await.unwrap()
}

#[tokio::test]
async fn connections_over_the_per_source_cap_are_reset_at_once_and_others_are_served() {
    let server = serve(TcpLimits {
        max_per_source: 3,
        ..TcpLimits::default()
    })
    .await;
    let address = server.tcp.address();
    let mut held = Vec::new();
    for _ in 0..3 {
        held.push(connect_from("127.0.0.2", address).await);
    }
    let gauge = server.metrics.tcp_connections.clone();
    assert!(eventually(Duration::from_secs(5), || gauge.get() == 3).await);
    // The fourth from the same address is reset straight away (a reset, not a close: the
    // server keeps no TIME_WAIT state for connections it refuses)...
    let mut fourth = connect_from("127.0.0.2", address).await;
    let started = Instant::now();
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(Duration::from_secs(2), fourth.read(&mut byte)).await;
    assert!(
        matches!(&read, Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionReset),
        "{read:?}"
    );
    assert!(started.elapsed() < Duration::from_millis(500));
    let per_source = server.metrics.tcp_rejected(TcpReject::PerSource);
    assert!(eventually(Duration::from_secs(2), || per_source.get() == 1).await);
    // ...while another address is served, and so is the first one's.
    let mut other = connect_from("127.0.0.3", address).await;
    let m = tcp_exchange(&mut other, &query(WEB)).await.unwrap();
    assert_eq!(m.answers.len(), 3);
    let m = tcp_exchange(&mut held[0], &query(WEB)).await.unwrap();
    assert_eq!(m.answers.len(), 3);
    // A closed connection gives its address a place again.
    drop(held.pop());
    assert!(eventually(Duration::from_secs(5), || gauge.get() == 3).await);
    let mut again = connect_from("127.0.0.2", address).await;
    let m = tcp_exchange(&mut again, &query(WEB)).await.unwrap();
    assert_eq!(m.answers.len(), 3);
    assert_eq!(per_source.get(), 1);
    assert_eq!(server.metrics.tcp_rejected(TcpReject::Limit).get(), 0);
    server.stop.cancel();
}

#[tokio::test]
async fn the_query_limit_closes_the_connection_after_its_last_answer() {
    let server = serve(TcpLimits {
        max_queries: 3,
        ..TcpLimits::default()
    })
    .await;
    let mut stream = TcpStream::connect(server.tcp.address()).await.unwrap();
    for _ in 0..3 {
        let m = tcp_exchange(&mut stream, &query(WEB)).await.unwrap();
        assert_eq!(
            m.answers.len(),
            3,
            "every allowed query is answered in full"
        );
    }
    assert!(closed_by_server(&mut stream, Duration::from_secs(2)).await);
    let closed = server.metrics.tcp_closed(TcpClose::QueryLimit);
    assert!(eventually(Duration::from_secs(2), || closed.get() == 1).await);
    server.stop.cancel();
}

#[tokio::test]
async fn the_total_time_limit_closes_a_busy_connection() {
    let server = serve(TcpLimits {
        max_lifetime: Duration::from_millis(400),
        idle_timeout: Duration::from_secs(30),
        ..TcpLimits::default()
    })
    .await;
    let mut stream = TcpStream::connect(server.tcp.address()).await.unwrap();
    let started = Instant::now();
    let mut answered = 0;
    // A query every 50 ms never lets the idle timeout fire; the total-time limit still does.
    while started.elapsed() < Duration::from_secs(5) {
        match tcp_exchange(&mut stream, &query(WEB)).await {
            Ok(_) => answered += 1,
            Err(_) => break,
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let lasted = started.elapsed();
    assert!(answered >= 3, "only {answered} answers before the close");
    assert!(
        lasted >= Duration::from_millis(350) && lasted < Duration::from_secs(2),
        "closed after {lasted:?}"
    );
    let closed = server.metrics.tcp_closed(TcpClose::Lifetime);
    assert!(eventually(Duration::from_secs(2), || closed.get() == 1).await);
    server.stop.cancel();
}

#[tokio::test]
async fn the_idle_timeout_closes_silent_and_half_sent_connections() {
    let server = serve(TcpLimits {
        idle_timeout: Duration::from_millis(200),
        ..TcpLimits::default()
    })
    .await;
    let address = server.tcp.address();
    let started = Instant::now();
    let mut silent = TcpStream::connect(address).await.unwrap();
    // A length prefix promising 100 bytes that never come.
    let mut half = TcpStream::connect(address).await.unwrap();
    half.write_all(&100u16.to_be_bytes()).await.unwrap();
    half.write_all(&[0; 10]).await.unwrap();
    assert!(closed_by_server(&mut silent, Duration::from_secs(2)).await);
    assert!(closed_by_server(&mut half, Duration::from_secs(2)).await);
    assert!(started.elapsed() >= Duration::from_millis(150));
    let closed = server.metrics.tcp_closed(TcpClose::Idle);
    assert!(eventually(Duration::from_secs(2), || closed.get() == 2).await);
    server.stop.cancel();
}

#[tokio::test]
async fn stopping_closes_the_listener_and_every_connection() {
    let server = serve(TcpLimits::default()).await;
    let address = server.tcp.address();
    let mut open = Vec::new();
    for _ in 0..5 {
        open.push(TcpStream::connect(address).await.unwrap());
    }
    let gauge = server.metrics.tcp_connections.clone();
    assert!(eventually(Duration::from_secs(5), || gauge.get() == 5).await);
    server.stop.cancel();
    tokio::time::timeout(Duration::from_secs(2), server.tcp.stopped())
        .await
        .expect("the listener and its connections end soon after stop");
    for stream in &mut open {
        assert!(closed_by_server(stream, Duration::from_secs(1)).await);
    }
    assert_eq!(gauge.get(), 0);
    assert_eq!(server.metrics.tcp_closed(TcpClose::Stop).get(), 5);
    assert!(
        TcpStream::connect(address).await.is_err(),
        "nothing listens any more"
    );
}
