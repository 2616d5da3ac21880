//! The Atoll agent, one per member cluster.
//!
//! Data flow (ARCHITECTURE.md §2): watches on the member and on the hub feed in-memory stores
//! ([`stores`]); whenever anything changes, one reconcile pass ([`reconcile`]) computes the
//! desired hub records and member objects with the pure functions of `atoll-core`, compares
//! them with what the stores observed, and writes only the differences with server-side apply
//! ([`writer`]). Nothing is written or deleted before every watch has listed once.

pub mod events;
mod export_side;
mod import_side;
pub mod metrics;
pub mod reconcile;
pub mod stores;
pub mod writer;

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use atoll_core::ClusterId;
use kube::Client;
use tokio::sync::Notify;

/// Everything the agent needs to run.
#[derive(Clone)]
pub struct AgentConfig {
    /// This member's cluster id.
    pub cluster_id: ClusterId,
    /// Client for this member cluster.
    pub member: Client,
    /// Client for the hub (may be the same cluster).
    pub hub: Client,
    /// How long to wait after a change before reconciling, to batch bursts of events.
    pub debounce: Duration,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("cluster_id", &self.cluster_id)
            .field("debounce", &self.debounce)
            .finish_non_exhaustive()
    }
}

/// What the agent reports about itself: metrics, and readiness (true once the first full pass
/// after every watch listed has run).
#[derive(Debug, Clone, Default)]
pub struct Telemetry {
    pub metrics: metrics::Metrics,
    pub ready: Arc<AtomicBool>,
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("preparing the hub namespace {namespace}: {source}")]
    HubNamespace {
        namespace: String,
        source: kube::Error,
    },
}

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: AgentConfig,
    telemetry: Telemetry,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    writer::ensure_hub_namespace(&config.hub, config.cluster_id.as_str()).await?;
    let trigger = Arc::new(Notify::new());
    let stores = stores::Stores::start(&config, trigger.clone());
    tokio::select! {
        () = reconcile::run_loop(&config, &stores, &trigger, &telemetry) => Ok(()),
        () = shutdown => {
            tracing::info!("shutting down");
            Ok(())
        }
    }
}
