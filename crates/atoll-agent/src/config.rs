//! What the agent runs with and reports: its configuration, its telemetry, why it stops.

use std::time::Duration;

use atoll_core::ClusterId;
use kube::Client;

use crate::{metrics, stores};

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
    /// This member's ClusterProfile on the hub, kept mirroring its ClusterProperties.
    pub profile: Option<atoll_api::keys::ObjectKey>,
    /// How often the heartbeat Lease is renewed.
    pub heartbeat: Duration,
    /// How long a source cluster's heartbeat may stay unchanged before its endpoints are
    /// withdrawn here.
    pub member_grace: Duration,
    /// How often a full pass re-checks every service even if no watch event said so.
    pub safety_net: Duration,
    /// The ConfigMap in the member holding the kept liveness decisions.
    pub kept: atoll_api::keys::ObjectKey,
    /// Leader election among this member's agent replicas; `None`: this process always leads.
    pub leader: Option<crate::leader::Settings>,
    /// How much this importer takes from each member.
    pub limits: atoll_core::caps::Limits,
    /// Ranges refused for other members' endpoints besides this cluster's Service CIDRs.
    pub denied_cidrs: Vec<atoll_core::validate::Cidr>,
}

impl std::fmt::Debug for AgentConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AgentConfig")
            .field("cluster_id", &self.cluster_id)
            .field("debounce", &self.debounce)
            .field("limits", &self.limits)
            .field("denied_cidrs", &self.denied_cidrs)
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
/// ... and a successful read of the kept liveness decisions (the agent runs without it, but
/// keeps nothing until it succeeds).
pub const KEPT_READ: &str = "the kept liveness decisions";

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            metrics: metrics::Metrics::default(),
            readiness: atoll_watch::Readiness::waiting_for(
                stores::WATCHES.into_iter().chain([FIRST_PASS, KEPT_READ]),
            ),
        }
    }
}

/// Why the agent stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    WatchEnded(#[from] stores::WatchEnded),
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
}
