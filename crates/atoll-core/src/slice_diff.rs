//! Whether a desired MCS EndpointSlice is already applied, without JSON: the same answer as
//! [`crate::diff::already_applied`] gives (every field the desired slice sets is present with
//! the same value, lists element by element), field by field. An importer of a large fleet
//! compares one slice per source cluster each time a service is planned (250 at 250 members),
//! and turning both sides into JSON was most of what planning one service cost. The property
//! test below holds it to the JSON comparison on random pairs.

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};

use atoll_api::endpoint::{EndpointFields, EndpointsDigest, PortableEndpoint};
use atoll_api::mcs_slice::McsSlice;

/// A desired `Some` must be observed equal; a desired `None` says nothing.
fn same<T: PartialEq>(observed: &Option<T>, desired: &Option<T>) -> bool {
    desired.is_none() || observed == desired
}

/// [`same`], for text held as `Box<str>` on one side and `String` on the other.
fn same_text(observed: Option<&str>, desired: Option<&str>) -> bool {
    desired.is_none() || observed == desired
}

fn conditions(observed: Option<&EndpointConditions>, desired: Option<&EndpointConditions>) -> bool {
    match (observed, desired) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(o), Some(d)) => {
            same(&o.ready, &d.ready)
                && same(&o.serving, &d.serving)
                && same(&o.terminating, &d.terminating)
        }
    }
}

/// Fields a portable endpoint does not keep: desired, they are never observed here.
fn unkept(desired: &Endpoint) -> bool {
    desired.node_name.is_some()
        || desired.target_ref.is_some()
        || desired.hints.is_some()
        || desired.deprecated_topology.is_some()
}

fn endpoint(observed: &PortableEndpoint, desired: &Endpoint) -> bool {
    !unkept(desired)
        && observed.addresses.are(&desired.addresses)
        && conditions(observed.conditions.as_ref(), desired.conditions.as_ref())
        && same_text(observed.hostname.as_deref(), desired.hostname.as_deref())
        && same_text(observed.zone.as_deref(), desired.zone.as_deref())
}

fn port(observed: &EndpointPort, desired: &EndpointPort) -> bool {
    same(&observed.name, &desired.name)
        && same(&observed.protocol, &desired.protocol)
        && same(&observed.port, &desired.port)
        && same(&observed.app_protocol, &desired.app_protocol)
}

/// Whether the endpoints `desired` sets are those observed: contained field by field when the
/// observed slice keeps its endpoints; when it keeps only their digest, equal (a field the
/// observed endpoints have and the desired ones do not is a difference then: the next apply
/// drops it, as it drops anything Atoll no longer sets).
fn endpoints(observed: &McsSlice, desired: &[Endpoint]) -> bool {
    match &observed.endpoints_digest {
        Some(digest) => {
            !desired.iter().any(unkept)
                && *digest == EndpointsDigest::of(desired.iter().map(EndpointFields::from))
        }
        None => {
            observed.endpoints.len() == desired.len()
                && observed
                    .endpoints
                    .iter()
                    .zip(desired)
                    .all(|(o, d)| endpoint(o, d))
        }
    }
}

