//! The collections a pass's slice deletions become, asserted exactly; and, on random holdings,
//! that the collections (of withdrawn clusters only) and the named deletions left delete
//! exactly the slices the plan deleted by name (breaking a condition of
//! `collect_slice_deletions`, say dropping the "every held slice is deleted" check, makes
//! `never_more_nor_less_than_the_named_deletions` fail).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use atoll_api::keys::ObjectKey;
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use proptest::prelude::*;

use super::*;

fn slice(namespace: &str, name: &str, source: Option<&str>) -> EndpointSlice {
    let mut labels = BTreeMap::from([
        (
            labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
            labels::ATOLL_ENDPOINTSLICE_MANAGER.to_owned(),
        ),
        (labels::SERVICE_NAME.to_owned(), name.to_owned()),
    ]);
    if let Some(source) = source {
        labels.insert(labels::SOURCE_CLUSTER.to_owned(), source.to_owned());
    }
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(labels),
            ..Default::default()
        },
        address_type: "IPv4".to_owned(),
        endpoints: Vec::new(),
        ports: None,
    }
}

/// `count` slices of `source` in `namespace`, named `<source>-<prefix><i>`.
fn slices(namespace: &str, source: &str, prefix: &str, count: usize) -> Vec<EndpointSlice> {
    (0..count)
        .map(|i| slice(namespace, &format!("{source}-{prefix}{i}"), Some(source)))
        .collect()
}

fn held(slices: &[EndpointSlice]) -> Vec<Arc<McsSlice>> {
    slices.iter().map(|s| Arc::new(McsSlice::from(s))).collect()
}

fn deleting(slices: &[EndpointSlice]) -> MemberWrites {
    MemberWrites {
        delete_slices: slices.iter().map(|s| ObjectKey::of(&s.metadata)).collect(),
        ..Default::default()
    }
}

fn collection(namespace: &str, source: &str, slices: &[EndpointSlice]) -> SliceCollection {
    SliceCollection {
        namespace: namespace.to_owned(),
        source_clusters: vec![source.to_owned()],
        slices: slices.iter().map(|s| ObjectKey::of(&s.metadata)).collect(),
    }
}

#[test]
fn a_cluster_whose_every_slice_goes_is_deleted_in_one_request_per_namespace() {
    let c2_a = slices("a", "c2", "", 10);
    let c2_b = slices("b", "c2", "", 9);
    let c3_a = slices("a", "c3", "", 12);
    let all: Vec<_> = [c2_a.clone(), c2_b.clone(), c3_a].concat();
    let mut writes = deleting(&[c2_a.clone(), c2_b.clone()].concat());
    collect_slice_deletions(&mut writes, &held(&all), |c| c == "c2");
    assert_eq!(
        writes.delete_slice_collections,
        [collection("a", "c2", &c2_a), collection("b", "c2", &c2_b)]
    );
    assert_eq!(writes.delete_slices, []);
}

#[test]
fn a_cluster_that_keeps_one_slice_in_a_namespace_is_deleted_by_name_there() {
    let going = slices("a", "c2", "", 10);
    let staying = slice("a", "c2-stays", Some("c2"));
    let elsewhere = slices("b", "c2", "", 8);
    let all: Vec<_> = [going.clone(), vec![staying], elsewhere.clone()].concat();
    let mut writes = deleting(&[going.clone(), elsewhere.clone()].concat());
    collect_slice_deletions(&mut writes, &held(&all), |c| c == "c2");
    assert_eq!(
        writes.delete_slice_collections,
        [collection("b", "c2", &elsewhere)]
    );
    let named: Vec<ObjectKey> = going.iter().map(|s| ObjectKey::of(&s.metadata)).collect();
    assert_eq!(writes.delete_slices, named);
}

