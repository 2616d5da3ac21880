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
    ACTIVE_LABEL, Candidate, InPlace, Selection, hold, profile_properties, select, serving,
    validate,
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

/// The selection in place for the service `name` in `namespace`: the clusters its observed MCS
/// slices (`slices`, by key) mark active, and when the last of them became active (a cluster
/// becoming active has its slices replaced, so created anew: the oldest active slice of each
/// cluster says when; a slice added later, as its endpoints grow, does not). Its slices are
/// named `<service>.<cluster>...` (`crate::mcs_names`), so they are found by name. How old the
/// service is here (`since`) is the caller's to say.
pub fn in_place(
    slices: &BTreeMap<atoll_api::keys::ObjectKey, &atoll_api::mcs_slice::McsSlice>,
    namespace: &str,
    name: &str,
) -> InPlace {
    use atoll_api::keys::ObjectKey;
    // Names from `<service>.` up to `<service>/` ('/' follows '.').
    let from = ObjectKey::new(namespace, &format!("{name}."));
    let to = ObjectKey::new(namespace, &format!("{name}/"));
    let mut activated: BTreeMap<&str, Option<i64>> = BTreeMap::new();
    for slice in slices.range(from..to).map(|(_, s)| s) {
        if slice.label(labels::SERVICE_NAME) != Some(name) {
            continue;
        }
        if let (Some("true"), Some(cluster)) = (
            slice.label(ACTIVE_LABEL),
            slice.label(labels::SOURCE_CLUSTER),
        ) {
            let oldest = activated.entry(cluster).or_insert(slice.created);
            *oldest = match (*oldest, slice.created) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
    }
    InPlace {
        changed_at: activated.values().copied().max().flatten(),
        active: activated.into_keys().map(str::to_owned).collect(),
        since: None,
    }
}

/// Evaluates `merged`'s selectors for this importer over the clusters' slices (each cluster's
/// MCS slices as this pass would write them), holds the selection `in_place` where no change
/// is needed yet (see [`hold`]), and marks the slices. `None` when the service has no
/// selectors, or the winner's list is invalid (an importer checks what a member wrote: it is
/// then used as if it had none).
pub fn mark(
    merged: &MergedService,
    properties: &Properties,
    per_cluster: &mut [(String, Vec<EndpointSlice>)],
    in_place: &InPlace,
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
    let selection = hold(wanted, in_place, &candidates, now);
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

#[cfg(test)]
mod tests {
    use super::*;
    use atoll_api::keys::ObjectKey;
    use atoll_api::mcs_slice::McsSlice;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    fn slice(service: &str, cluster: &str, active: bool, created: i64) -> McsSlice {
        let mut name = crate::mcs_names::slice_name(service, cluster, "IPv4", 0);
        if !active {
            name = crate::mcs_names::inactive_slice_name(&name);
        }
        let mut s = EndpointSlice::default();
        s.metadata.name = Some(name);
        s.metadata.namespace = Some("demo".into());
        s.metadata.creation_timestamp = Some(Time(
            k8s_openapi::jiff::Timestamp::from_second(created).unwrap_or_default(),
        ));
        s.metadata.labels = Some(BTreeMap::from([
            (labels::SERVICE_NAME.to_owned(), service.to_owned()),
            (labels::SOURCE_CLUSTER.to_owned(), cluster.to_owned()),
            (ACTIVE_LABEL.to_owned(), active.to_string()),
        ]));
        McsSlice::from(&s)
    }

    #[test]
    fn the_selection_in_place_is_read_from_the_services_slices_only() {
        let mut later = slice("web", "c1", true, 300);
        later.name = format!("{}1", later.name.trim_end_matches('0')).into();
        let slices = [
            slice("web", "c1", true, 100),
            // A slice added as c1's endpoints grew: c1 became active before.
            later,
            slice("web", "c4", true, 90),
            slice("web", "c2", false, 120),
            slice("web-2", "c3", true, 500),
            slice("we", "c3", true, 600),
        ];
        let by_key: BTreeMap<ObjectKey, &McsSlice> = slices.iter().map(|s| (s.key(), s)).collect();
        let in_place = in_place(&by_key, "demo", "web");
        assert_eq!(
            in_place,
            InPlace {
                active: ["c1".to_owned(), "c4".to_owned()].into(),
                changed_at: Some(100),
                since: None,
            }
        );
    }
}
