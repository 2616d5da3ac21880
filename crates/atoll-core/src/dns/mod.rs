//! The `clusterset.local` zone of the MCS DNS specification: ServiceImports and MCS
//! EndpointSlices are kept as compact records in a [`Catalog`], from which an immutable [`Zone`]
//! with pre-encoded record sets is built, and updated one changed service at a time; [`answer`]
//! only parses, looks up and copies bytes.

mod answer;
mod catalog;
mod feed;
mod records;
mod resolve;
mod service;
mod shards;
mod wire;
mod zone;

pub use catalog::{Catalog, ImportPort, ImportRecord, ReadyEndpoint, SlicePort, SliceRecord};
pub use feed::{Feed, WatchEvent};

pub use answer::{Outcome, answer};
pub use resolve::resolve;
pub use wire::{MAX_NAME, ParseError, Query, encode_name, parse_query, rcode, rtype};
pub use zone::{DEFAULT_MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, Missing, Zone, ZoneConfig};

#[cfg(test)]
mod incremental_tests;
#[cfg(test)]
mod tests;
