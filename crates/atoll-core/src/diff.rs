//! Desired versus observed: whether an object must be written, and which observed objects
//! Atoll owns. These comparisons are what keep the steady state at zero writes.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::import::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};

/// Whether everything `desired` says is already true of `observed`: every key of a desired
/// object is present with a contained value, arrays match element by element, scalars are
/// equal. Fields the apiserver defaults or other managers own are ignored, so a resync that
/// changes nothing sends nothing.
pub fn contains(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| o.get(k).is_some_and(|ov| contains(ov, dv))),
        (Value::Array(o), Value::Array(d)) => {
            o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| contains(ov, dv))
        }
        _ => observed == desired,
    }
}

/// [`contains`] for typed objects. The observed object may be of a compact type that keeps
/// fewer fields (an [`atoll_api::endpoint::McsSlice`] for a desired EndpointSlice), as long
/// as it keeps every field a desired object sets.
pub fn already_applied<O: Serialize, D: Serialize>(observed: &O, desired: &D) -> bool {
    match (
        serde_json::to_value(observed),
        serde_json::to_value(desired),
    ) {
        (Ok(o), Ok(d)) => contains(&o, &d),
        _ => false,
    }
}

/// Whether an object with these labels is one Atoll manages in a member (a ServiceImport or a
/// derived Service); anything else is never changed or deleted.
pub fn owned(labels: Option<&BTreeMap<String, String>>) -> bool {
    labels
        .and_then(|l| l.get(MANAGED_BY_LABEL))
        .is_some_and(|v| v == MANAGED_BY_VALUE)
}

/// The annotations Atoll sets on an import, compared without kubectl's own (every other
/// annotation on an owned import is ours): equal means no exported annotation was added,
/// changed or dropped.
pub fn same_own_annotations(
    observed: Option<&BTreeMap<String, String>>,
    desired: Option<&BTreeMap<String, String>>,
) -> bool {
    let ours = |a: Option<&BTreeMap<String, String>>| -> BTreeMap<String, String> {
        a.into_iter()
            .flatten()
            .filter(|(k, _)| !k.starts_with("kubectl.kubernetes.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    ours(observed) == ours(desired)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaulted_fields_do_not_count_as_differences() {
        let observed = json!({"spec": {"ports": [{"port": 42, "protocol": "TCP", "targetPort": 42}], "clusterIP": "10.0.0.1"}});
        assert!(contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 42, "protocol": "TCP"}]}})
        ));
    }

    #[test]
    fn changed_values_and_array_lengths_do() {
        let observed =
            json!({"spec": {"ports": [{"port": 42}]}, "metadata": {"labels": {"a": "1"}}});
        assert!(!contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 43}]}})
        ));
        assert!(!contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 42}, {"port": 43}]}})
        ));
        assert!(!contains(
            &observed,
            &json!({"metadata": {"labels": {"a": "2"}}})
        ));
        assert!(!contains(
            &observed,
            &json!({"metadata": {"annotations": {}}})
        ));
    }

    #[test]
    fn ownership_needs_atolls_managed_by_label() {
        let ours = BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned())]);
        let theirs = BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), "helm".to_owned())]);
        assert!(owned(Some(&ours)));
        assert!(!owned(Some(&theirs)));
        assert!(!owned(None));
    }

    #[test]
    fn kubectl_annotations_are_not_ours() {
        let desired = BTreeMap::from([("a".to_owned(), "1".to_owned())]);
        let mut observed = desired.clone();
        observed.insert(
            "kubectl.kubernetes.io/last-applied-configuration".to_owned(),
            "{}".to_owned(),
        );
        assert!(same_own_annotations(Some(&observed), Some(&desired)));
        observed.insert("b".to_owned(), "2".to_owned());
        assert!(!same_own_annotations(Some(&observed), Some(&desired)));
        assert!(!same_own_annotations(None, Some(&desired)));
    }
}
