//! Watch streams feed in-memory stores and only wake a reconciler; they never call the API
//! themselves (the linkerd policy-controller shape, ARCHITECTURE.md §2).

use std::fmt::Debug;
use std::sync::Arc;

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

/// Starts a reflector of `api` in the background and returns its store. Every event notifies
/// `trigger`. Managed fields are dropped before caching (large, never read), and `trim` may drop
/// more of what the caller never reads; watch errors are
/// logged with `what` and retried with backoff, and a relist replaces the store's content only
/// once complete, so readers never see a half-listed state.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    trigger: Arc<Notify>,
    what: &'static str,
    trim: fn(&mut K),
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(move |o| {
            o.managed_fields_mut().clear();
            trim(o);
        })
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            if let Err(error) = event {
                tracing::warn!(watch = what, %error, "watch error; retrying");
                continue;
            }
            trigger.notify_one();
        }
    });
    reader
}

/// A `trim` that keeps everything.
pub fn keep_all<K>(_: &mut K) {}

/// A `trim` that keeps only the name, namespace and labels of the metadata.
pub fn keep_identity_and_labels<K: Resource>(object: &mut K) {
    let meta = object.meta_mut();
    *meta = kube::api::ObjectMeta {
        name: meta.name.take(),
        namespace: meta.namespace.take(),
        labels: meta.labels.take(),
        ..Default::default()
    };
}
