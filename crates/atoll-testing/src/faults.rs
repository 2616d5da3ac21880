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
