//! Derived Service names.
//!
//! A ClusterSetIP import gets its VIP from a selector-less "derived" Service in each importing
//! cluster. Atoll names it exactly as the upstream reference controller does, so tools that know
//! that convention find it: `derived-` followed by the first 10 characters of the lowercase,
//! unpadded base32hex encoding of SHA-256(`"<namespace>/<name>"`). The ServiceImport's
//! `multicluster.kubernetes.io/derived-service` annotation stays the source of truth.

use sha2::{Digest, Sha256};

/// Name of the derived Service for the ServiceImport `namespace/name`.
pub fn derived_service_name(namespace: &str, name: &str) -> String {
    let digest = Sha256::digest(format!("{namespace}/{name}").as_bytes());
    let encoded = data_encoding::BASE32HEX_NOPAD
        .encode(&digest)
        .to_ascii_lowercase();
    format!("derived-{}", &encoded[..10])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_upstream_test_vectors() {
        // Names the upstream reference controller gives these services (its rule is in the
        // module doc): a change to the encoding or the hashed string breaks them.
        assert_eq!(derived_service_name("demo", "serve"), "derived-ovtkn0laet");
        assert_eq!(
            derived_service_name("default", "hello"),
            "derived-k5cuvo1ge4"
        );
        assert_eq!(
            derived_service_name("demo", "serve-with-vip"),
            "derived-3jail2m1qh"
        );
    }

    #[test]
    fn is_a_valid_service_name() {
        let name = derived_service_name("some-namespace", "some-service");
        assert_eq!(name.len(), "derived-".len() + 10);
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        );
    }
}
