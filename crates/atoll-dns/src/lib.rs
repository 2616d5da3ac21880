//! `atoll dns`: serves `clusterset.local` (the zone of the MCS DNS specification) from this
//! cluster's ServiceImports and MCS EndpointSlices only, so it works with any MCS
//! implementation, not just Atoll's agent.
//!
//! Data flow: watches ([`source`]) rebuild an immutable [`atoll_core::dns::Zone`] after each
//! batch of changes and swap it into an [`arc_swap::ArcSwap`]; UDP workers ([`udp`], one
//! blocking thread per SO_REUSEPORT socket) and the TCP listener ([`tcp`]) load the current
//! snapshot without locks and answer with [`atoll_core::dns::answer`].

pub mod metrics;
pub mod source;
pub mod tcp;
pub mod udp;

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use atoll_core::dns::{Zone, ZoneConfig};
pub use atoll_watch::Readiness;

/// The current zone, swapped atomically when cluster objects change.
pub type SharedZone = Arc<ArcSwap<Zone>>;

/// Settings of the DNS server.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    pub zone: ZoneConfig,
    /// Addresses to serve on (UDP and TCP each).
    pub listen: Vec<SocketAddr>,
    /// UDP sockets (and threads) per address.
    pub udp_workers: usize,
}

/// Why the DNS server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
}

/// A zone that answers SERVFAIL until the first sync replaces it.
pub fn initial_zone(config: &ZoneConfig) -> SharedZone {
    Arc::new(ArcSwap::from_pointee(Zone::unsynced(config)))
}
