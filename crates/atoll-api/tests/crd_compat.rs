//! Atoll's CRDs are structurally identical to the upstream ones in `shared/reference/crds`:
//! same names, scope, versions, subresources, printer columns and OpenAPI schema (types,
//! required keys, enums, lengths, patterns, list types and map keys). Only descriptions may
//! differ.

use std::path::PathBuf;

use atoll_api::crd;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn reference(file: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/reference/crds")
        .join(file);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// Removes what may legitimately differ (descriptions, controller-gen annotations) and puts
/// order-insensitive lists (`required`) in a canonical order.
fn normalize(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("description");
            if let Some(Value::Array(required)) = map.get_mut("required") {
                required.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
            }
            map.values_mut().for_each(normalize);
        }
        Value::Array(items) => items.iter_mut().for_each(normalize),
        _ => {}
    }
}

fn comparable(mut crd: Value) -> Value {
    normalize(&mut crd);
    serde_json::json!({
        "name": crd["metadata"]["name"],
        "labels": crd["metadata"]["labels"],
        "spec": crd["spec"],
    })
}

/// The first path at which two JSON values differ, for a readable failure.
fn first_difference(path: &str, ours: &Value, theirs: &Value) -> Option<String> {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter().find_map(|k| {
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                first_difference(&format!("{path}.{k}"), x, y)
            })
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find_map(|(i, (x, y))| first_difference(&format!("{path}[{i}]"), x, y)),
        // JSONSchemaProps keeps bounds such as `minimum` as floats: 0.0 and 0 are the same bound.
        (Value::Number(a), Value::Number(b)) if a.as_f64() == b.as_f64() => None,
        _ if ours == theirs => None,
        _ => Some(format!("{path}: ours = {ours}, upstream = {theirs}")),
    }
}

fn assert_compatible(ours: CustomResourceDefinition, reference_file: &str) {
    let ours = comparable(serde_json::to_value(&ours).unwrap_or_default());
    let theirs = comparable(reference(reference_file));
    if let Some(diff) = first_difference("", &ours, &theirs) {
        panic!("CRD differs from {reference_file} at {diff}");
    }
}

#[test]
fn service_export_crd_matches_upstream() {
    assert_compatible(
        crd::service_export().unwrap(),
        "multicluster.x-k8s.io_serviceexports.yaml",
    );
}

#[test]
fn service_import_crd_matches_upstream() {
    assert_compatible(
        crd::service_import().unwrap(),
        "multicluster.x-k8s.io_serviceimports.yaml",
    );
}

#[test]
fn cluster_property_crd_matches_upstream() {
    assert_compatible(
        crd::cluster_property().unwrap(),
        "about.k8s.io_clusterproperties.yaml",
    );
}

#[test]
fn comparison_detects_a_schema_change() {
    // Guard against a normalizer that hides everything: a dropped maxItems must be caught.
    let mut theirs = comparable(reference("multicluster.x-k8s.io_serviceimports.yaml"));
    let ours = theirs.clone();
    theirs["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        ["ips"]
        .as_object_mut()
        .map(|ips| ips.remove("maxItems"));
    assert!(first_difference("", &ours, &theirs).is_some());
}
