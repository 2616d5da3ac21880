//! Watches feeding in-memory stores. Watch streams never call the API themselves; every event
//! only marks the services it concerns and wakes the reconciler.

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use atoll_api::about::v1beta1::ClusterProperty;
use atoll_api::endpoint::ServedSlice;
use atoll_api::hub::{ExportedEndpointSlice, ExportedService, NamespacePolicy};
use atoll_api::interner::Interner;
use atoll_api::inventory::ClusterProfile;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::budget::Kind;
use atoll_core::keys;
use atoll_core::plan::{Observed, scope};
use atoll_watch::{KeptStore, Readiness};
use futures::FutureExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;

use crate::budget::{Budget, Gate};
use crate::compact;
use crate::dirty::{self, Dirty};

/// Everything the reconciler reads.
#[derive(Clone)]
pub struct Stores {
    /// Member: ServiceExports in all namespaces.
    pub exports: Store<ServiceExport>,
    /// Member: all Services (exported ones and our derived ones).
    pub services: Store<Service>,
    /// Member: EndpointSlices of Services (not ours), the endpoints we export.
    pub service_slices: Store<EndpointSlice>,
    /// Member: the MCS EndpointSlices Atoll wrote, kept in a form of Atoll's own.
    pub mcs_slices: KeptStore<McsSlice>,
    /// Member: namespaces (imports only go where the namespace exists).
    pub namespaces: Store<Namespace>,
    /// Member: ServiceImports.
    pub imports: Store<ServiceImport>,
    /// Hub: every member's ExportedService records (keyed by a hash of their names: a
    /// reflector's key would hold a copy of each object's name, namespace and version).
    pub records: KeptStore<ExportedService>,
    /// Hub: every member's copies of its exported EndpointSlices (keyed as the records).
    pub hub_slices: KeptStore<ExportedEndpointSlice>,
    /// Hub: every member's heartbeat Lease.
    pub leases: Store<Lease>,
    /// Hub: the ClusterSet's namespace policy.
    pub policies: Store<NamespacePolicy>,
    /// Member: its ClusterProperties.
    pub properties: Store<ClusterProperty>,
    /// Hub: every member's ClusterProfile, once joined.
    pub profile: Option<Store<ClusterProfile>>,
    /// Member: its ServiceCIDRs, where the API serves them (networking.k8s.io/v1, Kubernetes
    /// 1.33 on): other members' endpoints there are refused.
    pub service_cidrs: Option<Store<ServiceCIDR>>,
    /// Ranges the operator denies for other members' endpoints.
    pub denied_cidrs: Vec<atoll_core::validate::Cidr>,
    /// What each member's hub objects take in `records` and `hub_slices`, within its budget.
    pub budget: Budget,
    /// When the Lease watch saw each member's beat.
    pub beats: crate::beats::Beats,
    /// Member: its Nodes, only their names and addresses kept (other members' endpoints at
    /// those addresses are refused).
    pub nodes: Store<Node>,
}

impl Debug for Stores {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stores").finish_non_exhaustive()
    }
}

