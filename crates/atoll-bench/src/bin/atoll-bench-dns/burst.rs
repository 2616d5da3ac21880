//! `burst N WAIT NAME=PORT:PID...`: issue 26's measurement, one server after the other. N TCP
//! connections are opened at once to the server (non-blocking connects in a tight loop) and
//! left idle; meanwhile a UDP client asks one query after another and keeps their latencies;
//! the server's resident memory is sampled; WAIT seconds after the burst (the server's idle
//! timeout and a margin) it counts the connections the client still sees open, never closed by
//! the server: with an overflowing accept queue and SYN cookies, connections the server never
//! saw, which no idle timeout will ever close. Prints each server's figures, then the targets:
//! Atoll at least as good as CoreDNS on each.

use std::io::{ErrorKind, Read};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use socket2::{Domain, Protocol, Socket, Type};

/// The name asked over UDP during the burst (a ClusterSetIP service of `populate`).
const UDP_NAME: &str = "svc-0.bench-dns.svc.clusterset.local.";
/// How long UDP latencies are taken from the start of the burst.
const UDP_WINDOW: Duration = Duration::from_secs(3);
/// A UDP query without an answer in this time counts at this latency.
const UDP_TIMEOUT: Duration = Duration::from_secs(1);

/// One server to measure.
#[derive(Debug, Clone)]
pub struct Target {
    pub name: String,
    pub port: u16,
    pub pid: u32,
}

impl std::str::FromStr for Target {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Self> {
        let (name, rest) = s.split_once('=').context("NAME=PORT:PID")?;
        let (port, pid) = rest.split_once(':').context("NAME=PORT:PID")?;
        Ok(Self {
            name: name.to_owned(),
            port: port.parse()?,
            pid: pid.parse()?,
        })
    }
}

/// What one burst measured.
#[derive(Debug, Clone)]
struct Measured {
    name: String,
    still_open: usize,
    not_connected: usize,
    udp_p50_ms: f64,
    udp_p99_ms: f64,
    udp_lost: usize,
    rss_before_mib: f64,
    rss_peak_mib: f64,
}

/// Resident memory of `pid` in MiB (`VmRSS`; 0 once it is gone).
fn rss_mib(pid: u32) -> f64 {
    atoll_bench::probe::usage(pid).map_or(0.0, |u| u.rss_mib)
}

/// Starts connecting to `address` without waiting for the handshake.
fn connect_now(address: SocketAddr) -> anyhow::Result<TcpStream> {
    let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
    socket.set_nonblocking(true)?;
    match socket.connect(&address.into()) {
        Ok(()) => {}
        // EINPROGRESS: the handshake goes on without us.
        Err(e) if e.raw_os_error() == Some(115) || e.kind() == ErrorKind::WouldBlock => {}
        Err(e) => return Err(e).context("connect"),
    }
    Ok(socket.into())
}

/// What the client sees of a connection: closed by the server (end of file or reset), still
/// open (nothing to read, no error), or never connected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Closed,
    Open,
    NotConnected,
}

fn seen(stream: &mut TcpStream) -> Seen {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => Seen::Closed,
        Ok(_) => Seen::Open,
        // Nothing to read: established (open), or the handshake still retried.
        Err(e) if e.kind() == ErrorKind::WouldBlock => {
            if stream.peer_addr().is_ok() {
                Seen::Open
            } else {
                Seen::NotConnected
            }
        }
        // Reset or refused.
        Err(_) => Seen::Closed,
    }
}

fn query_packet(id: u16) -> anyhow::Result<Vec<u8>> {
    let mut query = Message::query();
    query.metadata.id = id;
    query.add_query(Query::query(Name::from_ascii(UDP_NAME)?, RecordType::A));
    Ok(query.to_vec()?)
}

/// Asks `port` one query after another until `stop`; returns the latencies (a lost query
/// counts as [`UDP_TIMEOUT`]) and how many were lost.
fn udp_latencies(port: u16, stop: &AtomicBool) -> anyhow::Result<(Vec<Duration>, usize)> {
    let socket = UdpSocket::bind("127.0.0.1:0")?;
    socket.set_read_timeout(Some(UDP_TIMEOUT))?;
    let mut buf = [0u8; 4096];
    let (mut latencies, mut lost) = (Vec::new(), 0);
    let mut id: u16 = 0;
    while !stop.load(Ordering::Relaxed) {
        id = id.wrapping_add(1);
        let packet = query_packet(id)?;
        let started = Instant::now();
        socket.send_to(&packet, ("127.0.0.1", port))?;
        loop {
            match socket.recv_from(&mut buf) {
                // A late answer to an earlier query: keep waiting for this one.
                Ok((len, _)) if len >= 2 && u16::from_be_bytes([buf[0], buf[1]]) != id => {}
                Ok(_) => {
                    latencies.push(started.elapsed());
                    break;
                }
                Err(_) => {
                    latencies.push(UDP_TIMEOUT);
                    lost += 1;
                    break;
                }
            }
        }
        // About 2,000 queries a second: steady load, not a flood.
        std::thread::sleep(Duration::from_micros(500));
    }
    latencies.sort();
    Ok((latencies, lost))
}

