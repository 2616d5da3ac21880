//! What a pass plans from: what the agent's stores observed, who is planning, and what the
//! previous pass's writes taught it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use atoll_api::about::v1beta1::ClusterProperty;
use atoll_api::hub::{ExportedEndpointSlice, ExportedService, NamespacePolicy};
use atoll_api::inventory::ClusterProfile;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::mcs_slice::McsSlice;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;

use crate::ClusterId;
use crate::liveness::Liveness;
use crate::validate::Cidr;

/// Everything the agent's watches hold at the start of a pass.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Member: ServiceExports.
    pub exports: Vec<Arc<ServiceExport>>,
    /// Member: Services (exported ones and the derived ones Atoll owns).
    pub services: Vec<Arc<Service>>,
    /// Member: EndpointSlices of local Services (not MCS slices, not hub copies).
    pub service_slices: Vec<Arc<EndpointSlice>>,
    /// Member: the MCS EndpointSlices Atoll wrote.
    pub mcs_slices: Vec<Arc<McsSlice>>,
    /// Member: namespaces.
    pub namespaces: Vec<Arc<Namespace>>,
    /// Member: ServiceImports.
    pub imports: Vec<Arc<ServiceImport>>,
    /// Hub: every member's ExportedService records.
    pub records: Vec<Arc<ExportedService>>,
    /// Hub: every member's EndpointSlice copies.
    pub hub_slices: Vec<Arc<ExportedEndpointSlice>>,
    /// Hub: the ClusterSet's NamespacePolicy (at most the one named `clusterset` counts).
    pub policies: Vec<Arc<NamespacePolicy>>,
    /// Member: its ClusterProperties.
    pub properties: Vec<Arc<ClusterProperty>>,
    /// Hub: every member's ClusterProfile (its own among them), once it is joined.
    pub profiles: Vec<Arc<ClusterProfile>>,
    /// Member: its ServiceCIDRs, the ranges of its Services' cluster IPs (another member's
    /// endpoint there would send traffic to this cluster's own Services).
    pub service_cidrs: Vec<Arc<ServiceCIDR>>,
    /// Ranges this member's operator denies for other members' endpoints (its nodes', say).
    pub denied_cidrs: Vec<Cidr>,
    /// Member: its Nodes' addresses (InternalIP, ExternalIP) with the Node's name (another
    /// member's endpoint there would send traffic to this cluster's own nodes).
    pub node_addresses: BTreeMap<IpAddr, String>,
    /// Which source clusters are withdrawn or stale, from `crate::liveness::Tracker`.
    pub liveness: Liveness,
    /// The records and copies to import from, when they differ from what the hub holds now:
    /// the tracker's view, without withdrawn clusters and with the last claimed sets of
    /// clusters whose objects do not match their claims. `None`: import what the hub holds.
    /// (The export side always compares with what the hub holds.)
    pub sources: Option<Sources>,
    /// Member watches that have not listed yet (the MCS CRDs missing or not served, no
    /// permission, version skew): their stores are empty, not known to be, so nothing is
    /// planned, and the member's claim holds what the hub holds for it.
    pub unlisted: Vec<&'static str>,
    /// When this importer's watch saw each cluster's current beat (see
    /// [`crate::liveness::BeatsSeen`]); empty: as seen at the step.
    pub beats_seen: crate::liveness::BeatsSeen,
    /// The cluster selections this importer's last passes applied, by service (set by the
    /// reconciler from its report; a selection holds against changes without need, see
    /// `crate::selection::hold`).
    pub selections: Arc<BTreeMap<ServiceKey, crate::selection::Selection>>,
}

/// What the import side merges.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub records: Vec<Arc<ExportedService>>,
    pub copies: Vec<Arc<ExportedEndpointSlice>>,
}

impl Observed {
    /// The records the import side merges.
    pub fn source_records(&self) -> &[Arc<ExportedService>] {
        self.sources.as_ref().map_or(&self.records, |s| &s.records)
    }

    /// The endpoint copies the import side turns into MCS EndpointSlices.
    pub fn source_copies(&self) -> &[Arc<ExportedEndpointSlice>] {
        self.sources
            .as_ref()
            .map_or(&self.hub_slices, |s| &s.copies)
    }
}

/// Who is planning: the member's cluster id and, once joined, its ClusterProfile on the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: ClusterId,
    pub profile: Option<ObjectKey>,
}

impl Member {
    /// A member without a ClusterProfile to keep current.
    pub fn new(id: ClusterId) -> Self {
        Self { id, profile: None }
    }
}

/// A write the API refused: its HTTP status (0 when no answer came) and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub message: String,
}

impl Refusal {
    /// Whether the apiserver refused a Service for its IP families (say an IPv6-only service
    /// imported into an IPv4-only cluster).
    pub fn is_ip_family_problem(&self) -> bool {
        self.code == 422 && self.message.to_ascii_lowercase().contains("famil")
    }
}

/// What the writer learned in the previous pass that no watch shows: the writes that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Feedback {
    /// Exports whose hub record could not be written.
    pub publish_failures: BTreeMap<ServiceKey, Refusal>,
    /// Exports one of whose endpoint copies could not be written (the copy's name with the
    /// refusal).
    pub copy_failures: BTreeMap<ServiceKey, (String, Refusal)>,
    /// Imports whose derived Service could not be written.
    pub derived_failures: BTreeMap<ServiceKey, Refusal>,
}

impl Feedback {
    /// Takes in what a pass over `scope` (every service when `None`) learned: its failures
    /// replace those of the same services.
    pub fn absorb(&mut self, scope: Option<&BTreeSet<ServiceKey>>, pass: Feedback) {
        let Some(scope) = scope else {
            *self = pass;
            return;
        };
        self.publish_failures.retain(|k, _| !scope.contains(k));
        self.copy_failures.retain(|k, _| !scope.contains(k));
        self.derived_failures.retain(|k, _| !scope.contains(k));
        self.publish_failures.extend(pass.publish_failures);
        self.copy_failures.extend(pass.copy_failures);
        self.derived_failures.extend(pass.derived_failures);
    }

    /// Whether `other` fails the same writes with the same status codes (messages may differ
    /// from one attempt to the next without meaning anything new).
    pub fn same_failures(&self, other: &Self) -> bool {
        let codes = |m: &BTreeMap<ServiceKey, Refusal>| -> Vec<(ServiceKey, u16)> {
            m.iter().map(|(k, r)| (k.clone(), r.code)).collect()
        };
        let copy_codes = |m: &BTreeMap<ServiceKey, (String, Refusal)>| -> Vec<(ServiceKey, u16)> {
            m.iter().map(|(k, (_, r))| (k.clone(), r.code)).collect()
        };
        codes(&self.publish_failures) == codes(&other.publish_failures)
            && copy_codes(&self.copy_failures) == copy_codes(&other.copy_failures)
            && codes(&self.derived_failures) == codes(&other.derived_failures)
    }
}
