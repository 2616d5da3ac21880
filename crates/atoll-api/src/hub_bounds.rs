//! Bounds on the hub CRDs' schemas. A member may write anything into its own hub namespace;
//! the apiserver then refuses, on the member's write, what no importer could use anyway: names
//! longer than the names they stand for, more ports or endpoints than a Service or an
//! EndpointSlice may have, port numbers outside 1-65535. Importers still check every field
//! themselves (a hub may serve older CRDs); these bounds only stop the grossest input at the
//! door and keep records small.

use serde_json::{Value, json};

use crate::hub::NAMESPACE_PREFIX;

/// Longest cluster id: its hub namespace `atoll-<id>` is a DNS label.
pub const MAX_CLUSTER_ID: usize = 63 - NAMESPACE_PREFIX.len();
/// Longest DNS label (namespace, service and port names, hostnames).
const LABEL: usize = 63;
/// Longest qualified name (`<253-character prefix>/<63-character name>`): appProtocol.
const QUALIFIED: usize = 253 + 1 + 63;
/// Longest value of the enumerated strings (protocols, families, policies), with room for
/// values Kubernetes adds later.
const WORD: usize = 63;
/// Longest IP address in text (an IPv6 address with an embedded IPv4 one).
const ADDRESS: usize = 45;
/// Most bytes of annotations an object may carry.
const ANNOTATIONS: usize = 256 * 1024;
/// Most ports of a record (a Service has no limit; this keeps records small) and of an
/// endpoint copy (an EndpointSlice's limit).
pub const MAX_RECORD_PORTS: usize = 1000;
pub const MAX_COPY_PORTS: usize = 100;
/// Most endpoints of a copy and addresses of an endpoint (an EndpointSlice's limits).
pub const MAX_COPY_ENDPOINTS: usize = 1000;
pub const MAX_ADDRESSES: usize = 100;
/// Most exported labels or annotations of a record.
const MAX_ENTRIES: usize = 256;

/// A port's bounds, in a record or a copy.
fn port_bounds() -> Vec<(&'static str, Value)> {
    vec![
        ("port", json!({"minimum": 1, "maximum": 65535})),
        ("name", json!({"maxLength": LABEL})),
        ("protocol", json!({"maxLength": WORD})),
        ("appProtocol", json!({"maxLength": QUALIFIED})),
    ]
}

/// The schema at `path` below `schema`: property names, `[]` for an array's items, `*` for a
/// map's values.
fn resolve<'a>(schema: &'a mut Value, path: &[&str]) -> Option<&'a mut Value> {
    let mut at = schema;
    for step in path {
        at = match *step {
            "[]" => at.get_mut("items")?,
            "*" => at.get_mut("additionalProperties")?,
            name => at.get_mut("properties")?.get_mut(name)?,
        };
    }
    Some(at)
}

/// The bounds of the fields naming an object's member and service (`name_field`).
fn owner_bounds(name_field: &'static str) -> Vec<(Vec<&'static str>, Value)> {
    vec![
        (
            vec!["cluster"],
            json!({"minLength": 1, "maxLength": MAX_CLUSTER_ID}),
        ),
        (
            vec!["namespace"],
            json!({"minLength": 1, "maxLength": LABEL}),
        ),
        (
            vec![name_field],
            json!({"minLength": 1, "maxLength": LABEL}),
        ),
    ]
}

