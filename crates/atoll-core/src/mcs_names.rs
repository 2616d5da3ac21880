//! Names of the MCS EndpointSlices an importer writes.
//!
//! A name is only the object's handle: which service, source cluster and family a slice is
//! for is read from its labels (`multicluster.kubernetes.io/service-name`,
//! `multicluster.kubernetes.io/source-cluster`) and `addressType`, by the plan, `atoll dns` and
//! the conformance suite alike. But two slices must never get the same name: joining the
//! parts with `-` did (`web` from `us-east` and `web-us` from `east` both became
//! `web-us-east-ipv4-0`, and whichever was written last replaced the other), and a member picks
//! its service names. The parts are therefore joined with `.`, which neither a service name nor
//! a cluster id (both DNS labels) can contain, so every (service, cluster, family, index) has
//! its own name; slice names are DNS subdomains, where dots are allowed.

/// The name of the `index`-th MCS EndpointSlice of `service` from `cluster` for the address
/// type `address_type` (`IPv4` or `IPv6`).
pub fn slice_name(service: &str, cluster: &str, address_type: &str, index: usize) -> String {
    format!(
        "{service}.{cluster}.{}.{index}",
        address_type.to_ascii_lowercase()
    )
}

/// The name of an MCS EndpointSlice while KEP-5939 selectors leave its cluster out. A slice
/// changes its name (is replaced) rather than its labels when its cluster becomes active or
/// inactive: kube-proxy ignores an update that drops `kubernetes.io/service-name` and would keep
/// routing to the endpoints it had, but it drops a deleted slice's. Service names and cluster
/// ids have no dots, so no active slice of any service can have this name.
pub fn inactive_slice_name(active: &str) -> String {
    format!("{active}.inactive")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::names::is_dns_subdomain;
    use proptest::prelude::*;

    #[test]
    fn a_service_and_a_cluster_that_shared_a_name_no_longer_do() {
        // The collision of the old `{service}-{cluster}-{family}-{index}` names.
        assert_ne!(
            slice_name("web", "us-east", "IPv4", 0),
            slice_name("web-us", "east", "IPv4", 0)
        );
        assert_eq!(
            slice_name("web", "us-east", "IPv4", 0),
            "web.us-east.ipv4.0"
        );
    }

    /// DNS labels with dashes, often prefixes and suffixes of each other.
    fn label() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::sample::select(vec![
                "a", "a-b", "b", "b-a", "us", "east", "us-east", "web", "web-us"
            ])
            .prop_map(str::to_owned),
            "[a-z0-9]([-a-z0-9]{0,55}[a-z0-9])?",
        ]
    }

    proptest! {
        /// Different parts never give the same name, and every name is a valid object name.
        #[test]
        fn names_are_injective_and_valid(
            a in (label(), label(), prop::sample::select(vec!["IPv4", "IPv6"]), 0usize..300),
            b in (label(), label(), prop::sample::select(vec!["IPv4", "IPv6"]), 0usize..300),
        ) {
            let name_a = slice_name(&a.0, &a.1, a.2, a.3);
            let name_b = slice_name(&b.0, &b.1, b.2, b.3);
            prop_assert_eq!(name_a == name_b, a == b);
            prop_assert!(is_dns_subdomain(&name_a), "{}", name_a);
        }
    }
}