#[test]
fn a_cluster_with_a_slice_written_in_the_same_pass_is_deleted_by_name() {
    // A renamed slice: the old ones go, a new one of the same cluster comes. A collection
    // sent beside the write could delete the new slice.
    let going = slices("a", "c2", "", 10);
    let mut writes = deleting(&going);
    writes.apply_slices = vec![slice("a", "c2-new", Some("c2"))];
    collect_slice_deletions(&mut writes, &held(&going), |c| c == "c2");
    assert_eq!(writes.delete_slice_collections, []);
    assert_eq!(writes.delete_slices.len(), 10);
}

/// Deleting every one of `slices` (all held, every source cluster `withdrawn` or none) stays a
/// named deletion each.
fn assert_named(slices: &[EndpointSlice], withdrawn: bool) {
    let mut writes = deleting(slices);
    let before = writes.clone();
    collect_slice_deletions(&mut writes, &held(slices), |_| withdrawn);
    assert_eq!(writes, before);
}

#[test]
fn a_few_deletions_stay_named() {
    assert_named(&slices("a", "c2", "", COLLECT_AT_LEAST - 1), true);
}

#[test]
fn a_live_clusters_deletions_stay_named() {
    // A selector would also match a slice of it written by an earlier pass and not observed
    // yet, which a pass over other services may want.
    assert_named(&slices("a", "c2", "", 10), false);
}

#[test]
fn slices_without_a_selectable_source_label_stay_named() {
    let unlabelled: Vec<_> = (0..10)
        .map(|i| slice("a", &format!("x{i}"), None))
        .collect();
    let odd = slices("a", "-odd-", "", 10);
    assert_named(&[unlabelled, odd].concat(), true);
}

#[test]
fn the_selector_names_atolls_manager_and_the_clusters() {
    assert_eq!(
        collection("a", "c2", &[]).selector(),
        "endpointslice.kubernetes.io/managed-by=atoll.multicluster.x-k8s.io,multicluster.kubernetes.io/source-cluster in (c2)"
    );
    let two = SliceCollection {
        source_clusters: vec!["c2".into(), "c3".into()],
        ..collection("a", "c2", &[])
    };
    assert!(two.selector().ends_with("source-cluster in (c2,c3)"));
}

#[test]
fn clusters_withdrawn_together_go_in_one_request_per_namespace() {
    // A region: c2, c3 and c4 withdrawn in one pass, each with slices in "a"; c5 lives on.
    // Mutation: one collection per (namespace, cluster) gives three here.
    let dying: Vec<Vec<EndpointSlice>> = ["c2", "c3", "c4"]
        .iter()
        .map(|c| slices("a", c, "", 10))
        .collect();
    let living = slices("a", "c5", "", 10);
    let all: Vec<_> = [dying.concat(), living].concat();
    let mut writes = deleting(&dying.concat());
    collect_slice_deletions(&mut writes, &held(&all), |c| c != "c5");
    assert_eq!(
        writes.delete_slice_collections,
        [SliceCollection {
            namespace: "a".into(),
            source_clusters: vec!["c2".into(), "c3".into(), "c4".into()],
            slices: dying
                .concat()
                .iter()
                .map(|s| ObjectKey::of(&s.metadata))
                .collect(),
        }]
    );
    assert_eq!(writes.delete_slices, []);
    // Past the slices' bound, more than one: 3 clusters of 20 slices make 2 and 1; a
    // cluster with more than the bound alone is deleted by name.
    let big: Vec<Vec<EndpointSlice>> = ["b1", "b2", "b3"]
        .iter()
        .map(|c| slices("a", c, "", 20))
        .chain([slices("a", "huge", "", SLICES_PER_COLLECTION + 1)])
        .collect();
    let mut writes = deleting(&big.concat());
    collect_slice_deletions(&mut writes, &held(&big.concat()), |_| true);
    let sizes: Vec<(usize, usize)> = writes
        .delete_slice_collections
        .iter()
        .map(|c| (c.source_clusters.len(), c.slices.len()))
        .collect();
    assert_eq!(sizes, [(2, 40), (1, 20)]);
    assert_eq!(writes.delete_slices.len(), SLICES_PER_COLLECTION + 1);
    // Many small clusters: as many as fit the slices' bound in each.
    let many: Vec<Vec<EndpointSlice>> = (0..65)
        .map(|i| slices("a", &format!("m{i:03}"), "", COLLECT_AT_LEAST))
        .collect();
    let mut writes = deleting(&many.concat());
    collect_slice_deletions(&mut writes, &held(&many.concat()), |_| true);
    let sizes: Vec<usize> = writes
        .delete_slice_collections
        .iter()
        .map(|c| c.source_clusters.len())
        .collect();
    assert_eq!(
        sizes,
        [6; 10].iter().copied().chain([5]).collect::<Vec<_>>()
    );
}

