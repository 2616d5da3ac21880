//! Faults the end-to-end tests cause on the local ClusterSet and take back again.

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use atoll_api::hub;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::Api;
use kube::api::{Patch, PatchParams};

use crate::mcs::HELLO_PORTS;
use crate::membership::kubectl;
use crate::{ClusterSet, Member, Undo, fixtures, wait_for};

/// The quota [`quota_on_copies`] creates.
pub const COPY_QUOTA: &str = "e2e-copies";

/// The resource [`quota_on_copies`] counts.
const COPIES: &str = "count/exportedendpointslices.hub.atoll.dev";

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
    let member = set
        .members
        .iter()
        .find(|m| m.context.ends_with(&format!("-{id}")))
        .ok_or_else(|| anyhow::anyhow!("no member {id}"))?;
    // Copies of namespaces an earlier test removed are still being withdrawn: counted now,
    // their deletion would leave room for the copy this quota must refuse (a CI run saw it).
    let copies_api =
        Api::<hub::ExportedEndpointSlice>::namespaced(set.members[0].client.clone(), &hub_ns);
    let namespaces: Api<Namespace> = Api::all(member.client.clone());
    wait_for(
        "the hub to hold only copies of live namespaces",
        Duration::from_secs(60),
        || async {
            let copies = copies_api.list(&Default::default()).await?.items;
            let mut stale = Vec::new();
            for copy in &copies {
                let live = namespaces
                    .get_opt(&copy.spec.namespace)
                    .await?
                    .is_some_and(|n| n.metadata.deletion_timestamp.is_none());
                if !live {
                    stale.push(copy.spec.namespace.clone());
                }
            }
            Ok(if stale.is_empty() {
                Ok(())
            } else {
                Err(format!("copies of {stale:?}"))
            })
        },
    )
    .await?;
    let quotas: Api<ResourceQuota> = Api::namespaced(set.members[0].client.clone(), &hub_ns);
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
    // Quota usage is computed by the controller: the limit follows what it counts until both
    // agree, so the apiserver enforces exactly "no more copies than now".
    let hard = Cell::new(copies_api.list(&Default::default()).await?.items.len());
    wait_for(
        "the quota to count as many copies as it allows",
        Duration::from_secs(60),
        || {
            let (quotas, hub_ns, hard) = (quotas.clone(), hub_ns.clone(), &hard);
            async move {
                let limit = hard.get().to_string();
                let quota = serde_json::json!({
                    "apiVersion": "v1", "kind": "ResourceQuota",
                    "metadata": { "name": COPY_QUOTA, "namespace": hub_ns },
                    "spec": { "hard": { COPIES: limit } },
                });
                quotas
                    .patch(
                        COPY_QUOTA,
                        &PatchParams::apply("atoll-e2e"),
                        &Patch::Apply(&quota),
                    )
                    .await?;
                let status = quotas.get(COPY_QUOTA).await?.status.unwrap_or_default();
                let counted = |m: Option<BTreeMap<String, Quantity>>| {
                    m.and_then(|m| m.get(COPIES).map(|q| q.0.clone()))
                };
                let (used, counted_hard) = (counted(status.used), counted(status.hard));
                Ok(match (used, counted_hard) {
                    (Some(u), Some(h)) if u == limit && h == limit => Ok(()),
                    (Some(u), Some(h)) if h == limit => {
                        // Counted against this limit, but copies came or went meanwhile.
                        if let Ok(n) = u.parse() {
                            hard.set(n);
                        }
                        Err(format!("used {u}, hard {h}"))
                    }
                    (u, h) => Err(format!("not counted yet: used {u:?}, hard {h:?}")),
                })
            }
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
