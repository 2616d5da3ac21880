//! The two watches the zone is made from (ServiceImports and MCS EndpointSlices), turned into
//! [`Catalog`] changes and the set of services they changed, for the next
//! [`Zone::updated`](super::Zone::updated). A relist is collected aside and applied whole once
//! complete, changing only the services whose records differ, so readers never see a
//! half-listed state and a relist of an unchanged cluster re-encodes nothing.

use std::collections::{BTreeSet, HashMap};

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::catalog::{Catalog, ImportRecord, SliceRecord};

/// One event of a watch, as the watch library reports it.
#[derive(Debug, Clone, Copy)]
pub enum WatchEvent<'a, K> {
    /// Created or changed.
    Applied(&'a K),
    Deleted(&'a K),
    /// A (re)list begins; the objects that follow as [`Self::Listed`] are the whole state.
    ListStarted,
    Listed(&'a K),
    /// The list is complete.
    ListDone,
}

/// Watch events in, catalog and changed services out.
#[derive(Debug, Default)]
pub struct Feed {
    catalog: Catalog,
    listing_imports: Option<HashMap<ServiceKey, ImportRecord>>,
    listing_slices: Option<HashMap<ObjectKey, SliceRecord>>,
    imports_listed: bool,
    slices_listed: bool,
    changed: BTreeSet<ServiceKey>,
}

fn import_key(import: &ServiceImport) -> Option<ServiceKey> {
    let meta = &import.metadata;
    Some(ServiceKey::new(
        meta.namespace.as_deref()?,
        meta.name.as_deref()?,
    ))
}

fn slice_key(slice: &EndpointSlice) -> Option<ObjectKey> {
    let meta = &slice.metadata;
    Some(ObjectKey::new(
        meta.namespace.as_deref()?,
        meta.name.as_deref()?,
    ))
}

impl Feed {
    /// An event of the ServiceImport watch.
    pub fn import_event(&mut self, event: WatchEvent<'_, ServiceImport>) {
        match event {
            WatchEvent::Applied(import) => {
                let Some(key) = import_key(import) else {
                    return;
                };
                // An import without a spec has nothing to answer: as good as gone.
                let record = ImportRecord::of(import).map(|(_, record)| record);
                if self.catalog.set_import(key.clone(), record) {
                    self.changed.insert(key);
                }
            }
            WatchEvent::Deleted(import) => {
                if let Some(key) = import_key(import)
                    && self.catalog.set_import(key.clone(), None)
                {
                    self.changed.insert(key);
                }
            }
            WatchEvent::ListStarted => self.listing_imports = Some(HashMap::new()),
            WatchEvent::Listed(import) => {
                if let Some((key, record)) = ImportRecord::of(import) {
                    self.listing_imports
                        .get_or_insert_default()
                        .insert(key, record);
                }
            }
            WatchEvent::ListDone => {
                let listed = self.listing_imports.take().unwrap_or_default();
                self.changed.extend(self.catalog.replace_imports(listed));
                self.imports_listed = true;
            }
        }
    }

    /// An event of the MCS EndpointSlice watch.
    pub fn slice_event(&mut self, event: WatchEvent<'_, EndpointSlice>) {
        match event {
            WatchEvent::Applied(slice) => {
                let Some(key) = slice_key(slice) else {
                    return;
                };
                // Without a service label the slice belongs to no service any more.
                let record = SliceRecord::of(slice).map(|(_, record)| record);
                self.changed.extend(self.catalog.set_slice(key, record));
            }
            WatchEvent::Deleted(slice) => {
                if let Some(key) = slice_key(slice) {
                    self.changed.extend(self.catalog.set_slice(key, None));
                }
            }
            WatchEvent::ListStarted => self.listing_slices = Some(HashMap::new()),
            WatchEvent::Listed(slice) => {
                if let Some((key, record)) = SliceRecord::of(slice) {
                    self.listing_slices
                        .get_or_insert_default()
                        .insert(key, record);
                }
            }
            WatchEvent::ListDone => {
                let listed = self.listing_slices.take().unwrap_or_default();
                self.changed.extend(self.catalog.replace_slices(listed));
                self.slices_listed = true;
            }
        }
    }

    /// Whether the ServiceImport and the EndpointSlice watch have each listed once.
    pub fn listed(&self) -> (bool, bool) {
        (self.imports_listed, self.slices_listed)
    }

    /// The services changed since the last call.
    pub fn take_changed(&mut self) -> BTreeSet<ServiceKey> {
        std::mem::take(&mut self.changed)
    }

    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_import, mk_slice};
    use atoll_api::multicluster::ServiceImportType;

    #[test]
    fn a_relist_is_applied_whole_once_done_and_changes_only_what_differs() {
        let hello = mk_import(
            "demo",
            "hello",
            ServiceImportType::ClusterSetIP,
            &["10.96.0.1"],
            &[],
        );
        let web = mk_import("demo", "web", ServiceImportType::Headless, &[], &[]);
        let slice = mk_slice("demo", "web", "c1", "IPv4", &[("10.1.0.1", None, true)]);
        let mut feed = Feed::default();
        feed.import_event(WatchEvent::ListStarted);
        feed.import_event(WatchEvent::Listed(&hello));
        feed.import_event(WatchEvent::Listed(&web));
        assert!(
            feed.catalog().is_empty(),
            "nothing is applied before the list is done"
        );
        feed.import_event(WatchEvent::ListDone);
        assert_eq!(feed.listed(), (true, false));
        feed.slice_event(WatchEvent::ListStarted);
        feed.slice_event(WatchEvent::Listed(&slice));
        feed.slice_event(WatchEvent::ListDone);
        assert_eq!(feed.listed(), (true, true));
        assert_eq!(
            feed.take_changed(),
            [
                ServiceKey::new("demo", "hello"),
                ServiceKey::new("demo", "web")
            ]
            .into()
        );
        // The watch restarts: hello unchanged, web gone.
        feed.import_event(WatchEvent::ListStarted);
        feed.import_event(WatchEvent::Listed(&hello));
        feed.import_event(WatchEvent::ListDone);
        feed.slice_event(WatchEvent::ListStarted);
        feed.slice_event(WatchEvent::Listed(&slice));
        feed.slice_event(WatchEvent::ListDone);
        assert_eq!(feed.take_changed(), [ServiceKey::new("demo", "web")].into());
        assert_eq!(feed.catalog().len(), (1, 1));
    }

    #[test]
    fn applied_and_deleted_objects_name_their_service() {
        let mut feed = Feed::default();
        let mut hello = mk_import(
            "demo",
            "hello",
            ServiceImportType::ClusterSetIP,
            &["10.96.0.1"],
            &[],
        );
        feed.import_event(WatchEvent::Applied(&hello));
        assert_eq!(
            feed.take_changed(),
            [ServiceKey::new("demo", "hello")].into()
        );
        // Without a spec it has nothing to answer.
        hello.spec = None;
        feed.import_event(WatchEvent::Applied(&hello));
        assert_eq!(
            feed.take_changed(),
            [ServiceKey::new("demo", "hello")].into()
        );
        feed.import_event(WatchEvent::Deleted(&hello));
        assert!(feed.take_changed().is_empty());
        let mut slice = mk_slice("demo", "web", "c1", "IPv4", &[("10.1.0.1", None, true)]);
        feed.slice_event(WatchEvent::Applied(&slice));
        assert_eq!(feed.take_changed(), [ServiceKey::new("demo", "web")].into());
        // Its service label removed: it leaves the service.
        slice.metadata.labels = None;
        feed.slice_event(WatchEvent::Applied(&slice));
        assert_eq!(feed.take_changed(), [ServiceKey::new("demo", "web")].into());
        assert!(feed.catalog().is_empty());
    }
}
