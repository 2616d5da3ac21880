//! What members write on the hub, checked before it reaches an importer's writes. A member's
//! hub credentials let it write anything into its own hub namespace, so every field of its
//! records and endpoint copies is checked with the rules the apiserver applies to the Services
//! and EndpointSlices an importer makes from them; what fails is left out alone (a record, a
//! copy, or one endpoint) and reported with a [`Reason`].
//!
//! * [`record`]: ExportedService records (ports, type-specific fields, exported metadata).
//! * [`endpoints`]: ExportedEndpointSlice copies and each of their endpoints.
//! * [`addresses`]: endpoint addresses, CIDRs and the importer's own ranges.
//! * [`ports`], [`names`]: the apiserver's port and name rules.

pub mod addresses;
pub mod endpoints;
pub mod names;
pub mod ports;
pub mod problem;
pub mod record;

pub use addresses::{AddressPolicy, Cidr, Family, node_addresses};
pub use problem::{Problem, Reason};
