//! The importer's evaluation of an import's cluster selectors.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::discovery::v1::Endpoint;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

use atoll_api::labels::{CLUSTER_ID_PROPERTY, CLUSTERSET_PROPERTY};

use super::selector::{ClusterSelector, SAME_AS_IMPORTER};

/// A cluster that exports the service, as one importer sees it.
#[derive(Clone, Copy, Debug)]
pub struct Candidate<'a> {
    pub id: &'a str,
    /// Its ClusterProperty values, by property name.
    pub properties: &'a BTreeMap<String, String>,
    /// Whether it has at least one ready or serving endpoint for the service here (a withdrawn
    /// cluster has none).
    pub serving: bool,
}

/// A cluster's property values by name, as its ClusterProfile on the hub mirrors them.
pub fn profile_properties(
    profile: &atoll_api::inventory::ClusterProfile,
    clusterset: Option<&str>,
) -> BTreeMap<String, String> {
    let mut properties: BTreeMap<String, String> = profile
        .status
        .iter()
        .flat_map(|s| s.properties.iter())
        .map(|p| (p.name.clone(), p.value.clone()))
        .collect();
    // Two properties no member may assert: its id is the profile's name (which only that
    // member's credentials can write the status of), and its ClusterSet is the importer's own.
    // Whatever else it writes is its own claim (see the README).
    properties.remove(CLUSTER_ID_PROPERTY);
    properties.remove(CLUSTERSET_PROPERTY);
    if let Some(name) = &profile.metadata.name {
        properties.insert(CLUSTER_ID_PROPERTY.to_owned(), name.clone());
    }
    if let Some(clusterset) = clusterset {
        properties.insert(CLUSTERSET_PROPERTY.to_owned(), clusterset.to_owned());
    }
    properties
}

/// Whether an endpoint counts as serving for selection: ready, or serving while terminating
/// (unset conditions count as true, as Kubernetes defines them).
pub fn serving(endpoint: &Endpoint) -> bool {
    let conditions = endpoint.conditions.as_ref();
    let ready = conditions.and_then(|c| c.ready).unwrap_or(true);
    let serving = conditions.and_then(|c| c.serving).unwrap_or(ready);
    ready || serving
}

/// Which clusters one importer uses for a service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// The selector that decided (its index in the list); `None` when there are no selectors or
    /// none selected a cluster with a serving endpoint, and every cluster is active.
    pub decided_by: Option<usize>,
    /// The active clusters.
    pub active: BTreeSet<String>,
    /// When this importer first used these active clusters for the service (seconds since the
    /// epoch; `None` before it applied them, see `super::hold`).
    pub since: Option<i64>,
    /// While the selection is held against a change that is not needed: until when.
    pub held_until: Option<i64>,
}

/// Evaluates `selectors` in order for the importer whose properties are `importer`: the first
/// selector that selects at least one candidate with a serving endpoint decides, and the
/// candidates it selects are active (with or without endpoints); if none does, every candidate
/// is active.
pub fn select(
    selectors: &[ClusterSelector],
    importer: &BTreeMap<String, String>,
    candidates: &[Candidate<'_>],
) -> Selection {
    for (index, selector) in selectors.iter().enumerate() {
        let chosen: Vec<&Candidate<'_>> = candidates
            .iter()
            .filter(|c| matches(&selector.property_selector, importer, c.properties))
            .collect();
        if chosen.iter().any(|c| c.serving) {
            return Selection {
                decided_by: Some(index),
                active: chosen.iter().map(|c| c.id.to_owned()).collect(),
                since: None,
                held_until: None,
            };
        }
    }
    Selection {
        decided_by: None,
        active: candidates.iter().map(|c| c.id.to_owned()).collect(),
        since: None,
        held_until: None,
    }
}

/// `value`, or the importer's own value of `key` for the placeholder (`None` when the importer
/// has no such property: the placeholder then stands for no value at all).
fn resolve<'a>(
    value: &'a str,
    key: &str,
    importer: &'a BTreeMap<String, String>,
) -> Option<&'a str> {
    if value == SAME_AS_IMPORTER {
        importer.get(key).map(String::as_str)
    } else {
        Some(value)
    }
}

/// Label-selector semantics over properties: every `matchLabels` pair and every requirement
/// must hold; an empty selector selects every cluster.
fn matches(
    selector: &LabelSelector,
    importer: &BTreeMap<String, String>,
    properties: &BTreeMap<String, String>,
) -> bool {
    let labels_hold = selector.match_labels.iter().flatten().all(|(key, value)| {
        resolve(value, key, importer)
            .is_some_and(|v| properties.get(key).map(String::as_str) == Some(v))
    });
    labels_hold
        && selector
            .match_expressions
            .iter()
            .flatten()
            .all(|r| requirement_holds(r, importer, properties))
}

fn requirement_holds(
    requirement: &LabelSelectorRequirement,
    importer: &BTreeMap<String, String>,
    properties: &BTreeMap<String, String>,
) -> bool {
    let key = &requirement.key;
    let values: BTreeSet<&str> = requirement
        .values
        .iter()
        .flatten()
        .filter_map(|v| resolve(v, key, importer))
        .collect();
    let own = properties.get(key).map(String::as_str);
    match requirement.operator.as_str() {
        "In" => own.is_some_and(|v| values.contains(v)),
        "NotIn" => own.is_none_or(|v| !values.contains(v)),
        "Exists" => own.is_some(),
        "DoesNotExist" => own.is_none(),
        // Refused by validation; selects nothing if it ever gets here.
        _ => false,
    }
}
