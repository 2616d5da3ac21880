//! Watches feeding in-memory stores. Watch streams never call the API themselves; every event
//! only wakes the reconciler.

use std::fmt::Debug;
use std::sync::Arc;

use atoll_api::hub::{ExportedService, LABEL_CLUSTER};
use atoll_api::labels;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use futures::FutureExt;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

use crate::AgentConfig;

/// Everything the reconciler reads.
#[derive(Clone)]
pub struct Stores {
    /// Member: ServiceExports in all namespaces.
    pub exports: Store<ServiceExport>,
    /// Member: all Services (exported ones and our derived ones).
    pub services: Store<Service>,
    /// Member: EndpointSlices of Services (not ours), the endpoints we export.
    pub service_slices: Store<EndpointSlice>,
    /// Member: the MCS EndpointSlices Atoll wrote.
    pub mcs_slices: Store<EndpointSlice>,
    /// Member: namespaces (imports only go where the namespace exists).
    pub namespaces: Store<Namespace>,
    /// Member: ServiceImports.
    pub imports: Store<ServiceImport>,
    /// Hub: every member's ExportedService records.
    pub records: Store<ExportedService>,
    /// Hub: every member's EndpointSlice copies.
    pub hub_slices: Store<EndpointSlice>,
}

impl Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    /// Starts every watch; each event notifies `trigger`.
    pub fn start(config: &AgentConfig, trigger: Arc<Notify>) -> Self {
        // MCS slices we wrote, never hub copies (a member may double as the hub).
        let ours = format!(
            "{}={},!{}",
            labels::ENDPOINTSLICE_MANAGED_BY,
            labels::ATOLL_ENDPOINTSLICE_MANAGER,
            LABEL_CLUSTER
        );
        // Slices of local Services: neither MCS slices nor hub copies.
        let not_ours = format!(
            "{},{}!={},!{}",
            labels::KUBERNETES_SERVICE_NAME,
            labels::ENDPOINTSLICE_MANAGED_BY,
            labels::ATOLL_ENDPOINTSLICE_MANAGER,
            LABEL_CLUSTER
        );
        let m = &config.member;
        let h = &config.hub;
        Self {
            exports: watch(
                m,
                "member ServiceExports",
                watcher::Config::default(),
                &trigger,
            ),
            services: watch(m, "member Services", watcher::Config::default(), &trigger),
            service_slices: watch(
                m,
                "member EndpointSlices",
                watcher::Config::default().labels(&not_ours),
                &trigger,
            ),
            mcs_slices: watch(
                m,
                "member MCS EndpointSlices",
                watcher::Config::default().labels(&ours),
                &trigger,
            ),
            namespaces: watch(m, "member Namespaces", watcher::Config::default(), &trigger),
            imports: watch(
                m,
                "member ServiceImports",
                watcher::Config::default(),
                &trigger,
            ),
            records: watch(
                h,
                "hub ExportedServices",
                watcher::Config::default().labels(LABEL_CLUSTER),
                &trigger,
            ),
            hub_slices: watch(
                h,
                "hub EndpointSlices",
                watcher::Config::default().labels(LABEL_CLUSTER),
                &trigger,
            ),
        }
    }

    /// Resolves once every watch has listed once.
    pub async fn wait_until_ready(&self) {
        let waits = [
            self.exports.wait_until_ready().boxed(),
            self.services.wait_until_ready().boxed(),
            self.service_slices.wait_until_ready().boxed(),
            self.mcs_slices.wait_until_ready().boxed(),
            self.namespaces.wait_until_ready().boxed(),
            self.imports.wait_until_ready().boxed(),
            self.records.wait_until_ready().boxed(),
            self.hub_slices.wait_until_ready().boxed(),
        ];
        for ready in futures::future::join_all(waits).await {
            if ready.is_err() {
                tracing::error!("a watch stopped before its first list");
            }
        }
    }
}

/// A store of `K` in all namespaces of `client`'s cluster.
fn watch<K>(
    client: &Client,
    what: &'static str,
    config: watcher::Config,
    trigger: &Arc<Notify>,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    atoll_watch::reflect(
        Api::all(client.clone()),
        config,
        trigger.clone(),
        what,
        atoll_watch::keep_all,
    )
}
