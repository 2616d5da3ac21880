//! Asking a [`Zone`] a question without a socket: what `atoll dns` would answer, for
//! `atoll explain`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::answer::answer;
use crate::wire::encode_name;
use crate::zone::Zone;

/// Names of the response codes `answer` uses.
fn rcode_name(code: u8) -> &'static str {
    match code {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        _ => "OTHER",
    }
}

/// Skips a (possibly compressed) name at `at`; returns the offset after it.
fn skip_name(packet: &[u8], mut at: usize) -> Option<usize> {
    loop {
        let len = *packet.get(at)?;
        if len & 0xC0 == 0xC0 {
            return Some(at + 2);
        }
        if len == 0 {
            return Some(at + 1);
        }
        at += 1 + usize::from(len);
    }
}

/// The response code and the A/AAAA addresses `zone` answers for `name` (`qtype` 1 or 28), as
/// over TCP (no truncation).
pub fn resolve(zone: &Zone, name: &str, qtype: u16) -> Option<(&'static str, Vec<IpAddr>)> {
    let mut query = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    query.extend(encode_name(name)?);
    query.extend(qtype.to_be_bytes());
    query.extend(1u16.to_be_bytes());
    let mut out = Vec::new();
    answer(zone, &query, true, &mut out);
    let header = out.get(..12)?;
    let code = rcode_name(header[3] & 0x0f);
    let answers = u16::from_be_bytes([header[6], header[7]]);
    let mut at = skip_name(&out, 12)? + 4;
    let mut addresses = Vec::new();
    for _ in 0..answers {
        at = skip_name(&out, at)?;
        let rtype = u16::from_be_bytes([*out.get(at)?, *out.get(at + 1)?]);
        let len = usize::from(u16::from_be_bytes([*out.get(at + 8)?, *out.get(at + 9)?]));
        let data = out.get(at + 10..at + 10 + len)?;
        match (rtype, len) {
            (1, 4) => addresses.push(IpAddr::V4(Ipv4Addr::new(
                data[0], data[1], data[2], data[3],
            ))),
            (28, 16) => {
                let mut octets = [0u8; 16];
                octets.copy_from_slice(data);
                addresses.push(IpAddr::V6(Ipv6Addr::from(octets)));
            }
            _ => {}
        }
        at += 10 + len;
    }
    Some((code, addresses))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::zone::ZoneConfig;
    use serde_json::json;

    #[test]
    fn resolves_a_clusterset_ip_and_says_nxdomain_for_unknown_names() {
        let import: atoll_api::v1beta1::ServiceImport = serde_json::from_value(json!({
            "metadata": {"name": "hello", "namespace": "demo"},
            "spec": {"type": "ClusterSetIP", "ips": ["10.96.0.10"], "ports": []}
        }))
        .unwrap();
        let zone = Zone::build(&ZoneConfig::default(), &[&import], &[]);
        let (code, addresses) = resolve(&zone, "hello.demo.svc.clusterset.local", 1).unwrap();
        assert_eq!(code, "NOERROR");
        assert_eq!(addresses, ["10.96.0.10".parse::<IpAddr>().unwrap()]);
        let (code, addresses) = resolve(&zone, "nope.demo.svc.clusterset.local", 1).unwrap();
        assert_eq!((code, addresses.len()), ("NXDOMAIN", 0));
    }
}
