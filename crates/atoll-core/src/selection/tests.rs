use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;

fn props(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn selectors(json: &str) -> Vec<ClusterSelector> {
    parse(json).unwrap()
}

/// c1, c2 in region a (zone a1, a2), c3 in region b; which of them serve.
fn fleet(serving: [bool; 3]) -> Vec<(String, BTreeMap<String, String>, bool)> {
    vec![
        (
            "c1".into(),
            props(&[("region", "a"), ("zone", "a1")]),
            serving[0],
        ),
        (
            "c2".into(),
            props(&[("region", "a"), ("zone", "a2")]),
            serving[1],
        ),
        (
            "c3".into(),
            props(&[("region", "b"), ("zone", "b1")]),
            serving[2],
        ),
    ]
}

/// The candidates of `fleet`: (id, properties, serving).
fn candidates(fleet: &[(String, BTreeMap<String, String>, bool)]) -> Vec<Candidate<'_>> {
    fleet
        .iter()
        .map(|(id, properties, serving)| Candidate {
            id,
            properties,
            serving: *serving,
        })
        .collect()
}

fn run(
    list: &[ClusterSelector],
    importer: &BTreeMap<String, String>,
    clusters: &[(String, BTreeMap<String, String>, bool)],
) -> (Option<usize>, Vec<String>) {
    let s = select(list, importer, &candidates(clusters));
    (s.decided_by, s.active.into_iter().collect())
}

const SAME_REGION: &str =
    r#"[{"propertySelector": {"matchLabels": {"region": "@SameAsImporter@"}}}]"#;

#[test]
fn same_region_while_it_serves_then_every_cluster() {
    let list = selectors(SAME_REGION);
    let in_a = props(&[("region", "a")]);
    assert_eq!(
        run(&list, &in_a, &fleet([true, true, true])),
        (Some(0), vec!["c1".into(), "c2".into()])
    );
    // One local cluster left serving: both local clusters stay active.
    assert_eq!(
        run(&list, &in_a, &fleet([false, true, true])),
        (Some(0), vec!["c1".into(), "c2".into()])
    );
    // Region a has no serving endpoint (or its clusters are withdrawn): fail over to all.
    assert_eq!(
        run(&list, &in_a, &fleet([false, false, true])),
        (None, vec!["c1".into(), "c2".into(), "c3".into()])
    );
    let in_b = props(&[("region", "b")]);
    assert_eq!(
        run(&list, &in_b, &fleet([true, true, true])),
        (Some(0), vec!["c3".into()])
    );
}

#[test]
fn selectors_are_tried_in_order() {
    let list = selectors(
        r#"[{"propertySelector": {"matchLabels": {"zone": "@SameAsImporter@"}}},
            {"propertySelector": {"matchLabels": {"region": "@SameAsImporter@"}}}]"#,
    );
    let importer = props(&[("region", "a"), ("zone", "a1")]);
    assert_eq!(
        run(&list, &importer, &fleet([true, true, true])),
        (Some(0), vec!["c1".into()])
    );
    assert_eq!(
        run(&list, &importer, &fleet([false, true, true])),
        (Some(1), vec!["c1".into(), "c2".into()])
    );
    assert_eq!(
        run(&list, &importer, &fleet([false, false, false])),
        (None, vec!["c1".into(), "c2".into(), "c3".into()])
    );
}

#[test]
fn in_and_not_in_take_the_placeholder_and_plain_values() {
    let importer = props(&[("region", "a")]);
    let not_mine = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["@SameAsImporter@"]}]}}]"#,
    );
    assert_eq!(
        run(&not_mine, &importer, &fleet([true; 3])),
        (Some(0), vec!["c3".into()])
    );
    let listed = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a2", "b1"]}]}}]"#,
    );
    assert_eq!(
        run(&listed, &importer, &fleet([true; 3])),
        (Some(0), vec!["c2".into(), "c3".into()])
    );
    let exists = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "tier", "operator": "Exists"}]}},
            {"propertySelector": {"matchExpressions": [{"key": "tier", "operator": "DoesNotExist"}, {"key": "region", "operator": "In", "values": ["b"]}]}}]"#,
    );
    assert_eq!(
        run(&exists, &importer, &fleet([true; 3])),
        (Some(1), vec!["c3".into()])
    );
}

