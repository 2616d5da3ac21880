//! Cluster ids.
//!
//! KEP-2149 allows any RFC-1123 subdomain, but the id becomes a label value
//! (`multicluster.kubernetes.io/source-cluster`, ≤ 63 characters) and exactly one DNS label in
//! `<hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local`; a dotted id could never be resolved.
//! Atoll therefore requires a single lowercase RFC-1123 label, short enough that every name
//! derived from it fits (the hub namespace `atoll-<id>` is itself a label), and refuses ids that
//! would name one of Atoll's own namespaces or a name Kubernetes reserves.

use std::fmt;

/// Why a string is not a usable cluster id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterIdError {
    #[error("cluster id is empty")]
    Empty,
    #[error(
        "cluster id {0:?} is longer than {max} characters (its hub namespace atoll-<id> must be a DNS label of at most 63)",
        max = ClusterId::MAX_LEN
    )]
    TooLong(String),
    #[error(
        "cluster id {0:?} is not a lowercase RFC-1123 label: use only a-z, 0-9 and '-', starting and ending with a letter or digit (dots are not allowed: the id is one DNS label)"
    )]
    Invalid(String),
    #[error("cluster id {0:?} is reserved: {1}")]
    Reserved(String, &'static str),
}

/// Ids whose hub namespace `atoll-<id>` is one of Atoll's own namespaces (`atoll-system` holds
/// a member's hub credentials, `atoll-inventory` every ClusterProfile: `atoll leave` of such a
/// member would delete them).
const ATOLL_NAMESPACE_IDS: [&str; 2] = ["system", "inventory"];

/// Why `id` may not be used although it is a well-formed label.
fn reserved(id: &str) -> Option<&'static str> {
    if ATOLL_NAMESPACE_IDS.contains(&id) {
        Some("its hub namespace atoll-<id> would be one of Atoll's own namespaces")
    } else if id == "default" || id.starts_with("kube-") {
        Some("Kubernetes reserves default and the kube- prefix")
    } else {
        None
    }
}

/// A cluster id: one lowercase RFC-1123 DNS label of at most [`ClusterId::MAX_LEN`]
/// characters, not reserved.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClusterId(String);

impl ClusterId {
    /// Longest allowed id: the hub namespace `atoll-<id>` is a DNS label (at most 63), and so
    /// are the id's other uses (a label value, a DNS label of `clusterset.local` names).
    pub const MAX_LEN: usize = atoll_api::hub_bounds::MAX_CLUSTER_ID;

    /// Validates `id`.
    pub fn new(id: &str) -> Result<Self, ClusterIdError> {
        if id.is_empty() {
            return Err(ClusterIdError::Empty);
        }
        if id.len() > Self::MAX_LEN {
            return Err(ClusterIdError::TooLong(id.to_owned()));
        }
        if !is_dns_label(id) {
            return Err(ClusterIdError::Invalid(id.to_owned()));
        }
        if let Some(why) = reserved(id) {
            return Err(ClusterIdError::Reserved(id.to_owned(), why));
        }
        Ok(Self(id.to_owned()))
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<&str> for ClusterId {
    type Error = ClusterIdError;
    fn try_from(id: &str) -> Result<Self, Self::Error> {
        Self::new(id)
    }
}

/// Whether `s` is a lowercase RFC-1123 label (length is checked by the caller).
pub fn is_dns_label(s: &str) -> bool {
    !s.bytes().any(|b| b.is_ascii_uppercase()) && atoll_api::dns_name::is_host_label(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn accepts_labels() {
        for ok in [
            "a",
            "c1",
            "east-1",
            "0abc",
            "systems",
            "my-default",
            "kube",
            &"x".repeat(57),
        ] {
            assert_eq!(
                ClusterId::new(ok).map(|id| id.to_string()),
                Ok(ok.to_owned())
            );
        }
    }

    #[test]
    fn rejects_non_labels_with_the_reason() {
        assert_eq!(ClusterId::new(""), Err(ClusterIdError::Empty));
        for long in [58, 63, 64] {
            assert!(matches!(
                ClusterId::new(&"x".repeat(long)),
                Err(ClusterIdError::TooLong(_))
            ));
        }
        for reserved in ["system", "inventory", "default", "kube-system", "kube-x"] {
            assert!(
                matches!(ClusterId::new(reserved), Err(ClusterIdError::Reserved(..))),
                "{reserved}"
            );
        }
        for bad in ["-a", "a-", "East", "a.b", "a_b", "a b", "ä"] {
            assert!(
                matches!(ClusterId::new(bad), Err(ClusterIdError::Invalid(_))),
                "{bad}"
            );
        }
    }

    /// Lowercase RFC-1123 labels of 1 to 57 characters, valid by construction:
    /// `^[a-z0-9]([-a-z0-9]*[a-z0-9])?$` with the inner part bounded so the whole stays ≤ 57,
    /// and none of the reserved ones.
    fn valid_id() -> impl Strategy<Value = String> {
        "[a-z0-9]([-a-z0-9]{0,55}[a-z0-9])?"
            .prop_filter("not reserved", |id| reserved(id).is_none())
    }

    /// A character no label may contain: ASCII upper case and punctuation, or anything
    /// non-ASCII.
    fn forbidden_char() -> impl Strategy<Value = char> {
        prop_oneof![
            proptest::char::range('A', 'Z'),
            proptest::sample::select(vec!['.', '_', ' ', '/', ':', '@', '*', '\n']),
            any::<char>().prop_filter("outside ASCII", |c| !c.is_ascii()),
        ]
    }

    proptest! {
        #[test]
        fn generated_valid_ids_are_accepted_unchanged(id in valid_id()) {
            prop_assert!(id.len() <= ClusterId::MAX_LEN);
            prop_assert_eq!(ClusterId::new(&id).map(|i| i.to_string()), Ok(id.clone()));
        }

        #[test]
        fn a_forbidden_character_anywhere_makes_an_id_invalid(
            id in valid_id(),
            at in any::<proptest::sample::Index>(),
            bad in forbidden_char(),
        ) {
            // Valid ids are ASCII, so every byte offset is a char boundary.
            let mut s = id;
            s.insert(at.index(s.len() + 1), bad);
            let expected = if s.len() > ClusterId::MAX_LEN {
                ClusterIdError::TooLong(s.clone())
            } else {
                ClusterIdError::Invalid(s.clone())
            };
            prop_assert_eq!(ClusterId::new(&s), Err(expected));
        }

        #[test]
        fn a_hyphen_at_either_end_makes_an_id_invalid(
            inner in "[-a-z0-9]{0,55}",
            at_start in any::<bool>(),
        ) {
            let s = if at_start { format!("-{inner}") } else { format!("{inner}-") };
            prop_assert_eq!(ClusterId::new(&s), Err(ClusterIdError::Invalid(s.clone())));
        }

        #[test]
        fn ids_longer_than_57_are_too_long_even_if_label_shaped(id in "[a-z0-9]{58,100}") {
            prop_assert_eq!(ClusterId::new(&id), Err(ClusterIdError::TooLong(id.clone())));
        }
    }
}
