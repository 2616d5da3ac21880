//! Endpoint addresses from the hub. Each must be an IP of its slice's family, written the one
//! way the apiserver writes it, and not special (loopback, link-local, multicast, unspecified,
//! broadcast, an IPv4 address dressed as IPv6). For another member's endpoints an importer also
//! refuses its own Service CIDRs, its own Nodes' addresses and the ranges its operator denies:
//! an endpoint there would send the ClusterSet's traffic to the importer's own Services (its
//! apiserver's VIP, say) or nodes (a kubelet, a node-local daemon).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::str::FromStr;

use super::problem::{Problem, Reason, ensure};

/// An IP range: a network address and a prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

/// Why a string is not a CIDR.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a CIDR (an IP address, a slash and a prefix length, e.g. 10.96.0.0/12)")]
pub struct CidrError(pub String);

impl FromStr for Cidr {
    type Err = CidrError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || CidrError(s.to_owned());
        let (address, prefix) = s.split_once('/').ok_or_else(invalid)?;
        let network: IpAddr = address.parse().map_err(|_| invalid())?;
        let prefix: u8 = prefix.parse().map_err(|_| invalid())?;
        let bits = if network.is_ipv4() { 32 } else { 128 };
        if prefix > bits {
            return Err(invalid());
        }
        Ok(Self { network, prefix })
    }
}

impl std::fmt::Display for Cidr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix)
    }
}

/// An address as a 128-bit number and its width.
fn bits(ip: &IpAddr) -> (u128, u32) {
    match ip {
        IpAddr::V4(a) => (u128::from(u32::from(*a)), 32),
        IpAddr::V6(a) => (u128::from(*a), 128),
    }
}

impl Cidr {
    /// Whether `ip` (of the same family) lies in the range.
    pub fn contains(&self, ip: &IpAddr) -> bool {
        if ip.is_ipv4() != self.network.is_ipv4() {
            return false;
        }
        let ((net, width), (addr, _)) = (bits(&self.network), bits(ip));
        let host_bits = width - u32::from(self.prefix);
        let mask = u128::MAX.checked_shl(host_bits).unwrap_or(0);
        net & mask == addr & mask
    }
}

/// The address family of an EndpointSlice's `addressType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    /// `IPv4` or `IPv6`; anything else (FQDN, the deprecated IP) is not imported.
    pub fn of(address_type: &str) -> Result<Self, Problem> {
        match address_type {
            "IPv4" => Ok(Self::V4),
            "IPv6" => Ok(Self::V6),
            other => Err(Problem::new(
                Reason::AddressType,
                format!("address type {other:?} is not IPv4 or IPv6"),
            )),
        }
    }
}

/// Whether an address is one no endpoint may have (the apiserver's `ValidateNonSpecialIP`,
/// plus every multicast and the IPv4 broadcast).
fn special(ip: &IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(a) if a.is_unspecified() => Some("unspecified"),
        IpAddr::V4(a) if a.is_loopback() => Some("loopback"),
        IpAddr::V4(a) if a.is_link_local() => Some("link-local"),
        IpAddr::V4(a) if a.is_multicast() => Some("multicast"),
        IpAddr::V4(a) if a.is_broadcast() => Some("broadcast"),
        IpAddr::V6(a) if a.is_unspecified() => Some("unspecified"),
        IpAddr::V6(a) if a.is_loopback() => Some("loopback"),
        IpAddr::V6(a) if a.segments()[0] & 0xffc0 == 0xfe80 => Some("link-local"),
        IpAddr::V6(a) if a.is_multicast() => Some("multicast"),
        // ::ffff:127.0.0.1 is 127.0.0.1 to many stacks: an IPv4 address has no business in an
        // IPv6 slice.
        IpAddr::V6(a) if a.to_ipv4_mapped().is_some() => Some("an IPv4-mapped IPv6 address"),
        _ => None,
    }
}

