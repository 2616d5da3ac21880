//! What the agent keeps of each hub object (records and copies): every member holds every hub
//! object of the ClusterSet, so what a cached object costs is paid once per hub object on
//! every member (`make bench-memory` measures it). The watch applies these after dropping
//! managed fields and before the store holds the object. (The MCS EndpointSlices it wrote are
//! kept as `atoll_api::mcs_slice::McsSlice`s.)
//!
//! Endpoints are held as `PortableEndpoint`s, a quarter of the full Endpoint type, their
//! addresses inline (`atoll_api::address`). Decoding grows every list by doubling (a JSON array
//! does not say its length up front): ten endpoints end in room for sixteen; each list is
//! shrunk to its length. Nothing the agent reads is dropped.

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use kube::api::ObjectMeta;

/// An ExportedService record as the store of a member whose hub namespace is `own` keeps it.
pub fn record(record: &mut ExportedService, own: &str) {
    others_without_labels(&mut record.metadata, own);
    metadata(&mut record.metadata);
    let spec = &mut record.spec;
    spec.ports.shrink_to_fit();
    spec.ip_families.shrink_to_fit();
    spec.cluster_selectors.shrink_to_fit();
}

/// An ExportedEndpointSlice copy as the store of a member whose hub namespace is `own` keeps
/// it.
pub fn hub_slice(copy: &mut ExportedEndpointSlice, own: &str) {
    others_without_labels(&mut copy.metadata, own);
    metadata(&mut copy.metadata);
    copy.spec.endpoints.shrink_to_fit();
    copy.spec.ports.shrink_to_fit();
}

/// Labels and annotations of another member's hub object are never read (an importer goes by
/// its spec and namespace); a member compares only its own records' and copies' labels with
/// what it would publish. One label costs a whole B-tree node (about half a KiB); annotations
/// may take 256 KiB an object, which every importer would hold.
fn others_without_labels(meta: &mut ObjectMeta, own: &str) {
    if meta.namespace.as_deref() != Some(own) {
        meta.labels = None;
        meta.annotations = None;
    }
}

fn metadata(meta: &mut ObjectMeta) {
    // Never read (reports name a version by name and resourceVersion); the store's key would
    // hold a second copy.
    meta.uid = None;
    if let Some(owners) = &mut meta.owner_references {
        owners.shrink_to_fit();
    }
    if let Some(finalizers) = &mut meta.finalizers {
        finalizers.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atoll_api::address::{Address, Addresses};
    use atoll_api::hub::ExportedEndpointSliceSpec;

    /// A copy as a watch decodes it: lists with room to spare.
    fn decoded_copy() -> ExportedEndpointSlice {
        let json = serde_json::json!({
            "apiVersion": "hub.atoll.dev/v1alpha1",
            "kind": "ExportedEndpointSlice",
            "metadata": {"name": "web", "namespace": "atoll-c2", "uid": "u1", "resourceVersion": "7"},
            "spec": {
                "cluster": "c2", "namespace": "ns", "service": "web", "addressType": "IPv4",
                "endpoints": (1..=10).map(|i| serde_json::json!({
                    "addresses": [format!("10.0.0.{i}")], "conditions": {"ready": true},
                    "hostname": format!("web-{i}"), "zone": "z1"
                })).collect::<Vec<_>>(),
                "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
            }
        });
        // From text, as a watch decodes (a decoded Value would know every list's length).
        serde_json::from_str(&json.to_string())
            .unwrap_or_else(|e| panic!("decoding the test copy: {e}"))
    }

    #[test]
    fn a_copy_keeps_everything_it_held_in_lists_without_spare_room() {
        let mut copy = decoded_copy();
        let before = copy.clone();
        assert!(
            copy.spec.endpoints.capacity() > copy.spec.endpoints.len(),
            "the decoded list has spare room (else this test proves nothing)"
        );
        hub_slice(&mut copy, "atoll-c2");
        assert_eq!(copy.spec, before.spec, "nothing the agent reads is dropped");
        let without_uid = ObjectMeta {
            uid: None,
            ..before.metadata.clone()
        };
        assert_eq!(
            copy.metadata, without_uid,
            "its own copy keeps its labels; no copy keeps its uid"
        );
        assert_eq!(copy.spec.endpoints.capacity(), 10);
        assert!(
            copy.spec
                .endpoints
                .iter()
                .all(|e| matches!(e.addresses, Addresses::One(Address::Ip(_)))),
            "one IP address each, held inline"
        );
        let ExportedEndpointSliceSpec { ports, .. } = &copy.spec;
        assert_eq!(ports.capacity(), ports.len());
    }

    #[test]
    fn another_members_objects_lose_their_labels_and_annotations_only() {
        let mut copy = decoded_copy();
        copy.metadata.labels = Some([("atoll.dev/cluster".to_owned(), "c2".to_owned())].into());
        copy.metadata.annotations = Some([("a".to_owned(), "x".repeat(1000))].into());
        let before = copy.clone();
        hub_slice(&mut copy, "atoll-c1");
        assert_eq!(copy.metadata.labels, None);
        assert_eq!(copy.metadata.annotations, None);
        assert_eq!(copy.spec, before.spec);
        let own = |mut c: ExportedEndpointSlice| {
            hub_slice(&mut c, "atoll-c2");
            c.metadata.labels
        };
        assert_eq!(own(before.clone()), before.metadata.labels);
    }
}
