//! `atoll dns`: serves `clusterset.local` (the zone of the MCS DNS specification) from this
//! cluster's ServiceImports and MCS EndpointSlices only, so it works with any MCS
//! implementation, not just Atoll's agent.
//!
//! Laid out like a DNS server's usual split into store, zone handler and server:
//! * [`zone`]: the data. Watch events become compact records in a [`zone::Catalog`], from
//!   which an immutable [`zone::Zone`] snapshot with pre-encoded record sets is built and
//!   updated one changed service at a time.
//! * [`answer`]: one query in, one response out, from a snapshot; [`resolve`] asks a snapshot
//!   without a socket (for `atoll explain`). [`wire`] is the little of the DNS wire format
//!   they need.
//! * [`source`]: the watches that keep the zone in step with the cluster and swap each new
//!   snapshot into a [`SharedZone`].
//! * [`server`]: UDP workers (one blocking thread per SO_REUSEPORT socket) and the TCP
//!   listener, which load the current snapshot without locks and answer with [`answer`].
//! * [`metrics`]: what the servers and the source count.
//!
//! No module here depends on `atoll-core`: the zone needs only the API types (`atoll-api`,
//! including the service keys) and the watches (`atoll-watch`).

pub mod answer;
#[cfg(test)]
mod fixtures;
pub mod metrics;
pub mod resolve;
pub mod server;
pub mod source;
pub mod wire;
pub mod zone;

use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
pub use atoll_watch::Readiness;

use crate::zone::{Zone, ZoneConfig};

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

/// A zone that answers SERVFAIL until the first sync replaces it.
pub fn initial_zone(config: &ZoneConfig) -> SharedZone {
    Arc::new(ArcSwap::from_pointee(Zone::unsynced(config)))
}