/// The bounds of `exportedservices.hub.atoll.dev`'s spec.
pub fn record_bounds() -> Vec<(Vec<&'static str>, Value)> {
    let mut out = owner_bounds("name");
    out.extend([
        (vec!["ports"], json!({"maxItems": MAX_RECORD_PORTS})),
        (vec!["ipFamilies"], json!({"maxItems": 2})),
        (vec!["ipFamilies", "[]"], json!({"maxLength": WORD})),
        (vec!["sessionAffinity"], json!({"maxLength": WORD})),
        (
            vec!["sessionAffinityConfig", "clientIP", "timeoutSeconds"],
            json!({"minimum": 1, "maximum": 86400}),
        ),
        (vec!["internalTrafficPolicy"], json!({"maxLength": WORD})),
        (vec!["trafficDistribution"], json!({"maxLength": WORD})),
        (
            vec!["exportedLabels"],
            json!({"maxProperties": MAX_ENTRIES}),
        ),
        (vec!["exportedLabels", "*"], json!({"maxLength": LABEL})),
        (
            vec!["exportedAnnotations"],
            json!({"maxProperties": MAX_ENTRIES}),
        ),
        (
            vec!["exportedAnnotations", "*"],
            json!({"maxLength": ANNOTATIONS}),
        ),
        (
            vec!["clusterSelectors"],
            json!({"maxItems": crate::cluster_selector::MAX_SELECTORS}),
        ),
    ]);
    out.extend(
        port_bounds()
            .into_iter()
            .map(|(field, b)| (vec!["ports", "[]", field], b)),
    );
    out
}

/// The bounds of `exportedendpointslices.hub.atoll.dev`'s spec.
pub fn copy_bounds() -> Vec<(Vec<&'static str>, Value)> {
    let mut out = owner_bounds("service");
    out.extend([
        (vec!["addressType"], json!({"maxLength": WORD})),
        (vec!["endpoints"], json!({"maxItems": MAX_COPY_ENDPOINTS})),
        (
            vec!["endpoints", "[]", "addresses"],
            json!({"maxItems": MAX_ADDRESSES}),
        ),
        (
            vec!["endpoints", "[]", "addresses", "[]"],
            json!({"maxLength": ADDRESS}),
        ),
        (
            vec!["endpoints", "[]", "hostname"],
            json!({"maxLength": LABEL}),
        ),
        (vec!["endpoints", "[]", "zone"], json!({"maxLength": LABEL})),
        (vec!["ports"], json!({"maxItems": MAX_COPY_PORTS})),
    ]);
    out.extend(
        port_bounds()
            .into_iter()
            .map(|(field, b)| (vec!["ports", "[]", field], b)),
    );
    out
}

/// Applies `bounds` to the spec schema of every version of `crd` (a serialized
/// CustomResourceDefinition); returns the paths it did not find (a test keeps that empty).
pub fn apply(crd: &mut Value, bounds: &[(Vec<&'static str>, Value)]) -> Vec<String> {
    let mut missing = Vec::new();
    let Some(versions) = crd
        .pointer_mut("/spec/versions")
        .and_then(Value::as_array_mut)
    else {
        return vec!["/spec/versions".to_owned()];
    };
    for version in versions {
        let Some(spec) = version.pointer_mut("/schema/openAPIV3Schema/properties/spec") else {
            missing.push("spec".to_owned());
            continue;
        };
        for (path, b) in bounds {
            match (
                resolve(spec, path).and_then(Value::as_object_mut),
                b.as_object(),
            ) {
                (Some(target), Some(b)) => target.extend(b.clone()),
                _ => missing.push(path.join(".")),
            }
        }
    }
    missing
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    fn value<K: CustomResourceExt>() -> Value {
        serde_json::to_value(K::crd()).unwrap()
    }

    #[test]
    fn every_bound_lands_on_a_field_of_the_types() {
        let mut record = value::<crate::hub::ExportedService>();
        assert_eq!(apply(&mut record, &record_bounds()), Vec::<String>::new());
        let mut copy = value::<crate::hub::ExportedEndpointSlice>();
        assert_eq!(apply(&mut copy, &copy_bounds()), Vec::<String>::new());
        let spec = "/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties";
        assert_eq!(
            record.pointer(&format!("{spec}/ports/items/properties/port/maximum")),
            Some(&json!(65535))
        );
        assert_eq!(
            record.pointer(&format!(
                "{spec}/exportedLabels/additionalProperties/maxLength"
            )),
            Some(&json!(63))
        );
        assert_eq!(
            copy.pointer(&format!("{spec}/endpoints/maxItems")),
            Some(&json!(1000))
        );
        assert_eq!(
            copy.pointer(&format!("{spec}/cluster/maxLength")),
            Some(&json!(57))
        );
    }
}
