//! Endpoints as they cross clusters, in a form every member can afford to hold once per hub
//! object: [`PortableEndpoint`] (the fields of a `discovery.k8s.io/v1` Endpoint that mean
//! something outside its own cluster) and [`ServedSlice`] (an MCS EndpointSlice as the importer
//! decodes the ones it wrote; it keeps them as [`crate::mcs_slice::McsSlice`]s). The full
//! Endpoint type is 352 bytes before its first allocation, most of it
//! fields Atoll never sets (target reference, node name, hints, topology); a portable endpoint
//! is 80. Both serialize to the same JSON as the full types (absent fields are omitted), so
//! comparing a desired EndpointSlice with an observed [`ServedSlice`] as JSON is exact for every
//! field Atoll writes.

use std::borrow::Cow;

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::JsonSchema;

use crate::address::Addresses;
use serde::{Deserialize, Serialize};

/// An endpoint without what only makes sense in its own cluster (target reference, node name,
/// hints, topology): what members publish and importers write.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PortableEndpoint {
    /// The endpoint's addresses (one, in practice), held compactly (see [`crate::address`]).
    #[serde(default)]
    pub addresses: Addresses,
    /// Ready, serving, terminating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<EndpointConditions>,
    /// The endpoint's hostname (headless services: `<hostname>.<cluster>.<svc>...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hostname: Option<Box<str>>,
    /// The endpoint's zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<Box<str>>,
}

impl From<&Endpoint> for PortableEndpoint {
    fn from(endpoint: &Endpoint) -> Self {
        Self {
            addresses: Addresses::from(endpoint.addresses.as_slice()),
            conditions: endpoint.conditions.clone(),
            hostname: endpoint.hostname.as_deref().map(Box::from),
            zone: endpoint.zone.as_deref().map(Box::from),
        }
    }
}

impl From<&PortableEndpoint> for Endpoint {
    fn from(endpoint: &PortableEndpoint) -> Self {
        Self {
            addresses: endpoint.addresses.to_strings(),
            conditions: endpoint.conditions.clone(),
            hostname: endpoint.hostname.as_deref().map(str::to_owned),
            zone: endpoint.zone.as_deref().map(str::to_owned),
            ..Default::default()
        }
    }
}

/// What the endpoints of an MCS slice say, in 16 bytes: a SHA-256 (truncated) of every
/// endpoint's addresses, conditions, hostname and zone, in order, each field length-prefixed
/// and its absence distinct from an empty value. An importer compares the endpoints it wants
/// with the digest of those it wrote instead of keeping them (10 endpoints cost 1.3 KiB per
/// slice, one slice per service and source cluster on every member).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EndpointsDigest([u8; 16]);

/// An endpoint's addresses as the digest reads them: written (an EndpointSlice's strings) or
/// kept (a portable endpoint's); the same addresses digest alike.
#[derive(Clone, Copy, Debug)]
pub enum AddressTexts<'a> {
    Written(&'a [String]),
    Kept(&'a Addresses),
}

/// One endpoint's fields as the digest reads them.
#[derive(Clone, Copy, Debug)]
pub struct EndpointFields<'a> {
    pub addresses: AddressTexts<'a>,
    pub conditions: Option<&'a EndpointConditions>,
    pub hostname: Option<&'a str>,
    pub zone: Option<&'a str>,
}

impl<'a> From<&'a PortableEndpoint> for EndpointFields<'a> {
    fn from(e: &'a PortableEndpoint) -> Self {
        Self {
            addresses: AddressTexts::Kept(&e.addresses),
            conditions: e.conditions.as_ref(),
            hostname: e.hostname.as_deref(),
            zone: e.zone.as_deref(),
        }
    }
}

impl<'a> From<&'a Endpoint> for EndpointFields<'a> {
    fn from(e: &'a Endpoint) -> Self {
        Self {
            addresses: AddressTexts::Written(&e.addresses),
            conditions: e.conditions.as_ref(),
            hostname: e.hostname.as_deref(),
            zone: e.zone.as_deref(),
        }
    }
}

impl EndpointsDigest {
    /// The digest of `endpoints`, in order.
    pub fn of<'a>(endpoints: impl IntoIterator<Item = EndpointFields<'a>>) -> Self {
        use sha2::{Digest, Sha256};
        fn text(hasher: &mut Sha256, value: Option<&str>) {
            match value {
                None => hasher.update([0]),
                Some(v) => {
                    hasher.update([1]);
                    hasher.update((v.len() as u64).to_le_bytes());
                    hasher.update(v.as_bytes());
                }
            }
        }
        fn flag(value: Option<bool>) -> u8 {
            match value {
                None => 0,
                Some(false) => 1,
                Some(true) => 2,
            }
        }
        let mut hasher = Sha256::new();
        for e in endpoints {
            hasher.update([b'E']);
            match e.addresses {
                AddressTexts::Written(all) => {
                    hasher.update((all.len() as u64).to_le_bytes());
                    for address in all {
                        text(&mut hasher, Some(address));
                    }
                }
                AddressTexts::Kept(all) => {
                    hasher.update((all.len() as u64).to_le_bytes());
                    for address in all.texts() {
                        text(&mut hasher, Some(&address));
                    }
                }
            }
            match e.conditions {
                None => hasher.update([0]),
                Some(c) => hasher.update([1, flag(c.ready), flag(c.serving), flag(c.terminating)]),
            }
            text(&mut hasher, e.hostname);
            text(&mut hasher, e.zone);
        }
        let mut digest = [0; 16];
        digest.copy_from_slice(&hasher.finalize()[..16]);
        Self(digest)
    }
}

