//! The only code that writes. `atoll_core::executor` carries out a step of
//! `atoll_core::reconciler` (the plan, the Events, the heartbeat renewal, the kept liveness
//! decisions): the order, what runs side by side and what each answer teaches are its
//! (`crate::executing` hands it this module's calls). This module makes the calls and decides
//! nothing: server-side apply with one field manager,
//! deletes that tolerate objects already gone. Every write is fenced: it starts only while this
//! replica leads and may take at most what is left of its leadership (see [`Fence`]). Failed
//! writes are logged with kind, namespace, name and the API's message, counted by kind, and
//! handed back as the refusal the executor turns into the [`Outcome`].

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use atoll_api::keys::ObjectKey;
use atoll_core::plan::Refusal;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, Resource};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::events::Announcer;
use crate::fence::Fence;
use crate::metrics::{KindLabels, Metrics, WriteLabels};

/// Field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "atoll-agent";

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
pub(crate) trait Namespaced:
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
pub(crate) fn report(metrics: &Metrics, error: &WriteError) {
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
}

/// One write (`verb`) of the object `key` of kind `K`, which `call` makes through the API of
/// `K` in the object's namespace: started only while the fence allows and bounded by its
/// budget, counted, logged, and a refusal turned into a [`WriteError`] that names the kind, the
/// verb and the object.
pub(crate) async fn write<K, T, F>(
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
pub(crate) async fn apply<K>(
    client: &Client,
    object: &K,
    context: &Context,
) -> Result<K, WriteError>
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
pub(crate) async fn apply_status<K: Namespaced>(
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
pub(crate) async fn delete<K: Namespaced>(
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

/// Renews this member's heartbeat Lease; whether the hub took it.
pub(crate) async fn renew(
    hub: &Client,
    renewal: &atoll_core::reconciler::Renewal,
    keeping: &atoll_core::reconciler::Keeping,
    last_error: &str,
    targets: &Targets,
    context: &Context,
) -> bool {
    let lease = atoll_core::reconciler::heartbeat_lease(
        &targets.cluster_id,
        renewal,
        targets.interval,
        targets.grace,
        &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(Timestamp::now()),
        last_error,
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
pub(crate) async fn keep(
    member: &Client,
    kept: &atoll_core::liveness::Persisted,
    targets: &Targets,
    context: &Context,
) -> Result<(), String> {
    let config_map = kept.config_map(&targets.kept.namespace, &targets.kept.name);
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
}