/// Whether everything `desired` sets is already true of `observed` (the metadata by
/// [`McsSlice::holds_metadata`]: name, namespace and labels).
pub fn slice_applied(observed: &McsSlice, desired: &EndpointSlice) -> bool {
    let ports = match (&observed.ports, &desired.ports) {
        (_, None) => true,
        (None, Some(_)) => false,
        (Some(o), Some(d)) => o.len() == d.len() && o.iter().zip(d).all(|(o, d)| port(o, d)),
    };
    *observed.address_type == *desired.address_type
        && ports
        && endpoints(observed, &desired.endpoints)
        && observed.holds_metadata(&desired.metadata)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diff::already_applied;
    use atoll_api::endpoint::ServedSlice;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use proptest::prelude::*;
    use std::collections::BTreeMap;
    use std::sync::Arc;

    fn flag() -> impl Strategy<Value = Option<bool>> {
        prop_oneof![Just(None), Just(Some(true)), Just(Some(false))]
    }

    fn pick(values: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
        prop::option::of(prop::sample::select(values).prop_map(str::to_owned))
    }

    fn endpoint() -> impl Strategy<Value = Endpoint> {
        (
            prop::collection::vec(prop::sample::select(&["10.0.0.1", "10.0.0.2"][..]), 0..3),
            prop::option::of((flag(), flag(), flag())),
            pick(&["a", "b"]),
            pick(&["z1", "z2"]),
            pick(&["node-1"]),
        )
            .prop_map(|(addresses, conditions, hostname, zone, node)| Endpoint {
                addresses: addresses.into_iter().map(str::to_owned).collect(),
                conditions: conditions.map(|(ready, serving, terminating)| EndpointConditions {
                    ready,
                    serving,
                    terminating,
                }),
                hostname,
                zone,
                // A field the observed form does not keep.
                node_name: node,
                ..Default::default()
            })
    }

    fn port() -> impl Strategy<Value = EndpointPort> {
        (
            pick(&["http", ""]),
            pick(&["TCP", "UDP"]),
            prop::option::of(79..81i32),
            pick(&["h2"]),
        )
            .prop_map(|(name, protocol, port, app_protocol)| EndpointPort {
                name,
                protocol,
                port,
                app_protocol,
            })
    }

    fn slice() -> impl Strategy<Value = EndpointSlice> {
        (
            prop::sample::select(&["IPv4", "IPv6"][..]),
            prop::collection::vec(endpoint(), 0..3),
            prop::option::of(prop::collection::vec(port(), 0..3)),
            prop::option::of(prop::collection::btree_map(
                prop::sample::select(&["a", "b"][..]).prop_map(str::to_owned),
                prop::sample::select(&["1", "2"][..]).prop_map(str::to_owned),
                0..3,
            )),
        )
            .prop_map(|(address_type, endpoints, ports, labels)| EndpointSlice {
                metadata: ObjectMeta {
                    name: Some("s".into()),
                    namespace: Some("ns".into()),
                    // An empty map sets nothing (the apiserver serves none; a kept slice cannot
                    // tell it from none, where JSON would call `{}` missing).
                    labels: labels.filter(|l| !l.is_empty()),
                    ..Default::default()
                },
                address_type: address_type.to_owned(),
                endpoints,
                ports,
            })
    }

    proptest! {
        /// The field-by-field comparison answers exactly as the JSON one, on unrelated pairs
        /// and on a slice against itself with one change.
        #[test]
        fn agrees_with_the_json_comparison(observed in slice(), desired in slice()) {
            let kept = McsSlice::from(&observed);
            let served = ServedSlice::from(&observed);
            prop_assert_eq!(slice_applied(&kept, &desired), already_applied(&served, &desired));
            let keepable = desired.endpoints.iter().all(|e| e.node_name.is_none());
            prop_assert_eq!(slice_applied(&McsSlice::from(&desired), &desired), keepable);
        }

        /// With only the digest of its endpoints kept, a slice is applied exactly when the
        /// endpoints are equal (and everything else contained).
        #[test]
        fn a_digested_slice_is_applied_when_its_endpoints_are_equal(observed in slice(), desired in slice()) {
            let kept = McsSlice::from(&observed);
            let mut digested = kept.clone();
            digested.digest_endpoints();
            prop_assert!(digested.endpoints.is_empty());
            let same_endpoints = kept.endpoints.len() == desired.endpoints.len()
                && kept.endpoints.iter().zip(&desired.endpoints).all(|(o, d)| {
                    !unkept(d) && *o == PortableEndpoint::from(d)
                });
            let mut rest = kept.clone();
            rest.endpoints = desired.endpoints.iter().map(PortableEndpoint::from).collect();
            let rest_applied = desired.endpoints.iter().all(|d| !unkept(d)) && slice_applied(&rest, &desired);
            prop_assert_eq!(slice_applied(&digested, &desired), same_endpoints && rest_applied);
            let mut own = McsSlice::from(&desired);
            own.digest_endpoints();
            prop_assert_eq!(slice_applied(&own, &desired), desired.endpoints.iter().all(|d| !unkept(d)));
        }
    }

    #[test]
    fn a_changed_address_condition_port_or_label_is_a_difference() {
        let desired = EndpointSlice {
            metadata: ObjectMeta {
                name: Some("s".into()),
                labels: Some(BTreeMap::from([("a".to_owned(), "1".to_owned())])),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: vec![Endpoint {
                addresses: vec!["10.0.0.1".into()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            }],
            ports: Some(vec![EndpointPort {
                port: Some(80),
                ..Default::default()
            }]),
        };
        let observed = McsSlice::from(&desired);
        assert!(slice_applied(&observed, &desired));
        let changes: [fn(&mut McsSlice); 4] = [
            |s| s.endpoints[0].addresses = vec!["10.0.0.2"].into(),
            |s| s.endpoints[0].conditions = None,
            |s| {
                s.ports = Some(Arc::from(vec![EndpointPort {
                    port: Some(81),
                    ..Default::default()
                }]))
            },
            |s| s.set_labels(&BTreeMap::new()),
        ];
        for change in changes {
            let mut changed = observed.clone();
            change(&mut changed);
            assert!(!slice_applied(&changed, &desired), "{changed:?}");
            changed.digest_endpoints();
            assert!(!slice_applied(&changed, &desired), "digested: {changed:?}");
        }
        let mut digested = observed.clone();
        digested.digest_endpoints();
        assert!(slice_applied(&digested, &desired));
    }
}
