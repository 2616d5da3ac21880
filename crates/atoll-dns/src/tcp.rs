//! DNS over TCP (RFC 7766): two-byte length-prefixed messages, several per connection, the full
//! answer however large. Used by clients after a truncated UDP answer.

use std::net::SocketAddr;
use std::time::Duration;

use atoll_core::dns::answer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::metrics::DnsMetrics;
use crate::{Error, SharedZone};

/// Idle time after which a connection is closed.
const IDLE: Duration = Duration::from_secs(10);

/// Binds `address` and serves connections in the background; returns the bound address.
pub async fn start(
    address: SocketAddr,
    zone: SharedZone,
    metrics: DnsMetrics,
) -> Result<SocketAddr, Error> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| Error::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| Error::Bind { address, source })?;
    tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => {
                    let (zone, metrics) = (zone.clone(), metrics.clone());
                    tokio::spawn(async move {
                        if let Err(error) = connection(stream, &zone, &metrics).await {
                            tracing::debug!(%error, "tcp connection ended with an error");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "tcp accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    });
    Ok(bound)
}

async fn connection(
    mut stream: TcpStream,
    zone: &SharedZone,
    metrics: &DnsMetrics,
) -> std::io::Result<()> {
    let mut query = vec![0u8; usize::from(u16::MAX)];
    let mut response = Vec::with_capacity(4096);
    loop {
        let mut len = [0u8; 2];
        match tokio::time::timeout(IDLE, stream.read_exact(&mut len)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(()),
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        let len = usize::from(u16::from_be_bytes(len));
        tokio::time::timeout(IDLE, stream.read_exact(&mut query[..len]))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        let outcome = answer(&zone.load(), &query[..len], true, &mut response);
        metrics.count(true, &outcome);
        if response.is_empty() {
            return Ok(());
        }
        let prefix = u16::try_from(response.len())
            .unwrap_or(u16::MAX)
            .to_be_bytes();
        stream.write_all(&prefix).await?;
        stream.write_all(&response).await?;
    }
}
