//! The only code that writes. It carries out a [`Step`] of `atoll_core::reconciler` (the plan,
//! the Events, the heartbeat renewal, the kept liveness decisions) and decides nothing itself:
//! server-side apply with one field manager, deletes that tolerate objects already gone, at
//! most 16 writes in flight per kind of write. Every write is fenced: it starts only while this
//! replica leads and may take at most what is left of its leadership (see [`Fence`]). Failed
//! writes are logged with kind, namespace, name and the API's message, counted by kind, and
//! handed back as the [`Outcome`] the reconciler learns from.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::inventory::ClusterProfile;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::keys::of_copy;
use atoll_core::keys::of_record;
use atoll_core::liveness::{copy_claim_name, record_claim_name};
use atoll_core::plan::{
    ExportStatus, ImportApply, ImportStatus, Plan, ProfileStatus, Refusal, SliceCollection,
};
use atoll_core::reconciler::{Answer, HubWriteResult, Outcome, Step};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::events::{self, Announcer};
use crate::fence::Fence;
use crate::metrics::{KindLabels, Metrics, WriteLabels};

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "atoll-agent";

/// Writes in flight at once, per kind of write.
const IN_FLIGHT: usize = 16;
/// Collections deleted at once: each deletes up to `atoll_core::plan::SLICES_PER_COLLECTION`
/// objects one after another, so the member's apiserver deletes as fast as this many requests
/// in flight together (see there).
const COLLECTIONS_IN_FLIGHT: usize = 32;

/// Counts API writes: a total for logs, and by (kind, verb) in the metrics.
#[derive(Debug, Default)]
pub struct WriteCounter {
    total: AtomicU64,
    by_kind: Family<WriteLabels, Counter>,
}

impl WriteCounter {
    /// A counter that also feeds the `api_writes` metric family.
    pub fn new(by_kind: Family<WriteLabels, Counter>) -> Self {
        Self {
            total: AtomicU64::new(0),
            by_kind,
        }
    }

    fn add(&self, kind: &str, verb: &'static str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        self.by_kind
            .get_or_create(&WriteLabels {
                kind: kind.to_owned(),
                verb: verb.to_owned(),
            })
            .inc();
    }

    /// Total writes so far.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }
}

/// State kept across passes.
pub struct Context {
    /// API writes so far.
    pub(crate) writes: WriteCounter,
    /// Metrics to update.
    pub(crate) metrics: Metrics,
    /// Publishes Events (fenced like every write).
    pub(crate) announcer: Announcer,
    /// Whether this replica may write, and for how long.
    pub(crate) fence: Fence,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

/// Why a write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("no answer within {0:?} (the rest of this replica's leadership, or the write timeout)")]
    TimedOut(std::time::Duration),
    #[error("not written: this replica does not lead (or too little of its leadership is left)")]
    NotLeading,
}

/// A write that did not happen.
#[derive(Debug, thiserror::Error)]
#[error("{verb} {kind} {key}: {source}")]
pub struct WriteError {
    pub kind: String,
    pub verb: &'static str,
    pub key: ObjectKey,
    #[source]
    pub source: Failure,
}

impl WriteError {
    /// The refusal as the plan sees it: HTTP status (0 without an answer) and message.
    pub fn refusal(&self) -> Refusal {
        match &self.source {
            Failure::Api(kube::Error::Api(e)) => Refusal {
                code: e.code,
                message: e.message.clone(),
            },
            other => Refusal {
                code: 0,
                message: other.to_string(),
            },
        }
    }
}

/// What every object the writer writes is: of a namespaced kind known at compile time.
trait Namespaced:
    Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + DeserializeOwned
    + Clone
    + Debug
{
}

impl<K> Namespaced for K where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug
{
}

fn kind<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// Logs and counts a failed write.
fn report(metrics: &Metrics, error: &WriteError) {
    tracing::warn!(
        kind = %error.kind,
        namespace = %error.key.namespace,
        name = %error.key.name,
        verb = error.verb,
        error = %error.source,
        "write failed"
    );
    metrics
        .write_errors
        .get_or_create(&KindLabels {
            kind: error.kind.clone(),
        })
        .inc();
    if let Ok(mut last) = metrics.last_error.lock() {
        *last = Some(format!("{} {error}", Timestamp::now()));
    }
}

