//! The only code that writes. It executes a [`Plan`] made by `atoll_core::plan` and decides
//! nothing itself: server-side apply with one field manager, deletes that tolerate objects
//! already gone, at most 16 writes in flight per kind of write. Failed writes are logged with
//! kind, namespace, name and the API's message, counted by kind, and handed back as
//! [`Feedback`] for the next plan.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::inventory::ClusterProfile;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::keys::of_record;
use atoll_core::plan::{
    ExportStatus, Feedback, ImportApply, ImportStatus, Plan, ProfileStatus, Refusal,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::runtime::events::Recorder;
use kube::{Api, Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::events;
use crate::metrics::{KindLabels, Metrics, WriteLabels};

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "atoll-agent";

/// Writes in flight at once, per kind of write.
const IN_FLIGHT: usize = 16;

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
    /// Publishes Events on ServiceExports.
    pub(crate) recorder: Recorder,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

/// A write the API did not accept.
#[derive(Debug, thiserror::Error)]
#[error("{verb} {kind} {key}: {source}")]
pub struct WriteError {
    pub kind: String,
    pub verb: &'static str,
    pub key: ObjectKey,
    #[source]
    pub source: kube::Error,
}

impl WriteError {
    /// The refusal as the plan sees it: HTTP status (0 without an answer) and message.
    pub fn refusal(&self) -> Refusal {
        match &self.source {
            kube::Error::Api(e) => Refusal {
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

/// What executing a plan did.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The failures the next plan must know about.
    pub feedback: Feedback,
    /// Failed writes (each already logged and counted).
    pub errors: usize,
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
/// `K` in the object's namespace: counted, logged, and a refusal turned into a [`WriteError`]
/// that names the kind, the verb and the object.
async fn write<K, T, F>(
    client: &Client,
    key: &ObjectKey,
    verb: &'static str,
    writes: &WriteCounter,
    call: impl FnOnce(Api<K>) -> F,
) -> Result<T, WriteError>
where
    K: Namespaced,
    F: Future<Output = kube::Result<T>>,
{
    let kind = kind::<K>();
    writes.add(&kind, verb);
    // The log says `apply status` where the metric's label says `apply-status`.
    tracing::debug!(kind = %kind, %key, "{}", verb.replace('-', " "));
    call(Api::namespaced(client.clone(), &key.namespace))
        .await
        .map_err(|source| WriteError {
            kind,
            verb,
            key: key.clone(),
            source,
        })
}

/// Server-side applies `object` (its name and namespace come from its metadata).
async fn apply<K>(client: &Client, object: &K, writes: &WriteCounter) -> Result<K, WriteError>
where
    K: Namespaced + Serialize,
{
    let key = ObjectKey::of(object.meta());
    let name = &key.name;
    write(client, &key, "apply", writes, |api: Api<K>| async move {
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
    writes: &WriteCounter,
) -> Result<(), WriteError> {
    let name = &key.name;
    write(
        client,
        key,
        "apply-status",
        writes,
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
    writes: &WriteCounter,
) -> Result<(), WriteError> {
    let name = &key.name;
    write(client, key, "delete", writes, |api: Api<K>| async move {
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
        apply(client, object, &context.writes)
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
        delete::<K>(client, key, &context.writes).await.err()
    })
    .await
}

/// Executes `plan`: hub writes, member writes and export statuses run side by side; within the
/// member, each ServiceImport is applied before its status.
pub async fn execute(hub: &Client, member: &Client, plan: &Plan, context: &Context) -> Outcome {
    let (hub_result, member_result, export_errors, profile_errors) = futures::join!(
        hub_writes(hub, plan, context),
        member_writes(member, plan, context),
        export_statuses(member, &plan.export_statuses, context),
        profile_status(hub, plan.profile.as_ref(), context),
    );
    let mut outcome = Outcome::default();
    let (publish_failures, hub_errors) = hub_result;
    let (derived_failures, member_errors) = member_result;
    outcome.feedback.publish_failures = publish_failures;
    outcome.feedback.derived_failures = derived_failures;
    outcome.errors = hub_errors + member_errors + export_errors + profile_errors;
    outcome
}

async fn hub_writes(
    hub: &Client,
    plan: &Plan,
    context: &Context,
) -> (std::collections::BTreeMap<ServiceKey, Refusal>, usize) {
    let writes = &plan.hub;
    let (records, slices, stale_records, stale_slices) = futures::join!(
        apply_each::<ExportedService>(hub, &writes.apply_records, context),
        apply_each::<ExportedEndpointSlice>(hub, &writes.apply_slices, context),
        delete_each::<ExportedService>(hub, &writes.delete_records, context),
        delete_each::<ExportedEndpointSlice>(hub, &writes.delete_slices, context),
    );
    let failures = refusals(&context.metrics, &records, |record, _| of_record(record));
    let others = slices
        .iter()
        .map(|(_, e)| e)
        .chain(&stale_records)
        .chain(&stale_slices);
    (
        failures,
        records.len() + report_all(&context.metrics, others),
    )
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
        events::announce_on(&context.recorder, "ServiceImport", key, announcement).await;
    }
    let (derived, imports, slices, stale_imports, stale_derived, stale_slices) = futures::join!(
        apply_each::<Service>(member, &writes.apply_derived, context),
        imports_then_statuses(
            member,
            &writes.apply_imports,
            &writes.import_statuses,
            context
        ),
        apply_each::<EndpointSlice>(member, &writes.apply_slices, context),
        delete_each::<ServiceImport>(member, &writes.delete_imports, context),
        delete_each::<Service>(member, &writes.delete_derived, context),
        delete_each::<EndpointSlice>(member, &writes.delete_slices, context),
    );
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
        .chain(&stale_imports)
        .chain(&stale_derived)
        .chain(&stale_slices);
    (
        failures,
        derived.len() + report_all(&context.metrics, others),
    )
}

/// ServiceImports first, then the statuses (of imports that exist or were just created).
async fn imports_then_statuses(
    member: &Client,
    imports: &[ImportApply],
    statuses: &[ImportStatus],
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
    let mut errors: Vec<WriteError> = failed.into_iter().map(|(_, e)| e).collect();
    let applied = statuses.iter().filter(|s| !failed_keys.contains(&s.key));
    let status_errors: Vec<WriteError> = each(applied, |s| async move {
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "status": s.status,
        });
        let result = apply_status::<ServiceImport>(member, &s.key, &partial, &context.writes)
            .await
            .err();
        if result.is_none() {
            events::publish_on_import(&context.recorder, s).await;
        }
        result
    })
    .await;
    errors.extend(status_errors);
    errors
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
    match apply_status::<ClusterProfile>(hub, &status.key, &partial, &context.writes).await {
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
        events::publish(&context.recorder, s).await;
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "status": { "conditions": s.conditions },
        });
        apply_status::<ServiceExport>(member, &s.key, &partial, &context.writes)
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
            source,
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
}
