//! The TCP listening socket and its backlog. The kernel completes handshakes on its own and
//! queues them until the server accepts; when a burst of connections fills that queue, the
//! kernel drops the handshakes' last packets, and with SYN cookies a client then believes it is
//! connected to a server that never saw the connection and so can neither serve nor close it
//! (an idle client waits on it for good). The standard library's backlog of 128 overflowed
//! under a burst of 2,000 connections; the queue here is as long as the system allows
//! (`net.core.somaxconn`, 4,096 on current kernels, CoreDNS's backlog too), and never asks for
//! less than the connection limit, so a burst waits in the queue until the accept loop serves
//! it or closes what is over the limits.

use std::net::SocketAddr;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::net::TcpListener;

/// Where Linux says how long an accept queue may be.
const SOMAXCONN_PATH: &str = "/proc/sys/net/core/somaxconn";
/// The system maximum assumed when it cannot be read: Linux's default since 5.4.
const DEFAULT_SOMAXCONN: u32 = 4096;

/// The accept queue of a listener.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backlog {
    /// What the server asks `listen` for.
    pub requested: u32,
    /// What the kernel grants: the request capped at the system maximum.
    pub granted: u32,
}

impl Backlog {
    /// The backlog for a server of `max_connections` on a system whose maximum is `somaxconn`
    /// (`None` when unknown): the system maximum, or the connection limit when that is larger.
    /// The kernel grants at most its maximum; asking for the limit anyway makes a shortfall
    /// visible ([`Backlog::holds`]) rather than silently smaller.
    pub fn for_limit(max_connections: usize, somaxconn: Option<u32>) -> Self {
        let system = somaxconn.unwrap_or(DEFAULT_SOMAXCONN);
        let limit = u32::try_from(max_connections).unwrap_or(u32::MAX);
        // listen(2) takes an int.
        let requested = system.max(limit).clamp(1, i32::MAX as u32);
        Self {
            requested,
            granted: requested.min(system.max(1)),
        }
    }

    /// Whether a burst as large as the connection limit fits in the queue.
    pub fn holds(&self, max_connections: usize) -> bool {
        usize::try_from(self.granted).is_ok_and(|granted| granted >= max_connections)
    }
}

/// `net.core.somaxconn`, when it can be read.
pub fn somaxconn() -> Option<u32> {
    std::fs::read_to_string(SOMAXCONN_PATH)
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// A listener on `address` with `backlog`, ready for tokio. Like the standard library's and
/// tokio's, it sets SO_REUSEADDR, so a restarted server binds while old connections linger in
/// TIME_WAIT.
pub fn bind(address: SocketAddr, backlog: Backlog) -> std::io::Result<TcpListener> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(i32::try_from(backlog.requested).unwrap_or(i32::MAX))?;
    socket.set_nonblocking(true)?;
    TcpListener::from_std(socket.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_backlog_is_the_systems_maximum() {
        assert_eq!(
            Backlog::for_limit(1000, Some(4096)),
            Backlog {
                requested: 4096,
                granted: 4096
            }
        );
        assert_eq!(Backlog::for_limit(1000, None).granted, 4096);
        // A connection limit above the system's maximum is asked for; the kernel grants less,
        // which the server reports.
        let small = Backlog::for_limit(1000, Some(128));
        assert_eq!((small.requested, small.granted), (1000, 128));
        assert!(!small.holds(1000));
        assert!(Backlog::for_limit(1000, Some(4096)).holds(1000));
    }

    proptest! {
        #[test]
        fn the_backlog_is_never_below_the_limit_or_the_system_maximum_and_fits_an_int(
            limit in any::<usize>(),
            somaxconn in proptest::option::of(any::<u32>()),
        ) {
            let backlog = Backlog::for_limit(limit, somaxconn);
            prop_assert!(backlog.requested >= 1 && backlog.requested <= i32::MAX as u32);
            let system = somaxconn.unwrap_or(DEFAULT_SOMAXCONN);
            prop_assert!(backlog.requested >= system.min(i32::MAX as u32));
            prop_assert!(u64::from(backlog.requested) >= (limit as u64).min(i32::MAX as u64));
            prop_assert_eq!(backlog.granted, backlog.requested.min(system.max(1)));
            // Never the standard library's 128 unless the system allows no more.
            prop_assert!(backlog.granted >= system.clamp(1, 128));
        }
    }

    #[tokio::test]
    async fn the_listener_accepts_connections() {
        let backlog = Backlog::for_limit(10, somaxconn());
        let listener = bind("127.0.0.1:0".parse().unwrap(), backlog).unwrap();
        let address = listener.local_addr().unwrap();
        assert!(address.port() > 0);
        // The accept queue's length is what `ss -ltn` shows as Send-Q: /proc/net/tcp does not
        // have it, so the end-to-end burst test (tests/tcp_burst.rs) is what checks it holds.
        let stream = tokio::net::TcpStream::connect(address).await.unwrap();
        let (accepted, peer) = listener.accept().await.unwrap();
        assert_eq!(peer, stream.local_addr().unwrap());
        drop(accepted);
    }
}