/// One write (`verb`) of the object `key` of kind `K`, which `call` makes through the API of
/// `K` in the object's namespace: started only while the fence allows and bounded by its
/// budget, counted, logged, and a refusal turned into a [`WriteError`] that names the kind, the
/// verb and the object.
async fn write<K, T, F>(
    client: &Client,
    key: &ObjectKey,
    verb: &'static str,
    context: &Context,
    call: impl FnOnce(Api<K>) -> F,
) -> Result<T, WriteError>
where
    K: Namespaced,
    F: Future<Output = kube::Result<T>>,
{
    let kind_name = kind::<K>();
    let failed = |source| WriteError {
        kind: kind::<K>(),
        verb,
        key: key.clone(),
        source,
    };
    let Some(budget) = context.fence.budget(std::time::Instant::now()) else {
        return Err(failed(Failure::NotLeading));
    };
    context.writes.add(&kind_name, verb);
    // The log says `apply status` where the metric's label says `apply-status`.
    tracing::debug!(kind = %kind_name, %key, "{}", verb.replace('-', " "));
    match tokio::time::timeout(
        budget,
        call(Api::namespaced(client.clone(), &key.namespace)),
    )
    .await
    {
        Ok(result) => result.map_err(|e| failed(Failure::Api(e))),
        Err(_) => Err(failed(Failure::TimedOut(budget))),
    }
}

/// Server-side applies `object` (its name and namespace come from its metadata).
async fn apply<K>(client: &Client, object: &K, context: &Context) -> Result<K, WriteError>
where
    K: Namespaced + Serialize,
{
    let key = ObjectKey::of(object.meta());
    let name = &key.name;
    write(client, &key, "apply", context, |api: Api<K>| async move {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(object)).await
    })
    .await
}

/// Server-side applies the status subresource of `key` from a partial object.
async fn apply_status<K: Namespaced>(
    client: &Client,
    key: &ObjectKey,
    partial: &Value,
    context: &Context,
) -> Result<(), WriteError> {
    let name = &key.name;
    write(
        client,
        key,
        "apply-status",
        context,
        |api: Api<K>| async move {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            api.patch_status(name, &params, &Patch::Apply(partial))
                .await
                .map(|_| ())
        },
    )
    .await
}

/// Deletes `key`; an object that is already gone is success.
async fn delete<K: Namespaced>(
    client: &Client,
    key: &ObjectKey,
    context: &Context,
) -> Result<(), WriteError> {
    let name = &key.name;
    write(client, key, "delete", context, |api: Api<K>| async move {
        match api.delete(name, &DeleteParams::background()).await {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
            Err(source) => Err(source),
        }
    })
    .await
}

/// Runs `write` on every item, [`IN_FLIGHT`] at a time; returns what the failed ones gave
/// back (`write` yields `None` on success).
async fn each<I, F, E>(items: I, write: impl FnMut(I::Item) -> F) -> Vec<E>
where
    I: IntoIterator,
    F: Future<Output = Option<E>>,
{
    futures::stream::iter(items)
        .map(write)
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|failed| async move { failed })
        .collect()
        .await
}