#[test]
fn not_in_and_does_not_exist_select_clusters_without_the_property() {
    let mut clusters = fleet([false, false, false]);
    clusters.push(("c4".into(), props(&[("zone", "x1")]), true));
    let not_in_a = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["a"]}]}}]"#,
    );
    assert_eq!(
        run(&not_in_a, &props(&[]), &clusters),
        (Some(0), vec!["c3".into(), "c4".into()])
    );
    let unplaced = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "DoesNotExist"}]}}]"#,
    );
    assert_eq!(
        run(&unplaced, &props(&[]), &clusters),
        (Some(0), vec!["c4".into()])
    );
}

#[test]
fn an_importer_without_the_property_matches_no_one_through_the_placeholder() {
    let list = selectors(SAME_REGION);
    let nowhere = props(&[]);
    // No cluster has "no value": nothing selected, every cluster active.
    assert_eq!(
        run(&list, &nowhere, &fleet([true; 3])),
        (None, vec!["c1".into(), "c2".into(), "c3".into()])
    );
    // NotIn a value that does not exist excludes no one.
    let not_mine = selectors(
        r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "NotIn", "values": ["@SameAsImporter@"]}]}}]"#,
    );
    assert_eq!(
        run(&not_mine, &nowhere, &fleet([true; 3])),
        (Some(0), vec!["c1".into(), "c2".into(), "c3".into()])
    );
}

