//! KEP-2149 `about.k8s.io` ClusterProperty: cluster-scoped key/value facts about a cluster.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of ClusterProperty.
pub const GROUP: &str = "about.k8s.io";

/// Spec of a ClusterProperty: the property's value (its key is the object's name).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterPropertySpec {
    /// The value of the property. The KEP caps it at 128k code points; the CRD does not.
    #[schemars(length(min = 1))]
    pub value: String,
}

/// Status of a ClusterProperty: empty upstream, kept as an open object.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClusterPropertyStatus(pub serde_json::Map<String, serde_json::Value>);

impl JsonSchema for ClusterPropertyStatus {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ClusterPropertyStatus".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({ "type": "object" })
    }
}

crate::resource::versioned_objects! {
    group: GROUP,
    /// A named fact about this cluster, such as its cluster id.
    ClusterProperty {
        plural: "clusterproperties",
        scope: Cluster,
        spec: ClusterPropertySpec,
        status: ClusterPropertyStatus,
    }
}
