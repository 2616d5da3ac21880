//! The Atoll agent, one per member cluster.
//!
//! Data flow (docs/architecture.md): watches on the member and on the hub feed in-memory stores
//! ([`stores`]); whenever anything changes, one reconcile pass ([`reconcile`]) hands a snapshot
//! of the stores to `atoll_core::plan`, which decides every write, and the [`writer`] executes
//! that plan with server-side apply. Nothing is written or deleted before every watch has
//! listed once; if a watch ends before that, the agent stops with an error.

mod config;
pub mod events;
pub mod heartbeat;
pub mod identity;
pub mod metrics;
pub mod reconcile;
pub mod stores;
pub mod writer;

use std::sync::Arc;

use tokio::sync::Notify;

pub use config::{AgentConfig, Error, FIRST_PASS, Telemetry};

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: AgentConfig,
    telemetry: Telemetry,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let trigger = Arc::new(Notify::new());
    let stores = stores::Stores::start(
        &config.member,
        &config.hub,
        config.profile.as_ref(),
        trigger.clone(),
    );
    let (digests, receiver) = tokio::sync::watch::channel(None);
    let heartbeat = heartbeat::run(
        config.hub.clone(),
        config.cluster_id.clone(),
        heartbeat::Settings {
            interval: config.heartbeat,
            grace: config.member_grace,
        },
        receiver,
        telemetry.metrics.clone(),
    );
    tokio::select! {
        result = reconcile::run_loop(&config, &stores, &trigger, &telemetry, &digests) => result,
        () = heartbeat => Ok(()),
        error = identity::id_changed(config.member.clone(), config.cluster_id.clone()) => Err(error.into()),
        () = shutdown => {
            tracing::info!("shutting down");
            Ok(())
        }
    }
}
