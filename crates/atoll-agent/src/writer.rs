//! The only code that writes: server-side apply with one field manager, deletes that tolerate
//! objects already gone, and the comparisons that keep the steady state at zero writes.

use std::fmt::Debug;
use std::sync::atomic::{AtomicU64, Ordering};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::Error;
use crate::metrics::WriteLabels;

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

fn kind<K: Resource<DynamicType = ()>>() -> String {
    K::kind(&()).into_owned()
}

/// Server-side applies `object` (its name and namespace come from its metadata).
pub async fn apply<K>(api: &Api<K>, object: &K, writes: &WriteCounter) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    writes.add(&kind::<K>(), "apply");
    tracing::debug!(kind = %kind::<K>(), namespace = ?object.meta().namespace, %name, "apply");
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
}

/// Server-side applies the status subresource of `name` from a partial object.
pub async fn apply_status<K>(
    api: &Api<K>,
    name: &str,
    partial: &Value,
    writes: &WriteCounter,
) -> Result<K, kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    writes.add(&kind::<K>(), "apply-status");
    tracing::debug!(kind = %kind::<K>(), %name, "apply status");
    api.patch_status(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(partial),
    )
    .await
}

/// Deletes `name`; an object that is already gone is success.
pub async fn delete<K>(api: &Api<K>, name: &str, writes: &WriteCounter) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    writes.add(&kind::<K>(), "delete");
    tracing::debug!(kind = %kind::<K>(), %name, "delete");
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Makes namespace `namespace` hold exactly the `desired` objects (by name) among those `store`
/// observed there: applies the ones `current` says differ, deletes the ones not desired, 16
/// writes at a time. Returns the names whose apply failed and the number of failed deletes.
pub async fn sync_namespace<K>(
    client: &Client,
    store: &kube::runtime::reflector::Store<K>,
    namespace: &str,
    desired: &std::collections::BTreeMap<String, K>,
    current: impl Fn(&K, &K) -> bool,
    writes: &WriteCounter,
) -> (std::collections::BTreeSet<String>, usize)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug
        + Send
        + Sync
        + 'static,
{
    let observed: std::collections::BTreeMap<String, std::sync::Arc<K>> = store
        .state()
        .into_iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (o.meta().name.clone().unwrap_or_default(), o))
        .collect();
    let changed: Vec<&K> = desired
        .iter()
        .filter(|(name, want)| !observed.get(*name).is_some_and(|o| current(o, want)))
        .map(|(_, want)| want)
        .collect();
    let failed = apply_all(client, changed, writes).await;
    let stale: Vec<(String, String)> = observed
        .keys()
        .filter(|name| !desired.contains_key(*name))
        .map(|name| (namespace.to_owned(), name.clone()))
        .collect();
    let delete_errors = delete_all::<K>(client, stale, writes).await;
    (failed, delete_errors)
}

/// Server-side applies every object (each names its own namespace), 16 at a time; returns
/// the names of those that failed (each is logged).
pub async fn apply_all<K>(
    client: &Client,
    objects: Vec<&K>,
    writes: &WriteCounter,
) -> std::collections::BTreeSet<String>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + Debug,
{
    use futures::StreamExt;
    futures::stream::iter(objects)
        .map(|object| async move {
            let namespace = object.meta().namespace.clone().unwrap_or_default();
            let name = object.meta().name.clone().unwrap_or_default();
            let api: Api<K> = Api::namespaced(client.clone(), &namespace);
            match apply(&api, object, writes).await {
                Ok(_) => None,
                Err(error) => {
                    tracing::warn!(kind = %kind::<K>(), %namespace, %name, %error, "apply failed");
                    Some(name)
                }
            }
        })
        .buffer_unordered(16)
        .filter_map(|failed| async move { failed })
        .collect()
        .await
}

/// Deletes the namespaced objects `(namespace, name)` of kind `K`, 16 at a time; returns how
/// many deletes failed (each is logged).
pub async fn delete_all<K>(
    client: &Client,
    objects: Vec<(String, String)>,
    writes: &WriteCounter,
) -> usize
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + Debug,
{
    use futures::StreamExt;
    let results: Vec<Result<(), kube::Error>> = futures::stream::iter(objects)
        .map(|(namespace, name)| async move {
            let api: Api<K> = Api::namespaced(client.clone(), &namespace);
            let result = delete(&api, &name, writes).await;
            if let Err(error) = &result {
                tracing::warn!(kind = %kind::<K>(), %namespace, %name, %error, "delete failed");
            }
            result
        })
        .buffer_unordered(16)
        .collect()
        .await;
    results.iter().filter(|r| r.is_err()).count()
}

/// Creates this member's hub namespace unless it exists (`atoll join` normally has).
pub async fn ensure_hub_namespace(hub: &Client, cluster: &str) -> Result<(), Error> {
    let namespace = atoll_api::hub::namespace_for(cluster);
    let api: Api<Namespace> = Api::all(hub.clone());
    let object = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(source) => Err(Error::HubNamespace { namespace, source }),
    }
}

/// Whether everything `desired` says is already true of `observed`: every key of a desired
/// object is present with a contained value, arrays match element by element, scalars are
/// equal. Fields the apiserver defaults or other managers own are ignored; that is what makes a
/// resync that changes nothing send nothing.
pub fn contains(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(o), Value::Object(d)) => d
            .iter()
            .all(|(k, dv)| o.get(k).is_some_and(|ov| contains(ov, dv))),
        (Value::Array(o), Value::Array(d)) => {
            o.len() == d.len() && o.iter().zip(d).all(|(ov, dv)| contains(ov, dv))
        }
        _ => observed == desired,
    }
}

/// [`contains`] for typed objects.
pub fn already_applied<T: Serialize>(observed: &T, desired: &T) -> bool {
    match (
        serde_json::to_value(observed),
        serde_json::to_value(desired),
    ) {
        (Ok(o), Ok(d)) => contains(&o, &d),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaulted_fields_do_not_count_as_differences() {
        let observed = json!({"spec": {"ports": [{"port": 42, "protocol": "TCP", "targetPort": 42}], "clusterIP": "10.0.0.1"}});
        assert!(contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 42, "protocol": "TCP"}]}})
        ));
    }

    #[test]
    fn changed_values_and_array_lengths_do() {
        let observed =
            json!({"spec": {"ports": [{"port": 42}]}, "metadata": {"labels": {"a": "1"}}});
        assert!(!contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 43}]}})
        ));
        assert!(!contains(
            &observed,
            &json!({"spec": {"ports": [{"port": 42}, {"port": 43}]}})
        ));
        assert!(!contains(
            &observed,
            &json!({"metadata": {"labels": {"a": "2"}}})
        ));
        assert!(!contains(
            &observed,
            &json!({"metadata": {"annotations": {}}})
        ));
    }
}