/// Applies every object, [`IN_FLIGHT`] at a time; returns the failures with their objects.
async fn apply_each<'a, K>(
    client: &Client,
    objects: &'a [K],
    context: &Context,
) -> Vec<(&'a K, WriteError)>
where
    K: Namespaced + Serialize + Sync,
{
    each(objects, |object| async move {
        apply(client, object, context)
            .await
            .err()
            .map(|e| (object, e))
    })
    .await
}

/// Deletes every object, [`IN_FLIGHT`] at a time; returns the failures.
async fn delete_each<K: Namespaced>(
    client: &Client,
    keys: &[ObjectKey],
    context: &Context,
) -> Vec<WriteError> {
    each(keys, |key| async move {
        delete::<K>(client, key, context).await.err()
    })
    .await
}

/// Deletes every MCS slice Atoll holds for one withdrawn source cluster in one namespace, in one
/// request (`deletecollection` by label; its error names the selector where a name would be). A
/// collection the apiserver refuses as such (403 or 405: an agent whose RBAC predates it, say)
/// is counted and logged, and the slices are deleted one by one instead, so a withdrawal never
/// waits on a permission; the pass then counts as written (no retry backoff) when those
/// succeed. Any other failure (not leading, a timeout, an overloaded apiserver) is returned as
/// it is, and the next pass plans the deletions again.
async fn delete_collection(
    client: &Client,
    collection: &SliceCollection,
    context: &Context,
) -> Vec<WriteError> {
    let selector = collection.selector();
    let key = ObjectKey::new(&collection.namespace, &selector);
    tracing::info!(
        namespace = %collection.namespace,
        source_clusters = %collection.source_clusters.join(","),
        slices = collection.slices.len(),
        "deleting every MCS EndpointSlice of withdrawn source clusters in the namespace at once"
    );
    let deleted = write(
        client,
        &key,
        "deletecollection",
        context,
        |api: Api<EndpointSlice>| async move {
            let params = ListParams::default().labels(&selector);
            api.delete_collection(&DeleteParams::background(), &params)
                .await
                .map(|_| ())
        },
    )
    .await;
    match deleted {
        Ok(()) => Vec::new(),
        Err(error) if !refused(&error) => vec![error],
        Err(error) => {
            report(&context.metrics, &error);
            tracing::warn!(
                namespace = %collection.namespace,
                source_clusters = %collection.source_clusters.join(","),
                "the collection was refused: deleting its {} slices one by one",
                collection.slices.len()
            );
            delete_each::<EndpointSlice>(client, &collection.slices, context).await
        }
    }
}

/// Whether the apiserver refused a request as such (forbidden, or the verb not allowed), rather
/// than failing to answer it.
fn refused(error: &WriteError) -> bool {
    matches!(&error.source, Failure::Api(kube::Error::Api(e)) if e.code == 403 || e.code == 405)
}

/// Where the writer keeps what is not in a plan: this member's heartbeat Lease on the hub and
/// its kept liveness decisions.
#[derive(Clone, Debug)]
pub struct Targets {
    pub cluster_id: String,
    /// The heartbeat interval and the grace this member asks importers for.
    pub interval: std::time::Duration,
    pub grace: std::time::Duration,
    /// The ConfigMap in the member that holds the kept liveness decisions.
    pub kept: ObjectKey,
}

/// Carries out `step`: first the kept decisions (a withdrawal is kept before its deletions, so
/// a crash between the two cannot give a dead cluster a fresh grace; a refused keep write stops
/// nothing), then the plan's hub writes, member writes and export statuses side by side
/// (within the member, the ServiceImports' statuses after every other member write), the
/// heartbeat renewal as soon as the hub writes it claims are done (never behind the member's
/// writes: a withdrawal of thousands of slices took 20 s, and this member, its beat held back,
/// looked dead to everyone and blind to itself), then the Events on rejected records.
pub async fn execute(
    hub: &Client,
    member: &Client,
    step: &Step,
    targets: &Targets,
    context: &Context,
) -> Outcome {
    let plan = &step.plan;
    let kept = match &step.keep {
        Some(kept) => Some(keep(member, kept, targets, context).await),
        None => None,
    };
    let hub_then_renewal = async {
        let written = hub_writes(hub, plan, context).await;
        let renewal = match &step.renewal {
            Some(renewal) => Some(renew(hub, renewal, &step.keeping, targets, context).await),
            None => None,
        };
        (written, renewal)
    };
    let ((hub_result, renewal), member_result, export_errors, profile_errors) = futures::join!(
        hub_then_renewal,
        member_writes(member, plan, context),
        export_statuses(member, &plan.export_statuses, context),
        profile_status(hub, plan.profile.as_ref(), context),
    );
    let mut outcome = Outcome {
        kept,
        renewal,
        ..Outcome::default()
    };
    let (derived_failures, member_errors) = member_result;
    outcome.feedback.publish_failures = hub_result.record_failures;
    outcome.feedback.copy_failures = hub_result.copy_failures;
    outcome.feedback.derived_failures = derived_failures;
    outcome.hub = hub_result.results;
    outcome.errors = hub_result.errors + member_errors + export_errors + profile_errors;
    for rejected in &step.announce {
        events::announce_rejected(&context.announcer, rejected).await;
    }
    outcome
}

/// The hub writes' results: per claimed name, and the refusals the next plan needs.
#[derive(Default)]
struct HubResult {
    results: Vec<HubWriteResult>,
    record_failures: std::collections::BTreeMap<ServiceKey, Refusal>,
    copy_failures: std::collections::BTreeMap<ServiceKey, (String, Refusal)>,
    errors: usize,
}

async fn hub_writes(hub: &Client, plan: &Plan, context: &Context) -> HubResult {
    let writes = &plan.hub;
    let (records, slices, stale_records, stale_slices) = futures::join!(
        apply_each::<ExportedService>(hub, &writes.apply_records, context),
        apply_each::<ExportedEndpointSlice>(hub, &writes.apply_slices, context),
        delete_each::<ExportedService>(hub, &writes.delete_records, context),
        delete_each::<ExportedEndpointSlice>(hub, &writes.delete_slices, context),
    );
    let name = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.name.clone().unwrap_or_default()
    };
    // Each failed write's name and the HTTP status of its answer (0: none came).
    let failed = |errors: &mut dyn Iterator<Item = &WriteError>| {
        errors
            .map(|e| (e.key.name.clone(), e.refusal().code))
            .collect::<std::collections::BTreeMap<String, u16>>()
    };
    let answer = |failed: &std::collections::BTreeMap<String, u16>, name: &str| {
        failed
            .get(name)
            .map_or(Answer::Done, |code| Answer::of_status(*code))
    };
    let mut result = HubResult::default();
    let f = failed(&mut records.iter().map(|(_, e)| e));
    result
        .results
        .extend(writes.apply_records.iter().map(|r| HubWriteResult {
            name: record_claim_name(&name(&r.metadata)),
            apply: true,
            answer: answer(&f, &name(&r.metadata)),
        }));
    let f = failed(&mut slices.iter().map(|(_, e)| e));
    result
        .results
        .extend(writes.apply_slices.iter().map(|c| HubWriteResult {
            name: copy_claim_name(&name(&c.metadata)),
            apply: true,
            answer: answer(&f, &name(&c.metadata)),
        }));
    let f = failed(&mut stale_records.iter());
    result
        .results
        .extend(writes.delete_records.iter().map(|k| HubWriteResult {
            name: record_claim_name(&k.name),
            apply: false,
            answer: answer(&f, &k.name),
        }));
    let f = failed(&mut stale_slices.iter());
    result
        .results
        .extend(writes.delete_slices.iter().map(|k| HubWriteResult {
            name: copy_claim_name(&k.name),
            apply: false,
            answer: answer(&f, &k.name),
        }));
    result.record_failures = refusals(&context.metrics, &records, |record, _| of_record(record));
    for (copy, error) in &slices {
        report(&context.metrics, error);
        result
            .copy_failures
            .insert(of_copy(copy), (error.key.name.clone(), error.refusal()));
    }
    result.errors = records.len()
        + slices.len()
        + report_all(&context.metrics, stale_records.iter().chain(&stale_slices));
    result
}

