//! KEP-5939 cluster selectors (alpha): the shape of one entry of an export's ordered
//! `clusterSelectors` list, as the KEP defines it. What the entries mean and how they are
//! checked is `atoll_core::selection`'s.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One entry of `clusterSelectors`: a label selector matched against a cluster's
/// ClusterProperty values (the property name as key, its `spec.value` as value).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSelector {
    pub property_selector: LabelSelector,
}

// A label selector is strings, lists and maps of strings: its equality is an equivalence.
impl Eq for ClusterSelector {}

/// At most this many selectors (the KEP's `MaxItems`).
pub const MAX_SELECTORS: usize = 16;
