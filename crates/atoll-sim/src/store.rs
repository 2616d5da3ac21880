//! One kind of object in a simulated apiserver, and a watch's view of it.
//!
//! Every change is appended to the kind's event log with a resourceVersion; a watch is a
//! cursor into that log. A watch may be delivered any number of events at a time (and the last
//! one again: a duplicate), may relist (410 Gone: the view becomes the current state, and the
//! watch says it relisted), and falls behind while it cannot reach its apiserver.

use std::collections::BTreeMap;
use std::sync::Arc;

use atoll_api::keys::ObjectKey;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Resource;

/// What a simulated apiserver object is.
pub trait Obj: Resource<DynamicType = ()> + Clone + std::fmt::Debug {}
impl<K: Resource<DynamicType = ()> + Clone + std::fmt::Debug> Obj for K {}

/// One change of a kind.
#[derive(Clone, Debug)]
pub enum Change<K> {
    Applied(Arc<K>),
    Deleted(Arc<K>),
}

impl<K: Obj> Change<K> {
    pub fn object(&self) -> &Arc<K> {
        match self {
            Change::Applied(o) | Change::Deleted(o) => o,
        }
    }
}

/// The objects of one kind and the log of their changes.
#[derive(Clone, Debug)]
pub struct Kind<K> {
    objects: BTreeMap<ObjectKey, Arc<K>>,
    log: Vec<Change<K>>,
}

impl<K> Default for Kind<K> {
    fn default() -> Self {
        Self {
            objects: BTreeMap::new(),
            log: Vec::new(),
        }
    }
}

/// Server-assigned metadata: resourceVersions and uids from the apiserver's counters, the
/// creation time from its clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct Counters {
    pub version: u64,
    pub uid: u64,
}

impl<K: Obj> Kind<K> {
    pub fn get(&self, key: &ObjectKey) -> Option<&Arc<K>> {
        self.objects.get(key)
    }

    pub fn all(&self) -> impl Iterator<Item = &Arc<K>> {
        self.objects.values()
    }

    pub fn len(&self) -> usize {
        self.objects.len()
    }

    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Stores `object` (created, or replacing what was there: `keep` carries over what the
    /// server owns, e.g. status or allocated IPs), stamping server metadata.
    pub fn put(
        &mut self,
        mut object: K,
        counters: &mut Counters,
        now: &Time,
        keep: impl FnOnce(Option<&K>, &mut K),
    ) -> Arc<K> {
        let key = ObjectKey::of(object.meta());
        let old = self.objects.get(&key).cloned();
        keep(old.as_deref(), &mut object);
        counters.version += 1;
        let meta = object.meta_mut();
        meta.resource_version = Some(counters.version.to_string());
        match &old {
            Some(o) => {
                meta.uid = o.meta().uid.clone();
                meta.creation_timestamp = o.meta().creation_timestamp.clone();
            }
            None => {
                counters.uid += 1;
                meta.uid = Some(format!("uid-{}", counters.uid));
                meta.creation_timestamp = Some(now.clone());
            }
        }
        let object = Arc::new(object);
        self.objects.insert(key, object.clone());
        self.log.push(Change::Applied(object.clone()));
        object
    }

    /// Deletes `key`; whether it existed.
    pub fn delete(&mut self, key: &ObjectKey, counters: &mut Counters) -> Option<Arc<K>> {
        let gone = self.objects.remove(key)?;
        counters.version += 1;
        self.log.push(Change::Deleted(gone.clone()));
        Some(gone)
    }

    /// Replaces every object by `objects` (a restore from a backup, done `how`); watches must
    /// relist.
    pub fn restore(&mut self, objects: &Kind<K>, counters: &mut Counters, how: Restore) {
        let keys: Vec<ObjectKey> = self.objects.keys().cloned().collect();
        for key in keys {
            self.delete(&key, counters);
        }
        for object in objects.objects.values() {
            let mut copy = (**object).clone();
            let meta = copy.meta_mut();
            match &how {
                // The backup's objects as they were, resourceVersions and all.
                Restore::Etcd => {}
                Restore::Replay => {
                    counters.version += 1;
                    meta.resource_version = Some(counters.version.to_string());
                }
                Restore::Recreate(now) => {
                    counters.version += 1;
                    counters.uid += 1;
                    meta.resource_version = Some(counters.version.to_string());
                    meta.uid = Some(format!("uid-{}", counters.uid));
                    meta.creation_timestamp = Some(now.clone());
                }
            }
            let copy = Arc::new(copy);
            self.objects
                .insert(ObjectKey::of(copy.meta()), copy.clone());
            self.log.push(Change::Applied(copy));
        }
    }

    /// The state without its log (what a backup holds).
    pub fn snapshot(&self) -> Kind<K> {
        Kind {
            objects: self.objects.clone(),
            log: Vec::new(),
        }
    }
}

/// How a backup comes back.
#[derive(Clone, Debug)]
pub enum Restore {
    /// A tool that replays objects through the API keeping their metadata (Velero-like with
    /// creationTimestamps kept): resourceVersions go on rising.
    Replay,
    /// etcd itself restored from a snapshot: the snapshot's resourceVersions, lower than ones
    /// already handed out; the revision counter goes back with them.
    Etcd,
    /// A tool that creates the objects anew: new uids and creationTimestamps (`now`), which
    /// moves them behind younger objects in every "oldest first" order.
    Recreate(Time),
}

/// A watch of one kind: the view a replica's store holds and where it is in the log.
#[derive(Clone, Debug)]
pub struct Watch<K> {
    pub view: BTreeMap<ObjectKey, Arc<K>>,
    cursor: usize,
    /// The last change delivered (for duplicates).
    last: Option<Change<K>>,
}

impl<K> Default for Watch<K> {
    fn default() -> Self {
        Self {
            view: BTreeMap::new(),
            cursor: 0,
            last: None,
        }
    }
}

impl<K: Obj> Watch<K> {
    /// Changes not delivered yet.
    pub fn pending(&self, kind: &Kind<K>) -> usize {
        kind.log.len().saturating_sub(self.cursor)
    }

    /// Delivers up to `count` changes, in order; returns them.
    pub fn deliver(&mut self, kind: &Kind<K>, count: usize) -> Vec<Change<K>> {
        let end = kind.log.len().min(self.cursor.saturating_add(count));
        let changes: Vec<Change<K>> = kind.log[self.cursor.min(end)..end].to_vec();
        self.cursor = end;
        for change in &changes {
            self.apply(change);
        }
        if let Some(last) = changes.last() {
            self.last = Some(last.clone());
        }
        changes
    }

    /// The last change again (watches may repeat one).
    pub fn duplicate(&mut self) -> Option<Change<K>> {
        let last = self.last.clone()?;
        self.apply(&last);
        Some(last)
    }

    /// A relist: the view becomes the kind's current state.
    pub fn relist(&mut self, kind: &Kind<K>) {
        self.view = kind.objects.clone();
        self.cursor = kind.log.len();
        self.last = None;
    }

    fn apply(&mut self, change: &Change<K>) {
        let key = ObjectKey::of(change.object().meta());
        match change {
            Change::Applied(o) => {
                self.view.insert(key, o.clone());
            }
            Change::Deleted(_) => {
                self.view.remove(&key);
            }
        }
    }

    pub fn objects(&self) -> Vec<Arc<K>> {
        self.view.values().cloned().collect()
    }
}
