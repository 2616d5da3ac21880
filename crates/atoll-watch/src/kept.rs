//! A store of objects in a form of the caller's own instead of the type a watch decodes: for
//! objects held by the tens of thousands (an importer's MCS EndpointSlices), where the decoded
//! type's metadata alone (360 bytes before its first allocation) would cost more than what is
//! read of them. Events are applied as a reflector applies them: a relist replaces the
//! content only once complete, so readers never see a half-listed state.
//!
//! Objects are found by a hash of the `(namespace, name)` the caller's form names, so the
//! store holds no copy of the key.

use std::hash::BuildHasher;
use std::sync::{Arc, PoisonError, RwLock};

use hashbrown::HashTable;
use kube::runtime::watcher;
use tokio::sync::watch;

/// Namespace and name of a kept object, borrowed from it.
pub type KeyOf<T> = fn(&T) -> (&str, &str);

/// Objects by key, each once.
struct Table<T> {
    hasher: foldhash::fast::FixedState,
    objects: HashTable<Arc<T>>,
    key: KeyOf<T>,
}

impl<T> Table<T> {
    fn new(key: KeyOf<T>) -> Self {
        Self {
            hasher: foldhash::fast::FixedState::default(),
            objects: HashTable::new(),
            key,
        }
    }

    fn hash(&self, key: (&str, &str)) -> u64 {
        self.hasher.hash_one(key)
    }

    fn put(&mut self, object: Arc<T>) {
        let key_of = self.key;
        let hash = self.hash(key_of(&object));
        let hasher = &self.hasher;
        let entry = self.objects.entry(
            hash,
            |o| key_of(o) == key_of(&object),
            |o| hasher.hash_one(key_of(o)),
        );
        match entry {
            hashbrown::hash_table::Entry::Occupied(mut e) => *e.get_mut() = object,
            hashbrown::hash_table::Entry::Vacant(e) => {
                e.insert(object);
            }
        }
    }

    fn remove(&mut self, key: (&str, &str)) {
        let key_of = self.key;
        let hash = self.hash(key);
        if let Ok(e) = self.objects.find_entry(hash, |o| key_of(o) == key) {
            e.remove();
        }
    }
}

struct Inner<T> {
    current: Table<T>,
    /// While a relist is under way: what it has listed so far.
    relisting: Option<Table<T>>,
}

/// Writes a [`KeptStore`] from watch events.
pub struct KeptWriter<T> {
    inner: Arc<RwLock<Inner<T>>>,
    ready: watch::Sender<bool>,
}

/// The objects as last listed and watched, in the caller's form.
pub struct KeptStore<T> {
    inner: Arc<RwLock<Inner<T>>>,
    ready: watch::Receiver<bool>,
}

impl<T> Clone for KeptStore<T> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
            ready: self.ready.clone(),
        }
    }
}

/// The watch ended before its first list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriterDropped;

impl<T> std::fmt::Debug for KeptStore<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptStore")
            .field("objects", &self.len())
            .finish()
    }
}

impl<T> std::fmt::Debug for KeptWriter<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeptWriter").finish_non_exhaustive()
    }
}

/// An empty store, and its writer; `key` names an object's namespace and name.
pub fn kept_store<T>(key: KeyOf<T>) -> (KeptStore<T>, KeptWriter<T>) {
    let inner = Arc::new(RwLock::new(Inner {
        current: Table::new(key),
        relisting: None,
    }));
    let (sender, receiver) = watch::channel(false);
    (
        KeptStore {
            inner: inner.clone(),
            ready: receiver,
        },
        KeptWriter {
            inner,
            ready: sender,
        },
    )
}

impl<T> KeptWriter<T> {
    /// Applies one event whose object is already in the caller's form.
    pub fn apply(&mut self, event: &watcher::Event<Arc<T>>) {
        let mut inner = self.inner.write().unwrap_or_else(PoisonError::into_inner);
        let key = inner.current.key;
        match event {
            watcher::Event::Apply(o) => inner.current.put(o.clone()),
            watcher::Event::Delete(o) => inner.current.remove(key(o)),
            watcher::Event::Init => inner.relisting = Some(Table::new(key)),
            watcher::Event::InitApply(o) => {
                if let Some(table) = &mut inner.relisting {
                    table.put(o.clone());
                }
            }
            watcher::Event::InitDone => {
                if let Some(table) = inner.relisting.take() {
                    inner.current = table;
                }
                drop(inner);
                self.ready.send_replace(true);
            }
        }
    }
}

impl<T> KeptStore<T> {
    /// Every object held now.
    pub fn state(&self) -> Vec<Arc<T>> {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.current.objects.iter().cloned().collect()
    }

    /// How many objects it holds.
    pub fn len(&self) -> usize {
        let inner = self.inner.read().unwrap_or_else(PoisonError::into_inner);
        inner.current.objects.len()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once the watch has listed once; fails if it ended before.
    pub async fn wait_until_ready(&self) -> Result<(), WriterDropped> {
        let mut ready = self.ready.clone();
        ready
            .wait_for(|listed| *listed)
            .await
            .map(|_| ())
            .map_err(|_| WriterDropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use watcher::Event;

    #[derive(Debug, PartialEq)]
    struct Item {
        namespace: String,
        name: String,
        value: u32,
    }

    fn item(name: &str, value: u32) -> Arc<Item> {
        Arc::new(Item {
            namespace: "ns".into(),
            name: name.into(),
            value,
        })
    }

    fn key(i: &Item) -> (&str, &str) {
        (&i.namespace, &i.name)
    }

    fn held(store: &KeptStore<Item>) -> Vec<(String, u32)> {
        let mut out: Vec<_> = store
            .state()
            .iter()
            .map(|i| (i.name.clone(), i.value))
            .collect();
        out.sort();
        out
    }

    #[test]
    fn events_apply_as_a_reflector_applies_them() {
        let (store, mut writer) = kept_store(key);
        writer.apply(&Event::Apply(item("a", 1)));
        writer.apply(&Event::Apply(item("b", 1)));
        writer.apply(&Event::Apply(item("a", 2)));
        assert_eq!(held(&store), [("a".into(), 2), ("b".into(), 1)]);
        writer.apply(&Event::Delete(item("b", 0)));
        writer.apply(&Event::Delete(item("missing", 0)));
        assert_eq!(held(&store), [("a".into(), 2)]);
        // A relist: the old content stays until it is complete, then is replaced whole.
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(item("c", 3)));
        writer.apply(&Event::InitApply(item("c", 4)));
        assert_eq!(held(&store), [("a".into(), 2)]);
        writer.apply(&Event::InitDone);
        assert_eq!(held(&store), [("c".into(), 4)]);
        assert_eq!(store.len(), 1);
    }

    #[tokio::test]
    async fn it_is_ready_after_its_first_list_and_fails_if_the_watch_ends_before() {
        let (store, mut writer) = kept_store(key);
        let waiting = tokio::spawn({
            let store = store.clone();
            async move { store.wait_until_ready().await }
        });
        writer.apply(&Event::Init);
        writer.apply(&Event::InitApply(item("a", 1)));
        writer.apply(&Event::InitDone);
        assert_eq!(waiting.await.ok(), Some(Ok(())));

        let (store, writer) = kept_store(key);
        drop(writer);
        assert_eq!(store.wait_until_ready().await, Err(WriterDropped));
    }
}
