//! Keeps the zone in step with the cluster: reflectors on ServiceImports and MCS EndpointSlices;
//! after each batch of events (debounced) a new snapshot is built and swapped in. The zone stays
//! SERVFAIL until both watches have listed once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use atoll_core::dns::{Zone, ZoneConfig};
use futures::FutureExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::Notify;

use crate::SharedZone;
use crate::metrics::DnsMetrics;

/// Watches `client`'s cluster and keeps `zone` current until the process ends. `ready` turns
/// true with the first synced snapshot.
pub async fn run(
    client: Client,
    config: ZoneConfig,
    zone: SharedZone,
    metrics: DnsMetrics,
    ready: Arc<AtomicBool>,
) {
    let trigger = Arc::new(Notify::new());
    let imports = atoll_watch::reflect(
        Api::<ServiceImport>::all(client.clone()),
        watcher::Config::default(),
        trigger.clone(),
        "ServiceImports",
        atoll_watch::keep_identity_and_labels,
    );
    let slices = atoll_watch::reflect(
        Api::<EndpointSlice>::all(client),
        watcher::Config::default().labels(labels::SERVICE_NAME),
        trigger.clone(),
        "MCS EndpointSlices",
        atoll_watch::keep_identity_and_labels,
    );
    let (a, b) = futures::join!(
        imports.wait_until_ready().boxed(),
        slices.wait_until_ready().boxed()
    );
    if a.is_err() || b.is_err() {
        tracing::error!("a watch stopped before its first list; serving SERVFAIL");
        return;
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
        ready.store(true, Ordering::Relaxed);
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
