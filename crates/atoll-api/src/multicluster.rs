//! MCS API group `multicluster.x-k8s.io`: ServiceExport and ServiceImport.
//!
//! Field names and omission rules follow the upstream Go types (`sigs.k8s.io/mcs-api`
//! `pkg/apis/v1beta1`), so objects round-trip unchanged: `spec.ports` and `spec.type` are always
//! written, `omitempty` fields are skipped when empty, unknown fields are ignored on input.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::condition::Condition;

/// API group of ServiceExport and ServiceImport.
pub const GROUP: &str = "multicluster.x-k8s.io";

/// ServiceExport condition types and reasons, as the upstream mcs-api v0.5.2 types name them.
pub mod export_condition {
    pub const VALID: &str = "Valid";
    pub const READY: &str = "Ready";
    pub const CONFLICT: &str = "Conflict";

    /// `Valid=True`.
    pub const REASON_VALID: &str = "Valid";
    /// `Valid=False`: no Service with the export's namespace and name.
    pub const REASON_NO_SERVICE: &str = "NoService";
    /// `Valid=False`: the Service's type cannot be exported (ExternalName).
    pub const REASON_INVALID_SERVICE_TYPE: &str = "InvalidServiceType";
    /// `Valid=False` (Atoll's own reason): the ClusterSet's namespace policy excludes the
    /// export's namespace.
    pub const REASON_NAMESPACE_EXCLUDED: &str = "NamespaceExcluded";
    /// `Valid=False` (KEP-5939): the export's cluster selectors are malformed.
    pub const REASON_INVALID_CLUSTER_SELECTOR: &str = "InvalidClusterSelector";
    /// `Ready=True` in a push model: the export reached the shared control plane.
    pub const REASON_EXPORTED: &str = "Exported";
    /// `Ready=True` in a pull model.
    pub const REASON_READY: &str = "Ready";
    pub const REASON_PENDING: &str = "Pending";
    pub const REASON_FAILED: &str = "Failed";

    pub const REASON_NO_CONFLICTS: &str = "NoConflicts";
    pub const REASON_PORT_CONFLICT: &str = "PortConflict";
    pub const REASON_TYPE_CONFLICT: &str = "TypeConflict";
    pub const REASON_SESSION_AFFINITY_CONFLICT: &str = "SessionAffinityConflict";
    pub const REASON_SESSION_AFFINITY_CONFIG_CONFLICT: &str = "SessionAffinityConfigConflict";
    pub const REASON_LABELS_CONFLICT: &str = "LabelsConflict";
    pub const REASON_ANNOTATIONS_CONFLICT: &str = "AnnotationsConflict";
    pub const REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT: &str = "InternalTrafficPolicyConflict";
    pub const REASON_TRAFFIC_DISTRIBUTION_CONFLICT: &str = "TrafficDistributionConflict";
    pub const REASON_IP_FAMILY_CONFLICT: &str = "IPFamilyConflict";
    /// KEP-5939: exports of one service carry different cluster selector lists.
    pub const REASON_CLUSTER_SELECTORS_CONFLICT: &str = "ClusterSelectorsConflict";
}

/// ServiceImport condition types and reasons, as the upstream mcs-api v0.5.2 types name them.
pub mod import_condition {
    pub const READY: &str = "Ready";
    pub const REASON_READY: &str = "Ready";
    pub const REASON_PENDING: &str = "Pending";
    pub const REASON_IP_FAMILY_NOT_SUPPORTED: &str = "IPFamilyNotSupported";
}

/// Spec of a ServiceExport. Upstream allows the whole spec to be absent; an empty spec and an
/// absent one mean the same.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportSpec {
    /// Labels to put on the ServiceImport (never taken from the Service's own metadata).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    /// Annotations to put on the ServiceImport.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
    /// KEP-5939's `clusterSelectors`, read when a CRD in the cluster has the field. Not in the
    /// schema Atoll installs (identical to upstream's, which does not have it yet); the
    /// annotation `atoll.dev/cluster-selectors` carries the list meanwhile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub cluster_selectors: Option<Vec<crate::cluster_selector::ClusterSelector>>,
}

