//! The list of cluster selectors an export carries: its shape, where it is read from, and what
//! makes it invalid.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use serde::{Deserialize, Serialize};

use crate::validate::names::{is_label_value, is_qualified_name};

/// Where an export carries its selectors while the MCS CRDs lack the field: the JSON of the
/// list, in the KEP's shape. The import shows the list it uses in the same annotation.
pub const SELECTORS_ANNOTATION: &str = "atoll.dev/cluster-selectors";

/// The value that stands for "the importing cluster's own value of this property".
pub const SAME_AS_IMPORTER: &str = "@SameAsImporter@";

/// The label on MCS EndpointSlices: `"false"` when the slice's cluster is not selected;
/// consumers select `multicluster.kubernetes.io/active!=false`.
pub const ACTIVE_LABEL: &str = "multicluster.kubernetes.io/active";

/// At most this many selectors (the KEP's MaxItems).
pub const MAX_SELECTORS: usize = 16;

/// One entry of `clusterSelectors`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ClusterSelector {
    /// Matched against a cluster's ClusterProperty values (property name as key).
    pub property_selector: LabelSelector,
}

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

/// The selectors of an annotation value (validated).
pub fn parse(annotation: &str) -> Result<Vec<ClusterSelector>, SelectorError> {
    let selectors: Vec<ClusterSelector> =
        serde_json::from_str(annotation).map_err(|e| SelectorError::Malformed(e.to_string()))?;
    validate(&selectors)?;
    Ok(selectors)
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
