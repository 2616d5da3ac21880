//! An MCS EndpointSlice as an importer keeps the ones it wrote: one per service and source
//! cluster, so at 250 clusters × 200 services 50,000 of them on every member. Kept as a
//! compact type of its own rather than an EndpointSlice: no `ObjectMeta` (360 bytes before its
//! first allocation), labels as a short list of shared strings instead of a B-tree of owned
//! ones (about 900 bytes for the four labels Atoll writes), ports shared by every slice of a
//! service, and the endpoints as their digest. The agent compares each with the slice it
//! wants (`atoll_core::slice_diff`), deletes it by name and groups it by its labels; nothing
//! else of it is read.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::endpoint::{EndpointFields, EndpointsDigest, PortableEndpoint, ServedSlice};
use crate::interner::Interner;
use crate::keys::ObjectKey;

/// A label: key and value, shared with every other kept slice that has them.
pub type Label = (Arc<str>, Arc<str>);

/// An MCS EndpointSlice of this member, as kept.
#[derive(Clone, Debug, PartialEq)]
pub struct McsSlice {
    pub name: Box<str>,
    pub namespace: Arc<str>,
    /// Sorted by key, each key once.
    labels: Box<[Label]>,
    /// `IPv4`, `IPv6` or `FQDN`.
    pub address_type: Arc<str>,
    pub ports: Option<Arc<[EndpointPort]>>,
    /// The endpoints, unless only their digest is kept (then empty).
    pub endpoints: Vec<PortableEndpoint>,
    /// The digest of the endpoints, when they are no longer kept.
    pub endpoints_digest: Option<EndpointsDigest>,
}

impl McsSlice {
    /// The slice as the agent keeps it: repeated values held once in `interner`, the endpoints
    /// as their digest.
    pub fn kept(served: ServedSlice, interner: &mut Interner) -> Self {
        let ServedSlice {
            metadata,
            address_type,
            endpoints,
            ports,
        } = served;
        Self {
            name: metadata.name.unwrap_or_default().into_boxed_str(),
            namespace: interner.string(metadata.namespace.as_deref().unwrap_or_default()),
            labels: metadata
                .labels
                .unwrap_or_default()
                .iter()
                .map(|(k, v)| (interner.string(k), interner.string(v)))
                .collect(),
            address_type: interner.string(&address_type),
            ports: ports.map(|p| interner.ports(p)),
            endpoints: Vec::new(),
            endpoints_digest: Some(EndpointsDigest::of(
                endpoints.iter().map(EndpointFields::from),
            )),
        }
    }

    /// Its key.
    pub fn key(&self) -> ObjectKey {
        ObjectKey {
            namespace: self.namespace.to_string(),
            name: self.name.to_string(),
        }
    }

    /// The value of its label `key`.
    pub fn label(&self, key: &str) -> Option<&str> {
        let at = self
            .labels
            .binary_search_by(|(k, _)| k.as_ref().cmp(key))
            .ok()?;
        Some(&self.labels[at].1)
    }

    /// Its labels, sorted by key.
    pub fn labels(&self) -> impl Iterator<Item = (&str, &str)> {
        self.labels.iter().map(|(k, v)| (k.as_ref(), v.as_ref()))
    }

    /// Replaces its labels (tests build slices this way).
    pub fn set_labels(&mut self, labels: &BTreeMap<String, String>) {
        self.labels = labels
            .iter()
            .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
            .collect();
    }

    /// Keeps the digest of the endpoints instead of the endpoints.
    pub fn digest_endpoints(&mut self) {
        if self.endpoints_digest.is_none() {
            self.endpoints_digest = Some(self.endpoints_digest());
            self.endpoints = Vec::new();
        }
    }

    /// The digest of its endpoints (kept, or computed from the endpoints it holds).
    pub fn endpoints_digest(&self) -> EndpointsDigest {
        self.endpoints_digest
            .unwrap_or_else(|| EndpointsDigest::of(self.endpoints.iter().map(EndpointFields::from)))
    }

    /// Whether everything `desired` sets of an object's metadata is true of this slice: its
    /// name and namespace, and each of its labels. A desired field this type does not keep
    /// (annotations, owners, finalizers, a generated name) is never held, so a slice that
    /// wants one is written.
    pub fn holds_metadata(&self, desired: &ObjectMeta) -> bool {
        let ObjectMeta {
            name,
            namespace,
            labels,
            annotations,
            owner_references,
            finalizers,
            generate_name,
            ..
        } = desired;
        let unkept = annotations.is_some()
            || owner_references.is_some()
            || finalizers.is_some()
            || generate_name.is_some();
        !unkept
            && name.as_deref().is_none_or(|n| n == &*self.name)
            && namespace.as_deref().is_none_or(|n| n == &*self.namespace)
            && labels
                .iter()
                .flatten()
                .all(|(k, v)| self.label(k) == Some(v.as_str()))
    }

