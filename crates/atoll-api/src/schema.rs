//! OpenAPI v3 schemas for CRDs, generated from the Rust types.

use schemars::JsonSchema;
use schemars::generate::SchemaSettings;
use serde_json::Value;

/// The structural OpenAPI schema of `T`, as Kubernetes wants it inside a CRD: every subschema
/// inlined, no `$schema`, no `nullable` markers (we never send nulls; upstream has none).
pub(crate) fn structural_schema<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::openapi3()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut schema = generator.into_root_schema_for::<T>().to_value();
    strip_non_structural(&mut schema);
    schema
}

/// Drops the keys schemars adds that upstream CRDs do not carry: `nullable`, `title`, `default`
/// and `$defs`/`definitions` left over after inlining. An optional enum also gets `null` among its
/// values, which goes with `nullable`.
fn strip_non_structural(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if map.get("nullable") == Some(&Value::Bool(true))
                && let Some(Value::Array(values)) = map.get_mut("enum")
            {
                values.retain(|v| !v.is_null());
            }
            for key in [
                "nullable",
                "title",
                "default",
                "$defs",
                "definitions",
                "$schema",
            ] {
                map.remove(key);
            }
            map.values_mut().for_each(strip_non_structural);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_non_structural),
        _ => {}
    }
}