impl Stores {
    /// Starts every watch of member `own` on the `member` cluster and the `hub` (including its
    /// ClusterProfile `profile`, when it has one, and its ServiceCIDRs when `ranges` says the
    /// member serves them); each event marks in `dirty` the services it concerns.
    pub fn start(
        own: &atoll_core::ClusterId,
        member: &Client,
        hub: &Client,
        profile: Option<&ObjectKey>,
        ranges: Ranges,
        budget: Budget,
        dirty: &Arc<Dirty>,
    ) -> Self {
        // MCS slices we wrote.
        let ours = format!(
            "{}={}",
            labels::ENDPOINTSLICE_MANAGED_BY,
            labels::ATOLL_ENDPOINTSLICE_MANAGER,
        );
        // Slices of local Services, not MCS slices.
        let not_ours = format!(
            "{},{}!={}",
            labels::KUBERNETES_SERVICE_NAME,
            labels::ENDPOINTSLICE_MANAGED_BY,
            labels::ATOLL_ENDPOINTSLICE_MANAGER,
        );
        let (m, h) = (member, hub);
        let own_namespace = || atoll_api::hub::namespace_for(own.as_str());
        let all = watcher::Config::default;
        let d = || dirty.clone();
        let beats = crate::beats::Beats::default();
        Self {
            exports: watch(
                m,
                WATCH_EXPORTS,
                all(),
                dirty::by_service(d(), |e: &ServiceExport| named(&e.metadata)),
            ),
            services: watch(
                m,
                WATCH_SERVICES,
                all(),
                dirty::by_service(d(), |s: &Service| {
                    scope::of_service(s).into_iter().collect()
                }),
            ),
            service_slices: watch(
                m,
                WATCH_SERVICE_SLICES,
                all().labels(&not_ours),
                dirty::by_service(d(), |s: &EndpointSlice| {
                    keys::of_service_slice(s).into_iter().collect()
                }),
            ),
            mcs_slices: atoll_watch::keep_with(
                Api::all(m.clone()),
                all().labels(&ours),
                WATCH_MCS_SLICES,
                {
                    let mut interner = Interner::default();
                    move |served: ServedSlice| McsSlice::kept(served, &mut interner)
                },
                |s| (&s.namespace, &s.name),
                dirty::by_service_keyed(
                    d(),
                    |s: &Arc<McsSlice>| s.key(),
                    |s: &Arc<McsSlice>| keys::of_mcs_slice(s).into_iter().collect(),
                ),
            ),
            namespaces: watch(m, WATCH_NAMESPACES, all(), dirty::by_namespace(d())),
            imports: watch(
                m,
                WATCH_IMPORTS,
                all(),
                dirty::by_service(d(), |i: &ServiceImport| named(&i.metadata)),
            ),
            records: keep_hub_objects(
                h,
                WATCH_RECORDS,
                budget.gate(Kind::Record),
                {
                    let own = own_namespace();
                    move |r| compact::record(r, &own)
                },
                dirty::by_service_keyed(d(), object_key, |r: &Arc<ExportedService>| {
                    vec![keys::of_record(r)]
                }),
            ),
            hub_slices: keep_hub_objects(
                h,
                WATCH_HUB_SLICES,
                budget.gate(Kind::Copy),
                {
                    let own = own_namespace();
                    move |c| compact::hub_slice(c, &own)
                },
                dirty::by_service_keyed(d(), object_key, |c: &Arc<ExportedEndpointSlice>| {
                    vec![keys::of_copy(c)]
                }),
            ),
            // Only the heartbeats: member credentials may read no other Lease on the hub.
            leases: watch(
                h,
                WATCH_LEASES,
                all().fields(&format!("metadata.name={}", atoll_api::hub::LEASE_NAME)),
                dirty::heartbeats(d(), beats.clone()),
            ),
            policies: watch(h, WATCH_POLICIES, all(), dirty::everything(d())),
            properties: watch(m, WATCH_PROPERTIES, all(), dirty::wake_only(d())),
            // A new range changes which endpoints every import may hold.
            service_cidrs: ranges
                .service_cidrs
                .then(|| watch(m, WATCH_SERVICE_CIDRS, all(), dirty::everything(d()))),
            denied_cidrs: ranges.denied,
            budget,
            beats,
            // Node status changes often; the reconciler re-plans everything only when the set
            // of addresses changes.
            nodes: atoll_watch::reflect_with(
                Api::all(m.clone()),
                all(),
                WATCH_NODES,
                keep_name_and_addresses,
                dirty::wake_only(d()),
            ),
            // Every member's profile: its own is kept mirroring its ClusterProperties, and
            // the others' properties decide which clusters KEP-5939 selectors pick (a change
            // re-plans every service; properties change rarely).
            profile: profile.map(|key| {
                atoll_watch::reflect_with(
                    Api::namespaced(h.clone(), &key.namespace),
                    if ranges.every_profile {
                        all()
                    } else {
                        all().fields(&format!("metadata.name={}", key.name))
                    },
                    WATCH_PROFILE,
                    atoll_watch::keep_all,
                    dirty::everything(d()),
                )
            }),
        }
    }

