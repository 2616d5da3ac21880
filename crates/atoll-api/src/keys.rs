//! Namespace and name, the keys of everything Atoll tracks: [`ServiceKey`] for a service (what
//! exports are merged by, what imports and DNS names are made for), [`ObjectKey`] for one
//! object. Both order by namespace, then name.

use std::fmt;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Declares a key type: namespace and name, ordered by namespace then name, shown as
/// `namespace/name`. Two types, so that a service is never looked up by an object's key.
macro_rules! namespaced_key {
    ($(#[$doc:meta])* $key:ident) => {
        $(#[$doc])*
        #[derive(
            Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
        )]
        pub struct $key {
            pub namespace: String,
            pub name: String,
        }

        impl $key {
            pub fn new(namespace: &str, name: &str) -> Self {
                Self {
                    namespace: namespace.to_owned(),
                    name: name.to_owned(),
                }
            }
        }

        impl fmt::Display for $key {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}/{}", self.namespace, self.name)
            }
        }
    };
}

namespaced_key!(
    /// Namespace and name of a service: its ServiceExports in every cluster, its
    /// ServiceImport, its hub records and its DNS names all share them.
    ServiceKey
);

namespaced_key!(
    /// Namespace and name of one object.
    ObjectKey
);

impl ObjectKey {
    /// The key of a namespaced object, from its metadata.
    pub fn of(meta: &ObjectMeta) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_keys_order_by_namespace_then_name_and_show_as_a_path() {
        let mut keys = [
            ServiceKey::new("b", "a"),
            ServiceKey::new("a", "z"),
            ServiceKey::new("a", "b"),
        ];
        keys.sort();
        let shown: Vec<String> = keys.iter().map(ToString::to_string).collect();
        assert_eq!(shown, ["a/b", "a/z", "b/a"]);
    }
}
