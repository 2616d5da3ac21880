//! Objects Atoll keeps on the hub (`hub.atoll.dev`). Each member writes only into its own hub
//! namespace `atoll-<cluster-id>`: one [`ExportedService`] per ServiceExport, plus copies of the
//! exported Service's EndpointSlices (plain `discovery.k8s.io/v1` objects, labelled below).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::multicluster::{ServiceImportType, ServicePort, SessionAffinityConfig};

/// API group of the hub objects.
pub const GROUP: &str = "hub.atoll.dev";
/// Prefix of a member's hub namespace; the rest is its cluster id.
pub const NAMESPACE_PREFIX: &str = "atoll-";
/// Label on hub objects: the cluster id of the member that wrote them.
pub const LABEL_CLUSTER: &str = "hub.atoll.dev/cluster";
/// Label on hub EndpointSlice copies: namespace of the exported Service.
pub const LABEL_SERVICE_NAMESPACE: &str = "hub.atoll.dev/service-namespace";
/// Label on hub EndpointSlice copies: name of the exported Service.
pub const LABEL_SERVICE_NAME: &str = "hub.atoll.dev/service-name";

/// `endpointslice.kubernetes.io/managed-by` of hub EndpointSlice copies. It differs from the
/// value on MCS slices in members, so a member that doubles as the hub never mistakes one for
/// the other.
pub const ENDPOINTSLICE_MANAGER: &str = "hub.atoll.dev";

/// The hub namespace of a member.
pub fn namespace_for(cluster: &str) -> String {
    format!("{NAMESPACE_PREFIX}{cluster}")
}

/// The hub object name of the export `namespace/name`. Both parts are DNS labels, so the dot
/// keeps the name unique and a valid DNS subdomain.
pub fn record_name(namespace: &str, name: &str) -> String {
    format!("{namespace}.{name}")
}

/// One member's export of one Service: everything the import side needs to merge it.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "hub.atoll.dev",
    version = "v1alpha1",
    kind = "ExportedService",
    namespaced,
    shortname = "exsvc",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.cluster"}"#,
    printcolumn = r#"{"name":"Service","type":"string","jsonPath":".spec.name"}"#,
    printcolumn = r#"{"name":"Type","type":"string","jsonPath":".spec.type"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ExportedServiceSpec {
    /// Cluster id of the exporting member; must match the hub namespace it is stored in.
    pub cluster: String,
    /// Namespace of the exported Service.
    pub namespace: String,
    /// Name of the exported Service.
    pub name: String,
    /// `creationTimestamp` of the ServiceExport: the oldest export wins conflicts.
    pub export_created: Time,
    /// ClusterSetIP, or Headless for a Service with `clusterIP: None`.
    #[serde(rename = "type")]
    pub type_: ServiceImportType,
    /// The Service's ports (external properties only).
    #[serde(default)]
    pub ports: Vec<ServicePort>,
    /// The Service's sessionAffinity as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// The Service's sessionAffinityConfig as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// The Service's ipFamilies.
    #[serde(default)]
    pub ip_families: Vec<String>,
    /// The Service's internalTrafficPolicy as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    /// The Service's trafficDistribution as stored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
    /// `spec.exportedLabels` of the ServiceExport.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    /// `spec.exportedAnnotations` of the ServiceExport.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
}
