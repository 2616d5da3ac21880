//! One request instead of hundreds: when a pass deletes every MCS EndpointSlice Atoll holds in
//! one namespace for withdrawn source clusters, the deletions become one `deletecollection` by
//! label, for every such cluster of the namespace together (a set-based selector on the source
//! cluster; a region dying is one request per namespace, not one per cluster). At 250 clusters
//! a withdrawal is one slice per service; sent one by one they kept the dead cluster's
//! endpoints in the importer for seconds past the grace, on a busy apiserver.
//!
//! The decision is made from every MCS slice the member holds, not from a pass's scope: a
//! collection is sent only when each slice the label selector matches is one the plan deletes
//! anyway, and no slice of that cluster in that namespace is written in the same pass. A
//! selector also matches slices written by an earlier pass and not observed yet, so only a
//! withdrawn cluster's slices are collected: no plan wants any slice of it, while a live
//! cluster's unobserved slice may be one a pass over other services has just written (a
//! renamed service, say) and this pass, scoped to the old names, cannot see.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use atoll_api::keys::ObjectKey;
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;

use super::output::{MemberWrites, SliceCollection};
use crate::ClusterId;

/// Fewer deletions than this in one namespace for one cluster stay named deletes: they are
/// cheap, and a named delete says exactly which object went.
pub const COLLECT_AT_LEAST: usize = 8;

/// Slices one collection deletes at most. The apiserver deletes a collection's objects one after
/// another, each an etcd commit of its own: on an etcd bound by its disk's sync (the local
/// ClusterSet's, about 16 ms a commit) one collection deletes some 60 objects a second, while
/// requests in flight together share their commits. So a withdrawal's deletions go as many
/// small collections at once (`COLLECTIONS_IN_FLIGHT` in the writer): at 1,000 per collection,
/// four at once, the member deleted about 110 slices a second and the requests timed out with
/// the leadership (about 3 s left); at 200, sixteen at once, about 1,000 a second. A cluster
/// with more slices than this in one namespace is deleted by name.
pub const SLICES_PER_COLLECTION: usize = 50;

/// `(namespace, source cluster)`.
type Group<'a> = (&'a str, &'a str);

/// Turns the named slice deletions of `writes` into [`SliceCollection`]s where that deletes the
/// same objects. `held` is every MCS slice the member holds (Atoll's: the agent watches only
/// slices with Atoll's `endpointslice.kubernetes.io/managed-by`), whatever the pass's scope;
/// `withdrawn` says whether a source cluster is withdrawn (only those are collected).
pub fn collect_slice_deletions(
    writes: &mut MemberWrites,
    held: &[Arc<McsSlice>],
    withdrawn: impl Fn(&str) -> bool,
) {
    if writes.delete_slices.len() < COLLECT_AT_LEAST {
        return;
    }
    let deleting: HashSet<(&str, &str)> = writes
        .delete_slices
        .iter()
        .map(|k| (k.namespace.as_str(), k.name.as_str()))
        .collect();
    let written: BTreeSet<Group> = writes
        .apply_slices
        .iter()
        .filter_map(|s| {
            let source = s.metadata.labels.as_ref()?.get(labels::SOURCE_CLUSTER)?;
            Some((s.metadata.namespace.as_deref()?, source.as_str()))
        })
        .collect();
    // Per group: slices held, and how many of them the plan deletes.
    let mut counts: BTreeMap<Group, (usize, usize)> = BTreeMap::new();
    let mut group_of: HashMap<(&str, &str), Group> = HashMap::new();
    for slice in held {
        let Some(source) = slice.label(labels::SOURCE_CLUSTER) else {
            continue;
        };
        let group = (&*slice.namespace, source);
        let count = counts.entry(group).or_default();
        count.0 += 1;
        if deleting.contains(&(&*slice.namespace, &*slice.name)) {
            count.1 += 1;
            group_of.insert((&*slice.namespace, &*slice.name), group);
        }
    }
    let collected: BTreeSet<Group> = counts
        .into_iter()
        .filter(|(group, (held, deleted))| {
            held == deleted
                && *deleted >= COLLECT_AT_LEAST
                && *deleted <= SLICES_PER_COLLECTION
                && withdrawn(group.1)
                && !written.contains(group)
                // It goes into the selector as it is; a slice's label is only as good as
                // whoever wrote it, a cluster id is a valid label value.
                && ClusterId::new(group.1).is_ok()
        })
        .map(|(group, _)| group)
        .collect();
    if collected.is_empty() {
        return;
    }
    let mut members: BTreeMap<Group, Vec<ObjectKey>> = BTreeMap::new();
    let mut named = Vec::with_capacity(writes.delete_slices.len());
    for key in &writes.delete_slices {
        match group_of.get(&(key.namespace.as_str(), key.name.as_str())) {
            Some(group) if collected.contains(group) => {
                members.entry(*group).or_default().push(key.clone());
            }
            _ => named.push(key.clone()),
        }
    }
    // One collection per namespace for all its collected clusters (a few, if very many).
    let mut by_namespace: BTreeMap<&str, Vec<(&str, Vec<ObjectKey>)>> = BTreeMap::new();
    for ((namespace, cluster), slices) in members {
        by_namespace
            .entry(namespace)
            .or_default()
            .push((cluster, slices));
    }
    for (namespace, clusters) in by_namespace {
        let mut current: Option<SliceCollection> = None;
        for (cluster, slices) in clusters {
            // Every cluster collected has at least `COLLECT_AT_LEAST` slices here, so a
            // collection selects at most 6 clusters.
            let full = current
                .as_ref()
                .is_some_and(|c| c.slices.len() + slices.len() > SLICES_PER_COLLECTION);
            if full {
                writes.delete_slice_collections.extend(current.take());
            }
            let collection = current.get_or_insert_with(|| SliceCollection {
                namespace: namespace.to_owned(),
                source_clusters: Vec::new(),
                slices: Vec::new(),
            });
            collection.source_clusters.push(cluster.to_owned());
            collection.slices.extend(slices);
        }
        writes.delete_slice_collections.extend(current);
    }
    writes.delete_slices = named;
}

#[cfg(test)]
mod tests;
