//! The member's heartbeat: a Lease `atoll-heartbeat` in its hub namespace, renewed every
//! interval and whenever what the member publishes changes, carrying the claim importers check
//! the member's records against (see `atoll_core::liveness`). It is the agent's only periodic
//! write; it starts after the first reconcile pass, so nothing is written before every watch
//! has listed.

use std::time::Duration;

use atoll_api::hub::{self, CLAIM_ANNOTATION, LAST_ERROR_ANNOTATION, LEASE_NAME};
use atoll_core::ClusterId;
use atoll_core::liveness::{Claim, next_epoch};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::json;
use tokio::sync::watch;

use crate::metrics::Metrics;
use crate::writer::FIELD_MANAGER;

/// How the heartbeat runs.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    pub interval: Duration,
    /// Advertised as the Lease's duration (importers use their own grace, not this).
    pub grace: Duration,
}

/// Renews the Lease until the process ends. `digests` carries the digest of what this member
/// publishes, set by each reconcile pass (`None` until the first one).
pub async fn run(
    hub: Client,
    id: ClusterId,
    settings: Settings,
    mut digests: watch::Receiver<Option<String>>,
    mut leading: watch::Receiver<bool>,
    metrics: Metrics,
) {
    let namespace = hub::namespace_for(id.as_str());
    let api: Api<Lease> = Api::namespaced(hub, &namespace);
    // What this process last claimed; `None` until it knows what the Lease holds.
    let mut claimed: Option<Claim> = None;
    let mut baseline_known = false;
    loop {
        tokio::select! {
            changed = digests.changed() => if changed.is_err() { return },
            changed = leading.changed() => if changed.is_err() { return },
            () = tokio::time::sleep(settings.interval) => {}
        }
        if !*leading.borrow_and_update() {
            // Another replica renews; on taking over, continue from what it claimed.
            baseline_known = false;
            continue;
        }
        let Some(digest) = digests.borrow_and_update().clone() else {
            continue;
        };
        if !baseline_known {
            match api.get_opt(LEASE_NAME).await {
                Ok(lease) => {
                    claimed = lease
                        .and_then(|l| l.metadata.annotations)
                        .and_then(|a| a.get(CLAIM_ANNOTATION).and_then(|v| Claim::parse(v)));
                    baseline_known = true;
                }
                Err(error) => {
                    metrics.heartbeat_failures.inc();
                    tracing::warn!(%error, lease = %format!("{namespace}/{LEASE_NAME}"), "reading the heartbeat Lease failed");
                    continue;
                }
            }
        }
        let claim = match &claimed {
            Some(c) if c.digest == digest => c.clone(),
            last => Claim {
                epoch: next_epoch(
                    last.as_ref().map_or(0, |c| c.epoch),
                    u64::try_from(Timestamp::now().as_millisecond()).unwrap_or(0),
                ),
                digest,
            },
        };
        // What `atoll status` shows as this member's last error (bounded: annotations are small).
        let last_error: String = metrics
            .last_error
            .lock()
            .ok()
            .and_then(|e| e.clone())
            .unwrap_or_default()
            .chars()
            .take(512)
            .collect();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {
                "name": LEASE_NAME,
                "namespace": namespace,
                "labels": { hub::LABEL_CLUSTER: id.as_str() },
                "annotations": { CLAIM_ANNOTATION: claim.encode(), LAST_ERROR_ANNOTATION: last_error },
            },
            "spec": {
                "holderIdentity": id.as_str(),
                "leaseDurationSeconds": i32::try_from(settings.grace.as_secs()).unwrap_or(i32::MAX),
                "renewTime": MicroTime(Timestamp::now()),
            },
        });
        match api
            .patch(
                LEASE_NAME,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&lease),
            )
            .await
        {
            Ok(_) => {
                metrics.heartbeats.inc();
                claimed = Some(claim);
            }
            Err(error) => {
                metrics.heartbeat_failures.inc();
                tracing::warn!(%error, lease = %format!("{namespace}/{LEASE_NAME}"), "renewing the heartbeat Lease failed");
            }
        }
    }
}
