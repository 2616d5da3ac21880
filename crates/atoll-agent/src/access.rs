//! At start, the agent asks its apiservers (SelfSubjectAccessReview) whether its credentials
//! allow every request it makes (`atoll_core::access`), and names what is missing: RBAC from an
//! older `atoll join` without a rule the agent now needs shows up at once, by name, not as a
//! write refused later. It only reports; nothing waits for it.

use atoll_core::ClusterId;
use atoll_core::access::{Access, Side, agent_access};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};

/// Whether `client` may make `access` (`None`: the question itself failed).
async fn allowed(client: &Client, access: &Access) -> Option<bool> {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                namespace: access.namespace.clone(),
                group: Some(access.group.clone()),
                resource: Some(access.resource.clone()),
                subresource: access.subresource.clone(),
                verb: Some(access.verb.clone()),
                name: access.name.clone(),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    let api: Api<SelfSubjectAccessReview> = Api::all(client.clone());
    match api.create(&PostParams::default(), &review).await {
        Ok(answer) => answer.status.map(|s| s.allowed),
        Err(error) => {
            tracing::debug!(%error, %access, "asking whether the agent may failed");
            None
        }
    }
}

/// Asks both apiservers about every request of member `id`'s agent; logs and counts what is
/// missing (the metric `atoll_agent_missing_permissions`).
pub async fn check(
    id: &ClusterId,
    member: &Client,
    hub: &Client,
    missing_gauge: &prometheus_client::metrics::gauge::Gauge,
) {
    let mut missing = Vec::new();
    let mut unknown = 0;
    for access in agent_access(id) {
        let client = match access.side {
            Side::Member => member,
            Side::Hub => hub,
        };
        match allowed(client, &access).await {
            Some(true) => {}
            Some(false) => missing.push(access.to_string()),
            None => unknown += 1,
        }
    }
    missing_gauge.set(i64::try_from(missing.len()).unwrap_or(i64::MAX));
    if missing.is_empty() {
        tracing::info!(
            unknown,
            "the agent's credentials allow every request it makes"
        );
    } else {
        tracing::warn!(
            missing = %missing.join("; "),
            count = missing.len(),
            "the agent's credentials lack permissions it needs (re-run `atoll join` or upgrade the chart): writes needing them will fail"
        );
    }
}
