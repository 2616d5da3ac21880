//! Namespace sameness, top-down: whether a namespace takes part in multi-cluster services
//! according to the ClusterSet's NamespacePolicy (or the default exclusions when there is none).

use atoll_api::hub::{NAMESPACE_POLICY, NamespacePolicySpec};

/// Whether `pattern` (`*` matches any run of characters) matches all of `name`.
pub fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let Some(first) = parts.next() else {
        return false;
    };
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Why `namespace` does not take part under `policy`, or `None` when it does.
pub fn excluded(policy: &NamespacePolicySpec, namespace: &str) -> Option<String> {
    if let Some(pattern) = policy.exclude.iter().find(|p| matches(p, namespace)) {
        return Some(format!(
            "namespace {namespace} is excluded from the ClusterSet by the NamespacePolicy {NAMESPACE_POLICY} on the hub (exclude pattern {pattern:?})"
        ));
    }
    if !policy.include.is_empty() && !policy.include.iter().any(|p| matches(p, namespace)) {
        return Some(format!(
            "namespace {namespace} matches no include pattern of the NamespacePolicy {NAMESPACE_POLICY} on the hub"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn patterns_match_whole_names() {
        assert!(matches("kube-system", "kube-system"));
        assert!(!matches("kube-system", "kube-system2"));
        assert!(matches("kube-*", "kube-public"));
        assert!(!matches("kube-*", "my-kube-public"));
        assert!(matches("*-prod", "team-a-prod"));
        assert!(matches("team-*-prod", "team-a-prod"));
        assert!(!matches("team-*-prod", "team-a-staging"));
        assert!(matches("*", "anything"));
        assert!(matches("a*a", "aa"));
        assert!(!matches("a*a", "a"));
    }

    #[test]
    fn the_default_policy_excludes_system_namespaces_only() {
        let policy = NamespacePolicySpec::default();
        for ns in [
            "kube-system",
            "kube-public",
            "kube-node-lease",
            "atoll-system",
        ] {
            assert!(excluded(&policy, ns).is_some(), "{ns}");
        }
        assert_eq!(excluded(&policy, "demo"), None);
        let only_teams = NamespacePolicySpec {
            include: vec!["team-*".into()],
            exclude: vec!["team-secret".into()],
        };
        assert_eq!(excluded(&only_teams, "team-a"), None);
        assert!(
            excluded(&only_teams, "demo")
                .unwrap()
                .contains("no include pattern")
        );
        assert!(
            excluded(&only_teams, "team-secret")
                .unwrap()
                .contains("\"team-secret\"")
        );
    }

    proptest! {
        #[test]
        fn a_name_matches_itself_and_star(name in "[a-z0-9-]{1,20}") {
            prop_assert!(matches(&name, &name));
            prop_assert!(matches("*", &name));
            let prefix = format!("{}*", &name[..1]);
            prop_assert!(matches(&prefix, &name));
        }
    }
}
