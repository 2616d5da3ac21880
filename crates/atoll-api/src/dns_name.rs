//! DNS names as Atoll takes them from users: the zone `atoll dns` serves and CoreDNS forwards,
//! and host names of forwarding targets. Checked once where they come in, so nothing later has
//! to cope with the root, an empty label or text that would break a Corefile.

use std::fmt;

/// Longest name in text form without the trailing dot: 255 bytes in wire format (RFC 1035
/// §2.3.4) are 253 characters of labels and dots.
pub const MAX_NAME: usize = 253;
/// Longest label (RFC 1035 §2.3.4).
pub const MAX_LABEL: usize = 63;

/// Why a text is not a DNS name Atoll accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsNameError {
    #[error(
        "the root (\".\" or an empty name) is not a zone: a zone is a DNS name, such as clusterset.local, under which nothing else is served"
    )]
    Root,
    #[error("{name:?} is longer than {MAX_NAME} characters")]
    TooLong { name: String },
    #[error("{name:?} has an empty label (two dots in a row, or a leading dot)")]
    EmptyLabel { name: String },
    #[error("{name:?} has a label longer than {MAX_LABEL} characters")]
    LongLabel { name: String },
    #[error(
        "{name:?} has a label that is not letters, digits and inner hyphens (RFC 1123): {label:?}"
    )]
    BadLabel { name: String, label: String },
}

/// A DNS name of at least one label, lowercased, without the trailing dot: every label 1 to 63
/// letters, digits and hyphens, neither starting nor ending with a hyphen (RFC 1123 host name
/// syntax), at most 253 characters. No whitespace, quote, brace or other character a Corefile
/// or a shell would read specially can be part of one.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DnsName(String);

impl DnsName {
    /// Checks `text` (one trailing dot allowed, any letter case) and returns it lowercased,
    /// without the dot.
    pub fn parse(text: &str) -> Result<Self, DnsNameError> {
        let trimmed = text.strip_suffix('.').unwrap_or(text);
        if trimmed.is_empty() {
            return Err(DnsNameError::Root);
        }
        let name = || text.to_owned();
        if trimmed.len() > MAX_NAME {
            return Err(DnsNameError::TooLong { name: name() });
        }
        for label in trimmed.split('.') {
            if label.is_empty() {
                return Err(DnsNameError::EmptyLabel { name: name() });
            }
            if label.len() > MAX_LABEL {
                return Err(DnsNameError::LongLabel { name: name() });
            }
            if !is_host_label(label) {
                return Err(DnsNameError::BadLabel {
                    name: name(),
                    label: label.to_owned(),
                });
            }
        }
        Ok(Self(trimmed.to_ascii_lowercase()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for DnsName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for DnsName {
    type Err = DnsNameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Letters, digits and hyphens, not starting or ending with a hyphen (length checked by the
/// caller).
pub fn is_host_label(label: &str) -> bool {
    let bytes = label.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            alnum(first) && alnum(last) && bytes.iter().all(|b| alnum(b) || *b == b'-')
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ordinary_zones_are_accepted_lowercased_without_the_trailing_dot() {
        for (text, want) in [
            ("clusterset.local", "clusterset.local"),
            ("clusterset.local.", "clusterset.local"),
            ("ClusterSet.LOCAL", "clusterset.local"),
            ("local", "local"),
            ("a-b.c0.example", "a-b.c0.example"),
            ("1.2.3.4", "1.2.3.4"),
        ] {
            assert_eq!(DnsName::parse(text).map(|n| n.0), Ok(want.to_owned()));
        }
    }

    #[test]
    fn the_root_and_broken_names_are_refused() {
        assert_eq!(DnsName::parse("."), Err(DnsNameError::Root));
        assert_eq!(DnsName::parse(""), Err(DnsNameError::Root));
        for text in [
            "..",
            ".local",
            "a..b",
            "-a.local",
            "a-.local",
            "a_b.local",
            "clusterset.local }",
            "clusterset.local{",
            "a b",
            "a\nb",
            "\"a\"",
            "a'b",
            "*.local",
            "a.local..",
            "ä.local",
        ] {
            assert!(DnsName::parse(text).is_err(), "{text:?} accepted");
        }
        assert!(matches!(
            DnsName::parse(&"a".repeat(64)),
            Err(DnsNameError::LongLabel { .. })
        ));
        let long = vec!["a".repeat(63); 4].join(".");
        assert!(matches!(
            DnsName::parse(&long),
            Err(DnsNameError::TooLong { .. })
        ));
        assert!(DnsName::parse(&long[..253]).is_ok());
    }

    proptest! {
        #[test]
        fn an_accepted_name_is_plain_lowercase_labels(text in "[ -~\n\t]{0,80}") {
            if let Ok(name) = DnsName::parse(&text) {
                let s = name.as_str();
                prop_assert!(!s.is_empty() && s.len() <= MAX_NAME);
                prop_assert!(s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.'));
                prop_assert!(s.split('.').all(|l| !l.is_empty() && l.len() <= MAX_LABEL && !l.starts_with('-') && !l.ends_with('-')));
                prop_assert_eq!(DnsName::parse(s), Ok(name.clone()), "parsing is idempotent");
            }
        }
    }
}
