//! Watch events mark the services they concern (`atoll_core::dirty`) and wake the reconciler,
//! which takes them a batch at a time.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use atoll_api::hub::CLAIM_ANNOTATION;
use k8s_openapi::api::coordination::v1::Lease;

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
    /// A wake that should not wait for others (see [`Dirty::wake_now`]).
    urgent: AtomicBool,
}

impl Dirty {
    /// An empty inbox waking `trigger` on every mark.
    pub fn new(trigger: Arc<Notify>) -> Self {
        Self {
            queue: Mutex::new(DirtyQueue::default()),
            trigger,
            urgent: AtomicBool::new(false),
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
    /// view may have changed, and it names the services that did). The loop may gather such
    /// wakes for a moment before it steps.
    pub fn wake(&self) {
        self.trigger.notify_one();
    }

    /// Wakes the reconciler for a change it should take in without gathering others first.
    pub fn wake_now(&self) {
        self.urgent.store(true, Ordering::Release);
        self.trigger.notify_one();
    }

    /// Whether a change marked or woke urgently since the last call (clears the urgency).
    pub fn pressing(&self) -> bool {
        let urgent = self.urgent.swap(false, Ordering::AcqRel);
        urgent || !self.is_empty()
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
    by_service_keyed(dirty, |o: &K| ObjectKey::of(o.meta()), concerns)
}

/// As [`by_service`], for objects `key` names (kept in a form of Atoll's own, without
/// Kubernetes metadata).
pub fn by_service_keyed<K: 'static>(
    dirty: Arc<Dirty>,
    key: fn(&K) -> ObjectKey,
    concerns: fn(&K) -> Vec<ServiceKey>,
) -> impl FnMut(&Event<K>) + Send + 'static {
    let mut concerned = Concerned::default();
    move |event| match event {
        Event::Apply(o) => dirty.mark(concerned.applied(key(o), concerns(o))),
        Event::Delete(o) => dirty.mark(concerned.deleted(&key(o))),
        Event::Init => concerned.relist_started(),
        Event::InitApply(o) => concerned.relisted(key(o), concerns(o)),
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

/// The event handler of the heartbeat Leases: a Lease whose claim changed (its member now
/// publishes other names, so objects that waited for the claim may count now) wakes the loop at
/// once; a beat alone is noted in `beats` with when it was seen, and wakes the loop (without
/// pressing) only when it may change something there (`Beats::saw`).
pub fn heartbeats(
    dirty: Arc<Dirty>,
    beats: crate::beats::Beats,
) -> impl FnMut(&Event<Lease>) + Send + 'static {
    let mut claims: HashMap<String, Option<String>> = HashMap::new();
    move |event| match event {
        Event::Apply(lease) | Event::InitApply(lease) => {
            let namespace = lease.metadata.namespace.clone().unwrap_or_default();
            let claim = lease
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(CLAIM_ANNOTATION))
                .cloned();
            let changed = claims.get(&namespace) != Some(&claim);
            claims.insert(namespace.clone(), claim);
            let wakes = match namespace.strip_prefix(atoll_api::hub::NAMESPACE_PREFIX) {
                Some(cluster) => beats.saw(
                    cluster,
                    atoll_core::liveness::Heartbeat::read(lease).beat,
                    std::time::Instant::now(),
                ),
                None => true,
            };
            match (event, changed) {
                (Event::Apply(_), true) => dirty.wake_now(),
                (Event::Apply(_), false) if wakes => dirty.wake(),
                _ => {}
            }
        }
        Event::Delete(lease) => {
            let namespace = lease.metadata.namespace.as_deref().unwrap_or_default();
            claims.remove(namespace);
            if let Some(cluster) = namespace.strip_prefix(atoll_api::hub::NAMESPACE_PREFIX) {
                beats.forget(cluster);
            }
            dirty.wake_now();
        }
        Event::Init => {
            claims.clear();
            beats.clear();
        }
        Event::InitDone => dirty.wake_now(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn lease(namespace: &str, claim: &str) -> Lease {
        let mut lease = Lease::default();
        lease.metadata.namespace = Some(namespace.into());
        lease.metadata.annotations = Some(BTreeMap::from([(
            CLAIM_ANNOTATION.to_owned(),
            claim.to_owned(),
        )]));
        lease
    }

    #[test]
    fn a_new_claim_presses_and_a_beat_alone_does_not() {
        let dirty = Arc::new(Dirty::new(Arc::new(Notify::new())));
        let mut handle = heartbeats(dirty.clone(), crate::beats::Beats::default());
        handle(&Event::Init);
        handle(&Event::InitApply(lease("atoll-c2", "1:aa")));
        handle(&Event::InitDone);
        assert!(dirty.pressing(), "a relist is taken in at once");
        handle(&Event::Apply(lease("atoll-c2", "1:aa")));
        assert!(!dirty.pressing(), "the same claim: a beat, which may wait");
        handle(&Event::Apply(lease("atoll-c2", "2:bb")));
        assert!(dirty.pressing(), "a new claim");
        assert!(!dirty.pressing(), "pressing once");
        handle(&Event::Apply(lease("atoll-c3", "1:cc")));
        assert!(dirty.pressing(), "a member seen for the first time");
        handle(&Event::Delete(lease("atoll-c3", "1:cc")));
        assert!(dirty.pressing(), "a Lease gone");
        dirty.mark([ServiceKey::new("ns", "web")]);
        assert!(dirty.pressing(), "a marked service");
    }
}
