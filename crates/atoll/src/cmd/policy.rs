//! `atoll admission-policy`: print the ValidatingAdmissionPolicy (and its binding) that keeps
//! imported objects the agent's, as multi-document YAML for `kubectl apply -f -`.

use std::io::Write;

use anyhow::Context;
use atoll_core::admission;

/// Arguments of `atoll admission-policy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The username the agent has in the member (default: Atoll's member ServiceAccount, which
    /// `atoll join` creates).
    #[arg(long)]
    pub agent_username: Option<String>,
}

/// Writes the policy and its binding to `out`.
pub fn run(args: &Args, out: &mut impl Write) -> anyhow::Result<()> {
    let policy = match &args.agent_username {
        Some(user) => admission::policy(user),
        None => admission::default_policy(),
    };
    let policy = serde_saphyr::to_string(&policy).context("encoding the policy as YAML")?;
    let binding =
        serde_saphyr::to_string(&admission::binding()).context("encoding the binding as YAML")?;
    write!(out, "---\n{policy}---\n{binding}")?;
    Ok(())
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
            },
            &mut out,
        )
        .unwrap();
        let text = String::from_utf8(out).unwrap();
        let docs: Vec<serde_json::Value> = text
            .split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_saphyr::from_str(d).unwrap())
            .collect();
        assert_eq!(docs[0]["kind"], "ValidatingAdmissionPolicy");
        assert_eq!(docs[1]["kind"], "ValidatingAdmissionPolicyBinding");
        assert!(
            docs[0]["spec"]["variables"][1]["expression"]
                .as_str()
                .unwrap()
                .contains("'someone'")
        );
    }
}
