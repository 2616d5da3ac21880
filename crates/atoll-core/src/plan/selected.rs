//! KEP-5939 on the import side: which exporting clusters this importer uses for a service with
//! cluster selectors, and the MCS slices marked accordingly. An inactive cluster's slices carry
//! `multicluster.kubernetes.io/active: "false"`, lose `kubernetes.io/service-name` and take
//! another name (see `crate::mcs_names::inactive_slice_name`: the active slice is deleted, which
//! kube-proxy honours), so kube-proxy (which knows nothing of the label) programs only the
//! active clusters' endpoints for the derived Service; an active cluster's carry `"true"`. Slices of services without
//! selectors are left as they were (no label).

use std::collections::BTreeMap;

use atoll_api::labels;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::input::Observed;
use crate::merge::MergedService;
use crate::selection::{
    ACTIVE_LABEL, Candidate, Selection, hold, profile_properties, select, serving, validate,
};

/// Property values by name: the importer's own, and every member's as its ClusterProfile on
/// the hub mirrors them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Properties {
    pub importer: BTreeMap<String, String>,
    pub clusters: BTreeMap<String, BTreeMap<String, String>>,
}

impl Properties {
    /// The importer's from its ClusterProperties (newer than its profile's mirror), the
    /// others' from their profiles (a profile is named by its member's cluster id, and only
    /// that member may write its status).
    pub fn of(observed: &Observed, own: &str) -> Self {
        let importer: BTreeMap<String, String> = observed
            .properties
            .iter()
            .filter_map(|p| Some((p.metadata.name.clone()?, p.spec.as_ref()?.value.clone())))
            .collect();
        let mut clusters: BTreeMap<String, BTreeMap<String, String>> = observed
            .profiles
            .iter()
            .filter_map(|p| {
                let clusterset = importer
                    .get(labels::CLUSTERSET_PROPERTY)
                    .map(String::as_str);
                Some((p.metadata.name.clone()?, profile_properties(p, clusterset)))
            })
            .collect();
        clusters.insert(own.to_owned(), importer.clone());
        Self { importer, clusters }
    }
}

/// Evaluates `merged`'s selectors for this importer over the clusters' slices (each cluster's
/// MCS slices as this pass would write them) and marks the slices. `None` when the service
/// has no selectors, or the winner's list is invalid (an importer checks what a member wrote:
/// it is then used as if it had none).
pub fn mark(
    merged: &MergedService,
    properties: &Properties,
    per_cluster: &mut [(String, Vec<EndpointSlice>)],
    applied: Option<&Selection>,
    imported_since: Option<i64>,
    now: i64,
) -> Option<Selection> {
    if merged.cluster_selectors.is_empty() || validate(&merged.cluster_selectors).is_err() {
        return None;
    }
    let none = BTreeMap::new();
    let candidates: Vec<Candidate<'_>> = per_cluster
        .iter()
        .map(|(cluster, slices)| Candidate {
            id: cluster,
            properties: properties.clusters.get(cluster).unwrap_or(&none),
            serving: slices.iter().flat_map(|s| &s.endpoints).any(serving),
        })
        .collect();
    let wanted = select(&merged.cluster_selectors, &properties.importer, &candidates);
    let selection = hold(wanted, applied, &candidates, imported_since, now);
    for (cluster, slices) in per_cluster.iter_mut() {
        let active = selection.active.contains(cluster);
        for slice in slices.iter_mut() {
            let l = slice.metadata.labels.get_or_insert_with(BTreeMap::new);
            l.insert(ACTIVE_LABEL.to_owned(), active.to_string());
            if !active {
                l.remove(labels::KUBERNETES_SERVICE_NAME);
                slice.metadata.name = slice
                    .metadata
                    .name
                    .as_deref()
                    .map(crate::mcs_names::inactive_slice_name);
            }
        }
    }
    Some(selection)
}
