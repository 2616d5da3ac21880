//! Root object types, one per served version, generated from shared spec and status types.
//!
//! Upstream serves every Atoll-relevant CRD in two versions with byte-identical schemas, so a
//! version is only an `apiVersion` string. kube's `CustomResource` derive would make `spec`
//! mandatory, while upstream ServiceExports routinely have no spec at all; hence this small
//! macro: it writes the root struct (`metadata`, optional `spec`, optional `status`), its
//! `kube::Resource` impl, a serializer that emits `apiVersion`/`kind`, and lossless `From`
//! conversions between the versions. The group, spec and status are names of the invoking
//! module, which each generated version module reaches as `super::<name>`.

macro_rules! versioned_objects {
    (
        group: $group:ident,
        $(
            $(#[$doc:meta])*
            $kind:ident {
                plural: $plural:literal,
                scope: $scope:ident,
                spec: $spec:ident,
                status: $status:ident,
            }
        )+
    ) => {
        $crate::resource::versioned_objects!(@version v1alpha1, $group, $( $(#[$doc])* $kind, $plural, $scope, $spec, $status; )+);
        $crate::resource::versioned_objects!(@version v1beta1, $group, $( $(#[$doc])* $kind, $plural, $scope, $spec, $status; )+);
        $(
            impl From<v1alpha1::$kind> for v1beta1::$kind {
                fn from(o: v1alpha1::$kind) -> Self {
                    Self { metadata: o.metadata, spec: o.spec, status: o.status }
                }
            }
            impl From<v1beta1::$kind> for v1alpha1::$kind {
                fn from(o: v1beta1::$kind) -> Self {
                    Self { metadata: o.metadata, spec: o.spec, status: o.status }
                }
            }
        )+
    };
    (@scope Namespaced) => { k8s_openapi::NamespaceResourceScope };
    (@scope Cluster) => { k8s_openapi::ClusterResourceScope };
    (@version $version:ident, $group:ident, $( $(#[$doc:meta])* $kind:ident, $plural:literal, $scope:ident, $spec:ident, $status:ident; )+) => {
        #[doc = concat!("Objects served at version `", stringify!($version), "`.")]
        pub mod $version {
            use std::borrow::Cow;
            use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

            /// The version string of this module's objects.
            pub const VERSION: &str = stringify!($version);

            $(
                $(#[$doc])*
                #[derive(Clone, Debug, Default, PartialEq, serde::Deserialize)]
                pub struct $kind {
                    /// Standard object metadata.
                    #[serde(default)]
                    pub metadata: ObjectMeta,
                    /// Desired state; upstream allows it to be absent.
                    #[serde(default)]
                    pub spec: Option<super::$spec>,
                    /// Observed state, written through the status subresource.
                    #[serde(default)]
                    pub status: Option<super::$status>,
                }

                impl $kind {
                    /// A new object with the given name and spec, no namespace and no status.
                    pub fn new(name: &str, spec: Option<super::$spec>) -> Self {
                        Self {
                            metadata: ObjectMeta { name: Some(name.to_owned()), ..ObjectMeta::default() },
                            spec,
                            status: None,
                        }
                    }
                }

                impl kube::Resource for $kind {
                    type DynamicType = ();
                    type Scope = $crate::resource::versioned_objects!(@scope $scope);

                    fn kind(_: &()) -> Cow<'_, str> {
                        Cow::Borrowed(stringify!($kind))
                    }
                    fn group(_: &()) -> Cow<'_, str> {
                        Cow::Borrowed(super::$group)
                    }
                    fn version(_: &()) -> Cow<'_, str> {
                        Cow::Borrowed(VERSION)
                    }
                    fn plural(_: &()) -> Cow<'_, str> {
                        Cow::Borrowed($plural)
                    }
                    fn meta(&self) -> &ObjectMeta {
                        &self.metadata
                    }
                    fn meta_mut(&mut self) -> &mut ObjectMeta {
                        &mut self.metadata
                    }
                }

                impl serde::Serialize for $kind {
                    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                        use serde::ser::SerializeStruct;
                        let api_version = <Self as kube::Resource>::api_version(&());
                        let mut out = serializer.serialize_struct(stringify!($kind), 5)?;
                        out.serialize_field("apiVersion", &api_version)?;
                        out.serialize_field("kind", stringify!($kind))?;
                        out.serialize_field("metadata", &self.metadata)?;
                        match &self.spec {
                            Some(spec) => out.serialize_field("spec", spec)?,
                            None => out.skip_field("spec")?,
                        }
                        match &self.status {
                            Some(status) => out.serialize_field("status", status)?,
                            None => out.skip_field("status")?,
                        }
                        out.end()
                    }
                }
            )+
        }
    };
}

pub(crate) use versioned_objects;
