//! The CustomResourceDefinitions Atoll installs, built from the Rust types.
//!
//! The MCS and ClusterProperty CRDs must stay schema-compatible with upstream (mcs-api and
//! about-api); `tests/crd_compat.rs` compares them with the reference copies.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;
use serde_json::{Value, json};

use crate::about::{self, ClusterPropertySpec, ClusterPropertyStatus};
use crate::inventory::{ClusterProfileSpec, ClusterProfileStatus};
use crate::labels;
use crate::multicluster::{
    self, ServiceExportSpec, ServiceExportStatus, ServiceImportSpec, ServiceImportStatus,
};
use crate::schema::structural_schema;

/// A generated schema did not fit the apiextensions types (a bug in this crate, not bad input).
#[derive(Debug)]
pub struct CrdError {
    crd: String,
    source: serde_json::Error,
}

impl std::fmt::Display for CrdError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "building the schema of CRD {}: {}",
            self.crd, self.source
        )
    }
}

impl std::error::Error for CrdError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// Every CRD Atoll needs, in apply order: the MCS and ClusterProperty CRDs for members and the
/// ExportedService CRD for the hub (harmless in a member that is not the hub).
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        service_export()?,
        service_import()?,
        cluster_property()?,
        cluster_profile()?,
        exported_service()?,
        exported_endpoint_slice()?,
        namespace_policy(),
    ])
}

/// `namespacepolicies.hub.atoll.dev`: the ClusterSet's namespace sameness policy.
pub fn namespace_policy() -> CustomResourceDefinition {
    use kube::CustomResourceExt;
    crate::hub::NamespacePolicy::crd()
}

/// `exportedendpointslices.hub.atoll.dev`: the hub's copy of one member's EndpointSlice, with
/// the bounds of [`crate::hub_bounds`].
pub fn exported_endpoint_slice() -> Result<CustomResourceDefinition, CrdError> {
    use kube::CustomResourceExt;
    bounded(
        crate::hub::ExportedEndpointSlice::crd(),
        &crate::hub_bounds::copy_bounds(),
    )
}

/// `exportedservices.hub.atoll.dev`: the hub's record of one member's export, with the bounds
/// of [`crate::hub_bounds`].
pub fn exported_service() -> Result<CustomResourceDefinition, CrdError> {
    use kube::CustomResourceExt;
    bounded(
        crate::hub::ExportedService::crd(),
        &crate::hub_bounds::record_bounds(),
    )
}

/// `crd` with `bounds` on its spec schema.
fn bounded(
    crd: CustomResourceDefinition,
    bounds: &[(Vec<&'static str>, Value)],
) -> Result<CustomResourceDefinition, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let error = |source| CrdError {
        crd: name.clone(),
        source,
    };
    let mut value = serde_json::to_value(&crd).map_err(error)?;
    crate::hub_bounds::apply(&mut value, bounds);
    serde_json::from_value(value).map_err(error)
}

/// `serviceexports.multicluster.x-k8s.io`, v1alpha1 and v1beta1 (storage).
pub fn service_export() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder {
        group: multicluster::GROUP,
        kind: "ServiceExport",
        plural: "serviceexports",
        namespaced: true,
        short_names: &["svcex", "svcexport"],
        categories: &[],
        list_kind: None,
        labels: mcs_labels(),
        annotations: BTreeMap::new(),
        columns: vec![age_column("Age")],
        schema: object_schema::<ServiceExportSpec, ServiceExportStatus>(),
        versions: ALPHA_AND_BETA,
    }
    .build()
}

/// `serviceimports.multicluster.x-k8s.io`, v1alpha1 and v1beta1 (storage).
pub fn service_import() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder {
        group: multicluster::GROUP,
        kind: "ServiceImport",
        plural: "serviceimports",
        namespaced: true,
        short_names: &["svcim", "svcimport"],
        categories: &[],
        list_kind: None,
        labels: mcs_labels(),
        annotations: BTreeMap::new(),
        columns: vec![
            column("Type", "string", ".spec.type"),
            column("IP", "string", ".spec.ips"),
            age_column("Age"),
        ],
        schema: object_schema::<ServiceImportSpec, ServiceImportStatus>(),
        versions: ALPHA_AND_BETA,
    }
    .build()
}

/// `clusterproperties.about.k8s.io`, cluster-scoped, v1alpha1 and v1beta1 (storage).
pub fn cluster_property() -> Result<CustomResourceDefinition, CrdError> {
    CrdBuilder {
        group: about::GROUP,
        kind: "ClusterProperty",
        plural: "clusterproperties",
        namespaced: false,
        short_names: &[],
        categories: &["multicluster"],
        list_kind: Some("ClusterPropertyList"),
        labels: BTreeMap::new(),
        // `*.k8s.io` groups are protected: the apiserver refuses their CRDs without a pointer to
        // the approved API (KEP-2149 defines ClusterProperty).
        annotations: BTreeMap::from([(
            "api-approved.kubernetes.io".to_owned(),
            "https://github.com/kubernetes/enhancements/tree/master/keps/sig-multicluster/2149-clusterid".to_owned(),
        )]),
        columns: vec![column("value", "string", ".spec.value"), age_column("age")],
        schema: object_schema::<ClusterPropertySpec, ClusterPropertyStatus>(),
        versions: ALPHA_AND_BETA,
    }
    .build()
}