    /// What every store holds now.
    pub fn snapshot(&self) -> Observed {
        Observed {
            exports: self.exports.state(),
            services: self.services.state(),
            service_slices: self.service_slices.state(),
            mcs_slices: self.mcs_slices.state(),
            namespaces: self.namespaces.state(),
            imports: self.imports.state(),
            records: self.records.state(),
            hub_slices: self.hub_slices.state(),
            policies: self.policies.state(),
            liveness: Default::default(),
            sources: None,
            properties: self.properties.state(),
            profiles: self.profile.as_ref().map(Store::state).unwrap_or_default(),
            service_cidrs: self
                .service_cidrs
                .as_ref()
                .map(Store::state)
                .unwrap_or_default(),
            denied_cidrs: self.denied_cidrs.clone(),
            node_addresses: atoll_core::validate::node_addresses(
                self.nodes.state().iter().map(|n| n.as_ref()),
            ),
            unlisted: self.unlisted(),
            beats_seen: self.beats.seen(),
            // The reconciler's to fill in from its report.
            selections: Default::default(),
        }
    }

    /// The member's MCS watches (ServiceExports, ServiceImports) that have not listed yet.
    pub fn unlisted(&self) -> Vec<&'static str> {
        let listed = |ready: Option<Result<(), _>>| ready.is_some_and(|r| r.is_ok());
        let mut unlisted = Vec::new();
        if !listed(self.exports.wait_until_ready().now_or_never()) {
            unlisted.push(WATCH_EXPORTS);
        }
        if !listed(self.imports.wait_until_ready().now_or_never()) {
            unlisted.push(WATCH_IMPORTS);
        }
        unlisted
    }

    /// Resolves once every watch has listed once, but the member's MCS watches
    /// (ServiceExports, ServiceImports), which it waits for at most [`MCS_WAIT`]: while those
    /// cannot list (the CRDs missing or not served, no permission), the agent runs held (it
    /// plans nothing and its claim holds what the hub holds) so that its heartbeat goes on and
    /// no importer drops its exports. Each watch is marked done in `readiness` when it has
    /// listed (for `/readyz`; the log repeats the waiting ones every 10 s). Fails, naming the
    /// watch, if one ends before its first list: nothing may be written then, since missing
    /// objects would look deleted.
    pub async fn wait_until_ready(&self, readiness: &Readiness) -> Result<(), WatchEnded> {
        let mcs = tokio::spawn({
            let (r, exports, imports) = (
                readiness.clone(),
                self.exports.clone(),
                self.imports.clone(),
            );
            async move {
                futures::future::join(
                    mark_listed(&r, WATCH_EXPORTS, exports.wait_until_ready()),
                    mark_listed(&r, WATCH_IMPORTS, imports.wait_until_ready()),
                )
                .await
            }
        });
        let mut waits = vec![
            (WATCH_SERVICES, listed(self.services.wait_until_ready())),
            (
                WATCH_SERVICE_SLICES,
                listed(self.service_slices.wait_until_ready()),
            ),
            (WATCH_MCS_SLICES, listed(self.mcs_slices.wait_until_ready())),
            (WATCH_NAMESPACES, listed(self.namespaces.wait_until_ready())),
            (WATCH_RECORDS, listed(self.records.wait_until_ready())),
            (WATCH_HUB_SLICES, listed(self.hub_slices.wait_until_ready())),
            (WATCH_POLICIES, listed(self.policies.wait_until_ready())),
            (WATCH_LEASES, listed(self.leases.wait_until_ready())),
            (WATCH_PROPERTIES, listed(self.properties.wait_until_ready())),
            (WATCH_NODES, listed(self.nodes.wait_until_ready())),
        ];
        if let Some(profile) = &self.profile {
            readiness.wait_for(WATCH_PROFILE);
            waits.push((WATCH_PROFILE, listed(profile.wait_until_ready())));
        }
        if let Some(cidrs) = &self.service_cidrs {
            readiness.wait_for(WATCH_SERVICE_CIDRS);
            waits.push((WATCH_SERVICE_CIDRS, listed(cidrs.wait_until_ready())));
        }
        let all = futures::future::try_join_all(waits.into_iter().map(|(name, wait)| async move {
            wait.await.map_err(|_| WatchEnded { watch: name })?;
            readiness.done(name);
            Ok::<(), WatchEnded>(())
        }));
        let mut all = std::pin::pin!(all);
        loop {
            tokio::select! {
                result = &mut all => {
                    result?;
                    break;
                }
                () = tokio::time::sleep(Duration::from_secs(10)) => {
                    tracing::warn!(
                        watches = %readiness.waiting().join(", "),
                        "still waiting for watches to list; nothing is written or deleted until every watch has listed once"
                    );
                }
            }
        }
        if tokio::time::timeout(MCS_WAIT, mcs).await.is_err() {
            tracing::warn!(
                watches = %self.unlisted().join(", "),
                "the member's MCS watches have not listed (ServiceExport or ServiceImport CRD missing or not served, or no permission): running held, planning nothing and claiming what the hub holds, so the heartbeat goes on and importers keep this member's exports"
            );
        }
        Ok(())
    }
}

