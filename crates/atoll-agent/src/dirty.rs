//! Watch events mark the services they concern (`atoll_core::dirty`) and wake the reconciler,
//! which takes them a batch at a time.

use std::sync::{Arc, Mutex, PoisonError};

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_core::dirty::{Concerned, DirtyQueue};
use kube::Resource;
use kube::runtime::watcher::Event;
use tokio::sync::Notify;

/// The marks of watch events since the reconciler last took them, shared by every watch and
/// the loop (the reconciler keeps its own queue of what waits; this is its inbox).
#[derive(Debug)]
pub struct Dirty {
    queue: Mutex<DirtyQueue>,
    trigger: Arc<Notify>,
}

impl Dirty {
    /// An empty inbox waking `trigger` on every mark.
    pub fn new(trigger: Arc<Notify>) -> Self {
        Self {
            queue: Mutex::new(DirtyQueue::default()),
            trigger,
        }
    }

    fn with<T>(&self, f: impl FnOnce(&mut DirtyQueue) -> T) -> T {
        // Every update is one call on the queue, so it stays consistent even after a panic.
        let mut queue = self.queue.lock().unwrap_or_else(PoisonError::into_inner);
        f(&mut queue)
    }

    /// `keys` need a pass.
    pub fn mark(&self, keys: impl IntoIterator<Item = ServiceKey>) {
        self.with(|q| keys.into_iter().for_each(|k| q.mark(k)));
        self.trigger.notify_one();
    }

    /// Every service of `namespace` needs a pass.
    pub fn mark_namespace(&self, namespace: &str) {
        self.with(|q| q.mark_namespace(namespace));
        self.trigger.notify_one();
    }

    /// Every service needs a pass.
    pub fn mark_everything(&self) {
        self.with(DirtyQueue::mark_everything);
        self.trigger.notify_one();
    }

    /// Wakes the reconciler without marking a service (a heartbeat moved: only the liveness
    /// view may have changed, and it names the services that did).
    pub fn wake(&self) {
        self.trigger.notify_one();
    }

    /// Every mark so far, leaving the inbox empty.
    pub fn drain(&self) -> DirtyQueue {
        self.with(std::mem::take)
    }

    /// Whether no mark waits.
    pub fn is_empty(&self) -> bool {
        self.with(|q| q.is_empty())
    }
}

/// An event handler for a watch of objects that concern the services `concerns` returns.
/// A relist marks everything: objects deleted while the watch was down give no event.
pub fn by_service<K: Resource + 'static>(
    dirty: Arc<Dirty>,
    concerns: fn(&K) -> Vec<ServiceKey>,
) -> impl FnMut(&Event<K>) + Send + 'static {
    let mut concerned = Concerned::default();
    move |event| match event {
        Event::Apply(o) => dirty.mark(concerned.applied(ObjectKey::of(o.meta()), concerns(o))),
        Event::Delete(o) => dirty.mark(concerned.deleted(&ObjectKey::of(o.meta()))),
        Event::Init => concerned.relist_started(),
        Event::InitApply(o) => concerned.relisted(ObjectKey::of(o.meta()), concerns(o)),
        Event::InitDone => {
            concerned.relist_done();
            dirty.mark_everything();
        }
    }
}

/// An event handler for the watch of namespaces: a namespace that appears, changes or goes
/// marks its services.
pub fn by_namespace<K: Resource + 'static>(
    dirty: Arc<Dirty>,
) -> impl FnMut(&Event<K>) + Send + 'static {
    move |event| match event {
        Event::Apply(o) | Event::Delete(o) => {
            dirty.mark_namespace(o.meta().name.as_deref().unwrap_or_default());
        }
        Event::Init | Event::InitApply(_) => {}
        Event::InitDone => dirty.mark_everything(),
    }
}

/// An event handler for objects every service depends on (the NamespacePolicy).
pub fn everything<K: 'static>(dirty: Arc<Dirty>) -> impl FnMut(&Event<K>) + Send + 'static {
    move |event| match event {
        Event::Init | Event::InitApply(_) => {}
        _ => dirty.mark_everything(),
    }
}

/// An event handler for objects no service depends on (heartbeats, properties, the profile):
/// every pass looks at them whole.
pub fn wake_only<K: 'static>(dirty: Arc<Dirty>) -> impl FnMut(&Event<K>) + Send + 'static {
    move |_| dirty.wake()
}
