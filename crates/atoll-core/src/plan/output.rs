//! What a pass decides: every write, the names this member publishes, and the report.

use std::collections::BTreeMap;

use atoll_api::Condition;
use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::inventory::Property;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::multicluster::ServiceImportStatus;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::announce::Announcement;

use super::report::Report;

/// Writes in this member's own hub namespace.
#[derive(Clone, Debug, Default)]
pub struct HubWrites {
    pub apply_records: Vec<ExportedService>,
    pub delete_records: Vec<ObjectKey>,
    pub apply_slices: Vec<ExportedEndpointSlice>,
    pub delete_slices: Vec<ObjectKey>,
}

impl HubWrites {
    pub fn is_empty(&self) -> bool {
        self.apply_records.is_empty()
            && self.delete_records.is_empty()
            && self.apply_slices.is_empty()
            && self.delete_slices.is_empty()
    }
}

/// A ServiceImport to apply (spec, labels, annotations; the status is separate).
#[derive(Clone, Debug, PartialEq)]
pub struct ImportApply {
    pub object: ServiceImport,
    /// Set when the import does not exist yet: the creation of the oldest constituent export,
    /// to measure export-to-import latency.
    pub first_export: Option<Time>,
}

/// A ServiceImport status to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportStatus {
    pub key: ObjectKey,
    pub status: ServiceImportStatus,
    /// Events for the ServiceImport (a source cluster withdrawn or restored).
    pub announcements: Vec<Announcement>,
}

/// Writes in this member.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberWrites {
    /// Derived Services (their cluster IPs become ClusterSetIP imports' `spec.ips`).
    pub apply_derived: Vec<Service>,
    /// ServiceImports; each before its status.
    pub apply_imports: Vec<ImportApply>,
    pub import_statuses: Vec<ImportStatus>,
    /// MCS EndpointSlices.
    pub apply_slices: Vec<EndpointSlice>,
    pub delete_imports: Vec<ObjectKey>,
    /// Events to publish on imports about to be deleted because every source cluster of theirs
    /// is withdrawn (the Event outlives the object, so `kubectl get events` says why).
    pub withdrawn_imports: Vec<(ObjectKey, Announcement)>,
    pub delete_derived: Vec<ObjectKey>,
    pub delete_slices: Vec<ObjectKey>,
    /// Every MCS slice of one source cluster in one namespace, deleted at once (see
    /// `collect_slice_deletions`).
    pub delete_slice_collections: Vec<SliceCollection>,
}

/// Every MCS EndpointSlice Atoll holds in `namespace` for `source_clusters`: deleted with one
/// `deletecollection` selecting Atoll's `endpointslice.kubernetes.io/managed-by` and the
/// `multicluster.kubernetes.io/source-cluster` label among them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceCollection {
    pub namespace: String,
    /// Sorted, each once, each a valid cluster id (a valid label value).
    pub source_clusters: Vec<String>,
    /// The slices the member held there when the pass was planned: what the collection
    /// deletes, and what the writer deletes one by one if the apiserver refuses the collection
    /// (an agent whose RBAC lacks `deletecollection`, say).
    pub slices: Vec<ObjectKey>,
}

impl SliceCollection {
    /// The label selector of the collection.
    pub fn selector(&self) -> String {
        format!(
            "{}={},{} in ({})",
            atoll_api::labels::ENDPOINTSLICE_MANAGED_BY,
            atoll_api::labels::ATOLL_ENDPOINTSLICE_MANAGER,
            atoll_api::labels::SOURCE_CLUSTER,
            self.source_clusters.join(",")
        )
    }

    /// Whether the collection selects slices of `source_cluster`.
    pub fn selects(&self, source_cluster: &str) -> bool {
        self.source_clusters.iter().any(|c| c == source_cluster)
    }
}

/// New conditions for one ServiceExport, and the Events announcing the change.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportStatus {
    pub key: ObjectKey,
    /// The export's uid, for the Events' object reference.
    pub uid: Option<String>,
    pub conditions: Vec<Condition>,
    pub announcements: Vec<Announcement>,
}

/// New `status.properties` for this member's ClusterProfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileStatus {
    pub key: ObjectKey,
    pub properties: Vec<Property>,
}

/// Names of the records (`r/<name>`) and copies (`s/<name>`) this member publishes, per
/// service.
pub type Published = BTreeMap<ServiceKey, Vec<String>>;

/// Every write of one pass.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub hub: HubWrites,
    /// The names of the records and copies this member publishes (its desired state; what it
    /// claims is decided from these in `crate::reconciler`), per service (a pass over some
    /// services knows only theirs).
    pub published: Published,
    pub profile: Option<ProfileStatus>,
    pub member: MemberWrites,
    pub export_statuses: Vec<ExportStatus>,
    pub report: Report,
}

impl Plan {
    /// Number of API writes the plan makes (Events not counted).
    pub fn writes(&self) -> usize {
        let h = &self.hub;
        let m = &self.member;
        h.apply_records.len()
            + h.delete_records.len()
            + h.apply_slices.len()
            + h.delete_slices.len()
            + m.apply_derived.len()
            + m.apply_imports.len()
            + m.import_statuses.len()
            + m.apply_slices.len()
            + m.delete_imports.len()
            + m.delete_derived.len()
            + m.delete_slices.len()
            + m.delete_slice_collections.len()
            + self.export_statuses.len()
            + usize::from(self.profile.is_some())
    }
}
