//! Kubernetes API types for Atoll.
//!
//! * [`multicluster`]: the MCS API (`multicluster.x-k8s.io` ServiceExport and ServiceImport), in
//!   the two served versions [`v1alpha1`] and [`v1beta1`]. Their schemas are identical upstream, so
//!   both versions share one set of spec/status types and differ only in `apiVersion`.
//! * [`about`]: KEP-2149 `about.k8s.io` ClusterProperty, which carries the cluster id.
//! * [`hub`]: the records members publish on the hub (`hub.atoll.dev` ExportedService and
//!   ExportedEndpointSlice).
//! * [`cluster_selector`]: KEP-5939's cluster selector entry (alpha).
//! * [`inventory`]: KEP-4322 ClusterProfile, one per member on the hub.
//! * [`dns_name`]: DNS names as users give them (a zone, a forwarding target's host), checked.
//! * [`endpoint`]: endpoints as they cross clusters ([`endpoint::PortableEndpoint`]) and MCS
//!   EndpointSlices as importers decode them ([`endpoint::ServedSlice`]); [`mcs_slice`]: as they
//!   keep them ([`mcs_slice::McsSlice`]), values shared through an [`interner::Interner`].
//! * [`keys`]: namespace and name of a service ([`keys::ServiceKey`]) or of one object
//!   ([`keys::ObjectKey`]), shared by the agent's plan and the DNS zone.
//! * [`labels`]: well-known labels and annotations.
//! * [`crd`]: the CustomResourceDefinitions `atoll crds` prints, schema-compatible with upstream;
//!   [`hub_bounds`]: the bounds of the hub CRDs' schemas.
//!
//! This crate has no Kubernetes client and no async runtime: it is data only.

pub mod about;
pub mod address;
pub mod cluster_selector;
pub mod condition;
pub mod crd;
pub mod dns_name;
pub mod endpoint;
pub mod hub;
pub mod hub_bounds;
pub mod interner;
pub mod inventory;
pub mod keys;
pub mod labels;
pub mod mcs_slice;
pub mod multicluster;
mod resource;
mod schema;

pub use condition::{Condition, ConditionStatus};
pub use multicluster::{v1alpha1, v1beta1};
