//! The Atoll agent, one per member cluster.
//!
//! Data flow (docs/architecture.md): watches on the member and on the hub feed in-memory stores
//! ([`stores`]); whenever anything changes, one reconcile pass ([`reconcile`]) hands a snapshot
//! of the stores to `atoll_core::plan`, which decides every write, and the [`writer`] executes
//! that plan with server-side apply. Nothing is written or deleted before every watch has
//! listed once; if a watch ends before that, the agent stops with an error.

pub mod access;
pub mod beats;
pub mod budget;
pub mod compact;
mod config;
pub mod dirty;
pub mod events;
pub mod executing;
pub mod fence;
pub mod identity;
pub mod kept;
pub mod leader;
pub mod metrics;
pub mod reconcile;
pub mod rejections;
mod report;
pub mod stores;
pub mod writer;

use std::sync::Arc;

use tokio::sync::Notify;

pub use config::{AgentConfig, Error, FIRST_PASS, KEPT_READ, Telemetry};

/// Longest any one write may take (with an election, also no longer than what is left of the
/// leadership).
const WRITE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: AgentConfig,
    telemetry: Telemetry,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let trigger = Arc::new(Notify::new());
    let dirty = Arc::new(dirty::Dirty::new(trigger.clone()));
    let ranges = stores::Ranges {
        service_cidrs: stores::serves_service_cidrs(&config.member).await,
        denied: config.denied_cidrs.clone(),
        every_profile: match &config.profile {
            Some(key) => stores::reads_every_profile(&config.hub, &key.namespace).await,
            None => false,
        },
    };
    if !ranges.service_cidrs {
        tracing::warn!(
            "this cluster serves no ServiceCIDRs (Kubernetes before 1.33): other members' endpoints inside its Service CIDR are not refused unless --deny-endpoint-cidrs lists it"
        );
    }
    telemetry
        .metrics
        .member_hub_bytes_budget
        .set(i64::try_from(config.limits.hub_bytes).unwrap_or(i64::MAX));
    let budget = budget::Budget::new(
        config.limits.hub_bytes,
        &atoll_api::hub::namespace_for(config.cluster_id.as_str()),
    );
    let stores = stores::Stores::start(
        &config.cluster_id,
        &config.member,
        &config.hub,
        config.profile.as_ref(),
        ranges,
        budget,
        &dirty,
    );
    // Without an election this process leads from the start.
    let (leading_tx, leading) = tokio::sync::watch::channel(config.leader.is_none());
    let fence = match &config.leader {
        Some(_) => fence::Fence::elected(WRITE_TIMEOUT),
        None => {
            telemetry.metrics.leader.set(1);
            fence::Fence::always(WRITE_TIMEOUT)
        }
    };
    // The election runs as a task of its own: a long synchronous stretch of a pass (planning
    // every service after a relist at 100,000 hub objects takes seconds) must not keep the
    // Lease from being renewed. Polled in the same task as the loop, it was: the fence lapsed
    // mid-pass, the pass's writes failed, and the next pass, leading again, replanned
    // everything (found by `make bench-scale` at 100×200).
    // The election's task gets a clone of the sender; the original stays here until the
    // function returns (without an election the loop stops once every sender is dropped).
    let mut election = config.leader.as_ref().map(|settings| {
        tokio::spawn(leader::run(
            config.member.clone(),
            settings.clone(),
            leading_tx.clone(),
            fence.clone(),
            telemetry.metrics.clone(),
        ))
    });
    let election_ended = async {
        match election.as_mut() {
            Some(task) => {
                if let Err(error) = task.await {
                    tracing::error!(%error, "the leader election task ended");
                }
            }
            None => std::future::pending().await,
        }
    };
    let result = tokio::select! {
        result = reconcile::run_loop(&config, &stores, &dirty, &trigger, &telemetry, &fence, leading) => result,
        () = election_ended => Ok(()),
        error = identity::id_changed(config.member.clone(), config.cluster_id.clone()) => Err(error.into()),
        () = shutdown => {
            tracing::info!("shutting down");
            Ok(())
        }
    };
    // Every write has stopped with the loops above, and the election with them (no renewal
    // after the release): hand the Lease to a standby at once.
    if let Some(task) = election.take() {
        task.abort();
        let _ = task.await;
    }
    fence.set(None);
    if let Some(settings) = &config.leader {
        leader::release(config.member.clone(), settings).await;
    }
    result
}
