//! What a user asks `atoll coredns wire|print` to put into a Corefile, checked before anything
//! is read or written: the zone, the `forward` targets and the `bind` addresses end up as bare
//! words in CoreDNS's configuration, where a brace, a quote, whitespace or a newline would
//! change its meaning (or open a block of the user's choosing), and the root as the zone would
//! send every name the cluster resolves to Atoll.

use std::net::{IpAddr, Ipv6Addr};

use atoll_api::dns_name::{DnsName, DnsNameError};

/// Why a value given for the Corefile is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("--zone {text:?}: {source}")]
    Zone { text: String, source: DnsNameError },
    #[error(
        "--target {text:?}: {why}; a target is host:port, the host an IPv4 address, an IPv6 address in brackets ([fd00::53]:53) or a DNS name, the port 1 to 65535"
    )]
    Target { text: String, why: String },
    #[error("--bind {text:?} is not an IP address (CoreDNS binds the block to IP addresses)")]
    Bind { text: String },
}

/// The zone to forward: a DNS name, not the root; lowercased, without the trailing dot.
pub fn zone(text: &str) -> Result<String, InputError> {
    DnsName::parse(text)
        .map(|name| name.as_str().to_owned())
        .map_err(|source| InputError::Zone {
            text: text.to_owned(),
            source,
        })
}

/// A `forward` target: `host:port`, returned in canonical form (addresses as Rust prints them,
/// names lowercased).
pub fn target(text: &str) -> Result<String, InputError> {
    let refuse = |why: &str| InputError::Target {
        text: text.to_owned(),
        why: why.to_owned(),
    };
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (inside, port) = rest
            .split_once("]:")
            .ok_or_else(|| refuse("an IPv6 address in brackets must be followed by :port"))?;
        let address: Ipv6Addr = inside
            .parse()
            .map_err(|_| refuse("the part in brackets is not an IPv6 address"))?;
        (format!("[{address}]"), port)
    } else {
        let (host, port) = text.rsplit_once(':').ok_or_else(|| refuse("no :port"))?;
        if host.contains(':') {
            return Err(refuse("an IPv6 address must be written in brackets"));
        }
        let host = match host.parse::<IpAddr>() {
            Ok(address) => address.to_string(),
            Err(_) => DnsName::parse(host)
                .map_err(|e| {
                    refuse(&format!(
                        "the host is neither an IP address nor a DNS name ({e})"
                    ))
                })?
                .as_str()
                .to_owned(),
        };
        (host, port)
    };
    if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(refuse("the port is not a number"));
    }
    match port.parse::<u16>() {
        Ok(port) if port > 0 => Ok(format!("{host}:{port}")),
        _ => Err(refuse("the port is not between 1 and 65535")),
    }
}

/// A `bind` address: an IP address, in canonical form.
pub fn bind(text: &str) -> Result<String, InputError> {
    text.parse::<IpAddr>()
        .map(|address| address.to_string())
        .map_err(|_| InputError::Bind {
            text: text.to_owned(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_root_is_no_zone() {
        for root in [".", ""] {
            assert!(matches!(
                zone(root),
                Err(InputError::Zone {
                    source: DnsNameError::Root,
                    ..
                })
            ));
        }
        assert_eq!(zone("ClusterSet.Local."), Ok("clusterset.local".to_owned()));
        let message = zone(".").unwrap_err().to_string();
        assert!(
            message.contains("--zone \".\"") && message.contains("root"),
            "{message}"
        );
    }

    #[test]
    fn targets_are_host_and_port() {
        for (text, want) in [
            ("10.96.0.53:53", "10.96.0.53:53"),
            ("[fd00::53]:53", "[fd00::53]:53"),
            ("[FD00:0::53]:5353", "[fd00::53]:5353"),
            (
                "atoll-dns.atoll-system.svc:53",
                "atoll-dns.atoll-system.svc:53",
            ),
            ("Atoll-DNS:65535", "atoll-dns:65535"),
            ("10.0.0.1:1", "10.0.0.1:1"),
        ] {
            assert_eq!(target(text), Ok(want.to_owned()), "{text}");
        }
        for text in [
            "10.96.0.53",
            "10.96.0.53:",
            "10.96.0.53:0",
            "10.96.0.53:65536",
            "10.96.0.53:+53",
            "10.96.0.53:53 ",
            " 10.96.0.53:53",
            "fd00::53:53",
            "[fd00::53]",
            "[fd00::53]53",
            "[10.0.0.1]:53",
            "[fe80::1%eth0]:53",
            ":53",
            "10.96.0.53:53}\nexample.com {",
            "a b:53",
            "\"a\":53",
            "a{:53",
            "-a:53",
            "a..b:53",
            "dns://10.0.0.1:53",
        ] {
            let refused = target(text);
            assert!(
                matches!(refused, Err(InputError::Target { .. })),
                "{text:?} accepted: {refused:?}"
            );
        }
    }

    #[test]
    fn bind_takes_ip_addresses_only() {
        assert_eq!(bind("127.0.0.1"), Ok("127.0.0.1".to_owned()));
        assert_eq!(bind("::1"), Ok("::1".to_owned()));
        for text in ["eth0", "127.0.0.1 }", "", "localhost", "127.0.0.1:53"] {
            assert!(bind(text).is_err(), "{text:?} accepted");
        }
    }

    proptest! {
        /// Whatever is accepted is safe to write into a Corefile as one word.
        #[test]
        fn accepted_values_are_single_plain_words(text in "[ -~\n\t]{0,40}") {
            for accepted in [target(&text), bind(&text), zone(&text)].into_iter().flatten() {
                prop_assert!(!accepted.is_empty());
                prop_assert!(
                    accepted.bytes().all(|b| b.is_ascii_alphanumeric() || b"-.:[]".contains(&b)),
                    "{:?} from {:?}", accepted, text
                );
            }
        }

        #[test]
        fn every_socket_address_is_a_target(address in any::<std::net::SocketAddr>()) {
            let text = match address {
                std::net::SocketAddr::V4(a) => a.to_string(),
                std::net::SocketAddr::V6(a) => format!("[{}]:{}", a.ip(), a.port()),
            };
            prop_assert_eq!(target(&text).is_ok(), address.port() > 0, "{}", text);
        }
    }
}