/// How long the agent waits for the member's MCS watches before it runs held.
pub const MCS_WAIT: Duration = Duration::from_secs(2);

/// Marks `name` done in `readiness` once `wait` resolves (the store has listed).
async fn mark_listed<E>(
    readiness: &Readiness,
    name: &'static str,
    wait: impl std::future::Future<Output = Result<(), E>>,
) {
    if wait.await.is_ok() {
        readiness.done(name);
    }
}

/// Resolves once a store's first list completed; fails if its watch ended before (the stores'
/// own errors say only that).
fn listed<'a, E>(
    wait: impl std::future::Future<Output = Result<(), E>> + Send + 'a,
) -> futures::future::BoxFuture<'a, Result<(), ()>> {
    wait.map(|r| r.map_err(drop)).boxed()
}

/// A watch ended before its first list.
#[derive(Debug, thiserror::Error)]
#[error("the watch of {watch} ended before its first list; nothing was written")]
pub struct WatchEnded {
    pub watch: &'static str,
}

/// Every watch, by the name logs and `/readyz` show.
pub const WATCHES: [&str; 12] = [
    WATCH_EXPORTS,
    WATCH_SERVICES,
    WATCH_SERVICE_SLICES,
    WATCH_MCS_SLICES,
    WATCH_NAMESPACES,
    WATCH_IMPORTS,
    WATCH_RECORDS,
    WATCH_HUB_SLICES,
    WATCH_POLICIES,
    WATCH_PROPERTIES,
    WATCH_LEASES,
    WATCH_NODES,
];

// Names of the watches, as logs and `/readyz` show them.
const WATCH_EXPORTS: &str = "member ServiceExports";
const WATCH_SERVICES: &str = "member Services";
const WATCH_SERVICE_SLICES: &str = "member EndpointSlices";
const WATCH_MCS_SLICES: &str = "member MCS EndpointSlices";
const WATCH_NAMESPACES: &str = "member Namespaces";
const WATCH_IMPORTS: &str = "member ServiceImports";
const WATCH_RECORDS: &str = "hub ExportedServices";
const WATCH_HUB_SLICES: &str = "hub ExportedEndpointSlices";
const WATCH_POLICIES: &str = "hub NamespacePolicies";
const WATCH_LEASES: &str = "hub heartbeat Leases";
const WATCH_PROPERTIES: &str = "member ClusterProperties";
const WATCH_PROFILE: &str = "hub ClusterProfiles";
const WATCH_SERVICE_CIDRS: &str = "member ServiceCIDRs";
const WATCH_NODES: &str = "member Nodes";

/// Of a Node, only what the importer needs: its name and its addresses (a Node's status holds
/// images, conditions and capacity; thousands of Nodes would otherwise cost megabytes).
fn keep_name_and_addresses(node: &mut Node) {
    let name = node.metadata.name.take();
    let resource_version = node.metadata.resource_version.take();
    let addresses = node.status.as_mut().and_then(|s| s.addresses.take());
    *node = Node::default();
    node.metadata.name = name;
    node.metadata.resource_version = resource_version;
    node.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        addresses,
        ..Default::default()
    });
}

