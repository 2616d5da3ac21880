//! The Atoll agent, one per member cluster.
//!
//! Data flow (docs/architecture.md): watches on the member and on the hub feed in-memory stores
//! ([`stores`]); whenever anything changes, one reconcile pass ([`reconcile`]) hands a snapshot
//! of the stores to `atoll_core::plan`, which decides every write, and the [`writer`] executes
//! that plan with server-side apply. Nothing is written or deleted before every watch has
//! listed once; if a watch ends before that, the agent stops with an error.

pub mod events;
pub mod metrics;
pub mod reconcile;
pub mod stores;
pub mod writer;

use std::sync::Arc;
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

/// What the agent reports about itself: metrics, and readiness: what it still waits for,
/// every watch's first list and then the first full pass.
#[derive(Debug, Clone)]
pub struct Telemetry {
    pub metrics: metrics::Metrics,
    pub readiness: atoll_watch::Readiness,
}

/// What readiness waits for after the watches.
pub const FIRST_PASS: &str = "the first reconcile pass";

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            metrics: metrics::Metrics::default(),
            readiness: atoll_watch::Readiness::waiting_for(
                stores::WATCHES.into_iter().chain([FIRST_PASS]),
            ),
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the watch of {watch} ended before its first list; nothing was written")]
    WatchEnded { watch: &'static str },
}

/// Runs the agent until `shutdown` resolves.
pub async fn run(
    config: AgentConfig,
    telemetry: Telemetry,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), Error> {
    let trigger = Arc::new(Notify::new());
    let stores = stores::Stores::start(&config, trigger.clone());
    tokio::select! {
        result = reconcile::run_loop(&config, &stores, &trigger, &telemetry) => result,
        () = shutdown => {
            tracing::info!("shutting down");
            Ok(())
        }
    }
}
