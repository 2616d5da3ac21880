//! `atoll rbac`: print the member-side ServiceAccounts and RBAC of the agent and the DNS server
//! (the same objects `atoll join` creates for the agent), for the Helm chart and for review.

use std::io::Write;

use anyhow::Context;
use atoll_core::ClusterId;

use super::manifest::{to_yaml, write_documents};
use atoll_core::membership::{dns_objects, member_objects};

/// Arguments of `atoll rbac`.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Writes the objects to `out` as multi-document YAML with their kinds.
pub fn run(_args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    use k8s_openapi::Resource;
    // The id and kubeconfig only shape the Secret and properties, which are not printed.
    let id = ClusterId::new("placeholder").context("a placeholder cluster id")?;
    let agent = member_objects(&id, "", "");
    let dns = dns_objects();
    fn doc<K: Resource + serde::Serialize>(object: &K) -> anyhow::Result<String> {
        let mut value = serde_json::to_value(object)?;
        if let Some(map) = value.as_object_mut() {
            map.insert("apiVersion".into(), K::API_VERSION.into());
            map.insert("kind".into(), K::KIND.into());
        }
        to_yaml(&value)
    }
    let docs = [
        doc(&agent.account)?,
        doc(&agent.role)?,
        doc(&agent.binding)?,
        doc(&agent.secret_role)?,
        doc(&agent.secret_binding)?,
        doc(&dns.account)?,
        doc(&dns.role)?,
        doc(&dns.binding)?,
    ];
    write_documents(out, &docs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_the_agents_and_the_dns_servers_accounts_and_roles() {
        let mut out = Vec::new();
        run(&Args {}, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let docs = super::super::manifest::parse_documents(&text);
        let kinds: Vec<String> = docs
            .iter()
            .map(|d| {
                format!(
                    "{}/{}",
                    d["kind"].as_str().unwrap(),
                    d["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "ServiceAccount/atoll-agent",
                "ClusterRole/atoll-agent",
                "ClusterRoleBinding/atoll-agent",
                "Role/atoll-agent",
                "RoleBinding/atoll-agent",
                "ServiceAccount/atoll-dns",
                "ClusterRole/atoll-dns",
                "ClusterRoleBinding/atoll-dns",
            ]
        );
        assert_eq!(docs[0]["metadata"]["namespace"], "atoll-system");
        assert!(
            !text.contains("placeholder"),
            "no trace of the placeholder id"
        );
    }
}
