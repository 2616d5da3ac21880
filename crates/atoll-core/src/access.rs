//! What the agent's credentials must allow, as single requests (one verb on one resource, in
//! one namespace or cluster-wide, of one name or any), taken from the very rules `atoll join`
//! and the chart grant (`crate::membership`), so that the agent can ask its apiservers at start
//! what is missing and name it (RBAC from an older join, a hand-edited role), instead of
//! finding out from a write refused later.

use std::fmt;

use k8s_openapi::api::rbac::v1::PolicyRule;

use crate::ClusterId;
use crate::membership::{self, INVENTORY_NAMESPACE, SYSTEM_NAMESPACE};

/// Which apiserver a request goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Side {
    Member,
    Hub,
}

/// One request the agent makes.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Access {
    pub side: Side,
    /// `None`: cluster-wide.
    pub namespace: Option<String>,
    pub group: String,
    pub resource: String,
    pub subresource: Option<String>,
    pub verb: String,
    /// `None`: any name.
    pub name: Option<String>,
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            Side::Member => "member",
            Side::Hub => "hub",
        };
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.group)
        };
        let sub = self
            .subresource
            .as_ref()
            .map_or_else(String::new, |s| format!("/{s}"));
        let name = self
            .name
            .as_ref()
            .map_or_else(String::new, |n| format!(" {n}"));
        let scope = self
            .namespace
            .as_ref()
            .map_or_else(|| "cluster-wide".to_owned(), |n| format!("in {n}"));
        write!(
            f,
            "{} {}{group}{sub}{name} {scope} ({side})",
            self.verb, self.resource
        )
    }
}

/// Every request of the rules `rules`, as made on `side` in `namespace`.
fn expand(side: Side, namespace: Option<&str>, rules: &[PolicyRule]) -> Vec<Access> {
    let mut out = Vec::new();
    for rule in rules {
        let names: Vec<Option<String>> = match &rule.resource_names {
            Some(names) if !names.is_empty() => names.iter().cloned().map(Some).collect(),
            _ => vec![None],
        };
        for group in rule.api_groups.iter().flatten() {
            for resource in rule.resources.iter().flatten() {
                let (resource, subresource) = match resource.split_once('/') {
                    Some((r, s)) => (r.to_owned(), Some(s.to_owned())),
                    None => (resource.clone(), None),
                };
                for verb in &rule.verbs {
                    for name in &names {
                        out.push(Access {
                            side,
                            namespace: namespace.map(str::to_owned),
                            group: group.clone(),
                            resource: resource.clone(),
                            subresource: subresource.clone(),
                            verb: verb.clone(),
                            name: name.clone(),
                        });
                    }
                }
            }
        }
    }
    out
}

/// What member `id`'s agent reads and writes, on its member and on the hub.
pub fn agent_access(id: &ClusterId) -> Vec<Access> {
    let member = membership::member_objects(id, "", "");
    let hub = membership::hub_objects(id, "", "");
    let own = atoll_api::hub::namespace_for(id.as_str());
    let rules = |r: &Option<Vec<PolicyRule>>| r.clone().unwrap_or_default();
    let mut all = Vec::new();
    all.extend(expand(Side::Member, None, &rules(&member.role.rules)));
    all.extend(expand(
        Side::Member,
        Some(SYSTEM_NAMESPACE),
        &rules(&member.secret_role.rules),
    ));
    all.extend(expand(Side::Hub, Some(&own), &rules(&hub.writer.rules)));
    all.extend(expand(Side::Hub, None, &rules(&hub.reader.rules)));
    all.extend(expand(
        Side::Hub,
        Some(INVENTORY_NAMESPACE),
        &rules(&hub.profile_role.rules),
    ));
    all.sort();
    all.dedup();
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_asks_for_what_it_keeps_and_what_it_writes() {
        let id = ClusterId::new("c3").unwrap_or_else(|_| panic!("c3"));
        let access = agent_access(&id);
        let text: Vec<String> = access.iter().map(ToString::to_string).collect();
        for want in [
            "patch configmaps atoll-agent-liveness in atoll-system (member)",
            "get configmaps atoll-agent-liveness in atoll-system (member)",
            "create configmaps in atoll-system (member)",
            "deletecollection endpointslices.discovery.k8s.io cluster-wide (member)",
            "patch serviceimports.multicluster.x-k8s.io/status cluster-wide (member)",
            "patch leases.coordination.k8s.io in atoll-c3 (hub)",
            "patch clusterprofiles.multicluster.x-k8s.io/status c3 in atoll-inventory (hub)",
        ] {
            assert!(
                text.iter().any(|t| t == want),
                "{want} missing from {text:#?}"
            );
        }
        assert!(
            !text.iter().any(|t| t.contains("in atoll-c4")),
            "nothing in another member's namespace"
        );
    }
}