/// `clusterprofiles.multicluster.x-k8s.io` (cluster-inventory-api, KEP-4322), v1alpha1.
pub fn cluster_profile() -> Result<CustomResourceDefinition, CrdError> {
    let mut schema = object_schema::<ClusterProfileSpec, ClusterProfileStatus>();
    schema["required"] = json!(["spec"]);
    CrdBuilder {
        group: multicluster::GROUP,
        kind: "ClusterProfile",
        plural: "clusterprofiles",
        namespaced: true,
        short_names: &[],
        categories: &[],
        list_kind: Some("ClusterProfileList"),
        labels: BTreeMap::new(),
        annotations: BTreeMap::new(),
        columns: Vec::new(),
        schema,
        versions: &["v1alpha1"],
    }
    .build()
}

fn mcs_labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            labels::MCS_RELEASE_VERSION.to_owned(),
            labels::MCS_RELEASE.to_owned(),
        ),
        (
            labels::MCS_CRD_SCHEMA_REVISION.to_owned(),
            labels::MCS_SCHEMA_REVISION.to_owned(),
        ),
    ])
}

fn column(name: &str, type_: &str, json_path: &str) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: json_path.to_owned(),
        ..Default::default()
    }
}

fn age_column(name: &str) -> CustomResourceColumnDefinition {
    column(name, "date", ".metadata.creationTimestamp")
}

/// The root schema of an object with an optional spec and an optional status.
fn object_schema<Spec: JsonSchema, Status: JsonSchema>() -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": { "type": "string", "description": "APIVersion defines the versioned schema of this representation of an object." },
            "kind": { "type": "string", "description": "Kind is a string value representing the REST resource this object represents." },
            "metadata": { "type": "object" },
            "spec": structural_schema::<Spec>(),
            "status": structural_schema::<Status>(),
        },
    })
}

/// The parts in which Atoll's CRDs differ; everything else (two versions with one schema,
/// v1beta1 as storage, a status subresource, no conversion webhook) is common.
struct CrdBuilder {
    group: &'static str,
    kind: &'static str,
    plural: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    list_kind: Option<&'static str>,
    labels: BTreeMap<String, String>,
    annotations: BTreeMap<String, String>,
    columns: Vec<CustomResourceColumnDefinition>,
    schema: Value,
    /// Served versions, oldest first; the last one is stored.
    versions: &'static [&'static str],
}

/// The MCS and about.k8s.io CRDs serve two versions with one schema, v1beta1 stored.
const ALPHA_AND_BETA: &[&str] = &["v1alpha1", "v1beta1"];

impl CrdBuilder {
    fn build(self) -> Result<CustomResourceDefinition, CrdError> {
        let name = format!("{}.{}", self.plural, self.group);
        let schema: JSONSchemaProps =
            serde_json::from_value(self.schema).map_err(|source| CrdError {
                crd: name.clone(),
                source,
            })?;
        let strings = |items: &[&str]| -> Option<Vec<String>> {
            (!items.is_empty()).then(|| items.iter().map(|s| (*s).to_owned()).collect())
        };
        let version = |name: &str, storage: bool| CustomResourceDefinitionVersion {
            name: name.to_owned(),
            served: true,
            storage,
            schema: Some(CustomResourceValidation {
                open_api_v3_schema: Some(schema.clone()),
            }),
            subresources: Some(CustomResourceSubresources {
                status: Some(CustomResourceSubresourceStatus(serde_json::Value::Object(
                    Default::default(),
                ))),
                scale: None,
            }),
            additional_printer_columns: (!self.columns.is_empty()).then(|| self.columns.clone()),
            ..Default::default()
        };
        Ok(CustomResourceDefinition {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                labels: (!self.labels.is_empty()).then_some(self.labels),
                annotations: (!self.annotations.is_empty()).then_some(self.annotations),
                ..Default::default()
            },
            spec: CustomResourceDefinitionSpec {
                group: self.group.to_owned(),
                names: CustomResourceDefinitionNames {
                    kind: self.kind.to_owned(),
                    plural: self.plural.to_owned(),
                    singular: Some(self.kind.to_lowercase()),
                    short_names: strings(self.short_names),
                    categories: strings(self.categories),
                    list_kind: self.list_kind.map(str::to_owned),
                },
                scope: if self.namespaced {
                    "Namespaced"
                } else {
                    "Cluster"
                }
                .to_owned(),
                versions: self
                    .versions
                    .iter()
                    .enumerate()
                    .map(|(i, v)| version(v, i + 1 == self.versions.len()))
                    .collect(),
                conversion: None,
                preserve_unknown_fields: None,
            },
            status: None,
        })
    }
}
