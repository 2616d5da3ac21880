//! The UDP hot path: several sockets bound to the same address with SO_REUSEPORT (the kernel
//! spreads packets over them), each served by one blocking thread that loads the current zone
//! snapshot without locking, answers into a reused buffer and sends. No allocation, no task
//! per packet, no shared lock.

use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use socket2::{Domain, Protocol, Socket, Type};
use tokio_util::sync::CancellationToken;

use super::Error;
use crate::SharedZone;
use crate::answer::answer;
use crate::metrics::DnsMetrics;

/// Largest UDP query we read (EDNS allows clients to send up to 64 KiB; queries are small).
const MAX_QUERY: usize = 4096;

fn bind(address: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    socket.set_reuse_port(true)?;
    socket.set_reuse_address(true)?;
    // Wake up now and then to notice shutdown.
    socket.set_read_timeout(Some(Duration::from_millis(250)))?;
    socket.bind(&address.into())?;
    Ok(socket.into())
}

/// Whether a datagram from `peer` may be answered at all. No real client sends from port 0, from
/// an unspecified address (`0.0.0.0`, `::`) or from a broadcast or multicast address (RFC 1122
/// §3.2.1.3 and RFC 4291 §2.7 forbid them as sources), IPv4-mapped IPv6 forms included: such a
/// source is forged, and answering would send traffic to a third party or to a whole network.
pub fn answerable_source(peer: SocketAddr) -> bool {
    if peer.port() == 0 {
        return false;
    }
    let v4 = match peer.ip() {
        IpAddr::V4(v4) => v4,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4,
            None => return !(v6.is_unspecified() || v6.is_multicast()),
        },
    };
    !(v4.is_unspecified() || v4.is_broadcast() || v4.is_multicast())
}

/// Binds `workers` sockets on `address` and starts one thread for each; they stop within about
/// 250 ms of `stop` being cancelled. Returns the address actually bound (port 0 picks a free
/// port, shared by all workers).
pub fn start(
    address: SocketAddr,
    workers: usize,
    zone: SharedZone,
    metrics: DnsMetrics,
    stop: CancellationToken,
) -> Result<SocketAddr, Error> {
    let first = bind(address).map_err(|source| Error::Bind { address, source })?;
    let bound = first
        .local_addr()
        .map_err(|source| Error::Bind { address, source })?;
    let mut sockets = vec![first];
    for _ in 1..workers.max(1) {
        sockets.push(bind(bound).map_err(|source| Error::Bind {
            address: bound,
            source,
        })?);
    }
    for (i, socket) in sockets.into_iter().enumerate() {
        let (zone, metrics, stop) = (zone.clone(), metrics.clone(), stop.clone());
        std::thread::Builder::new()
            .name(format!("dns-udp-{i}"))
            .spawn(move || serve(&socket, &zone, &metrics, &stop))
            .map_err(|source| Error::Bind {
                address: bound,
                source,
            })?;
    }
    Ok(bound)
}

fn serve(socket: &UdpSocket, zone: &SharedZone, metrics: &DnsMetrics, stop: &CancellationToken) {
    let mut query = [0u8; MAX_QUERY];
    let mut response = Vec::with_capacity(4096);
    let mut handled: u64 = 0;
    while !stop.is_cancelled() {
        let (len, peer) = match socket.recv_from(&mut query) {
            Ok(received) => received,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(error) => {
                // Per-packet errors (e.g. ICMP port unreachable reported on the socket) must
                // never stop the server.
                tracing::debug!(%error, "udp receive error");
                continue;
            }
        };
        if !answerable_source(peer) {
            metrics.udp_dropped_sources.inc();
            continue;
        }
        handled += 1;
        let sample = handled.is_multiple_of(64);
        let started = sample.then(Instant::now);
        let snapshot = zone.load();
        let outcome = answer(&snapshot, &query[..len], false, &mut response);
        if !response.is_empty()
            && let Err(error) = socket.send_to(&response, peer)
        {
            tracing::debug!(%error, %peer, "udp send error");
        }
        if let Some(started) = started {
            metrics.latency.observe(started.elapsed().as_secs_f64());
        }
        metrics.count(false, &outcome);
    }
}

#[cfg(test)]
mod tests {
    use super::answerable_source;

    fn ok(peer: &str) -> bool {
        answerable_source(peer.parse().unwrap_or_else(|e| panic!("{peer}: {e}")))
    }

    #[test]
    fn ordinary_sources_are_answered() {
        for peer in [
            "127.0.0.1:53000",
            "10.0.0.7:1",
            "192.168.1.255:4000", // may be a host address in a wider subnet
            "[::1]:53000",
            "[fd00::7]:65535",
            "[::ffff:10.0.0.7]:53000",
        ] {
            assert!(ok(peer), "{peer} should be answered");
        }
    }

    #[test]
    fn forged_sources_are_never_answered() {
        for peer in [
            "127.0.0.1:0",
            "[::1]:0",
            "0.0.0.0:53000",
            "[::]:53000",
            "255.255.255.255:53000",
            "[::ffff:0.0.0.0]:53000",
            "[::ffff:255.255.255.255]:53000",
            "224.0.0.251:5353",
            "[ff02::fb]:5353",
            "[::ffff:239.1.1.1]:53000",
        ] {
            assert!(!ok(peer), "{peer} must not be answered");
        }
    }
}
