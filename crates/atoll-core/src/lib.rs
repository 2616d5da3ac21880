//! Pure MCS logic for Atoll: no Kubernetes client, no async runtime, no I/O.
//!
//! * [`cluster_id`]: validated cluster ids (KEP-2149, with Atoll's stricter single-label rule).
//! * [`merge`]: export records of one service in, the ServiceImport and Conflict verdict out.
//! * [`export`]: validity of an export and the records a member publishes on the hub.
//! * [`import`]: the ServiceImport, derived Service and MCS EndpointSlices an importer writes.
//! * [`derived`]: names of the derived Services that carry a ClusterSetIP import's VIP.
//! * [`trust`], [`validate`]: which hub objects may be used (hub records are untrusted input:
//!   every field is checked as the apiserver checks what an importer writes from it).
//! * [`budget`]: how many bytes of each member's hub objects an importer holds.
//! * [`caps`]: how much an importer takes from each member; [`audit`]: what of each member's
//!   publication an importer leaves out, for `atoll status`.
//! * [`precedence`]: when an export counts from (a member cannot backdate its own).
//! * [`mcs_names`]: names of the MCS EndpointSlices.
//! * [`text`]: member-written text made safe to print.
//! * [`conditions`], [`announce`]: status conditions (clock passed in) and the Events for
//!   their changes.
//! * [`diff`]: desired versus observed, and what Atoll owns.
//! * [`corefile`]: Atoll's clusterset.local block in a CoreDNS Corefile, added and removed;
//!   [`corefile_input`] checks what goes into it.
//! * [`keys`]: the service an object names (the key types are `atoll_api::keys`).
//! * [`plan`]: one reconcile pass as a pure function, from observed state to every write.
//! * [`leader`]: which agent replica of a member writes (Lease-based election).
//! * [`selection`]: KEP-5939 cluster selectors, validated and evaluated per importer.

pub mod access;
pub mod admission;
pub mod announce;
pub mod audit;
pub mod budget;
pub mod caps;
pub mod cluster_id;
pub mod conditions;
pub mod corefile;
pub mod corefile_input;
pub mod derived;
pub mod diff;
pub mod dirty;
pub mod events;
pub mod executor;
pub mod explain;
pub mod export;
pub mod import;
pub mod keys;
pub mod leader;
pub mod liveness;
pub mod mcs_names;
pub mod membership;
pub mod merge;
pub mod namespaces;
pub mod plan;
pub mod precedence;
pub mod reconciler;
pub mod selection;
pub mod slice_diff;
#[cfg(test)]
mod test_support;
pub mod text;
pub mod trust;
pub mod validate;

pub use cluster_id::{ClusterId, ClusterIdError};
