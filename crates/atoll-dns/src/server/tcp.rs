//! DNS over TCP (RFC 7766): two-byte length-prefixed messages, several per connection, the full
//! answer however large. Used by clients after a truncated UDP answer.
//!
//! Connections cost the server memory and a task each, and TCP is where a client can hold them
//! open cheaply, so every resource a connection takes is bounded ([`TcpLimits`]): how many are
//! open at once, in all and from one address, how long one may wait for a query and live in
//! total, and how many queries it may send. An idle connection holds no message buffer. A
//! burst of connections waits in an accept queue as long as the system allows
//! ([`super::listener`]) and each is then served or, over a limit, reset at once: none is left
//! where neither side can close it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio::time::{Instant, timeout};
use tokio_util::sync::CancellationToken;

use super::Error;
use super::listener::{self, Backlog};
use super::sources::SourceSlots;
use crate::SharedZone;
use crate::answer::answer;
use crate::metrics::{DnsMetrics, TcpClose, TcpReject};

/// Bounds on what TCP clients can make the server hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpLimits {
    /// Connections served at once; any more are reset as soon as they are accepted.
    pub max_connections: usize,
    /// Connections served at once from one source address; any more are reset as soon as they
    /// are accepted, so one client cannot take every slot.
    pub max_per_source: usize,
    /// How long a connection may wait for its next query, or for the rest of one, or for the
    /// client to take an answer.
    pub idle_timeout: Duration,
    /// How long a connection may stay open however busy it is, so that no client holds one of
    /// the `max_connections` slots for good.
    pub max_lifetime: Duration,
    /// Queries answered on one connection before the server closes it.
    pub max_queries: usize,
}

impl Default for TcpLimits {
    fn default() -> Self {
        Self {
            max_connections: 1000,
            // A client (or the cluster's CoreDNS forwarding to Atoll) needs one connection per
            // query in flight; 64 is far above what answers of microseconds keep busy.
            max_per_source: 64,
            idle_timeout: Duration::from_secs(10),
            max_lifetime: Duration::from_secs(60),
            max_queries: 1000,
        }
    }
}

/// A TCP server started by [`start`].
#[derive(Debug)]
pub struct TcpServer {
    address: SocketAddr,
    backlog: Backlog,
    task: JoinHandle<()>,
}

impl TcpServer {
    /// The address actually bound (port 0 picks a free port).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The listener's accept queue.
    pub fn backlog(&self) -> Backlog {
        self.backlog
    }

    /// Resolves once the listener is closed and every connection has ended, which happens soon
    /// after the `stop` token given to [`start`] is cancelled.
    pub async fn stopped(self) {
        if let Err(error) = self.task.await {
            tracing::warn!(%error, "tcp listener task failed");
        }
    }
}

/// Binds `address` and serves connections in the background within `limits` until `stop` is
/// cancelled.
pub async fn start(
    address: SocketAddr,
    zone: SharedZone,
    metrics: DnsMetrics,
    limits: TcpLimits,
    stop: CancellationToken,
) -> Result<TcpServer, Error> {
    let backlog = Backlog::for_limit(limits.max_connections, listener::somaxconn());
    let listener =
        listener::bind(address, backlog).map_err(|source| Error::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { address, source })?;
    if !backlog.holds(limits.max_connections) {
        tracing::warn!(
            address = %bound,
            backlog = backlog.granted,
            max_connections = limits.max_connections,
            "the system's accept queue (net.core.somaxconn) is shorter than the connection \
             limit: a burst of connections can overflow it and leave clients on connections \
             the server never saw; raise net.core.somaxconn"
        );
    }
    let task = tokio::spawn(listen(listener, zone, metrics, limits, stop));
    Ok(TcpServer {
        address: bound,
        backlog,
        task,
    })
}

async fn listen(
    listener: TcpListener,
    zone: SharedZone,
    metrics: DnsMetrics,
    limits: TcpLimits,
    stop: CancellationToken,
) {
    // One permit per connection slot; a connection task holds its permit until it ends, so all
    // permits being back means every connection has ended.
    let slots =
        u32::try_from(limits.max_connections.min(Semaphore::MAX_PERMITS)).unwrap_or(u32::MAX);
    let permits = Arc::new(Semaphore::new(slots as usize));
    let sources = SourceSlots::new(limits.max_per_source);
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            accepted = listener.accept() => accepted,
        };
        let (stream, peer) = match accepted {
            Ok(accepted) => accepted,
            Err(error) => {
                // Typically out of file descriptors: wait a little rather than spin.
                tracing::warn!(%error, "tcp accept failed");
                tokio::select! {
                    () = stop.cancelled() => break,
                    () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                }
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            refuse(stream, &metrics, TcpReject::Limit);
            continue;
        };
        let Some(source) = sources.take(peer.ip()) else {
            refuse(stream, &metrics, TcpReject::PerSource);
            continue;
        };
        let (zone, metrics, stop) = (zone.clone(), metrics.clone(), stop.clone());
        tokio::spawn(async move {
            metrics.tcp_connections.inc();
            let reason = connection(stream, &zone, &metrics, &limits, &stop).await;
            metrics.tcp_connections.dec();
            metrics.tcp_closed(reason).inc();
            drop((source, permit));
        });
    }
    drop(listener);
    if permits.acquire_many(slots).await.is_err() {
        tracing::warn!("tcp connection slots closed while stopping");
    }
}

