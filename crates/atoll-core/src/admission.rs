//! Imports are the controller's: a ValidatingAdmissionPolicy (CEL, no webhook) that refuses
//! creating, changing or deleting the ServiceImports, derived Services and MCS EndpointSlices
//! Atoll manages to anyone but the agent's identity and the cluster's own controllers (which
//! delete them with their namespace or by garbage collection). Users export instead.

use atoll_api::labels;
use k8s_openapi::api::admissionregistration::v1::{
    MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::import::{MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use crate::membership::member_agent_username;

/// Name of the policy and of its binding.
pub const POLICY_NAME: &str = "atoll-imports-are-controller-owned";

/// The message users get when the policy refuses them.
pub const MESSAGE: &str = "this object is managed by Atoll from the ClusterSet's ServiceExports and may only be changed by the Atoll agent; to change what is imported, create, change or delete a ServiceExport next to the Service in an exporting cluster";

fn rule(group: &str, resource: &str) -> NamedRuleWithOperations {
    NamedRuleWithOperations {
        api_groups: Some(vec![group.to_owned()]),
        api_versions: Some(vec!["*".to_owned()]),
        operations: Some(vec![
            "CREATE".to_owned(),
            "UPDATE".to_owned(),
            "DELETE".to_owned(),
        ]),
        resources: Some(vec![resource.to_owned()]),
        ..Default::default()
    }
}

/// A CEL test that `object` (a variable name) carries Atoll's managed-by label.
fn managed(object: &str) -> String {
    format!(
        "{object} != null && has({object}.metadata.labels) && (\
         ('{MANAGED_BY_LABEL}' in {object}.metadata.labels && {object}.metadata.labels['{MANAGED_BY_LABEL}'] == '{MANAGED_BY_VALUE}') || \
         ('{slice}' in {object}.metadata.labels && {object}.metadata.labels['{slice}'] == '{atoll}'))",
        slice = labels::ENDPOINTSLICE_MANAGED_BY,
        atoll = labels::ATOLL_ENDPOINTSLICE_MANAGER,
    )
}

/// The policy, allowing `agent` (the agent's username in this member) to manage the objects.
pub fn policy(agent: &str) -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(POLICY_NAME.to_owned()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![
                    rule(atoll_api::multicluster::GROUP, "serviceimports"),
                    rule("", "services"),
                    rule("discovery.k8s.io", "endpointslices"),
                ]),
                ..Default::default()
            }),
            variables: Some(vec![
                Variable {
                    name: "managed".to_owned(),
                    expression: format!("({}) || ({})", managed("object"), managed("oldObject")),
                },
                Variable {
                    name: "trusted".to_owned(),
                    expression: format!(
                        "request.userInfo.username == '{agent}' || request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username == 'system:kube-controller-manager'"
                    ),
                },
            ]),
            validations: Some(vec![Validation {
                expression: "!variables.managed || variables.trusted".to_owned(),
                message: Some(MESSAGE.to_owned()),
                reason: Some("Forbidden".to_owned()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// Binds [`policy`] cluster-wide, denying what it refuses.
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(POLICY_NAME.to_owned()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(POLICY_NAME.to_owned()),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..Default::default()
        }),
    }
}

/// The policy for an agent running as Atoll's member ServiceAccount.
pub fn default_policy() -> ValidatingAdmissionPolicy {
    policy(&member_agent_username())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_guards_the_three_kinds_and_trusts_the_agent() {
        let p = default_policy();
        let spec = p.spec.unwrap();
        let resources: Vec<String> = spec
            .match_constraints
            .unwrap()
            .resource_rules
            .unwrap()
            .into_iter()
            .flat_map(|r| r.resources.unwrap_or_default())
            .collect();
        assert_eq!(resources, ["serviceimports", "services", "endpointslices"]);
        let variables = spec.variables.unwrap();
        assert!(
            variables[1]
                .expression
                .contains("'system:serviceaccount:atoll-system:atoll-agent'")
        );
        assert!(
            variables[0].expression.contains("oldObject"),
            "a label removed in an update still counts"
        );
        assert_eq!(
            spec.validations.unwrap()[0].message.as_deref(),
            Some(MESSAGE)
        );
    }
}