/// Status of a ServiceExport.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportStatus {
    /// Valid, Ready and Conflict conditions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

/// How a ServiceImport is reached: `ClusterSetIP` (a virtual IP in `spec.ips`, load-balanced
/// over all exporting clusters' endpoints) or `Headless` (clients resolve endpoints through DNS).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub enum ServiceImportType {
    // Plain comments, not doc comments: documented variants would turn the schema's `enum`
    // into a `oneOf`, which upstream does not have.
    // A virtual IP in `spec.ips`, load-balanced over all exporting clusters' endpoints.
    ClusterSetIP,
    // No virtual IP: clients resolve the endpoints through DNS.
    Headless,
}

/// A port of a ServiceImport: the external properties of a Service port (no target port).
#[derive(
    Clone, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// DNS_LABEL name; optional only when the import has a single port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// TCP, UDP or SCTP; absent means TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// Application protocol (IANA name or a prefixed name such as kubernetes.io/h2c).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// Port number exposed by the service.
    pub port: i32,
}

/// ClientIP session affinity settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClientIpConfig {
    /// Sticky session time in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<i32>,
}

/// Session affinity settings of a ServiceImport (same shape as the core Service's).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionAffinityConfig {
    /// Settings for ClientIP affinity.
    #[serde(rename = "clientIP", default, skip_serializing_if = "Option::is_none")]
    pub client_ip: Option<ClientIpConfig>,
}

/// Spec of a ServiceImport: the merged view of every exporting cluster's Service.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportSpec {
    /// Union of the constituent Services' ports. Always serialized, even when empty.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ports: Vec<ServicePort>,
    /// The clusterset VIP(s) for ClusterSetIP imports; empty for Headless.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub ips: Vec<String>,
    /// ClusterSetIP or Headless.
    #[serde(rename = "type")]
    pub type_: ServiceImportType,
    /// `None` or `ClientIP`; ignored for Headless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// Session affinity settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// IP families (`IPv4`, `IPv6`) of the import; `ips[i]` has family `ipFamilies[i]`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub ip_families: Vec<String>,
    /// `Cluster` or `Local`, as on the exported Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    /// Traffic distribution preference, as on the exported Service (e.g. `PreferClose`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
}

impl ServiceImportSpec {
    /// An empty spec of the given type: no ports, no IPs, nothing else set.
    pub fn new(type_: ServiceImportType) -> Self {
        Self {
            ports: Vec::new(),
            ips: Vec::new(),
            type_,
            session_affinity: None,
            session_affinity_config: None,
            ip_families: Vec::new(),
            internal_traffic_policy: None,
            traffic_distribution: None,
        }
    }
}

/// One cluster an import was derived from.
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct ClusterStatus {
    /// Cluster id of the exporting cluster (an RFC-1123 DNS label).
    pub cluster: String,
}

/// Whether the implementation maintains MCS EndpointSlice objects for an import (mcs-api
/// v0.5.2), so that consumers such as Gateway API implementations know whether to read them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
pub enum EndpointSliceObjects {
    // Plain comments, not doc comments: documented variants would turn the schema's `enum`
    // into a `oneOf`, which upstream does not have.
    // MCS EndpointSlices labelled with the import's name are maintained in this cluster.
    Present,
    // No EndpointSlice objects are maintained for this import.
    Absent,
}

/// Status of a ServiceImport.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportStatus {
    /// The exporting clusters this import was derived from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["cluster"]))]
    pub clusters: Vec<ClusterStatus>,
    /// The Ready condition.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// Whether MCS EndpointSlice objects exist for this import.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint_slice_objects: Option<EndpointSliceObjects>,
}

crate::resource::versioned_objects! {
    group: GROUP,
    /// Declares that the Service with the same namespace and name is exported to the ClusterSet.
    ServiceExport {
        plural: "serviceexports",
        scope: Namespaced,
        spec: ServiceExportSpec,
        status: ServiceExportStatus,
    }
    /// A service imported from one or more clusters of the ClusterSet.
    ServiceImport {
        plural: "serviceimports",
        scope: Namespaced,
        spec: ServiceImportSpec,
        status: ServiceImportStatus,
    }
}