    /// Its metadata as an EndpointSlice's (for comparisons in tests).
    pub fn metadata(&self) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name.to_string()),
            namespace: Some(self.namespace.to_string()),
            labels: (!self.labels.is_empty()).then(|| {
                self.labels()
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect()
            }),
            ..ObjectMeta::default()
        }
    }
}

/// The slice with its endpoints (nothing shared, nothing digested): what tests and the
/// simulation observe of a slice they wrote.
impl From<&EndpointSlice> for McsSlice {
    fn from(slice: &EndpointSlice) -> Self {
        let meta = &slice.metadata;
        Self {
            name: meta.name.clone().unwrap_or_default().into_boxed_str(),
            namespace: Arc::from(meta.namespace.as_deref().unwrap_or_default()),
            labels: meta
                .labels
                .iter()
                .flatten()
                .map(|(k, v)| (Arc::from(k.as_str()), Arc::from(v.as_str())))
                .collect(),
            address_type: Arc::from(slice.address_type.as_str()),
            ports: slice.ports.clone().map(Arc::from),
            endpoints: slice.endpoints.iter().map(PortableEndpoint::from).collect(),
            endpoints_digest: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};

    fn slice(labels: &[(&str, &str)]) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                name: Some("web.c2.ipv4.0".into()),
                namespace: Some("ns".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                uid: Some("u1".into()),
                resource_version: Some("7".into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: (1..=3)
                .map(|i| Endpoint {
                    addresses: vec![format!("10.0.0.{i}")],
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..Default::default()
                    }),
                    ..Default::default()
                })
                .collect(),
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(80),
                protocol: Some("TCP".into()),
                app_protocol: None,
            }]),
        }
    }

    #[test]
    fn a_kept_slice_holds_what_the_served_one_says_with_shared_values() {
        let served = slice(&[("b", "2"), ("a", "1")]);
        let mut interner = Interner::default();
        let kept = McsSlice::kept(ServedSlice::from(&served), &mut interner);
        let other = McsSlice::kept(ServedSlice::from(&served), &mut interner);
        let full = McsSlice::from(&served);
        assert_eq!(kept.key(), ObjectKey::new("ns", "web.c2.ipv4.0"));
        assert_eq!(kept.labels().collect::<Vec<_>>(), [("a", "1"), ("b", "2")]);
        assert_eq!((kept.label("a"), kept.label("c")), (Some("1"), None));
        assert!(kept.endpoints.is_empty());
        assert_eq!(kept.endpoints_digest(), full.endpoints_digest());
        assert_eq!(kept.ports, full.ports);
        assert!(Arc::ptr_eq(&kept.namespace, &other.namespace));
        assert!(Arc::ptr_eq(&kept.labels[0].1, &other.labels[0].1));
        let (Some(p), Some(q)) = (&kept.ports, &other.ports) else {
            panic!("ports kept");
        };
        assert!(Arc::ptr_eq(p, q));
    }

    #[test]
    fn metadata_is_held_when_every_desired_field_is() {
        let kept = McsSlice::from(&slice(&[("a", "1"), ("b", "2")]));
        let desired = |labels: &[(&str, &str)]| slice(labels).metadata;
        assert!(kept.holds_metadata(&desired(&[("a", "1")])));
        assert!(kept.holds_metadata(&desired(&[("a", "1"), ("b", "2")])));
        assert!(kept.holds_metadata(&ObjectMeta::default()));
        assert!(!kept.holds_metadata(&desired(&[("a", "2")])));
        assert!(!kept.holds_metadata(&desired(&[("c", "1")])));
        let renamed = ObjectMeta {
            name: Some("other".into()),
            ..desired(&[])
        };
        assert!(!kept.holds_metadata(&renamed));
        let moved = ObjectMeta {
            namespace: Some("other".into()),
            ..desired(&[])
        };
        assert!(!kept.holds_metadata(&moved));
        let annotated = ObjectMeta {
            annotations: Some(BTreeMap::new()),
            ..desired(&[])
        };
        assert!(!kept.holds_metadata(&annotated), "annotations are not kept");
        assert_eq!(
            kept.metadata().labels,
            Some(BTreeMap::from([
                ("a".to_owned(), "1".to_owned()),
                ("b".to_owned(), "2".to_owned())
            ]))
        );
    }
}