/// What a label selector of `c` matches among `held`.
fn matched<'a>(c: &SliceCollection, held: &'a [EndpointSlice]) -> Vec<&'a EndpointSlice> {
    held.iter()
        .filter(|s| {
            s.metadata.namespace.as_deref() == Some(c.namespace.as_str())
                && s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(labels::SOURCE_CLUSTER))
                    .is_some_and(|source| c.selects(source))
        })
        .collect()
}

proptest! {
    #[test]
    fn never_more_nor_less_than_the_named_deletions(
        // (namespace, source, deleted, written again) per slice.
        picks in proptest::collection::vec((0..2usize, 0..3usize, prop::bool::weighted(0.8), prop::bool::weighted(0.05)), 0..60),
        // Which of the three source clusters are withdrawn, a bit each.
        withdrawn in 0..8usize,
    ) {
        let namespaces = ["a", "b"];
        let sources = ["c1", "c2", "c3"];
        let all: Vec<EndpointSlice> = picks
            .iter()
            .enumerate()
            .map(|(i, (ns, src, _, _))| slice(namespaces[*ns], &format!("s{i}"), Some(sources[*src])))
            .collect();
        let going: Vec<EndpointSlice> = all
            .iter()
            .zip(&picks)
            .filter(|(_, p)| p.2)
            .map(|(s, _)| s.clone())
            .collect();
        let mut writes = deleting(&going);
        writes.apply_slices = all
            .iter()
            .zip(&picks)
            .filter(|(_, p)| p.3)
            .map(|(s, _)| slice(s.metadata.namespace.as_deref().unwrap_or_default(), "new", s.metadata.labels.as_ref().and_then(|l| l.get(labels::SOURCE_CLUSTER)).map(String::as_str)))
            .collect();
        let wanted: BTreeSet<ObjectKey> = writes.delete_slices.iter().cloned().collect();
        let is_withdrawn = |c: &str| sources.iter().position(|s| *s == c).is_some_and(|i| withdrawn & (1 << i) != 0);
        collect_slice_deletions(&mut writes, &held(&all), is_withdrawn);
        let mut gone: Vec<ObjectKey> = writes.delete_slices.clone();
        for c in &writes.delete_slice_collections {
            let hit = matched(c, &all);
            let hit_keys: BTreeSet<ObjectKey> = hit.iter().map(|s| ObjectKey::of(&s.metadata)).collect();
            let named: BTreeSet<ObjectKey> = c.slices.iter().cloned().collect();
            prop_assert_eq!(hit_keys, named, "the fallback deletes what the selector matches");
            prop_assert!(c.slices.len() >= COLLECT_AT_LEAST);
            prop_assert!(c.source_clusters.iter().all(|source| is_withdrawn(source)));
            prop_assert!(c.slices.len() <= SLICES_PER_COLLECTION);
            prop_assert!(!writes.apply_slices.iter().any(|w| !matched(c, std::slice::from_ref(w)).is_empty()));
            gone.extend(hit.into_iter().map(|s| ObjectKey::of(&s.metadata)));
        }
        let gone_set: BTreeSet<ObjectKey> = gone.iter().cloned().collect();
        prop_assert_eq!(gone.len(), gone_set.len(), "a slice deleted twice");
        prop_assert_eq!(gone_set, wanted);
    }
}
