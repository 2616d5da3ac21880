//! The two watches the zone is made from (ServiceImports and MCS EndpointSlices), turned into
//! [`Catalog`] changes and the set of services they changed, for the next
//! [`Zone::updated`](super::Zone::updated). A relist is collected aside and applied whole once
//! complete, changing only the services whose records differ, so readers never see a
//! half-listed state and a relist of an unchanged cluster re-encodes nothing. Slices no trusted
//! controller manages ([`SliceTrust`]) count as absent, and are kept aside by name to be
//! counted and reported once each.

use std::collections::{BTreeSet, HashMap};

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::catalog::{Catalog, ImportRecord, SliceRecord};
use super::trust::SliceTrust;

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

/// Untrusted MCS EndpointSlices by name, with their `managed-by` value (if any).
type Untrusted = HashMap<ObjectKey, Option<String>>;

/// Watch events in, catalog and changed services out.
#[derive(Debug, Default)]
pub struct Feed {
    trust: SliceTrust,
    catalog: Catalog,
    listing_imports: Option<HashMap<ServiceKey, ImportRecord>>,
    listing_slices: Option<HashMap<ObjectKey, SliceRecord>>,
    imports_listed: bool,
    slices_listed: bool,
    changed: BTreeSet<ServiceKey>,
    untrusted: Untrusted,
    listing_untrusted: Option<Untrusted>,
    /// Untrusted slices not reported yet (new ones, or with another `managed-by` than before).
    unreported: Vec<(ObjectKey, Option<String>)>,
}

/// What a slice event means for the zone.
enum Slice {
    /// It belongs to the zone, as this record.
    Trusted(ObjectKey, SliceRecord),
    /// It would, but no trusted controller manages it: the `managed-by` value it has.
    Untrusted(ObjectKey, Option<String>),
    /// It belongs to no service (no service label, or no name).
    Neither,
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
    /// A feed that answers from the slices `trust` allows.
    pub fn new(trust: SliceTrust) -> Self {
        Self {
            trust,
            ..Self::default()
        }
    }

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

    fn classify(&self, slice: &EndpointSlice) -> Slice {
        let Some((key, record)) = SliceRecord::of(slice) else {
            return Slice::Neither;
        };
        match self.trust.check(slice) {
            Ok(()) => Slice::Trusted(key, record),
            Err(manager) => Slice::Untrusted(key, manager),
        }
    }

    /// Notes `key` as untrusted, to be reported unless it already was with this `managed-by`.
    fn distrust(&mut self, key: ObjectKey, manager: Option<String>) {
        if self.untrusted.get(&key) != Some(&manager) {
            self.unreported.push((key.clone(), manager.clone()));
            self.untrusted.insert(key, manager);
        }
    }

    /// An event of the MCS EndpointSlice watch.
    pub fn slice_event(&mut self, event: WatchEvent<'_, EndpointSlice>) {
        match event {
            WatchEvent::Applied(slice) => {
                let Some(key) = slice_key(slice) else {
                    return;
                };
                // Without a service label, or untrusted, the slice belongs to no service (any
                // more).
                let record = match self.classify(slice) {
                    Slice::Trusted(_, record) => {
                        self.untrusted.remove(&key);
                        Some(record)
                    }
                    Slice::Untrusted(_, manager) => {
                        self.distrust(key.clone(), manager);
                        None
                    }
                    Slice::Neither => {
                        self.untrusted.remove(&key);
                        None
                    }
                };
                self.changed.extend(self.catalog.set_slice(key, record));
            }
            WatchEvent::Deleted(slice) => {
                if let Some(key) = slice_key(slice) {
                    self.untrusted.remove(&key);
                    self.changed.extend(self.catalog.set_slice(key, None));
                }
            }
            WatchEvent::ListStarted => {
                self.listing_slices = Some(HashMap::new());
                self.listing_untrusted = Some(HashMap::new());
            }
            WatchEvent::Listed(slice) => match self.classify(slice) {
                Slice::Trusted(key, record) => {
                    self.listing_slices
                        .get_or_insert_default()
                        .insert(key, record);
                }
                Slice::Untrusted(key, manager) => {
                    self.listing_untrusted
                        .get_or_insert_default()
                        .insert(key, manager);
                }
                Slice::Neither => {}
            },
            WatchEvent::ListDone => {
                let listed = self.listing_slices.take().unwrap_or_default();
                self.changed.extend(self.catalog.replace_slices(listed));
                let untrusted = self.listing_untrusted.take().unwrap_or_default();
                self.untrusted.retain(|key, _| untrusted.contains_key(key));
                for (key, manager) in untrusted {
                    self.distrust(key, manager);
                }
                self.slices_listed = true;
            }
        }
    }

