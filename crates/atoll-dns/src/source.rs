//! Keeps the zone in step with the cluster: reflectors on ServiceImports and MCS EndpointSlices;
//! after each batch of events (debounced) a new snapshot is built and swapped in. The zone stays
//! SERVFAIL, and the [`Readiness`] not ready, until both watches have listed once: an empty zone
//! served while the apiserver cannot be listed would answer NXDOMAIN for services that exist,
//! and resolvers would cache that.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use atoll_core::dns::{Zone, ZoneConfig};
use atoll_watch::Readiness;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::Notify;

use crate::SharedZone;
use crate::metrics::DnsMetrics;

/// The watch of the cluster's ServiceImports.
pub const SERVICE_IMPORTS: &str = "ServiceImports";
/// The watch of the cluster's MCS EndpointSlices (those with a service-name label).
pub const MCS_ENDPOINT_SLICES: &str = "MCS EndpointSlices";
/// The first zone snapshot, built once both watches have listed.
pub const FIRST_SNAPSHOT: &str = "the first zone snapshot";

/// How often the log repeats which watches have not listed yet.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(10);

/// Why the zone source stopped.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// A watch stream ended before its first complete list, so the zone can never be built.
    #[error("the {watch} watch ended before its first list")]
    WatchEnded { watch: &'static str },
}

/// What [`run`] must do before the server is ready: list both watches and build the first
/// snapshot. Give it to `/readyz` before starting [`run`].
pub fn readiness() -> Readiness {
    Readiness::waiting_for([SERVICE_IMPORTS, MCS_ENDPOINT_SLICES, FIRST_SNAPSHOT])
}

/// Watches `client`'s cluster and keeps `zone` current. Marks each watch done in `readiness` as
/// it first lists, and [`FIRST_SNAPSHOT`] done once the first synced zone is served. Runs until
/// the process ends; returns only with an error.
pub async fn run(
    client: Client,
    config: ZoneConfig,
    zone: SharedZone,
    metrics: DnsMetrics,
    readiness: Readiness,
) -> Result<(), SourceError> {
    let trigger = Arc::new(Notify::new());
    let imports = atoll_watch::reflect(
        Api::<ServiceImport>::all(client.clone()),
        watcher::Config::default(),
        trigger.clone(),
        SERVICE_IMPORTS,
        atoll_watch::keep_identity_and_labels,
    );
    let slices = atoll_watch::reflect(
        Api::<EndpointSlice>::all(client),
        watcher::Config::default().labels(labels::SERVICE_NAME),
        trigger.clone(),
        MCS_ENDPOINT_SLICES,
        atoll_watch::keep_identity_and_labels,
    );
    // The first watch to end stops the wait: the other may never list either.
    let listed = async {
        tokio::try_join!(
            first_list(&imports, SERVICE_IMPORTS, &readiness),
            first_list(&slices, MCS_ENDPOINT_SLICES, &readiness)
        )
        .map(|_| ())
    };
    let mut listed = std::pin::pin!(listed);
    let mut reminder = tokio::time::interval_at(
        tokio::time::Instant::now() + WAITING_LOG_EVERY,
        WAITING_LOG_EVERY,
    );
    loop {
        tokio::select! {
            result = &mut listed => break result?,
            _ = reminder.tick() => {
                let mut waiting = readiness.waiting();
                waiting.retain(|w| *w != FIRST_SNAPSHOT);
                tracing::warn!(
                    waiting = ?waiting,
                    "still waiting for the first list of a watch (see its errors above); \
                     answering SERVFAIL until then"
                );
            }
        }
    }
    tracing::info!("ServiceImports and MCS EndpointSlices listed; serving the zone");
    loop {
        let started = Instant::now();
        let import_objects = imports.state();
        let slice_objects = slices.state();
        let import_refs: Vec<&ServiceImport> = import_objects.iter().map(Arc::as_ref).collect();
        let slice_refs: Vec<&EndpointSlice> = slice_objects.iter().map(Arc::as_ref).collect();
        let snapshot = Zone::build(&config, &import_refs, &slice_refs);
        metrics
            .snapshot_names
            .set(i64::try_from(snapshot.names).unwrap_or(i64::MAX));
        metrics
            .snapshot_bytes
            .set(i64::try_from(snapshot.bytes).unwrap_or(i64::MAX));
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        metrics
            .snapshot_timestamp
            .set(i64::try_from(now).unwrap_or(i64::MAX));
        metrics.rebuilds.inc();
        zone.store(Arc::new(snapshot));
        readiness.done(FIRST_SNAPSHOT);
        tracing::debug!(
            imports = import_refs.len(),
            slices = slice_refs.len(),
            took_us = started.elapsed().as_micros() as u64,
            "zone rebuilt"
        );
        trigger.notified().await;
        // Batch bursts of events into one rebuild.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Waits for `store`'s first complete list and marks `watch` done in `readiness`.
async fn first_list<K>(
    store: &Store<K>,
    watch: &'static str,
    readiness: &Readiness,
) -> Result<(), SourceError>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    store
        .wait_until_ready()
        .await
        .map_err(|_| SourceError::WatchEnded { watch })?;
    tracing::info!(watch, "first list complete");
    readiness.done(watch);
    Ok(())
}
