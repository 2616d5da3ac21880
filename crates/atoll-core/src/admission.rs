//! Imports are the controller's: a ValidatingAdmissionPolicy (CEL, no webhook) that refuses
//! creating, changing or deleting the ServiceImports, derived Services and MCS EndpointSlices
//! Atoll manages to anyone but the agent's identity and the cluster's own controllers (which
//! delete them with their namespace or by garbage collection). Users export instead.
//!
//! The same policy guards every MCS EndpointSlice, whoever's: DNS serves the addresses of
//! slices labelled `multicluster.kubernetes.io/service-name` (Atoll's `atoll dns`, and CoreDNS's
//! `multicluster` option, which trusts any such slice), so anyone who may create an
//! EndpointSlice in a namespace could otherwise put their own addresses into the answers of an
//! imported service. Only the agent, the cluster's own controllers and the MCS controllers the
//! operator names (`atoll admission-policy --trusted-slice-writer`) may write them.

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

/// The message users get when the policy refuses them a change to an MCS EndpointSlice that
/// is not Atoll's.
pub const SLICE_MESSAGE: &str = "EndpointSlices labelled multicluster.kubernetes.io/service-name are MCS EndpointSlices, whose addresses DNS serves for the imported service: only the cluster's MCS controllers may create, change or delete them (the Atoll agent, or a controller named with `atoll admission-policy --trusted-slice-writer`); to change what is imported, change the ServiceExport and the exported Service in the exporting cluster";

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

/// `text` as a CEL string literal: single-quoted, with backslashes and quotes escaped, so a
/// username cannot end the string and add to the expression.
fn cel_string(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

/// A CEL test that the request is made by one of `users`.
fn made_by(users: &[&str]) -> String {
    if users.is_empty() {
        return "false".to_owned();
    }
    let list: Vec<String> = users.iter().map(|u| cel_string(u)).collect();
    format!("request.userInfo.username in [{}]", list.join(", "))
}

/// A CEL test that `object` (a variable name) is an EndpointSlice carrying the MCS service-name
/// label (any implementation's MCS slice).
fn mcs_slice(object: &str) -> String {
    format!(
        "{object} != null && has({object}.metadata.labels) && '{label}' in {object}.metadata.labels",
        label = labels::SERVICE_NAME,
    )
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

/// What makes one of Atoll's policies: its name, the resources it guards, who it applies to
/// (all requests when `applies_to` is `None`), its variables and its validations (expression,
/// message).
struct Shape<'a> {
    name: &'a str,
    rules: Vec<NamedRuleWithOperations>,
    applies_to: Option<String>,
    variables: Vec<Variable>,
    validations: Vec<(String, &'a str)>,
}

fn denying_policy(shape: Shape<'_>) -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(shape.name.to_owned()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(shape.rules),
                ..Default::default()
            }),
            match_conditions: shape.applies_to.map(|who| {
                vec![
                    k8s_openapi::api::admissionregistration::v1::MatchCondition {
                        name: "the-atoll-agent".to_owned(),
                        expression: who,
                    },
                ]
            }),
            variables: (!shape.variables.is_empty()).then_some(shape.variables),
            validations: Some(
                shape
                    .validations
                    .into_iter()
                    .map(|(expression, message)| Validation {
                        expression,
                        message: Some(message.to_owned()),
                        reason: Some("Forbidden".to_owned()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

/// The name of the policy variable saying whether the request is made by one of the other MCS
/// controllers trusted with MCS EndpointSlices (the chart sets it from its values).
pub const SLICE_WRITER_VARIABLE: &str = "sliceWriter";

/// The policy, allowing `agent` (the agent's username in this member) to manage Atoll's
/// objects, and `agent` and `slice_writers` (other MCS controllers) to write MCS EndpointSlices.
pub fn policy(agent: &str, slice_writers: &[&str]) -> ValidatingAdmissionPolicy {
    let variable = |name: &str, expression: String| Variable {
        name: name.to_owned(),
        expression,
    };
    denying_policy(Shape {
        name: POLICY_NAME,
        rules: vec![
            rule(atoll_api::multicluster::GROUP, "serviceimports"),
            rule("", "services"),
            rule("discovery.k8s.io", "endpointslices"),
        ],
        applies_to: None,
        variables: vec![
            variable(
                "managed",
                format!("({}) || ({})", managed("object"), managed("oldObject")),
            ),
            variable(
                "trusted",
                format!(
                    "{} || request.userInfo.username.startsWith('system:serviceaccount:kube-system:') || request.userInfo.username == 'system:kube-controller-manager'",
                    made_by(&[agent])
                ),
            ),
            variable(
                "mcsSlice",
                format!(
                    "request.resource.resource == 'endpointslices' && (({}) || ({}))",
                    mcs_slice("object"),
                    mcs_slice("oldObject")
                ),
            ),
            variable(SLICE_WRITER_VARIABLE, made_by(slice_writers)),
        ],
        validations: vec![
            (
                "!variables.managed || variables.trusted".to_owned(),
                MESSAGE,
            ),
            (
                format!(
                    "!variables.mcsSlice || variables.trusted || variables.{SLICE_WRITER_VARIABLE}"
                ),
                SLICE_MESSAGE,
            ),
        ],
    })
}

/// Binds [`policy`] cluster-wide, denying what it refuses.
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    binding_of(POLICY_NAME)
}

fn binding_of(policy: &str) -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(policy.to_owned()),
            ..Default::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(policy.to_owned()),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..Default::default()
        }),
    }
}