/// Renews this member's heartbeat Lease; whether the hub took it.
pub(crate) async fn renew(
    hub: &Client,
    renewal: &atoll_core::reconciler::Renewal,
    keeping: &atoll_core::reconciler::Keeping,
    targets: &Targets,
    context: &Context,
) -> bool {
    // What `atoll status` shows as this member's last error (bounded: annotations are small).
    let last_error: String = context
        .metrics
        .last_error
        .lock()
        .ok()
        .and_then(|e| e.clone())
        .unwrap_or_default()
        .chars()
        .take(512)
        .collect();
    let lease = atoll_core::reconciler::heartbeat_lease(
        &targets.cluster_id,
        renewal,
        targets.interval,
        targets.grace,
        &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        &last_error,
        &atoll_core::reconciler::keeping_text(keeping, std::time::Instant::now()),
    );
    let key = ObjectKey::new(
        &atoll_api::hub::namespace_for(&targets.cluster_id),
        atoll_api::hub::LEASE_NAME,
    );
    let name = &key.name;
    let written = write(hub, &key, "apply", context, |api: Api<Lease>| async move {
        let params = PatchParams::apply(FIELD_MANAGER).force();
        api.patch(name, &params, &Patch::Apply(&lease)).await
    })
    .await;
    match written {
        Ok(_) => {
            context.metrics.heartbeats.inc();
            true
        }
        Err(error) => {
            context.metrics.heartbeat_failures.inc();
            tracing::warn!(%error, "renewing the heartbeat Lease failed");
            false
        }
    }
}

