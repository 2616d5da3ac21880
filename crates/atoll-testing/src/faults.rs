//! Faults the end-to-end tests cause on the local ClusterSet and take back again.

use std::time::Duration;

use atoll_api::hub;
use k8s_openapi::api::core::v1::ResourceQuota;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::mcs::HELLO_PORTS;
use crate::membership::kubectl;
use crate::{ClusterSet, Member, Undo, fixtures, wait_for};

/// The quota [`quota_on_copies`] creates.
pub const COPY_QUOTA: &str = "e2e-copies";

/// A Deployment, its Service and its export of `name` in `member`.
pub async fn exported(member: &Member, ns: &str, name: &str) -> anyhow::Result<()> {
    fixtures::deployment(&member.client, ns, name, 1).await?;
    fixtures::apply_service(
        &member.client,
        &fixtures::service(ns, name, name, HELLO_PORTS, false),
    )
    .await?;
    fixtures::export(&member.client, ns, name, &[]).await
}

/// A ResourceQuota on member `id`'s hub namespace that allows no more endpoint copies than it
/// holds now, once the apiserver enforces it: the member's next copy cannot be written. Returns
/// the hub's quota API (to lift it while the test runs) and a guard that lifts it on drop.
pub async fn quota_on_copies(
    set: &ClusterSet,
    id: &str,
) -> anyhow::Result<(Api<ResourceQuota>, impl Drop + use<>)> {
    let hub_ns = hub::namespace_for(id);
    let copies =
        Api::<hub::ExportedEndpointSlice>::namespaced(set.members[0].client.clone(), &hub_ns)
            .list(&Default::default())
            .await?
            .items
            .len();
    let quotas: Api<ResourceQuota> = Api::namespaced(set.members[0].client.clone(), &hub_ns);
    let quota = serde_json::json!({
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": { "name": COPY_QUOTA, "namespace": hub_ns },
        "spec": { "hard": { "count/exportedendpointslices.hub.atoll.dev": copies.to_string() } },
    });
    quotas
        .patch(
            COPY_QUOTA,
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&quota),
        )
        .await?;
    let lift = {
        let (set, hub_ns) = (set.clone(), hub_ns.clone());
        Undo::new(move || {
            let _ = kubectl(
                &set,
                &set.members[0].context,
                &[
                    "-n",
                    &hub_ns,
                    "delete",
                    "resourcequota",
                    COPY_QUOTA,
                    "--ignore-not-found",
                ],
            );
        })
    };
    // Quota usage is computed by the controller: wait until the apiserver enforces it.
    wait_for(
        "the quota to count the copies",
        Duration::from_secs(30),
        || async {
            let q = quotas.get(COPY_QUOTA).await?;
            let used = q.status.and_then(|s| s.used).unwrap_or_default();
            Ok(if used.is_empty() {
                Err("not yet")
            } else {
                Ok(())
            })
        },
    )
    .await?;
    Ok((quotas, lift))
}

/// The admission policy (and binding) [`refuse_kept_writes`] creates.
pub const KEPT_REFUSAL: &str = "e2e-refuse-kept-decisions";

/// A ValidatingAdmissionPolicy in `member` that refuses every create and update of the agent's
/// kept liveness ConfigMap (as a Kyverno or Gatekeeper rule "every ConfigMap must carry label
/// X" would), once the apiserver enforces it; the guard removes it on drop.
pub async fn refuse_kept_writes(
    set: &ClusterSet,
    member: &Member,
) -> anyhow::Result<Undo<impl FnMut() + use<>>> {
    use k8s_openapi::api::admissionregistration::v1::{
        ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    };
    let kept = atoll_core::membership::KEPT_CONFIG_MAP;
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": KEPT_REFUSAL },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": { "resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "resources": ["configmaps"],
                "operations": ["CREATE", "UPDATE"],
            }]},
            "validations": [{
                "expression": format!("object.metadata.name != '{kept}'"),
                "message": "every ConfigMap must carry the label team (e2e policy)",
            }],
        },
    }))?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": KEPT_REFUSAL },
        "spec": { "policyName": KEPT_REFUSAL, "validationActions": ["Deny"] },
    }))?;
    let apply = PatchParams::apply("atoll-e2e");
    Api::<ValidatingAdmissionPolicy>::all(member.client.clone())
        .patch(KEPT_REFUSAL, &apply, &Patch::Apply(&policy))
        .await?;
    Api::<ValidatingAdmissionPolicyBinding>::all(member.client.clone())
        .patch(KEPT_REFUSAL, &apply, &Patch::Apply(&binding))
        .await?;
    let guard = {
        let (set, context) = (set.clone(), member.context.clone());
        Undo::new(move || {
            for kind in [
                "validatingadmissionpolicybinding",
                "validatingadmissionpolicy",
            ] {
                let _ = kubectl(
                    &set,
                    &context,
                    &["delete", kind, KEPT_REFUSAL, "--ignore-not-found"],
                );
            }
        })
    };
    // Policies take effect a moment after they are written: a dry-run create shows when.
    let probes: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(member.client.clone(), "default");
    let mut probe = k8s_openapi::api::core::v1::ConfigMap::default();
    probe.metadata.name = Some(kept.to_owned());
    wait_for(
        "the policy to refuse the kept ConfigMap",
        Duration::from_secs(30),
        || async {
            let dry = kube::api::PostParams {
                dry_run: true,
                ..Default::default()
            };
            Ok(match probes.create(&dry, &probe).await {
                Err(kube::Error::Api(e)) if e.code == 422 || e.code == 403 => Ok(()),
                Ok(_) => Err("still allowed".to_owned()),
                Err(e) => Err(e.to_string()),
            })
        },
    )
    .await?;
    Ok(guard)
}

/// Deletes `member`'s kept liveness decisions (the ConfigMap), as an operator or a cleanup
/// job might.
pub fn delete_kept(set: &ClusterSet, member: &Member) -> anyhow::Result<()> {
    kubectl(
        set,
        &member.context,
        &[
            "-n",
            atoll_core::membership::SYSTEM_NAMESPACE,
            "delete",
            "configmap",
            atoll_core::membership::KEPT_CONFIG_MAP,
            "--ignore-not-found",
        ],
    )
}
