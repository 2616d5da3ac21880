//! The `clusterset.local` zone of the MCS DNS specification: built from ServiceImports and MCS
//! EndpointSlices into an immutable [`Zone`] whose record sets are pre-encoded, then queried by
//! [`answer`], which only parses, looks up and copies bytes.

mod answer;
mod resolve;
mod wire;
mod zone;

pub use answer::{Outcome, answer};
pub use resolve::resolve;
pub use wire::{MAX_NAME, ParseError, Query, encode_name, parse_query, rcode, rtype};
pub use zone::{DEFAULT_MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, Missing, Zone, ZoneConfig};

#[cfg(test)]
mod tests;
