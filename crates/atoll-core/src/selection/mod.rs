//! Cluster selection (KEP-5939, alpha): an export's ordered list of cluster selectors, and
//! which clusters an importer uses for the service.
//!
//! * [`ClusterSelector`]: one entry, in the KEP's shape (`{propertySelector: LabelSelector}`),
//!   read from the ServiceExport's `spec.clusterSelectors` once a CRD has the field, else from
//!   the annotation [`SELECTORS_ANNOTATION`] (the upstream CRDs prune unknown fields).
//! * [`parse`] and [`validate`]: what makes an export `Valid=False` with reason
//!   `InvalidClusterSelector`.
//! * [`select`]: the importer's evaluation: selectors in order, the first that
//!   selects a cluster with a ready or serving endpoint decides the active clusters, else every
//!   cluster is active. [`SAME_AS_IMPORTER`] stands for the importer's own property value.

mod eval;
mod hold;
mod selector;
#[cfg(test)]
mod tests;

pub use eval::{Candidate, Selection, profile_properties, select, serving};
pub use hold::{MIN_HOLD_SECONDS, hold};
pub use selector::{
    ACTIVE_LABEL, ClusterSelector, MAX_SELECTORS, SAME_AS_IMPORTER, SELECTORS_ANNOTATION,
    SelectorError, of_export, parse, validate,
};