/// Keeps the liveness decisions in the member; whether the write went through (`Err`: the
/// API's message).
async fn keep(
    member: &Client,
    kept: &atoll_core::liveness::Persisted,
    targets: &Targets,
    context: &Context,
) -> Result<(), String> {
    let config_map = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": targets.kept.name,
            "namespace": targets.kept.namespace,
            "labels": { "app.kubernetes.io/managed-by": "atoll" },
        },
        "data": { crate::kept::DATA_KEY: kept.encode() },
    });
    let name = &targets.kept.name;
    let written = write(
        member,
        &targets.kept,
        "apply",
        context,
        |api: Api<ConfigMap>| async move {
            let params = PatchParams::apply(FIELD_MANAGER).force();
            api.patch(name, &params, &Patch::Apply(&config_map)).await
        },
    )
    .await;
    match written {
        Ok(_) => Ok(()),
        Err(error) => {
            report(&context.metrics, &error);
            context.metrics.kept_write_failures.inc();
            Err(error.to_string())
        }
    }
}

/// Reports failed applies whose refusal the next plan needs, keyed by the service each belongs to.
fn refusals<K>(
    metrics: &Metrics,
    failed: &[(&K, WriteError)],
    service: impl Fn(&K, &WriteError) -> ServiceKey,
) -> std::collections::BTreeMap<ServiceKey, Refusal> {
    failed
        .iter()
        .map(|(object, error)| {
            report(metrics, error);
            (service(object, error), error.refusal())
        })
        .collect()
}

/// Reports every failed write; returns how many there were.
fn report_all<'a>(metrics: &Metrics, errors: impl Iterator<Item = &'a WriteError>) -> usize {
    errors.map(|error| report(metrics, error)).count()
}

async fn member_writes(
    member: &Client,
    plan: &Plan,
    context: &Context,
) -> (std::collections::BTreeMap<ServiceKey, Refusal>, usize) {
    let writes = &plan.member;
    for (key, announcement) in &writes.withdrawn_imports {
        events::announce_on(&context.announcer, "ServiceImport", key, announcement).await;
    }
    // What traffic follows (derived Services, ServiceImports, MCS slices) first; the imports'
    // statuses only after it, so that a withdrawal's slice deletions do not queue behind as many
    // status rewrites on a busy apiserver (at 250 clusters they doubled the time until the dead
    // cluster's endpoints were gone).
    let (derived, imports, slices, stale_imports, stale_derived, stale_slices, collections) = futures::join!(
        apply_each::<Service>(member, &writes.apply_derived, context),
        apply_imports(member, &writes.apply_imports, context),
        apply_each::<EndpointSlice>(member, &writes.apply_slices, context),
        delete_each::<ServiceImport>(member, &writes.delete_imports, context),
        delete_each::<Service>(member, &writes.delete_derived, context),
        delete_each::<EndpointSlice>(member, &writes.delete_slices, context),
        futures::stream::iter(&writes.delete_slice_collections)
            .map(|c| delete_collection(member, c, context))
            .buffer_unordered(COLLECTIONS_IN_FLIGHT)
            .concat(),
    );
    let failed_imports: std::collections::BTreeSet<ObjectKey> =
        imports.iter().map(|e| e.key.clone()).collect();
    let statuses = import_statuses(member, &writes.import_statuses, &failed_imports, context).await;
    let failures = refusals(&context.metrics, &derived, |service, error| {
        let imported = service
            .meta()
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::SERVICE_NAME))
            .cloned()
            .unwrap_or_default();
        ServiceKey {
            namespace: error.key.namespace.clone(),
            name: imported,
        }
    });
    let others = slices
        .iter()
        .map(|(_, e)| e)
        .chain(&imports)
        .chain(&statuses)
        .chain(&stale_imports)
        .chain(&stale_derived)
        .chain(&stale_slices)
        .chain(&collections);
    (
        failures,
        derived.len() + report_all(&context.metrics, others),
    )
}

