//! Settings of the served zone.

use atoll_api::dns_name::{DnsName, DnsNameError, MAX_NAME};

/// The largest UDP answer Atoll sends by default, and what its OPT record advertises: the DNS
/// flag day 2020 value, which fits an unfragmented IPv6 packet on common links. Honouring
/// whatever size a requester claims (up to 65,535 bytes) would let a spoofed 60-byte query
/// draw a kilobytes-long answer at a victim.
pub const DEFAULT_MAX_UDP_PAYLOAD: u16 = 1232;
/// The smallest UDP payload size there is: plain DNS's, and the floor of any EDNS size (RFC 6891
/// §6.2.3 says smaller values count as 512).
pub const MIN_UDP_PAYLOAD: u16 = 512;

/// Settings of the served zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConfig {
    /// The zone, `clusterset.local` by default.
    pub zone: String,
    /// TTL of every service record (CoreDNS uses 5 s).
    pub ttl: u32,
    /// TTL of the `dns-version` TXT record.
    pub txt_ttl: u32,
    /// The largest UDP answer the server sends, whatever the requester's EDNS size; also the
    /// size its OPT record advertises. Values under 512 count as 512.
    pub max_udp_payload: u16,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        Self {
            zone: "clusterset.local".to_owned(),
            ttl: 5,
            txt_ttl: 28800,
            max_udp_payload: DEFAULT_MAX_UDP_PAYLOAD,
        }
    }
}

/// The longest name the zone serves at its apex besides the apex itself: `dns-version.<zone>`
/// (the SOA's `hostmaster.<zone>` and `ns.dns.<zone>` are shorter).
const LONGEST_APEX_PREFIX: &str = "dns-version.";

/// Why a zone cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ZoneError {
    #[error(transparent)]
    Name(#[from] DnsNameError),
    #[error(
        "the zone {zone} is too long: {LONGEST_APEX_PREFIX}{zone} must fit in {MAX_NAME} characters"
    )]
    TooLong { zone: String },
}

/// Checks `text` as the zone to serve and returns it lowercased without the trailing dot. A
/// zone is a DNS name under which nothing else is served: the root (`.`) would make the server
/// claim every name there is, so it is refused, as is a name too long for the names the zone
/// serves at its apex.
pub fn zone_name(text: &str) -> Result<String, ZoneError> {
    let name = DnsName::parse(text)?;
    if LONGEST_APEX_PREFIX
        .len()
        .saturating_add(name.as_str().len())
        > MAX_NAME
    {
        return Err(ZoneError::TooLong {
            zone: name.as_str().to_owned(),
        });
    }
    Ok(name.as_str().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_name;

    #[test]
    fn the_root_is_not_a_zone() {
        for root in [".", ""] {
            assert_eq!(zone_name(root), Err(ZoneError::Name(DnsNameError::Root)));
        }
        assert!(zone_name(".").unwrap_err().to_string().contains("root"));
    }

    #[test]
    fn a_zone_is_a_dns_name_whose_apex_names_fit() {
        assert_eq!(
            zone_name("ClusterSet.Local."),
            Ok("clusterset.local".to_owned())
        );
        for bad in ["a..b", "a b", "clusterset.local}", "_x.local", "*"] {
            assert!(zone_name(bad).is_err(), "{bad:?} accepted");
        }
        let longest = format!(
            "{}.{}.{}.{}",
            "a".repeat(63),
            "b".repeat(59),
            "b".repeat(58),
            "b".repeat(58)
        );
        assert_eq!(longest.len() + LONGEST_APEX_PREFIX.len(), MAX_NAME);
        let zone = zone_name(&longest).unwrap();
        for apex_name in ["dns-version", "hostmaster", "ns.dns"] {
            assert!(
                encode_name(&format!("{apex_name}.{zone}")).is_some(),
                "{apex_name}"
            );
        }
        assert!(matches!(
            zone_name(&format!("c.{longest}")),
            Err(ZoneError::TooLong { .. })
        ));
    }
}
