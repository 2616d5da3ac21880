//! Objects Atoll keeps on the hub (`hub.atoll.dev`). Each member writes only into its own hub
//! namespace `atoll-<cluster-id>`: one [`ExportedService`] per ServiceExport, plus one
//! [`ExportedEndpointSlice`] per EndpointSlice of the exported Service, and its heartbeat Lease
//! [`LEASE_NAME`]. The names and annotations here are what members and `atoll join` agree on.

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
/// Annotation on hub objects of a member: the uid of the member's `kube-system` namespace,
/// which tells a re-join of the same cluster from another cluster claiming its id.
pub const ANNOTATION_MEMBER_UID: &str = "hub.atoll.dev/member-uid";
/// Name of every member's heartbeat Lease, in its hub namespace.
pub const LEASE_NAME: &str = "atoll-heartbeat";
/// Annotation on the heartbeat Lease: `<epoch>:<digest>` of what the member publishes.
pub const CLAIM_ANNOTATION: &str = "hub.atoll.dev/claim";
/// Annotation on the heartbeat Lease: the member's last failed write (empty when none).
pub const LAST_ERROR_ANNOTATION: &str = "hub.atoll.dev/last-error";
/// Annotation on a member's heartbeat Lease: how keeping its liveness decisions in the member
/// stands (`kept`, `unread`, or since when and why writing them fails).
pub const KEPT_ANNOTATION: &str = "hub.atoll.dev/kept-decisions";
/// Annotation on the heartbeat Lease: a counter the member raises with every renewal (at least
/// its wall clock in milliseconds, and above what the Lease held), so importers can tell a
/// heartbeat from a Lease restored from a backup or re-created with an older value.
pub const BEAT_ANNOTATION: &str = "hub.atoll.dev/beat";
/// Annotation on the heartbeat Lease: seconds between the member's renewals, so importers judge
/// it by its own rhythm (its `leaseDurationSeconds` is the grace it asks for).
pub const INTERVAL_ANNOTATION: &str = "hub.atoll.dev/heartbeat-seconds";

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
    /// KEP-5939's ordered cluster selectors of the export (validated by the member; importers
    /// check them again).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_selectors: Vec<crate::cluster_selector::ClusterSelector>,
}

/// One member's copy of one EndpointSlice of an exported Service: the endpoints importers turn
/// into MCS EndpointSlices. A hub type of its own rather than an `EndpointSlice`, so that members
/// can be allowed to read every member's copies without being allowed to read the hub's own
/// EndpointSlices when the hub is also a member.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "hub.atoll.dev",
    version = "v1alpha1",
    kind = "ExportedEndpointSlice",
    namespaced,
    shortname = "exeps",
    printcolumn = r#"{"name":"Cluster","type":"string","jsonPath":".spec.cluster"}"#,
    printcolumn = r#"{"name":"Service","type":"string","jsonPath":".spec.service"}"#,
    printcolumn = r#"{"name":"AddressType","type":"string","jsonPath":".spec.addressType"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ExportedEndpointSliceSpec {
    /// Cluster id of the exporting member; must match the hub namespace it is stored in.
    pub cluster: String,
    /// Namespace of the exported Service.
    pub namespace: String,
    /// Name of the exported Service.
    pub service: String,
    /// `IPv4` or `IPv6`, as on the source slice.
    // Boxed text: 8 bytes less than a `String` puts a held copy (with its `Arc`) at 512 bytes,
    // an allocator size class, instead of 520, which took the next one (640) on every member
    // for every copy of the ClusterSet.
    pub address_type: Box<str>,
    /// The source slice's endpoints, without what only makes sense in their own cluster.
    // The schema stays the full Endpoint's (what the hub CRD has always served): fields a
    // portable endpoint lacks are never published, and are dropped when read.
    #[serde(default)]
    #[schemars(with = "Vec<k8s_openapi::api::discovery::v1::Endpoint>")]
    pub endpoints: Vec<crate::endpoint::PortableEndpoint>,
    /// The source slice's ports (target ports of the Service).
    #[serde(default)]
    pub ports: Vec<k8s_openapi::api::discovery::v1::EndpointPort>,
}

/// Name of the one NamespacePolicy object of a ClusterSet.
pub const NAMESPACE_POLICY: &str = "clusterset";

/// Namespaces a member's agent never exports from or imports into, unless the ClusterSet's
/// NamespacePolicy says otherwise.
pub const DEFAULT_EXCLUDED_NAMESPACES: &[&str] = &[
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "atoll-system",
];

/// The ClusterSet's namespace sameness policy, top-down from the hub: which namespaces take
/// part in multi-cluster services. Patterns are namespace names where `*` matches any run of
/// characters. A namespace takes part if it matches an `include` pattern (or `include` is
/// empty) and no `exclude` pattern. Without a policy object, the default exclusions apply.
#[derive(CustomResource, Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "hub.atoll.dev",
    version = "v1alpha1",
    kind = "NamespacePolicy",
    shortname = "nspolicy",
    printcolumn = r#"{"name":"Include","type":"string","jsonPath":".spec.include"}"#,
    printcolumn = r#"{"name":"Exclude","type":"string","jsonPath":".spec.exclude"}"#
)]
pub struct NamespacePolicySpec {
    /// Namespaces that take part (empty: all but the excluded ones).
    #[serde(default)]
    pub include: Vec<String>,
    /// Namespaces that never take part.
    #[serde(default)]
    pub exclude: Vec<String>,
}

impl Default for NamespacePolicySpec {
    fn default() -> Self {
        Self {
            include: Vec::new(),
            exclude: DEFAULT_EXCLUDED_NAMESPACES
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
        }
    }
}
