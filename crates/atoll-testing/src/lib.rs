//! Test support for integration and end-to-end tests against the local ClusterSet
//! (`make env-up`): one client per member cluster, a fresh namespace per test in every cluster,
//! and waits that report what they last saw when they time out.
//!
//! The ClusterSet is found through `ATOLL_KUBECONFIG` (default `~/.cache/atoll/env/kubeconfig`)
//! and `ATOLL_CONTEXTS` (default `kwok-c1,kwok-c2,kwok-c3`).

mod admin;
mod cluster_set;
pub mod crd_compat;
pub mod dns;
pub mod events;
pub mod faults;
pub mod fixtures;
pub mod hostile;
pub mod hub_member;
pub mod mcs;
pub mod membership;
pub mod ports;
pub mod tools;
mod undo;
mod wait;

pub use admin::{
    agent_writes_besides_heartbeats, http_get, metric, metric_labelled, metric_samples, samples,
    wait_metric,
};
pub use cluster_set::{ClusterSet, Member, TestNamespace, install_crypto_provider};
pub use ports::{agent_admin_port, dns_admin_port, dns_port};
pub use undo::Undo;
pub use wait::wait_for;
