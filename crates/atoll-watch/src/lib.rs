//! Watch streams feed in-memory stores and only wake a reconciler; they never call the API
//! themselves (the linkerd policy-controller shape): a reconciler reads the stores, so a burst
//! of events costs one pass, not one API call each.

use std::fmt::Debug;
use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::Notify;

pub mod kept;

pub use kept::{KeptStore, KeyOf, WriterDropped};

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
    reflect_with(api, config, what, trim, move |_| trigger.notify_one())
}

/// As [`reflect`], but every event goes to `on_event` (called once the store holds it), which
/// may mark what the event concerns before it wakes a reconciler.
pub fn reflect_with<K, F>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    trim: impl Fn(&mut K) + Send + 'static,
    mut on_event: F,
) -> Store<K>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = watcher(api, config)
        .backoff(CappedBackoff::default())
        .modify(move |o| cached_form(o, &trim))
        .reflect(writer);
    tokio::spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Err(error) => tracing::warn!(watch = what, %error, "watch error; retrying"),
                Ok(event) => on_event(&event),
            }
        }
    });
    reader
}

/// As [`reflect_with`], but each object is kept in the caller's form: `convert` turns the
/// decoded object into it, `key` names its namespace and name, and `on_event` sees the event
/// with the converted object (see [`kept`]).
pub fn keep_with<K, T, F>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    convert: impl FnMut(K) -> T + Send + 'static,
    key: KeyOf<T>,
    on_event: F,
) -> KeptStore<T>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Send + Sync + 'static,
    F: FnMut(&watcher::Event<Arc<T>>) + Send + 'static,
{
    let never = Arc::new(Notify::new());
    keep_gated(api, config, what, convert, key, Some, never, on_event)
}

/// As [`keep_with`], but each converted event first passes `gate`, which says what the store
/// applies of it (nothing, or another event: a delete of an object the store must not hold),
/// and the watch lists again from scratch whenever `relist` is notified (a relist replaces
/// the store's content once complete, as any relist does).
#[allow(clippy::too_many_arguments)]
pub fn keep_gated<K, T, F, G>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
    mut convert: impl FnMut(K) -> T + Send + 'static,
    key: KeyOf<T>,
    mut gate: G,
    relist: Arc<Notify>,
    mut on_event: F,
) -> KeptStore<T>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    T: Send + Sync + 'static,
    F: FnMut(&watcher::Event<Arc<T>>) + Send + 'static,
    G: FnMut(watcher::Event<Arc<T>>) -> Option<watcher::Event<Arc<T>>> + Send + 'static,
{
    let (reader, mut writer) = kept::kept_store(key);
    tokio::spawn(async move {
        let mut events = watch(api.clone(), config.clone(), what);
        loop {
            let event = tokio::select! {
                event = events.next() => match event {
                    Some(event) => event,
                    None => break,
                },
                () = relist.notified() => {
                    tracing::info!(watch = what, "listing again");
                    events = watch(api.clone(), config.clone(), what);
                    continue;
                }
            };
            let event = match event {
                watcher::Event::Apply(o) => watcher::Event::Apply(Arc::new(convert(o))),
                watcher::Event::Delete(o) => watcher::Event::Delete(Arc::new(convert(o))),
                watcher::Event::Init => watcher::Event::Init,
                watcher::Event::InitApply(o) => watcher::Event::InitApply(Arc::new(convert(o))),
                watcher::Event::InitDone => watcher::Event::InitDone,
            };
            if let Some(event) = gate(event) {
                writer.apply(&event);
                on_event(&event);
            }
        }
    });
    reader
}

/// The events of a watch of `api`, for a caller that keeps its own state instead of a store of
/// objects: errors are logged with `what` and retried with backoff, and never end the stream.
pub fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    what: &'static str,
) -> futures::stream::BoxStream<'static, watcher::Event<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
{
    watcher(api, config)
        .backoff(CappedBackoff::default())
        .filter_map(move |event| async move {
            event
                .inspect_err(|error| tracing::warn!(watch = what, %error, "watch error; retrying"))
                .ok()
        })
        .boxed()
}

/// Retries a failed watch after 250 ms, doubling up to 4 s (kube's default goes up to 30 s).
/// After an apiserver comes back, every store is current again within seconds: liveness
/// judgement waits for the stores to agree (see `atoll_core::liveness`), so a slow watch would
/// delay recovery.
#[derive(Debug, Clone)]
struct CappedBackoff {
    next: std::time::Duration,
}

const FIRST_RETRY: std::time::Duration = std::time::Duration::from_millis(250);
const LAST_RETRY: std::time::Duration = std::time::Duration::from_secs(4);

impl Default for CappedBackoff {
    fn default() -> Self {
        Self { next: FIRST_RETRY }
    }
}

impl Iterator for CappedBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<Self::Item> {
        let now = self.next;
        self.next = (self.next * 2).min(LAST_RETRY);
        Some(now)
    }
}

impl kube::runtime::utils::Backoff for CappedBackoff {
    fn reset(&mut self) {
        self.next = FIRST_RETRY;
    }
}

/// What a store keeps of `object`: no managed fields (large, never read; dropped with their
/// allocation, not just emptied), then what `trim` leaves.
pub fn cached_form<K: Resource>(object: &mut K, trim: &impl Fn(&mut K)) {
    object.meta_mut().managed_fields = None;
    trim(object);
}

/// Namespace and name of an object, borrowed (the key of a [`KeptStore`] of Kubernetes objects).
pub fn namespace_and_name<K: Resource>(object: &K) -> (&str, &str) {
    let meta = object.meta();
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
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

/// What a process still waits for before it can do its job, by name: typically the first list
/// of each of its watches. Shared (cheap to clone) between the code that gets each thing done
/// and the `/readyz` endpoint that reports what is missing, so an operator sees which watch
/// cannot list (an unreachable apiserver, a missing permission) instead of a bare "not ready".
#[derive(Debug, Clone, Default)]
pub struct Readiness {
    waiting: Arc<Mutex<Vec<&'static str>>>,
}

impl Readiness {
    /// Waiting for each of `names` (created before anything can report ready, so there is no
    /// moment when nothing is registered yet and the process looks ready).
    pub fn waiting_for(names: impl IntoIterator<Item = &'static str>) -> Self {
        let readiness = Self::default();
        for name in names {
            readiness.wait_for(name);
        }
        readiness
    }

    /// Adds `name` to what is awaited (no-op if it already is).
    pub fn wait_for(&self, name: &'static str) {
        let mut waiting = self.lock();
        if !waiting.contains(&name) {
            waiting.push(name);
        }
    }

    /// `name` is done.
    pub fn done(&self, name: &str) {
        self.lock().retain(|w| *w != name);
    }

    /// What is still awaited, in the order it was registered.
    pub fn waiting(&self) -> Vec<&'static str> {
        self.lock().clone()
    }

    /// Whether nothing is awaited any more.
    pub fn is_ready(&self) -> bool {
        self.lock().is_empty()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<&'static str>> {
        // The list stays consistent even if a holder panicked: every update is one call.
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
