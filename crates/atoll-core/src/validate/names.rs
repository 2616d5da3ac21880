//! The apiserver's name rules (`k8s.io/apimachinery/pkg/util/validation`), for what members
//! write on the hub: DNS labels and subdomains, qualified names (label and annotation keys,
//! appProtocol), label values, and the size limit of annotations.

use std::collections::BTreeMap;

use super::problem::{Problem, Reason, ensure};
use crate::cluster_id::is_dns_label as label_chars;

/// Longest DNS label (and label value, and the name part of a qualified name).
pub const MAX_LABEL: usize = 63;
/// Longest DNS subdomain.
pub const MAX_SUBDOMAIN: usize = 253;
/// Most bytes of annotations (keys and values together) an object may carry.
pub const MAX_ANNOTATION_BYTES: usize = 256 * 1024;
/// What of [`MAX_ANNOTATION_BYTES`] is kept for the keys Atoll adds to an import (the derived
/// Service's name, the cluster selectors it uses): exported annotations get the rest, so an
/// import carrying them is never refused by the apiserver in every importer.
pub const ATOLL_ANNOTATION_BYTES: usize = 16 * 1024;
/// Most bytes of exported annotations one export may carry.
pub const MAX_EXPORTED_ANNOTATION_BYTES: usize = MAX_ANNOTATION_BYTES - ATOLL_ANNOTATION_BYTES;

/// A lowercase RFC-1123 label of at most 63 characters (`DNS_LABEL`).
pub fn is_dns_label(s: &str) -> bool {
    s.len() <= MAX_LABEL && label_chars(s)
}

/// A lowercase RFC-1123 subdomain of at most 253 characters: labels joined by dots (the
/// apiserver checks the whole, not each label's length).
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= MAX_SUBDOMAIN && s.split('.').all(label_chars)
}

/// `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`, at most 63 characters: the name part of a
/// qualified name and a non-empty label value.
fn is_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_alphanumeric();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            s.len() <= MAX_LABEL
                && alnum(first)
                && alnum(last)
                && bytes
                    .iter()
                    .all(|b| alnum(b) || matches!(b, b'-' | b'_' | b'.'))
        }
        _ => false,
    }
}

/// A qualified name (`[prefix/]name`, the prefix a DNS subdomain): label and annotation keys,
/// appProtocol.
pub fn is_qualified_name(s: &str) -> bool {
    match s.split_once('/') {
        None => is_name_part(s),
        Some((prefix, name)) => {
            !prefix.is_empty() && is_dns_subdomain(prefix) && is_name_part(name)
        }
    }
}

/// A label value: empty, or a name part of at most 63 characters.
pub fn is_label_value(s: &str) -> bool {
    s.is_empty() || is_name_part(s)
}

/// A service's namespace and name, both DNS labels.
pub fn service(namespace: &str, name: &str) -> Result<(), Problem> {
    ensure(
        is_dns_label(namespace) && is_dns_label(name),
        Reason::Name,
        || format!("namespace {namespace:?} or name {name:?} is not a DNS label"),
    )
}

/// Labels the apiserver would accept on an object.
pub fn labels(labels: &BTreeMap<String, String>) -> Result<(), Problem> {
    for (key, value) in labels {
        ensure(is_qualified_name(key), Reason::Label, || {
            format!("exported label key {key:?} is not a qualified name")
        })?;
        ensure(is_label_value(value), Reason::Label, || {
            format!(
                "exported label {key}'s value {value:?} is not a label value (at most 63 characters of A-Z, a-z, 0-9, '-', '_', '.', alphanumeric at both ends)"
            )
        })?;
    }
    Ok(())
}

/// Bytes of annotations as the apiserver counts them against its limit: keys and values.
pub fn annotation_bytes(annotations: &BTreeMap<String, String>) -> usize {
    annotations.iter().fold(0usize, |total, (key, value)| {
        total.saturating_add(key.len()).saturating_add(value.len())
    })
}

/// Exported annotations an import can carry beside Atoll's own keys: qualified keys (compared
/// in lower case, as the apiserver does), at most [`MAX_EXPORTED_ANNOTATION_BYTES`] of keys
/// and values together.
pub fn annotations(annotations: &BTreeMap<String, String>) -> Result<(), Problem> {
    for key in annotations.keys() {
        ensure(
            is_qualified_name(&key.to_ascii_lowercase()),
            Reason::Annotation,
            || format!("exported annotation key {key:?} is not a qualified name"),
        )?;
    }
    let total = annotation_bytes(annotations);
    ensure(
        total <= MAX_EXPORTED_ANNOTATION_BYTES,
        Reason::Annotation,
        || {
            format!(
                "exported annotations take {total} bytes, more than the {MAX_EXPORTED_ANNOTATION_BYTES} an import may carry beside Atoll's own keys (an object carries at most {MAX_ANNOTATION_BYTES})"
            )
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_names_follow_the_apiserver() {
        for ok in [
            "a",
            "app.kubernetes.io/name",
            "kubernetes.io/h2c",
            "http",
            "A_b.c-D",
            &format!("{}/{}", "d".repeat(253), "n".repeat(63)),
        ] {
            assert!(is_qualified_name(ok), "{ok}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "a-",
            "Example.com/a",
            "a b",
            &"n".repeat(64),
            &format!("{}/n", "d".repeat(254)),
            "a\u{0}",
        ] {
            assert!(!is_qualified_name(bad), "{bad:?}");
        }
    }

    #[test]
    fn label_values_may_be_empty_but_not_long() {
        assert!(is_label_value(""));
        assert!(is_label_value("v1.2_x"));
        assert!(!is_label_value(&"v".repeat(64)));
        assert!(!is_label_value("a/b"));
        let bad = BTreeMap::from([("team".to_owned(), "x".repeat(64))]);
        assert_eq!(labels(&bad).unwrap_err().reason, Reason::Label);
    }

    #[test]
    fn annotations_are_bounded_in_total() {
        // Room is kept for Atoll's own keys: what the apiserver alone would take is too much.
        let big = BTreeMap::from([("a".to_owned(), "x".repeat(MAX_ANNOTATION_BYTES - 2))]);
        assert_eq!(annotations(&big).unwrap_err().reason, Reason::Annotation);
        let fits = BTreeMap::from([(
            "a".to_owned(),
            "x".repeat(MAX_EXPORTED_ANNOTATION_BYTES - 1),
        )]);
        assert_eq!(annotations(&fits), Ok(()));
        let key = BTreeMap::from([("Not Qualified".to_owned(), String::new())]);
        assert!(annotations(&key).is_err());
    }

    #[test]
    fn subdomains_are_dot_joined_labels() {
        assert!(is_dns_subdomain("a.b-c.d"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(".a"));
        assert!(!is_dns_subdomain("A.b"));
        assert!(!is_dns_subdomain(&"a".repeat(254)));
        assert!(is_dns_label(&"a".repeat(63)) && !is_dns_label(&"a".repeat(64)));
    }
}