/// Name of the policy that confines the agent (and of its binding).
pub const AGENT_POLICY_NAME: &str = "atoll-agent-changes-only-atoll-objects";

/// The message the agent's identity gets when it tries to change a user's object.
pub const AGENT_MESSAGE: &str = "the Atoll agent may only create, change or delete the Services and EndpointSlices Atoll manages (derived Services and MCS EndpointSlices, labelled as Atoll's); this one is not Atoll's";

/// The policy confining `agent`: RBAC must let it write Services and EndpointSlices (derived
/// Services and MCS slices live in users' namespaces), so this policy makes sure that a
/// compromised agent still cannot change, label, take over or delete a user's Service or
/// EndpointSlice. A create must carry Atoll's label, an update must keep it on an object that
/// already had it, a delete must be of an object that has it.
pub fn agent_policy(agent: &str) -> ValidatingAdmissionPolicy {
    denying_policy(Shape {
        name: AGENT_POLICY_NAME,
        rules: vec![
            rule("", "services"),
            rule("discovery.k8s.io", "endpointslices"),
        ],
        applies_to: Some(made_by(&[agent])),
        variables: vec![],
        validations: vec![(
            format!(
                "(request.operation == 'DELETE' || ({new})) && (request.operation == 'CREATE' || ({old}))",
                new = managed("object"),
                old = managed("oldObject"),
            ),
            AGENT_MESSAGE,
        )],
    })
}

/// Binds [`agent_policy`] cluster-wide, denying what it refuses.
pub fn agent_binding() -> ValidatingAdmissionPolicyBinding {
    binding_of(AGENT_POLICY_NAME)
}

/// The policy for an agent running as Atoll's member ServiceAccount, the only MCS controller.
pub fn default_policy() -> ValidatingAdmissionPolicy {
    policy(&member_agent_username(), &[])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_agent_policy_applies_to_the_agent_only_and_needs_the_label_on_both_sides() {
        let p = agent_policy("system:serviceaccount:atoll-system:atoll-agent");
        let spec = p.spec.unwrap();
        let conditions = spec.match_conditions.unwrap();
        assert_eq!(
            conditions[0].expression,
            "request.userInfo.username in ['system:serviceaccount:atoll-system:atoll-agent']"
        );
        let resources: Vec<String> = spec
            .match_constraints
            .unwrap()
            .resource_rules
            .unwrap()
            .into_iter()
            .flat_map(|r| r.resources.unwrap_or_default())
            .collect();
        assert_eq!(resources, ["services", "endpointslices"]);
        let expression = &spec.validations.unwrap()[0].expression;
        assert!(expression.contains("request.operation == 'DELETE' || (object != null"));
        assert!(expression.contains("request.operation == 'CREATE' || (oldObject != null"));
        assert_eq!(
            agent_binding().spec.unwrap().policy_name.as_deref(),
            Some(AGENT_POLICY_NAME)
        );
    }

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
        let validations = spec.validations.unwrap();
        assert_eq!(validations[0].message.as_deref(), Some(MESSAGE));
        assert_eq!(validations[1].message.as_deref(), Some(SLICE_MESSAGE));
    }

    #[test]
    fn every_mcs_slice_is_guarded_whoever_manages_it() {
        let spec = policy("agent", &["mcs-controller", "o'brien"])
            .spec
            .unwrap();
        let variables = spec.variables.unwrap();
        let mcs = &variables[2];
        assert_eq!(mcs.name, "mcsSlice");
        // Any slice carrying the service-name label, before or after the change, not only
        // Atoll's (whose managed-by the `managed` variable checks).
        assert!(
            mcs.expression
                .contains("request.resource.resource == 'endpointslices'")
        );
        assert!(
            mcs.expression
                .contains("'multicluster.kubernetes.io/service-name' in object.metadata.labels")
        );
        assert!(
            mcs.expression
                .contains("'multicluster.kubernetes.io/service-name' in oldObject.metadata.labels")
        );
        assert!(!mcs.expression.contains("managed-by"));
        assert_eq!(variables[3].name, SLICE_WRITER_VARIABLE);
        assert_eq!(
            variables[3].expression, "request.userInfo.username in ['mcs-controller', 'o\\'brien']",
            "named controllers, quoted so a username cannot extend the expression"
        );
        let validations = spec.validations.unwrap();
        assert_eq!(
            validations[1].expression,
            "!variables.mcsSlice || variables.trusted || variables.sliceWriter"
        );
        // Without named controllers, only the agent and the cluster's own controllers.
        let default = default_policy().spec.unwrap().variables.unwrap();
        assert_eq!(default[3].expression, "false");
    }

    #[test]
    fn cel_strings_cannot_be_escaped_from() {
        assert_eq!(cel_string("plain"), "'plain'");
        assert_eq!(cel_string("a'b"), "'a\\'b'");
        assert_eq!(cel_string("a\\'b"), "'a\\\\\\'b'");
    }
}
