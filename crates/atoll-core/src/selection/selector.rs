//! The list of cluster selectors an export carries: its shape, where it is read from, and what
//! makes it invalid.

pub use atoll_api::cluster_selector::{ClusterSelector, MAX_SELECTORS};
use atoll_api::v1beta1::ServiceExport;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::Deserialize;

use crate::validate::names::{is_label_value, is_qualified_name};

/// Where an export carries its selectors while the MCS CRDs lack the field: the JSON of the
/// list, in the KEP's shape. The import shows the list it uses in the same annotation.
pub const SELECTORS_ANNOTATION: &str = "atoll.dev/cluster-selectors";

/// The value that stands for "the importing cluster's own value of this property".
pub const SAME_AS_IMPORTER: &str = "@SameAsImporter@";

/// The label on MCS EndpointSlices: `"false"` when the slice's cluster is not selected.
pub const ACTIVE_LABEL: &str = atoll_api::labels::ACTIVE;

/// Why a list of selectors is refused (the message of `InvalidClusterSelector`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error(
        "{SELECTORS_ANNOTATION} is not a JSON list of {{\"propertySelector\": <label selector>}}: {0}"
    )]
    Malformed(String),
    #[error("{0} cluster selectors: at most {MAX_SELECTORS} are allowed")]
    TooMany(usize),
    #[error("cluster selector {index}: {problem}")]
    Entry { index: usize, problem: String },
}

/// An entry as a user writes it: a field other than `propertySelector` is a mistake to
/// report, not to drop.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Strict {
    property_selector: LabelSelector,
}

/// The selectors of an annotation value (validated).
pub fn parse(annotation: &str) -> Result<Vec<ClusterSelector>, SelectorError> {
    let strict: Vec<Strict> =
        serde_json::from_str(annotation).map_err(|e| SelectorError::Malformed(e.to_string()))?;
    let selectors: Vec<ClusterSelector> = strict
        .into_iter()
        .map(|s| ClusterSelector {
            property_selector: s.property_selector,
        })
        .collect();
    validate(&selectors)?;
    Ok(selectors)
}

/// The selectors of an export (validated): `spec.clusterSelectors` when a CRD in the cluster
/// has the field (it wins), else the annotation [`SELECTORS_ANNOTATION`], else none.
pub fn of_export(export: &ServiceExport) -> Result<Vec<ClusterSelector>, SelectorError> {
    if let Some(field) = export
        .spec
        .as_ref()
        .and_then(|s| s.cluster_selectors.as_ref())
    {
        validate(field)?;
        return Ok(field.clone());
    }
    match export
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(SELECTORS_ANNOTATION))
    {
        Some(text) => parse(text),
        None => Ok(Vec::new()),
    }
}

/// Checks a list as the apiserver checks a label selector, plus the KEP's rules: at most
/// [`MAX_SELECTORS`], and [`SAME_AS_IMPORTER`] only as a `matchLabels` value or an `In` /
/// `NotIn` value.
pub fn validate(selectors: &[ClusterSelector]) -> Result<(), SelectorError> {
    if selectors.len() > MAX_SELECTORS {
        return Err(SelectorError::TooMany(selectors.len()));
    }
    for (index, selector) in selectors.iter().enumerate() {
        entry(&selector.property_selector)
            .map_err(|problem| SelectorError::Entry { index, problem })?;
    }
    Ok(())
}

fn value_ok(value: &str) -> bool {
    value == SAME_AS_IMPORTER || is_label_value(value)
}

fn entry(selector: &LabelSelector) -> Result<(), String> {
    for (key, value) in selector.match_labels.iter().flatten() {
        if !is_qualified_name(key) {
            return Err(format!(
                "matchLabels key {key:?} is not a valid property name"
            ));
        }
        if !value_ok(value) {
            return Err(format!(
                "matchLabels value {value:?} of {key:?} is not a valid value"
            ));
        }
    }
    for requirement in selector.match_expressions.iter().flatten() {
        let key = &requirement.key;
        if !is_qualified_name(key) {
            return Err(format!(
                "matchExpressions key {key:?} is not a valid property name"
            ));
        }
        let values = requirement.values.as_deref().unwrap_or_default();
        match requirement.operator.as_str() {
            "In" | "NotIn" => {
                if values.is_empty() {
                    return Err(format!(
                        "{} on {key:?} needs at least one value",
                        requirement.operator
                    ));
                }
                if let Some(bad) = values.iter().find(|v| !value_ok(v)) {
                    return Err(format!("value {bad:?} of {key:?} is not a valid value"));
                }
            }
            "Exists" | "DoesNotExist" => {
                if !values.is_empty() {
                    return Err(format!(
                        "{} on {key:?} takes no values",
                        requirement.operator
                    ));
                }
            }
            other => {
                return Err(format!(
                    "operator {other:?} on {key:?} is not In, NotIn, Exists or DoesNotExist"
                ));
            }
        }
    }
    Ok(())
}
