//! The transports: [`udp`] for the hot path, [`tcp`] for answers too large for UDP (with its
//! listening socket in [`listener`] and its per-address cap in `sources`). Both load the
//! current [`SharedZone`](crate::SharedZone) snapshot per query and answer with
//! [`crate::answer::answer`].

pub mod listener;
mod sources;
pub mod tcp;
pub mod udp;

use std::net::SocketAddr;

/// Why the DNS server could not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("binding {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
}