/// Closes a connection over a limit with a reset: the client learns at once (it may retry
/// later), and the server keeps no state for it (a normal close would leave it in TIME_WAIT,
/// which a flood of connections would fill).
fn refuse(stream: TcpStream, metrics: &DnsMetrics, reason: TcpReject) {
    metrics.tcp_rejected(reason).inc();
    if let Err(error) = socket2::SockRef::from(&stream).set_linger(Some(Duration::ZERO)) {
        tracing::debug!(%error, "tcp set_linger failed; closing normally");
    }
    drop(stream);
}

/// Serves one connection until a limit, the client or `stop` ends it; says which.
async fn connection(
    stream: TcpStream,
    zone: &SharedZone,
    metrics: &DnsMetrics,
    limits: &TcpLimits,
    stop: &CancellationToken,
) -> TcpClose {
    let deadline = Instant::now() + limits.max_lifetime;
    // Whichever ends first drops the others, and with them the stream, which closes it.
    tokio::select! {
        () = stop.cancelled() => TcpClose::Stop,
        () = tokio::time::sleep_until(deadline) => TcpClose::Lifetime,
        reason = exchange(stream, zone, metrics, limits) => reason,
    }
}

/// Reads queries and writes answers, one at a time, up to `limits.max_queries`.
async fn exchange(
    mut stream: TcpStream,
    zone: &SharedZone,
    metrics: &DnsMetrics,
    limits: &TcpLimits,
) -> TcpClose {
    // Each answer goes out in one write; with Nagle's algorithm a second small write would
    // wait for the client's delayed acknowledgement.
    if let Err(error) = stream.set_nodelay(true) {
        tracing::debug!(%error, "tcp set_nodelay failed");
    }
    let idle = limits.idle_timeout;
    for _ in 0..limits.max_queries {
        let mut prefix = [0u8; 2];
        if let Err(close) = read_within(&mut stream, &mut prefix, idle).await {
            return close;
        }
        // Allocated at the message's length and only for this message, so an idle connection
        // holds no buffer.
        let mut query = vec![0u8; usize::from(u16::from_be_bytes(prefix))];
        if let Err(close) = read_within(&mut stream, &mut query, idle).await {
            return close;
        }
        let mut response = Vec::new();
        let outcome = answer(&zone.load(), &query, true, &mut response);
        metrics.count(true, &outcome);
        drop(query);
        if response.is_empty() {
            // Not a query (a response, or shorter than a header): nothing sensible follows.
            return TcpClose::Error;
        }
        let mut framed = Vec::with_capacity(2 + response.len());
        framed.extend_from_slice(
            &u16::try_from(response.len())
                .unwrap_or(u16::MAX)
                .to_be_bytes(),
        );
        framed.extend_from_slice(&response);
        drop(response);
        match timeout(idle, stream.write_all(&framed)).await {
            Err(_) => return TcpClose::Idle,
            Ok(Err(error)) => {
                tracing::debug!(%error, "tcp write failed");
                return TcpClose::Error;
            }
            Ok(Ok(())) => {}
        }
    }
    // Send the last answer and a FIN before closing, so the client reads everything.
    if let Ok(Err(error)) = timeout(idle, stream.shutdown()).await {
        tracing::debug!(%error, "tcp shutdown failed");
    }
    TcpClose::QueryLimit
}

/// Reads exactly `buf.len()` bytes within `idle`, or says why the connection ends.
async fn read_within(
    stream: &mut tokio::net::TcpStream,
    buf: &mut [u8],
    idle: std::time::Duration,
) -> Result<(), TcpClose> {
    match timeout(idle, stream.read_exact(buf)).await {
        Err(_) => Err(TcpClose::Idle),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => Err(TcpClose::Client),
        Ok(Err(error)) => {
            tracing::debug!(%error, "tcp read failed");
            Err(TcpClose::Error)
        }
        Ok(Ok(_)) => Ok(()),
    }
}
