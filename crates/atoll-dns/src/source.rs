//! Keeps the zone in step with the cluster: watches of ServiceImports and MCS EndpointSlices
//! feed a [`Feed`], which keeps the compact [`Catalog`](crate::zone::Catalog) of what trusted
//! controllers wrote ([`SliceTrust`]) and the services each event changed; after each batch of events the next snapshot re-encodes only
//! those services ([`Zone::updated`]) and is swapped in. The zone stays SERVFAIL, and the
//! [`Readiness`] not ready, until both watches have listed once: an empty zone served while the
//! apiserver cannot be listed would answer NXDOMAIN for services that exist, and resolvers would
//! cache that.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::labels;
use atoll_api::v1beta1::ServiceImport;
use atoll_watch::Readiness;
use futures::{FutureExt, StreamExt};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::watcher;
use kube::{Api, Client};

use crate::SharedZone;
use crate::metrics::DnsMetrics;
use crate::zone::{Feed, SliceTrust, WatchEvent, Zone, ZoneConfig};

/// The watch of the cluster's ServiceImports.
pub const SERVICE_IMPORTS: &str = "ServiceImports";
/// The watch of the cluster's MCS EndpointSlices (those with a service-name label).
pub const MCS_ENDPOINT_SLICES: &str = "MCS EndpointSlices";
/// The first zone snapshot, built once both watches have listed.
pub const FIRST_SNAPSHOT: &str = "the first zone snapshot";

/// How often the log repeats which watches have not listed yet.
const WAITING_LOG_EVERY: Duration = Duration::from_secs(10);
/// Most events applied before the next snapshot is made: a long burst (a relist of a large
/// cluster) still publishes what it has every so often.
const BATCH: usize = 4096;

/// An event of one of the two watches.
enum Change {
    Import(watcher::Event<ServiceImport>),
    Slice(watcher::Event<EndpointSlice>),
}

fn feed_event<K>(event: &watcher::Event<K>) -> WatchEvent<'_, K> {
    match event {
        watcher::Event::Apply(o) => WatchEvent::Applied(o),
        watcher::Event::Delete(o) => WatchEvent::Deleted(o),
        watcher::Event::Init => WatchEvent::ListStarted,
        watcher::Event::InitApply(o) => WatchEvent::Listed(o),
        watcher::Event::InitDone => WatchEvent::ListDone,
    }
}

fn apply(feed: &mut Feed, change: &Change) {
    match change {
        Change::Import(event) => feed.import_event(feed_event(event)),
        Change::Slice(event) => feed.slice_event(feed_event(event)),
    }
}

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

