//! KEP-4322 cluster inventory: `ClusterProfile` (`multicluster.x-k8s.io/v1alpha1`), one per
//! member cluster, in the ClusterSet's inventory namespace on the hub. Field names follow the
//! upstream cluster-inventory-api types, so the CRD Atoll installs is interchangeable with
//! upstream's.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::Condition;

/// Label on a ClusterProfile: the cluster manager that maintains it.
pub const LABEL_CLUSTER_MANAGER: &str = "x-k8s.io/cluster-manager";
/// Label on the namespace that holds a ClusterSet's ClusterProfiles: the ClusterSet's name.
pub const LABEL_CLUSTERSET: &str = "multicluster.x-k8s.io/clusterset";
/// Atoll's cluster-manager name.
pub const CLUSTER_MANAGER: &str = "atoll";

/// Who manages the cluster (immutable once set).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterManager {
    /// Name of the cluster manager.
    pub name: String,
}

/// Spec of a ClusterProfile.
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "multicluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ClusterProfile",
    namespaced,
    status = "ClusterProfileStatus",
    schema = "disabled"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileSpec {
    /// Human-readable name of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub display_name: Option<String>,
    /// The cluster manager of this cluster.
    #[schemars(extend("x-kubernetes-validations" = [
        { "message": "ClusterManager is immutable", "rule": "self == oldSelf" }
    ]))]
    pub cluster_manager: ClusterManager,
}

/// One named fact about the cluster (KEP-2149 ClusterProperty, mirrored).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Property {
    /// Name of the property (the ClusterProperty's name).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Its value.
    #[schemars(length(min = 1, max = 1024))]
    pub value: String,
    /// When it was last observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_time: Option<Time>,
}

/// The Kubernetes version of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterVersion {
    /// The kube-apiserver version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubernetes: Option<String>,
}

/// One extension of a kubeconfig cluster entry.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct NamedExtension {
    pub name: String,
    #[schemars(schema_with = "open_object")]
    pub extension: serde_json::Value,
}

fn open_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "object", "x-kubernetes-preserve-unknown-fields": true })
}

fn byte_string(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({ "type": "string", "format": "byte" })
}

/// How to reach the cluster's apiserver: a kubeconfig `cluster` entry.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct KubeconfigCluster {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_server_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub insecure_skip_tls_verify: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "byte_string")]
    pub certificate_authority_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[serde(rename = "proxy-url")]
    pub proxy_url: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disable_compression: Option<bool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extensions: Vec<NamedExtension>,
}

/// One way to obtain access to the cluster.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct AccessProvider {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<KubeconfigCluster>,
}

/// Status of a ClusterProfile.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProfileStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub access_providers: Vec<AccessProvider>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub credential_providers: Vec<AccessProvider>,
    /// The member's ClusterProperty objects, unchanged.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub properties: Vec<Property>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<ClusterVersion>,
}

/// The labels of Atoll's ClusterProfiles.
pub fn profile_labels() -> BTreeMap<String, String> {
    BTreeMap::from([(LABEL_CLUSTER_MANAGER.to_owned(), CLUSTER_MANAGER.to_owned())])
}
