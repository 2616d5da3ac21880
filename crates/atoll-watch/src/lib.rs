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
/// `trigger`. Managed fields are dropped before caching (large, never read); watch errors are
/// logged with `what` and retried with backoff, and a relist replaces the store's content only
/// once complete, so readers never see a half-listed state.
pub fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    trigger: Arc<Notify>,
    what: &'static str,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .default_backoff()
        .modify(|o| o.managed_fields_mut().clear())
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
