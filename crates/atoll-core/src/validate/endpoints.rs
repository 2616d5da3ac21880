//! An ExportedEndpointSlice copy and its endpoints. A copy whose own fields are wrong (its
//! owner, names, address type, ports, size) is refused whole; an endpoint that is wrong is
//! dropped alone and the copy's other endpoints are kept.

use atoll_api::endpoint::PortableEndpoint;
use atoll_api::hub::ExportedEndpointSlice;

use super::addresses::{AddressPolicy, Family, address};
use super::names::{self, is_dns_label, is_label_value};
use super::ports::slice_ports;
use super::problem::{Problem, Reason, ensure};
use super::record::owner;

/// Most endpoints one EndpointSlice may hold (the apiserver's `maxEndpoints`).
pub const MAX_ENDPOINTS_PER_COPY: usize = atoll_api::hub_bounds::MAX_COPY_ENDPOINTS;
/// Most addresses one endpoint may have (the apiserver's `maxAddresses`).
pub const MAX_ADDRESSES: usize = atoll_api::hub_bounds::MAX_ADDRESSES;

/// The copy's own fields; `Ok` with its family when they are fine.
pub fn copy(copy: &ExportedEndpointSlice) -> Result<Family, Problem> {
    let spec = &copy.spec;
    owner(&spec.cluster, copy.metadata.namespace.as_deref())?;
    names::service(&spec.namespace, &spec.service)?;
    let family = Family::of(&spec.address_type)?;
    slice_ports(&spec.ports)?;
    ensure(
        spec.endpoints.len() <= MAX_ENDPOINTS_PER_COPY,
        Reason::TooManyEndpointsInCopy,
        || {
            format!(
                "{} endpoints, more than an EndpointSlice's {MAX_ENDPOINTS_PER_COPY}",
                spec.endpoints.len()
            )
        },
    )?;
    Ok(family)
}

/// One endpoint of a copy of `family`. `remote`: whether it comes from another member than
/// the importer, whose `policy` then applies too.
pub fn endpoint(
    endpoint: &PortableEndpoint,
    family: Family,
    policy: &AddressPolicy,
    remote: bool,
) -> Result<(), Problem> {
    let count = endpoint.addresses.len();
    ensure(
        (1..=MAX_ADDRESSES).contains(&count),
        Reason::Endpoint,
        || format!("an endpoint with {count} addresses (1-{MAX_ADDRESSES} allowed)"),
    )?;
    for text in endpoint.addresses.texts() {
        let ip = address(&text, family)?;
        if remote {
            policy.remote(&ip)?;
        }
    }
    if let Some(hostname) = &endpoint.hostname {
        ensure(is_dns_label(hostname), Reason::Endpoint, || {
            format!("endpoint hostname {hostname:?} is not a DNS label")
        })?;
    }
    if let Some(zone) = &endpoint.zone {
        ensure(is_label_value(zone), Reason::Endpoint, || {
            format!("endpoint zone {zone:?} is not a label value")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn copy_of(address_type: &str, addresses: &[&str]) -> ExportedEndpointSlice {
        crate::test_support::copy_of("east", address_type, addresses)
    }

    #[test]
    fn copies_must_be_ip_slices_of_their_owner() {
        assert_eq!(copy(&copy_of("IPv4", &["10.0.0.1"])), Ok(Family::V4));
        assert_eq!(
            copy(&copy_of("FQDN", &["a.example"])).map_err(|p| p.reason),
            Err(Reason::AddressType)
        );
        let mut moved = copy_of("IPv6", &[]);
        moved.metadata.namespace = Some("atoll-west".into());
        assert_eq!(
            copy(&moved).map_err(|p| p.reason),
            Err(Reason::WrongNamespace)
        );
        let many: Vec<String> = (0..=MAX_ENDPOINTS_PER_COPY)
            .map(|i| format!("10.0.{}.{}", i / 250, i % 250 + 1))
            .collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        assert_eq!(
            copy(&copy_of("IPv4", &refs)).map_err(|p| p.reason),
            Err(Reason::TooManyEndpointsInCopy)
        );
    }

    #[test]
    fn endpoints_are_judged_one_by_one() {
        let policy = AddressPolicy {
            service_cidrs: vec!["10.101.0.0/16".parse().unwrap()],
            ..Default::default()
        };
        let ep = |addresses: &[&str], hostname: Option<&str>| PortableEndpoint {
            addresses: addresses.into(),
            hostname: hostname.map(Box::from),
            ..Default::default()
        };
        let judge = |e: &PortableEndpoint, remote| {
            endpoint(e, Family::V4, &policy, remote).map_err(|p| p.reason)
        };
        assert_eq!(judge(&ep(&["10.203.0.9"], Some("web-0")), true), Ok(()));
        assert_eq!(judge(&ep(&["127.0.0.1"], None), true), Err(Reason::Address));
        assert_eq!(
            judge(&ep(&["10.101.0.1"], None), true),
            Err(Reason::ServiceCidr)
        );
        assert_eq!(
            judge(&ep(&["10.101.0.1"], None), false),
            Ok(()),
            "the importer's own endpoints"
        );
        assert_eq!(judge(&ep(&[], None), true), Err(Reason::Endpoint));
        assert_eq!(
            judge(&ep(&["10.203.0.9"], Some("Web_0")), true),
            Err(Reason::Endpoint)
        );
    }
}