/// The address, if it is a valid, canonical, non-special IP of `family`.
pub fn address(text: &str, family: Family) -> Result<IpAddr, Problem> {
    let ip: IpAddr = text.parse().map_err(|_| {
        Problem::new(
            Reason::Address,
            format!("address {text:?} is not an IP address"),
        )
    })?;
    ensure(
        ip.is_ipv4() == (family == Family::V4),
        Reason::Address,
        || format!("address {text} is not of the slice's family {family:?}"),
    )?;
    ensure(ip.to_string() == text, Reason::Address, || {
        format!("address {text:?} is not in canonical form ({ip})")
    })?;
    match special(&ip) {
        Some(what) => Err(Problem::new(
            Reason::Address,
            format!("address {text} is {what}"),
        )),
        None => Ok(ip),
    }
}

/// The InternalIP and ExternalIP addresses of `nodes`, each with its Node's name (addresses
/// that are not IPs, such as a Hostname, are not addresses an endpoint can have).
pub fn node_addresses<'a>(
    nodes: impl IntoIterator<Item = &'a k8s_openapi::api::core::v1::Node>,
) -> BTreeMap<IpAddr, String> {
    let mut found = BTreeMap::new();
    for node in nodes {
        let name = node.metadata.name.clone().unwrap_or_default();
        let addresses = node
            .status
            .iter()
            .flat_map(|s| s.addresses.iter().flatten());
        for a in addresses.filter(|a| a.type_ == "InternalIP" || a.type_ == "ExternalIP") {
            if let Ok(ip) = a.address.parse::<IpAddr>() {
                found.insert(ip, name.clone());
            }
        }
    }
    found
}

/// The ranges an importer refuses for other members' endpoints.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddressPolicy {
    /// The importing cluster's Service CIDRs (its ServiceCIDR objects).
    pub service_cidrs: Vec<Cidr>,
    /// Ranges its operator denies (`--deny-endpoint-cidrs`), e.g. its nodes' network.
    pub denied: Vec<Cidr>,
    /// The importing cluster's Node addresses (InternalIP, ExternalIP), with the Node's name.
    pub nodes: BTreeMap<IpAddr, String>,
}