/// Applies the ServiceImports; returns the failures. Observes export -> import for every
/// import seen for the first time.
async fn apply_imports(
    member: &Client,
    imports: &[ImportApply],
    context: &Context,
) -> Vec<WriteError> {
    let objects: Vec<ServiceImport> = imports.iter().map(|i| i.object.clone()).collect();
    let failed = apply_each::<ServiceImport>(member, &objects, context).await;
    let failed_keys: std::collections::BTreeSet<ObjectKey> =
        failed.iter().map(|(_, e)| e.key.clone()).collect();
    for apply in imports {
        let key = ObjectKey::of(&apply.object.metadata);
        if let (Some(first), false) = (&apply.first_export, failed_keys.contains(&key)) {
            let age = Timestamp::now().duration_since(first.0);
            context
                .metrics
                .export_to_import_seconds
                .observe(age.as_secs_f64().max(0.0));
        }
    }
    failed.into_iter().map(|(_, e)| e).collect()
}

/// The ServiceImports' statuses, but not of an import whose apply just failed (it may not
/// exist); each applied status is announced by an Event.
async fn import_statuses(
    member: &Client,
    statuses: &[ImportStatus],
    failed_imports: &std::collections::BTreeSet<ObjectKey>,
    context: &Context,
) -> Vec<WriteError> {
    let applied = statuses.iter().filter(|s| !failed_imports.contains(&s.key));
    each(applied, |s| async move {
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "status": s.status,
        });
        let result = apply_status::<ServiceImport>(member, &s.key, &partial, context)
            .await
            .err();
        if result.is_none() {
            events::publish_on_import(&context.announcer, s).await;
        }
        result
    })
    .await
}

/// The member's ClusterProfile properties on the hub.
async fn profile_status(hub: &Client, status: Option<&ProfileStatus>, context: &Context) -> usize {
    let Some(status) = status else {
        return 0;
    };
    let partial = json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "status": { "properties": status.properties },
    });
    match apply_status::<ClusterProfile>(hub, &status.key, &partial, context).await {
        Ok(()) => 0,
        Err(error) => {
            report(&context.metrics, &error);
            1
        }
    }
}

/// Export conditions, each preceded by the Events announcing its changes.
async fn export_statuses(member: &Client, statuses: &[ExportStatus], context: &Context) -> usize {
    let errors: Vec<WriteError> = each(statuses, |s| async move {
        events::publish(&context.announcer, s).await;
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "status": { "conditions": s.conditions },
        });
        apply_status::<ServiceExport>(member, &s.key, &partial, context)
            .await
            .err()
    })
    .await;
    report_all(&context.metrics, errors.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn error(source: kube::Error) -> WriteError {
        WriteError {
            kind: "Service".into(),
            verb: "apply",
            key: ObjectKey::new("demo", "derived-x"),
            source: Failure::Api(source),
        }
    }

    #[test]
    fn api_refusals_keep_their_status_and_message() {
        let api = kube::core::Status::failure("spec.ipFamilies: not configured", "Invalid")
            .with_code(422);
        let refusal = error(kube::Error::Api(Box::new(api))).refusal();
        assert_eq!(refusal.code, 422);
        assert!(refusal.is_ip_family_problem());
        let message = error(kube::Error::LinesCodecMaxLineLengthExceeded).to_string();
        assert!(
            message.starts_with("apply Service demo/derived-x: "),
            "{message}"
        );
        assert_eq!(
            error(kube::Error::LinesCodecMaxLineLengthExceeded)
                .refusal()
                .code,
            0
        );
    }

    #[test]
    fn only_a_forbidden_or_disallowed_collection_falls_back_to_named_deletes() {
        let api = |code| {
            let status = kube::core::Status::failure("no", "Refused").with_code(code);
            error(kube::Error::Api(Box::new(status)))
        };
        assert!(refused(&api(403)));
        assert!(refused(&api(405)));
        for code in [409, 429, 500, 503] {
            assert!(!refused(&api(code)), "{code}");
        }
        let not_leading = WriteError {
            source: Failure::NotLeading,
            ..api(403)
        };
        assert!(!refused(&not_leading));
    }
}