#[test]
fn no_selectors_and_an_empty_selector_select_every_cluster() {
    let importer = props(&[("region", "a")]);
    assert_eq!(
        run(&[], &importer, &fleet([true; 3])),
        (None, vec!["c1".into(), "c2".into(), "c3".into()])
    );
    let empty = selectors(r#"[{"propertySelector": {}}]"#);
    assert_eq!(
        run(&empty, &importer, &fleet([false, false, true])),
        (Some(0), vec!["c1".into(), "c2".into(), "c3".into()])
    );
}

#[test]
fn malformed_lists_are_refused_with_the_entry_and_reason() {
    let refused = |json: &str| parse(json).unwrap_err().to_string();
    assert!(refused("{").contains("not a JSON list"));
    assert!(
        refused(r#"[{}]"#).contains("propertySelector"),
        "{}",
        refused(r#"[{}]"#)
    );
    assert!(
        refused(r#"[{"propertySelector": {}, "labelSelector": {}}]"#).contains("unknown field")
    );
    let entry = |index: usize, rest: &str| format!("cluster selector {index}: {rest}");
    assert!(
        refused(r#"[{"propertySelector": {}}, {"propertySelector": {"matchExpressions": [{"key": "region", "operator": "Near"}]}}]"#)
            .starts_with(&entry(1, "operator \"Near\""))
    );
    assert!(
        refused(
            r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "In"}]}}]"#
        )
        .contains("needs at least one value")
    );
    assert!(
        refused(r#"[{"propertySelector": {"matchExpressions": [{"key": "region", "operator": "Exists", "values": ["a"]}]}}]"#)
            .contains("takes no values")
    );
    assert!(
        refused(r#"[{"propertySelector": {"matchLabels": {"bad key!": "a"}}}]"#)
            .contains("not a valid property name")
    );
    assert!(
        refused(r#"[{"propertySelector": {"matchLabels": {"region": "not a value"}}}]"#)
            .contains("not a valid value")
    );
    let seventeen = format!("[{}]", vec![r#"{"propertySelector": {}}"#; 17].join(","));
    assert_eq!(
        refused(&seventeen),
        "17 cluster selectors: at most 16 are allowed"
    );
    let sixteen = format!("[{}]", vec![r#"{"propertySelector": {}}"#; 16].join(","));
    assert_eq!(parse(&sixteen).map(|l| l.len()), Ok(16));
}

#[test]
fn the_kep_shape_round_trips() {
    let list = selectors(SAME_REGION);
    let json = serde_json::to_string(&list).unwrap();
    assert_eq!(
        json,
        r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#
    );
    assert_eq!(parse(&json), Ok(list));
}

fn arb_selector() -> impl Strategy<Value = ClusterSelector> {
    let value = prop_oneof![
        Just(SAME_AS_IMPORTER.to_owned()),
        Just("a".to_owned()),
        Just("b".to_owned())
    ];
    let key = prop_oneof![Just("region".to_owned()), Just("zone".to_owned())];
    let labels = proptest::collection::btree_map(key.clone(), value.clone(), 0..2);
    let requirement = (
        key,
        prop_oneof![
            Just("In"),
            Just("NotIn"),
            Just("Exists"),
            Just("DoesNotExist")
        ],
        proptest::collection::vec(value, 1..3),
    )
        .prop_map(|(key, op, values)| LabelSelectorRequirement {
            key,
            operator: op.to_owned(),
            values: matches!(op, "In" | "NotIn").then_some(values),
        });
    (labels, proptest::collection::vec(requirement, 0..2)).prop_map(|(labels, requirements)| {
        ClusterSelector {
            property_selector: LabelSelector {
                match_labels: Some(labels),
                match_expressions: Some(requirements),
            },
        }
    })
}

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};

fn arb_cluster() -> impl Strategy<Value = (BTreeMap<String, String>, bool)> {
    let v = prop_oneof![Just("a"), Just("b"), Just("c")];
    (
        proptest::option::of(v.clone()),
        proptest::option::of(v),
        any::<bool>(),
    )
        .prop_map(|(r, z, serving)| {
            let mut p = BTreeMap::new();
            if let Some(r) = r {
                p.insert("region".to_owned(), r.to_owned());
            }
            if let Some(z) = z {
                p.insert("zone".to_owned(), z.to_owned());
            }
            (p, serving)
        })
}

proptest! {
    /// Whatever the selectors: the active clusters are candidates and never none; a decision
    /// names a selector that selects a serving cluster and no earlier one does; without a
    /// decision every cluster is active.
    #[test]
    fn selection_invariants(
        list in proptest::collection::vec(arb_selector(), 0..4),
        importer in arb_cluster(),
        clusters in proptest::collection::vec(arb_cluster(), 1..6),
    ) {
        prop_assert!(validate(&list).is_ok());
        let fleet: Vec<(String, BTreeMap<String, String>, bool)> = clusters
            .into_iter()
            .enumerate()
            .map(|(i, (p, s))| (format!("c{i}"), p, s))
            .collect();
        let (decided, active) = run(&list, &importer.0, &fleet);
        prop_assert!(!active.is_empty());
        prop_assert!(active.iter().all(|a| fleet.iter().any(|(id, _, _)| id == a)));
        let serving_under = |i: usize| {
            run(&list[i..=i], &importer.0, &fleet).0 == Some(0)
        };
        match decided {
            Some(i) => {
                prop_assert!(active.iter().any(|a| fleet.iter().any(|(id, _, s)| id == a && *s)));
                prop_assert!((0..i).all(|j| !serving_under(j)));
            }
            None => {
                prop_assert_eq!(active.len(), fleet.len());
                prop_assert!((0..list.len()).all(|j| !serving_under(j)));
            }
        }
    }
}

#[test]
fn a_member_cannot_claim_another_members_id_or_clusterset() {
    // c2 writes, into its own profile's status, `cluster.clusterset.k8s.io: c3` (to join the
    // selectors meant for c3) and another ClusterSet. Its id is its profile's name and its
    // ClusterSet the importer's; its other properties are its own claims. Taking the status as
    // written (the defect) fails this test.
    let profile: atoll_api::inventory::ClusterProfile = serde_json::from_value(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "c2", "namespace": "atoll-inventory"},
        "spec": {"displayName": "c2", "clusterManager": {"name": "atoll"}},
        "status": {"properties": [
            {"name": "cluster.clusterset.k8s.io", "value": "c3"},
            {"name": "clusterset.k8s.io", "value": "elsewhere"},
            {"name": "region", "value": "a"},
        ]},
    }))
    .unwrap();
    assert_eq!(
        profile_properties(&profile, Some("prod")),
        props(&[
            ("cluster.clusterset.k8s.io", "c2"),
            ("clusterset.k8s.io", "prod"),
            ("region", "a"),
        ])
    );
    // An importer that knows no ClusterSet name believes none from a member either.
    assert_eq!(
        profile_properties(&profile, None),
        props(&[("cluster.clusterset.k8s.io", "c2"), ("region", "a")])
    );
}