impl AddressPolicy {
    /// Whether the importer accepts `ip` from another member.
    pub fn remote(&self, ip: &IpAddr) -> Result<(), Problem> {
        if let Some(cidr) = self.service_cidrs.iter().find(|c| c.contains(ip)) {
            return Err(Problem::new(
                Reason::ServiceCidr,
                format!("address {ip} is inside this cluster's Service CIDR {cidr}"),
            ));
        }
        if let Some(node) = self.nodes.get(ip) {
            return Err(Problem::new(
                Reason::NodeAddress,
                format!("address {ip} is an address of this cluster's Node {node}"),
            ));
        }
        if let Some(cidr) = self.denied.iter().find(|c| c.contains(ip)) {
            return Err(Problem::new(
                Reason::DeniedCidr,
                format!("address {ip} is inside the denied range {cidr}"),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cidr(s: &str) -> Cidr {
        s.parse().unwrap()
    }

    #[test]
    fn cidrs_parse_and_contain() {
        let c = cidr("10.96.0.0/12");
        assert!(c.contains(&"10.96.0.1".parse().unwrap()));
        assert!(c.contains(&"10.111.255.255".parse().unwrap()));
        assert!(!c.contains(&"10.112.0.0".parse().unwrap()));
        assert!(!c.contains(&"fd00::1".parse().unwrap()));
        assert!(cidr("0.0.0.0/0").contains(&"192.0.2.1".parse().unwrap()));
        assert!(cidr("fd00:10:96::/112").contains(&"fd00:10:96::a".parse().unwrap()));
        assert!(cidr("10.0.0.1/32").contains(&"10.0.0.1".parse().unwrap()));
        for bad in [
            "10.0.0.0",
            "10.0.0.0/33",
            "fd00::/129",
            "x/8",
            "10.0.0.0/-1",
        ] {
            assert!(bad.parse::<Cidr>().is_err(), "{bad}");
        }
    }

    #[test]
    fn special_and_foreign_addresses_are_refused() {
        for (text, family) in [
            ("127.0.0.1", Family::V4),
            ("0.0.0.0", Family::V4),
            ("169.254.1.1", Family::V4),
            ("224.0.0.1", Family::V4),
            ("255.255.255.255", Family::V4),
            ("::1", Family::V6),
            ("::", Family::V6),
            ("fe80::1", Family::V6),
            ("ff02::1", Family::V6),
            ("::ffff:127.0.0.1", Family::V6),
            ("10.0.0.1", Family::V6),
            ("fd00::1", Family::V4),
            ("010.0.0.1", Family::V4),
            ("FD00::1", Family::V6),
            ("fd00:0::1", Family::V6),
            ("example.com", Family::V4),
        ] {
            assert_eq!(
                address(text, family).map_err(|p| p.reason),
                Err(Reason::Address),
                "{text}"
            );
        }
        assert!(address("10.203.0.9", Family::V4).is_ok());
        assert!(address("fd00::9", Family::V6).is_ok());
    }

    #[test]
    fn an_importer_refuses_its_own_service_cidrs_node_addresses_and_denied_ranges_from_others() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let policy = AddressPolicy {
            service_cidrs: vec![cidr("10.101.0.0/16")],
            denied: vec![cidr("192.168.0.0/24")],
            nodes: BTreeMap::from([
                (ip("172.18.0.3"), "node-a".to_owned()),
                (ip("fd00::3"), "node-a".to_owned()),
            ]),
        };
        assert_eq!(
            policy.remote(&ip("10.101.0.1")).map_err(|p| p.reason),
            Err(Reason::ServiceCidr)
        );
        assert_eq!(
            policy.remote(&ip("192.168.0.7")).map_err(|p| p.reason),
            Err(Reason::DeniedCidr)
        );
        assert_eq!(
            policy.remote(&ip("172.18.0.3")).map_err(|p| p.reason),
            Err(Reason::NodeAddress)
        );
        assert_eq!(
            policy.remote(&ip("fd00::3")).map_err(|p| p.reason),
            Err(Reason::NodeAddress)
        );
        assert_eq!(
            policy.remote(&ip("172.18.0.4")),
            Ok(()),
            "only the Node's own address"
        );
        assert_eq!(policy.remote(&ip("10.102.0.1")), Ok(()));
    }

    #[test]
    fn node_addresses_are_the_internal_and_external_ips() {
        use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeStatus};
        let node = |name: &str, addresses: &[(&str, &str)]| Node {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.to_owned()),
                ..Default::default()
            },
            status: Some(NodeStatus {
                addresses: Some(
                    addresses
                        .iter()
                        .map(|(t, a)| NodeAddress {
                            type_: (*t).to_owned(),
                            address: (*a).to_owned(),
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
            ..Default::default()
        };
        let nodes = [
            node(
                "a",
                &[
                    ("InternalIP", "172.18.0.3"),
                    ("Hostname", "a"),
                    ("ExternalIP", "203.0.113.9"),
                    ("InternalDNS", "a.internal"),
                ],
            ),
            node(
                "b",
                &[("InternalIP", "fd00::4"), ("InternalIP", "not-an-ip")],
            ),
            node("kwok", &[("Hostname", "localhost")]),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            node_addresses(&nodes),
            BTreeMap::from([
                (ip("172.18.0.3"), "a".to_owned()),
                (ip("203.0.113.9"), "a".to_owned()),
                (ip("fd00::4"), "b".to_owned()),
            ])
        );
    }

    proptest! {
        /// A range contains exactly the addresses that agree with its network on the prefix.
        #[test]
        fn containment_is_agreement_on_the_prefix(net in any::<u32>(), addr in any::<u32>(), prefix in 0u8..=32) {
            let c = Cidr { network: IpAddr::V4(net.into()), prefix };
            let shift = 32 - u32::from(prefix);
            let same = net.checked_shr(shift).unwrap_or(0) == addr.checked_shr(shift).unwrap_or(0);
            prop_assert_eq!(c.contains(&IpAddr::V4(addr.into())), same);
        }
    }
}