/// An MCS EndpointSlice (`discovery.k8s.io/v1` EndpointSlice) as the watch of the slices an
/// importer wrote decodes it: its endpoints portable (everything Atoll writes into one),
/// nothing else left out. Held only until it is kept as a [`crate::mcs_slice::McsSlice`];
/// serialized for tests and comparisons as JSON.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ServedSlice {
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// `IPv4`, `IPv6` or `FQDN`.
    #[serde(default)]
    pub address_type: String,
    /// The slice's endpoints. A slice without any is served as `"endpoints": null` (stored
    /// as protobuf, an empty list comes back absent): read as an empty list.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub endpoints: Vec<PortableEndpoint>,
    /// The slice's ports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ports: Option<Vec<EndpointPort>>,
}

fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

impl From<&EndpointSlice> for ServedSlice {
    fn from(slice: &EndpointSlice) -> Self {
        Self {
            metadata: slice.metadata.clone(),
            address_type: slice.address_type.clone(),
            endpoints: slice.endpoints.iter().map(PortableEndpoint::from).collect(),
            ports: slice.ports.clone(),
        }
    }
}

impl From<EndpointSlice> for ServedSlice {
    fn from(slice: EndpointSlice) -> Self {
        Self::from(&slice)
    }
}

/// As the full type serializes: `apiVersion` and `kind` first, `ports` only when present.
impl Serialize for ServedSlice {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("EndpointSlice", 6)?;
        out.serialize_field("apiVersion", "discovery.k8s.io/v1")?;
        out.serialize_field("kind", "EndpointSlice")?;
        out.serialize_field("metadata", &self.metadata)?;
        out.serialize_field("addressType", &self.address_type)?;
        out.serialize_field("endpoints", &self.endpoints)?;
        match &self.ports {
            Some(ports) => out.serialize_field("ports", ports)?,
            None => out.skip_field("ports")?,
        }
        out.end()
    }
}

impl kube::Resource for ServedSlice {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("EndpointSlice")
    }
    fn group(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("discovery.k8s.io")
    }
    fn version(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("v1")
    }
    fn plural(_: &()) -> Cow<'_, str> {
        Cow::Borrowed("endpointslices")
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn full_endpoint() -> Endpoint {
        Endpoint {
            addresses: vec!["10.0.0.1".into()],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            hostname: Some("web-0".into()),
            zone: Some("z1".into()),
            node_name: Some("node-1".into()),
            target_ref: Some(Default::default()),
            ..Default::default()
        }
    }

    #[test]
    fn a_portable_endpoint_keeps_what_crosses_clusters_and_serializes_as_the_full_type() {
        let full = full_endpoint();
        let portable = PortableEndpoint::from(&full);
        let back = Endpoint::from(&portable);
        assert_eq!(back.node_name, None);
        assert_eq!(back.target_ref, None);
        let without_local = Endpoint {
            node_name: None,
            target_ref: None,
            ..full
        };
        assert_eq!(back, without_local);
        assert_eq!(
            serde_json::to_value(&portable).ok(),
            serde_json::to_value(&without_local).ok()
        );
    }

    #[test]
    fn a_served_slice_reads_an_endpoint_slice_and_serializes_as_one_without_local_fields() {
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                name: Some("web-c2-ipv4-0".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: vec![Endpoint {
                node_name: None,
                target_ref: None,
                ..full_endpoint()
            }],
            ports: Some(vec![EndpointPort {
                name: Some("http".into()),
                port: Some(8080),
                protocol: Some("TCP".into()),
                app_protocol: None,
            }]),
        };
        let json = serde_json::to_value(&slice).unwrap_or_default();
        let view: ServedSlice = serde_json::from_value(json.clone()).unwrap_or_default();
        assert_eq!(view, ServedSlice::from(&slice));
        assert_eq!(serde_json::to_value(&view).unwrap_or_default(), json);
    }

    #[test]
    fn a_served_slice_without_endpoints_reads_as_the_apiserver_serves_it() {
        let served = serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-c2-ipv4-0", "namespace": "ns"},
            "addressType": "IPv4", "endpoints": null, "ports": null
        });
        let slice: ServedSlice = serde_json::from_str(&served.to_string())
            .unwrap_or_else(|e| panic!("an empty slice as served: {e}"));
        assert!(slice.endpoints.is_empty());
        assert_eq!(slice.ports, None);
    }

    #[test]
    fn a_portable_endpoint_is_a_fraction_of_the_full_type() {
        assert!(std::mem::size_of::<PortableEndpoint>() * 4 <= std::mem::size_of::<Endpoint>());
    }
}