/// The member's own address ranges an importer refuses for other members' endpoints.
#[derive(Clone, Debug, Default)]
pub struct Ranges {
    /// Whether the member serves ServiceCIDRs (networking.k8s.io/v1), to watch them.
    pub service_cidrs: bool,
    /// Ranges the operator denies besides (`--deny-endpoint-cidrs`).
    pub denied: Vec<atoll_core::validate::Cidr>,
    /// Whether to watch every member's ClusterProfile (see [`reads_every_profile`]) rather
    /// than this member's own only.
    pub every_profile: bool,
}

/// Whether this member's hub credentials may list every ClusterProfile in `namespace`
/// (members joined before KEP-5939 selectors may read only their own: their agents then watch
/// that one, and selectors see no other member's properties until `atoll join` is re-run).
pub async fn reads_every_profile(hub: &Client, namespace: &str) -> bool {
    let api = Api::<ClusterProfile>::namespaced(hub.clone(), namespace);
    match api.list(&kube::api::ListParams::default().limit(1)).await {
        Ok(_) => true,
        Err(error) => {
            tracing::warn!(%error, namespace, "cannot list the ClusterProfiles on the hub: this member's hub credentials predate cluster selectors (re-run `atoll join` for this member to grant it); cluster selectors match no other member's properties meanwhile");
            false
        }
    }
}

/// Whether `member` serves ServiceCIDRs (networking.k8s.io/v1): GA in Kubernetes 1.33; on an
/// older cluster the watch would never list and the agent would never start.
pub async fn serves_service_cidrs(member: &Client) -> bool {
    match member
        .list_api_group_resources("networking.k8s.io/v1")
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == "servicecidrs"),
        Err(error) => {
            tracing::warn!(%error, "cannot tell whether this cluster serves ServiceCIDRs; not refusing endpoints in its Service CIDRs (list them with --deny-endpoint-cidrs)");
            false
        }
    }
}
/// A store of `K` in all namespaces of `client`'s cluster; every event goes to `on_event`.
fn watch<K>(
    client: &Client,
    what: &'static str,
    config: watcher::Config,
    on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watch_trimmed(client, what, config, atoll_watch::keep_all, on_event)
}

/// As [`watch`], each object reduced by `trim` (see [`compact`]) before the store holds it.
fn watch_trimmed<K>(
    client: &Client,
    what: &'static str,
    config: watcher::Config,
    trim: impl Fn(&mut K) + Send + 'static,
    on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    atoll_watch::reflect_with(Api::all(client.clone()), config, what, trim, on_event)
}

/// A store of every member's hub objects of type `K`, each reduced by `trim` (see [`compact`])
/// and held within its member's budget (`gate`), keyed by a hash of its namespace and name.
fn keep_hub_objects<K>(
    hub: &Client,
    what: &'static str,
    (mut gate, relist): (Gate<K>, Arc<tokio::sync::Notify>),
    trim: impl Fn(&mut K) + Send + 'static,
    on_event: impl FnMut(&watcher::Event<Arc<K>>) + Send + 'static,
) -> KeptStore<K>
where
    K: crate::budget::Weigh
        + Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Debug
        + Send
        + Sync
        + 'static,
{
    atoll_watch::keep_gated(
        Api::all(hub.clone()),
        // Pages of a relist are decoded whole before any object is trimmed or weighed: a
        // small page bounds what a relist holds at once (a hub object may take 1.5 MiB).
        watcher::Config::default().page_size(HUB_PAGE),
        what,
        move |mut object: K| {
            atoll_watch::cached_form(&mut object, &trim);
            object
        },
        atoll_watch::namespace_and_name,
        move |event| gate.pass(event),
        relist,
        on_event,
    )
}

/// Objects per page when a hub watch lists: at most 150 MiB of objects at their largest, 100
/// KB at their usual size; 500 pages for 50,000 records (250 members of 200 services).
const HUB_PAGE: u32 = 100;

/// The key of a kept object.
fn object_key<K: Resource>(object: &Arc<K>) -> ObjectKey {
    ObjectKey::of(object.meta())
}

/// The service an object named after it concerns.
fn named(meta: &kube::api::ObjectMeta) -> Vec<ServiceKey> {
    keys::named(meta).into_iter().collect()
}
