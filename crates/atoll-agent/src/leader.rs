//! Leader election among the agent replicas of one member: a `coordination.k8s.io` Lease in
//! the member (decided by `atoll_core::leader`). Every replica watches and plans, so a standby
//! is warm; only the leader writes. The leader releases the Lease when it stops, so a standby
//! takes over within one retry period; if the leader dies, within the Lease's duration.

use std::time::{Duration, Instant};

use atoll_core::leader::{Elector, Observed, Step, Timings};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use tokio::sync::watch;

use crate::fence::Fence;
use crate::metrics::Metrics;

/// Where the election's Lease is and who this replica is.
#[derive(Clone, Debug)]
pub struct Settings {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub timings: Timings,
}

fn observe(lease: &Lease) -> Observed {
    let spec = lease.spec.as_ref();
    Observed {
        holder: spec.and_then(|s| s.holder_identity.clone()),
        renew_time: spec
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string()),
        duration_seconds: spec.and_then(|s| s.lease_duration_seconds),
        transitions: spec.and_then(|s| s.lease_transitions).unwrap_or(0),
    }
}

fn seconds(d: Duration) -> i32 {
    i32::try_from(d.as_secs().max(1)).unwrap_or(i32::MAX)
}

/// `lease` (or a new one) held by this replica from now.
fn held(settings: &Settings, lease: Option<Lease>, transitions: Option<i32>) -> Lease {
    let now = MicroTime(Timestamp::now());
    let mut lease = lease.unwrap_or_else(|| Lease {
        metadata: ObjectMeta {
            name: Some(settings.name.clone()),
            namespace: Some(settings.namespace.clone()),
            ..Default::default()
        },
        spec: None,
    });
    let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
    spec.holder_identity = Some(settings.identity.clone());
    spec.lease_duration_seconds = Some(seconds(settings.timings.lease_duration));
    spec.renew_time = Some(now.clone());
    if let Some(transitions) = transitions {
        spec.acquire_time = Some(now);
        spec.lease_transitions = Some(transitions);
    }
    lease
}

/// Runs the election until the process ends, publishing whether this replica leads.
pub async fn run(
    client: Client,
    settings: Settings,
    leading: watch::Sender<bool>,
    fence: Fence,
    metrics: Metrics,
) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let mut elector = Elector::new(settings.identity.clone(), settings.timings);
    let lease_name = format!("{}/{}", settings.namespace, settings.name);
    // One API call may not outlast half the renew deadline, so a hung call cannot keep a
    // replica believing it leads.
    let call_timeout = settings.timings.renew_deadline / 2;
    loop {
        let now = Instant::now();
        match tokio::time::timeout(call_timeout, api.get_opt(&settings.name)).await {
            Ok(Ok(lease)) => {
                let step = elector.decide(now, lease.as_ref().map(observe).as_ref());
                let write = match step {
                    Step::Create => Some(held(&settings, None, Some(0))),
                    Step::Acquire { transitions } => {
                        Some(held(&settings, lease, Some(transitions)))
                    }
                    Step::Renew => Some(held(&settings, lease, None)),
                    Step::Follow { .. } => None,
                };
                if let Some(write) = write {
                    let create = matches!(step, Step::Create);
                    let pp = PostParams::default();
                    let call = async {
                        if create {
                            api.create(&pp, &write).await
                        } else {
                            // The update carries the resourceVersion read: of two replicas
                            // racing for the Lease, one gets 409 Conflict.
                            api.replace(&settings.name, &pp, &write).await
                        }
                    };
                    match tokio::time::timeout(call_timeout, call).await {
                        Ok(Ok(_)) => elector.wrote(now),
                        Ok(Err(kube::Error::Api(e))) if e.code == 409 => elector.lost(),
                        Ok(Err(error)) => {
                            tracing::warn!(%error, lease = %lease_name, "writing the leader election Lease failed");
                        }
                        Err(_) => {
                            tracing::warn!(lease = %lease_name, "writing the leader election Lease timed out");
                        }
                    }
                }
            }
            Ok(Err(error)) => {
                tracing::warn!(%error, lease = %lease_name, "reading the leader election Lease failed");
            }
            Err(_) => {
                tracing::warn!(lease = %lease_name, "reading the leader election Lease timed out")
            }
        }
        let now = Instant::now();
        let leads = elector.leading(now);
        // Writes check this, each one: they stop before leadership lapses.
        fence.set(elector.lapses_at().filter(|_| leads));
        leading.send_if_modified(|was| {
            let changed = *was != leads;
            if changed {
                if leads {
                    metrics.leader_transitions.inc();
                    tracing::info!(identity = %settings.identity, lease = %lease_name, "leading: this replica writes");
                } else {
                    tracing::warn!(identity = %settings.identity, lease = %lease_name, "not leading: this replica stands by and writes nothing");
                }
            }
            *was = leads;
            changed
        });
        metrics.leader.set(i64::from(leads));
        // Wake for the next look, or when leadership would lapse, whichever is first.
        let mut next = Instant::now() + settings.timings.retry_period;
        if let Some(lapse) = elector.lapses_at().filter(|_| leads) {
            next = next.min(lapse);
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

/// Gives the Lease up if this replica holds it, so a standby takes over at its next look
/// instead of waiting for the Lease to expire.
pub async fn release(client: Client, settings: &Settings) {
    let api: Api<Lease> = Api::namespaced(client, &settings.namespace);
    let Ok(Ok(Some(mut lease))) =
        tokio::time::timeout(Duration::from_secs(2), api.get_opt(&settings.name)).await
    else {
        return;
    };
    let ours = lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
        == Some(settings.identity.as_str());
    if !ours {
        return;
    }
    if let Some(spec) = lease.spec.as_mut() {
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
    }
    let name = lease.name_any();
    match tokio::time::timeout(
        Duration::from_secs(2),
        api.replace(&name, &PostParams::default(), &lease),
    )
    .await
    {
        Ok(Ok(_)) => {
            tracing::info!(lease = %format!("{}/{name}", settings.namespace), "released the leader election Lease")
        }
        Ok(Err(error)) => tracing::warn!(%error, "releasing the leader election Lease failed"),
        Err(_) => tracing::warn!("releasing the leader election Lease timed out"),
    }
}