    /// MCS EndpointSlices ignored now because no trusted controller manages them.
    pub fn untrusted(&self) -> usize {
        self.untrusted.len()
    }

    /// The untrusted slices not reported yet, each with its `managed-by` value: every slice is
    /// reported once (again only if its `managed-by` changes).
    pub fn take_unreported(&mut self) -> Vec<(ObjectKey, Option<String>)> {
        std::mem::take(&mut self.unreported)
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
    fn untrusted_slices_count_as_absent_and_are_reported_once() {
        let web = mk_import("demo", "web", ServiceImportType::Headless, &[], &[]);
        let atoll = mk_slice("demo", "web", "c1", "IPv4", &[("10.1.0.1", None, true)]);
        let mut forged = mk_slice("demo", "web", "c2", "IPv4", &[("10.6.6.6", None, true)]);
        forged.metadata.name = Some("forged".to_owned());
        if let Some(labels) = forged.metadata.labels.as_mut() {
            labels.remove(atoll_api::labels::ENDPOINTSLICE_MANAGED_BY);
        }
        let forged_key = ObjectKey::new("demo", "forged");
        let mut feed = Feed::default();
        feed.import_event(WatchEvent::Applied(&web));
        feed.slice_event(WatchEvent::Applied(&atoll));
        feed.slice_event(WatchEvent::Applied(&forged));
        assert_eq!(
            feed.catalog().len(),
            (1, 1),
            "the forged slice is not in the catalog"
        );
        assert_eq!(feed.untrusted(), 1);
        assert_eq!(feed.take_unreported(), [(forged_key.clone(), None)]);
        // Seen again (a status write, a relist): counted, not reported again.
        feed.slice_event(WatchEvent::Applied(&forged));
        for event in [
            WatchEvent::ListStarted,
            WatchEvent::Listed(&atoll),
            WatchEvent::Listed(&forged),
            WatchEvent::ListDone,
        ] {
            feed.slice_event(event);
        }
        assert_eq!(feed.untrusted(), 1);
        assert!(feed.take_unreported().is_empty());
        // A trusted slice that loses its managed-by leaves its service.
        feed.take_changed();
        let mut relabelled = atoll.clone();
        if let Some(labels) = relabelled.metadata.labels.as_mut() {
            labels.insert(
                atoll_api::labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
                "someone".to_owned(),
            );
        }
        feed.slice_event(WatchEvent::Applied(&relabelled));
        assert_eq!(feed.take_changed(), [ServiceKey::new("demo", "web")].into());
        assert_eq!(feed.catalog().len(), (1, 0));
        assert_eq!(feed.untrusted(), 2);
        assert_eq!(feed.take_unreported().len(), 1);
        // Deleted, or gone from a relist: no longer counted.
        feed.slice_event(WatchEvent::Deleted(&forged));
        assert_eq!(feed.untrusted(), 1);
        feed.slice_event(WatchEvent::ListStarted);
        feed.slice_event(WatchEvent::ListDone);
        assert_eq!(feed.untrusted(), 0);
        // A feed told to trust the other controller serves its slices.
        let mut wider = Feed::new(SliceTrust::with_managers(["someone".to_owned()]));
        wider.slice_event(WatchEvent::Applied(&relabelled));
        assert_eq!((wider.catalog().len(), wider.untrusted()), ((0, 1), 0));
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