fn percentile_ms(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i].as_secs_f64() * 1000.0
}

fn measure(target: &Target, connections: usize, wait: Duration) -> anyhow::Result<Measured> {
    let address: SocketAddr = ([127, 0, 0, 1], target.port).into();
    let rss_before_mib = rss_mib(target.pid);
    let stop = Arc::new(AtomicBool::new(false));
    let udp = {
        let (stop, port) = (stop.clone(), target.port);
        std::thread::spawn(move || udp_latencies(port, &stop))
    };
    // Let the UDP client start before the burst, so its window covers it.
    std::thread::sleep(Duration::from_millis(100));
    let started = Instant::now();
    let mut clients = (0..connections)
        .map(|_| connect_now(address))
        .collect::<anyhow::Result<Vec<TcpStream>>>()?;
    let mut rss_peak_mib = rss_mib(target.pid);
    while started.elapsed() < UDP_WINDOW {
        std::thread::sleep(Duration::from_millis(100));
        rss_peak_mib = rss_peak_mib.max(rss_mib(target.pid));
    }
    stop.store(true, Ordering::Relaxed);
    let (latencies, udp_lost) = udp
        .join()
        .map_err(|_| anyhow::anyhow!("the UDP client panicked"))??;
    if let Some(rest) = wait.checked_sub(started.elapsed()) {
        std::thread::sleep(rest);
    }
    let seen: Vec<Seen> = clients.iter_mut().map(seen).collect();
    let count = |s: Seen| seen.iter().filter(|x| **x == s).count();
    Ok(Measured {
        name: target.name.clone(),
        still_open: count(Seen::Open),
        not_connected: count(Seen::NotConnected),
        udp_p50_ms: percentile_ms(&latencies, 0.5),
        udp_p99_ms: percentile_ms(&latencies, 0.99),
        udp_lost,
        rss_before_mib,
        rss_peak_mib,
    })
}

/// Measures every target in turn and prints the figures and the targets; fails when Atoll
/// (`atoll`) is worse than CoreDNS (`coredns`) on a figure.
pub fn run(connections: usize, wait_seconds: u64, targets: &[Target]) -> anyhow::Result<()> {
    if targets.is_empty() {
        bail!("usage: atoll-bench-dns burst N WAIT_SECONDS NAME=PORT:PID...");
    }
    let wait = Duration::from_secs(wait_seconds);
    let mut results = Vec::new();
    for target in targets {
        let m = measure(target, connections, wait)?;
        println!(
            "burst {name}: {connections} TCP connections at once; still open after {wait_seconds} s: {open} (never connected: {nc}); UDP during the burst p50 {p50:.2} ms, p99 {p99:.2} ms ({lost} lost); RSS {before:.0} -> {peak:.0} MiB",
            name = m.name,
            open = m.still_open,
            nc = m.not_connected,
            p50 = m.udp_p50_ms,
            p99 = m.udp_p99_ms,
            lost = m.udp_lost,
            before = m.rss_before_mib,
            peak = m.rss_peak_mib,
        );
        results.push(m);
        // Let the closed connections of this run leave the kernel's tables before the next.
        std::thread::sleep(Duration::from_secs(2));
    }
    let find = |name: &str| results.iter().find(|m| m.name == name);
    let (Some(atoll), Some(coredns)) = (find("atoll"), find("coredns")) else {
        return Ok(());
    };
    let verdict = |ok: bool| if ok { "PASS" } else { "FAIL" };
    let open_ok = atoll.still_open <= coredns.still_open;
    let p99_ok = atoll.udp_p99_ms <= coredns.udp_p99_ms;
    let rss_ok = atoll.rss_peak_mib <= coredns.rss_peak_mib;
    println!(
        "burst target: still open after idle timeout + 5 s, atoll {} vs CoreDNS {} (target: at most CoreDNS's): {}",
        atoll.still_open,
        coredns.still_open,
        verdict(open_ok)
    );
    println!(
        "burst target: UDP p99 during the burst, atoll {:.2} ms vs CoreDNS {:.2} ms (target: at most CoreDNS's): {}",
        atoll.udp_p99_ms,
        coredns.udp_p99_ms,
        verdict(p99_ok)
    );
    println!(
        "burst target: RSS during the burst, atoll {:.0} MiB vs CoreDNS {:.0} MiB (target: at most CoreDNS's): {}",
        atoll.rss_peak_mib,
        coredns.rss_peak_mib,
        verdict(rss_ok)
    );
    if !(open_ok && p99_ok && rss_ok) {
        bail!("a burst target was missed");
    }
    Ok(())
}