/// Watches `client`'s cluster and keeps `zone` current, from the MCS EndpointSlices `trust`
/// allows. Marks each watch done in `readiness` as it first lists, and [`FIRST_SNAPSHOT`] done
/// once the first synced zone is served. Runs until the process ends; returns only with an
/// error.
pub async fn run(
    client: Client,
    config: ZoneConfig,
    trust: SliceTrust,
    zone: SharedZone,
    metrics: DnsMetrics,
    readiness: Readiness,
) -> Result<(), SourceError> {
    let imports = atoll_watch::watch(
        Api::<ServiceImport>::all(client.clone()),
        watcher::Config::default(),
        SERVICE_IMPORTS,
    )
    .map(Change::Import);
    let slices = atoll_watch::watch(
        Api::<EndpointSlice>::all(client),
        watcher::Config::default().labels(labels::SERVICE_NAME),
        MCS_ENDPOINT_SLICES,
    )
    .map(Change::Slice);
    let mut events = futures::stream::select(imports, slices);
    let trusted: Vec<String> = trust.managers().map(str::to_owned).collect();
    let mut feed = Feed::new(trust);
    let mut current: Option<Arc<Zone>> = None;
    let mut reminder = tokio::time::interval_at(
        tokio::time::Instant::now() + WAITING_LOG_EVERY,
        WAITING_LOG_EVERY,
    );
    loop {
        let first = tokio::select! {
            event = events.next() => event,
            _ = reminder.tick(), if current.is_none() => {
                let mut waiting = readiness.waiting();
                waiting.retain(|w| *w != FIRST_SNAPSHOT);
                tracing::warn!(
                    waiting = ?waiting,
                    "still waiting for the first list of a watch (see its errors above); \
                     answering SERVFAIL until then"
                );
                continue;
            }
        };
        let Some(first) = first else {
            let (imports_listed, _) = feed.listed();
            let watch = if imports_listed {
                MCS_ENDPOINT_SLICES
            } else {
                SERVICE_IMPORTS
            };
            return Err(SourceError::WatchEnded { watch });
        };
        // Everything already waiting goes into the same snapshot.
        apply(&mut feed, &first);
        let mut batched = 1;
        while batched < BATCH {
            let Some(Some(change)) = events.next().now_or_never() else {
                break;
            };
            apply(&mut feed, &change);
            batched += 1;
        }
        report_untrusted(&mut feed, &metrics, &trusted);
        let (imports_listed, slices_listed) = feed.listed();
        if imports_listed && readiness.waiting().contains(&SERVICE_IMPORTS) {
            tracing::info!(watch = SERVICE_IMPORTS, "first list complete");
            readiness.done(SERVICE_IMPORTS);
        }
        if slices_listed && readiness.waiting().contains(&MCS_ENDPOINT_SLICES) {
            tracing::info!(watch = MCS_ENDPOINT_SLICES, "first list complete");
            readiness.done(MCS_ENDPOINT_SLICES);
        }
        if !(imports_listed && slices_listed) {
            continue;
        }
        let started = Instant::now();
        let changed = feed.take_changed();
        let next = match &current {
            Some(_) if changed.is_empty() => continue,
            Some(zone) => zone.updated(feed.catalog(), &changed),
            None => {
                tracing::info!("ServiceImports and MCS EndpointSlices listed; serving the zone");
                Zone::of_catalog(&config, feed.catalog())
            }
        };
        let next = Arc::new(next);
        let took = started.elapsed();
        if current.is_none() {
            tracing::info!(
                services = changed.len(),
                took_ms = took.as_millis() as u64,
                "first zone snapshot built"
            );
        } else {
            metrics.update_seconds.observe(took.as_secs_f64());
            metrics.updated_services.inc_by(changed.len() as u64);
        }
        publish(&zone, &metrics, &next);
        readiness.done(FIRST_SNAPSHOT);
        let (imports, slices) = feed.catalog().len();
        tracing::debug!(
            imports,
            slices,
            changed = changed.len(),
            took_us = took.as_micros() as u64,
            "zone updated"
        );
        current = Some(next);
    }
}

/// Logs the untrusted slices not reported yet (once each) and counts those ignored now.
fn report_untrusted(feed: &mut Feed, metrics: &DnsMetrics, trusted: &[String]) {
    for (slice, manager) in feed.take_unreported() {
        tracing::warn!(
            namespace = %slice.namespace,
            name = %slice.name,
            managed_by = manager.as_deref().unwrap_or("(none)"),
            trusted = ?trusted,
            "ignoring an MCS EndpointSlice that no trusted controller manages: its endpoints are \
             not served (if its controller is an MCS implementation of this cluster, add its \
             managed-by value with --trusted-slice-manager)"
        );
    }
    metrics
        .untrusted_slices
        .set(i64::try_from(feed.untrusted()).unwrap_or(i64::MAX));
}

/// Swaps `next` in and records it in `metrics`.
fn publish(zone: &SharedZone, metrics: &DnsMetrics, next: &Arc<Zone>) {
    metrics
        .snapshot_names
        .set(i64::try_from(next.names).unwrap_or(i64::MAX));
    metrics
        .snapshot_bytes
        .set(i64::try_from(next.bytes).unwrap_or(i64::MAX));
    metrics
        .snapshot_trimmed
        .set(i64::try_from(next.trimmed).unwrap_or(i64::MAX));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    metrics
        .snapshot_timestamp
        .set(i64::try_from(now).unwrap_or(i64::MAX));
    metrics.rebuilds.inc();
    zone.store(next.clone());
}
