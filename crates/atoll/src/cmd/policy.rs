//! `atoll admission-policy`: print the ValidatingAdmissionPolicies (and bindings) that keep
//! imported objects the agent's and keep the agent off everything else, as multi-document YAML for `kubectl apply -f -`.

use std::io::Write;

use atoll_core::admission;

use super::manifest::{to_yaml, write_documents};

/// Arguments of `atoll admission-policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The username the agent has in the member (default: Atoll's member ServiceAccount, which
    /// `atoll join` creates).
    #[arg(long)]
    pub agent_username: Option<String>,
    /// The username of another MCS controller allowed to create, change and delete MCS
    /// EndpointSlices (those labelled multicluster.kubernetes.io/service-name) in this member
    /// (repeat for several); by default only the agent and the cluster's own controllers may.
    #[arg(long = "trusted-slice-writer", value_name = "USERNAME")]
    pub trusted_slice_writers: Vec<String>,
}

/// Writes both policies and their bindings to `out`.
pub fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let agent = args
        .agent_username
        .clone()
        .unwrap_or_else(atoll_core::membership::member_agent_username);
    write_documents(
        out,
        &[
            to_yaml(&admission::policy(
                &agent,
                &args
                    .trusted_slice_writers
                    .iter()
                    .map(String::as_str)
                    .collect::<Vec<_>>(),
            ))?,
            to_yaml(&admission::binding())?,
            to_yaml(&admission::agent_policy(&agent))?,
            to_yaml(&admission::agent_binding())?,
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prints_a_policy_and_its_binding() {
        let mut out = Vec::new();
        run(
            &Args {
                agent_username: Some("someone".into()),
                trusted_slice_writers: vec!["other-mcs".into()],
            },
            &mut out,
        )
        .unwrap();
        let docs = super::super::manifest::parse_documents(&String::from_utf8(out).unwrap());
        assert_eq!(docs[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(docs[1]["kind"], "ValidatingAdmissionPolicyBinding");
        assert_eq!(docs[2]["metadata"]["name"], admission::AGENT_POLICY_NAME);
        assert_eq!(docs[3]["spec"]["policyName"], admission::AGENT_POLICY_NAME);
        assert!(
            docs[2]["spec"]["matchConditions"][0]["expression"]
                .as_str()
                .unwrap()
                .contains("'someone'")
        );
        assert!(
            docs[0]["spec"]["variables"][1]["expression"]
                .as_str()
                .unwrap()
                .contains("'someone'")
        );
        assert_eq!(
            docs[0]["spec"]["variables"][3]["expression"],
            "request.userInfo.username in ['other-mcs']"
        );
    }
}
