//! Structural comparison of Atoll's CRDs with the upstream ones: same names, labels, scope,
//! versions, subresources, printer columns and OpenAPI schema (types, required keys, enums,
//! lengths, patterns, list types and map keys). Only descriptions may differ.
//!
//! The upstream files are not in this repository: `hack/reference-crds.sh` gathers them and
//! prints their directory, which the e2e test `crd_compat` reads from [`REFERENCE_ENV`].

use std::path::PathBuf;

use anyhow::Context;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

/// The environment variable naming the directory of upstream CRD files.
pub const REFERENCE_ENV: &str = "ATOLL_REFERENCE_CRDS";

/// The directory named by [`REFERENCE_ENV`], or an error that says how to set it.
pub fn reference_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::var_os(REFERENCE_ENV).with_context(|| {
        format!(
            "{REFERENCE_ENV} is not set: run `export {REFERENCE_ENV}=$(hack/reference-crds.sh)` \
             first (make test does), which gathers the upstream CRDs and prints their directory"
        )
    })?;
    let dir = PathBuf::from(dir);
    anyhow::ensure!(
        dir.is_dir(),
        "{REFERENCE_ENV}={} is not a directory: run hack/reference-crds.sh again",
        dir.display()
    );
    Ok(dir)
}

/// The upstream CRD `file` (YAML) from [`reference_dir`].
pub fn reference(file: &str) -> anyhow::Result<Value> {
    let path = reference_dir()?.join(file);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    serde_saphyr::from_str(&text).with_context(|| format!("parsing {}", path.display()))
}

/// Removes what may legitimately differ (descriptions) and puts order-insensitive lists
/// (`required`) in a canonical order.
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

/// The parts of a CRD that must match: its name, labels and spec, normalized. Annotations
/// (controller-gen's version stamp) are left out.
pub fn comparable(mut crd: Value) -> Value {
    normalize(&mut crd);
    serde_json::json!({
        "name": crd["metadata"]["name"],
        "labels": crd["metadata"]["labels"],
        "spec": crd["spec"],
    })
}

/// The first path at which two JSON values differ, for a readable failure.
pub fn first_difference(path: &str, ours: &Value, theirs: &Value) -> Option<String> {
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

/// Compares `ours` with the upstream CRD `theirs` (as parsed from its YAML); the error names the
/// first path at which they differ.
pub fn assert_compatible(ours: &CustomResourceDefinition, theirs: Value) -> anyhow::Result<()> {
    let ours = comparable(serde_json::to_value(ours)?);
    let theirs = comparable(theirs);
    match first_difference("", &ours, &theirs) {
        Some(diff) => anyhow::bail!("CRD differs from upstream at {diff}"),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Atoll's own ServiceImport CRD, as JSON: a fixture with the shape of the upstream file.
    fn service_import() -> anyhow::Result<Value> {
        Ok(serde_json::to_value(atoll_api::crd::service_import()?)?)
    }

    /// Applies `edit` to the `spec.ips` schema of every version; returns how many it edited.
    fn edit_ips(crd: &mut Value, edit: impl Fn(&mut serde_json::Map<String, Value>)) -> usize {
        let mut edited = 0;
        for version in crd["spec"]["versions"].as_array_mut().into_iter().flatten() {
            if let Some(ips) =
                version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["ips"]
                    .as_object_mut()
            {
                edit(ips);
                edited += 1;
            }
        }
        edited
    }

    #[test]
    fn a_crd_matches_itself() -> anyhow::Result<()> {
        let crd = atoll_api::crd::service_import()?;
        assert_compatible(&crd, service_import()?)
    }

    #[test]
    fn a_dropped_max_items_is_detected() -> anyhow::Result<()> {
        // Guard against a normalizer that hides everything.
        let ours = atoll_api::crd::service_import()?;
        let mut theirs = service_import()?;
        assert_eq!(
            edit_ips(&mut theirs, |ips| {
                ips.remove("maxItems");
            }),
            2,
            "both served versions have spec.ips"
        );
        let error = assert_compatible(&ours, theirs)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(error.contains(".ips.maxItems"), "{error:?}");
        Ok(())
    }

    #[test]
    fn descriptions_required_order_and_integer_floats_do_not_count() -> anyhow::Result<()> {
        let ours = atoll_api::crd::service_import()?;
        let mut theirs = service_import()?;
        edit_ips(&mut theirs, |ips| {
            ips.insert("description".into(), "reworded upstream".into());
            if let Some(max) = ips.get("maxItems").and_then(Value::as_f64) {
                ips.insert("maxItems".into(), serde_json::json!(max));
            }
        });
        if let Some(required) = theirs["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
            ["properties"]["spec"]["required"]
            .as_array_mut()
        {
            required.reverse();
        }
        assert_compatible(&ours, theirs)
    }
}
