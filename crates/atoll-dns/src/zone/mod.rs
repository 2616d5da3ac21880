//! The `clusterset.local` zone of the MCS DNS specification, as data: ServiceImports and MCS
//! EndpointSlices are kept as compact records in a [`Catalog`] (fed by the watches through a
//! [`Feed`], which leaves out slices no trusted controller manages: [`SliceTrust`]), from which
//! an immutable [`Zone`] with pre-encoded record sets is built, and updated one changed service
//! at a time. Answering from it is [`crate::answer`]'s part.

// Zone arithmetic is checked: a member's input at any bound must not panic or wrap here.
#![deny(clippy::arithmetic_side_effects)]

mod catalog;
mod config;
mod feed;
mod missing;
mod records;
mod service;
mod shards;
mod snapshot;
mod trust;

pub use catalog::{Catalog, ImportPort, ImportRecord, ReadyEndpoint, SlicePort, SliceRecord};
pub use config::{DEFAULT_MAX_UDP_PAYLOAD, MIN_UDP_PAYLOAD, ZoneConfig, ZoneError, zone_name};
pub use feed::{Feed, WatchEvent};
pub use missing::Missing;
pub(crate) use records::RrSet;
#[cfg(test)]
pub(crate) use records::{MAX_RRSET, MAX_SERVICE_RECORDS};
pub use snapshot::Zone;
pub use trust::SliceTrust;

#[cfg(test)]
mod incremental_tests;
