//! What the zone is made of, kept compactly: per service, the parts of its ServiceImport and MCS
//! EndpointSlices that DNS answers from. Watch events change the catalog one object at a time
//! and say which services they changed, so the zone rebuilds only those (see
//! [`Zone::updated`](super::Zone::updated)). Keeping these records instead of the objects
//! themselves is most of the server's memory saving: an EndpointSlice as deserialised is several
//! times the size of the few addresses and names DNS uses.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::multicluster::ServiceImportType;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// A port of a ServiceImport as DNS uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportPort {
    pub name: Option<String>,
    /// Lowercased, `tcp` when unset.
    pub protocol: String,
    pub port: i32,
}

/// The part of a ServiceImport the zone is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportRecord {
    pub kind: ServiceImportType,
    /// The parseable `spec.ips`, in order.
    pub ips: Vec<IpAddr>,
    pub ports: Vec<ImportPort>,
}

impl ImportRecord {
    /// The service and record of `import`; `None` without a namespace, name or spec (such an
    /// import has nothing to answer).
    pub fn of(import: &ServiceImport) -> Option<(ServiceKey, Self)> {
        let namespace = import.metadata.namespace.clone()?;
        let name = import.metadata.name.clone()?;
        let spec = import.spec.as_ref()?;
        let record = Self {
            kind: spec.type_,
            ips: spec.ips.iter().filter_map(|ip| ip.parse().ok()).collect(),
            ports: spec
                .ports
                .iter()
                .map(|p| ImportPort {
                    name: p.name.clone(),
                    protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                    port: p.port,
                })
                .collect(),
        };
        Some((ServiceKey { namespace, name }, record))
    }
}

/// A port of an MCS EndpointSlice as DNS uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlicePort {
    /// `None` when unset or empty.
    pub name: Option<String>,
    /// Lowercased, `tcp` when unset.
    pub protocol: String,
    pub port: i32,
}

/// A ready endpoint with at least one parseable address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyEndpoint {
    /// Lowercased; the dashed first address when the endpoint has no hostname.
    pub hostname: String,
    pub addresses: Vec<IpAddr>,
}

/// The part of an MCS EndpointSlice the zone is built from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceRecord {
    /// The service it belongs to (its `multicluster.kubernetes.io/service-name` label).
    pub service: String,
    /// Its source cluster, lowercased; empty when unlabelled.
    pub cluster: String,
    pub ports: Vec<SlicePort>,
    pub endpoints: Vec<ReadyEndpoint>,
}

impl SliceRecord {
    /// The key and record of `slice`; `None` without a namespace, name or service label.
    pub fn of(slice: &EndpointSlice) -> Option<(ObjectKey, Self)> {
        let namespace = slice.metadata.namespace.clone()?;
        let name = slice.metadata.name.clone()?;
        let labels = slice.metadata.labels.as_ref()?;
        let service = labels.get(labels::SERVICE_NAME)?.clone();
        let cluster = labels
            .get(labels::SOURCE_CLUSTER)
            .map(|c| c.to_ascii_lowercase())
            .unwrap_or_default();
        let ports = slice
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some(SlicePort {
                    name: p.name.clone().filter(|n| !n.is_empty()),
                    protocol: p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase(),
                    port: p.port?,
                })
            })
            .collect();
        // KEP-5939: a cluster the importer's selectors leave out serves no answers.
        let inactive = labels.get(labels::ACTIVE).map(String::as_str) == Some("false");
        let endpoints = slice
            .endpoints
            .iter()
            .filter(|_| !inactive)
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .filter_map(|e| {
                let addresses: Vec<IpAddr> =
                    e.addresses.iter().filter_map(|a| a.parse().ok()).collect();
                let first = addresses.first()?;
                let hostname = e
                    .hostname
                    .clone()
                    .unwrap_or_else(|| dashed(first))
                    .to_ascii_lowercase();
                Some(ReadyEndpoint {
                    hostname,
                    addresses,
                })
            })
            .collect();
        Some((
            ObjectKey { namespace, name },
            Self {
                service,
                cluster,
                ports,
                endpoints,
            },
        ))
    }
}

/// The records of every ServiceImport and MCS EndpointSlice of the cluster, by service.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    imports: HashMap<ServiceKey, ImportRecord>,
    /// Slices by the service they belong to, then by name.
    slices: HashMap<ServiceKey, BTreeMap<String, SliceRecord>>,
    /// The service each slice belongs to, by slice: a relabelled slice leaves its old service.
    owners: HashMap<ObjectKey, String>,
}

impl Catalog {
    /// A catalog of these objects.
    pub fn of(imports: &[&ServiceImport], slices: &[&EndpointSlice]) -> Self {
        let mut catalog = Self::default();
        for (key, record) in imports.iter().filter_map(|i| ImportRecord::of(i)) {
            catalog.set_import(key, Some(record));
        }
        for (key, record) in slices.iter().filter_map(|s| SliceRecord::of(s)) {
            catalog.set_slice(key, Some(record));
        }
        catalog
    }

    /// Every service with an import or a slice.
    pub fn services(&self) -> BTreeSet<ServiceKey> {
        self.imports
            .keys()
            .chain(self.slices.keys())
            .cloned()
            .collect()
    }

    /// The import of `service`, if any.
    pub fn import(&self, service: &ServiceKey) -> Option<&ImportRecord> {
        self.imports.get(service)
    }

    /// The slices of `service`, by name.
    pub fn slices(&self, service: &ServiceKey) -> impl Iterator<Item = &SliceRecord> {
        self.slices
            .get(service)
            .into_iter()
            .flat_map(|s| s.values())
    }

    /// Number of imports and of slices.
    pub fn len(&self) -> (usize, usize) {
        (self.imports.len(), self.owners.len())
    }

    /// Whether the catalog holds nothing.
    pub fn is_empty(&self) -> bool {
        self.imports.is_empty() && self.owners.is_empty()
    }

    /// Sets (or, with `None`, removes) the import of `service`; returns whether that changed
    /// anything DNS answers from.
    pub fn set_import(&mut self, service: ServiceKey, record: Option<ImportRecord>) -> bool {
        match record {
            Some(record) => {
                if self.imports.get(&service) == Some(&record) {
                    return false;
                }
                self.imports.insert(service, record);
                true
            }
            None => self.imports.remove(&service).is_some(),
        }
    }

    /// Sets (or removes) slice `key`; returns the services that changed (none, its service, or
    /// its old and its new one when it was relabelled).
    pub fn set_slice(&mut self, key: ObjectKey, record: Option<SliceRecord>) -> Vec<ServiceKey> {
        let mut changed = Vec::new();
        let old_service = self.owners.get(&key).cloned();
        if let Some(old_service) = &old_service {
            let old_key = ServiceKey::new(&key.namespace, old_service);
            let unchanged = record.as_ref().is_some_and(|new| {
                &new.service == old_service
                    && self.slices.get(&old_key).and_then(|s| s.get(&key.name)) == Some(new)
            });
            if unchanged {
                return changed;
            }
            if let Some(of_service) = self.slices.get_mut(&old_key) {
                of_service.remove(&key.name);
                if of_service.is_empty() {
                    self.slices.remove(&old_key);
                }
            }
            self.owners.remove(&key);
            changed.push(old_key);
        }
        if let Some(record) = record {
            let new_key = ServiceKey::new(&key.namespace, &record.service);
            self.owners.insert(key.clone(), record.service.clone());
            self.slices
                .entry(new_key.clone())
                .or_default()
                .insert(key.name, record);
            if !changed.contains(&new_key) {
                changed.push(new_key);
            }
        }
        changed
    }

    /// Replaces every import with `imports` (a relist); returns the services that changed.
    pub fn replace_imports(
        &mut self,
        imports: HashMap<ServiceKey, ImportRecord>,
    ) -> BTreeSet<ServiceKey> {
        let gone: Vec<ServiceKey> = self
            .imports
            .keys()
            .filter(|k| !imports.contains_key(*k))
            .cloned()
            .collect();
        let mut changed = BTreeSet::new();
        for key in gone {
            if self.set_import(key.clone(), None) {
                changed.insert(key);
            }
        }
        for (key, record) in imports {
            if self.set_import(key.clone(), Some(record)) {
                changed.insert(key);
            }
        }
        changed
    }

    /// Replaces every slice with `slices` (a relist); returns the services that changed.
    pub fn replace_slices(
        &mut self,
        slices: HashMap<ObjectKey, SliceRecord>,
    ) -> BTreeSet<ServiceKey> {
        let gone: Vec<ObjectKey> = self
            .owners
            .keys()
            .filter(|k| !slices.contains_key(*k))
            .cloned()
            .collect();
        let mut changed = BTreeSet::new();
        for key in gone {
            changed.extend(self.set_slice(key, None));
        }
        for (key, record) in slices {
            changed.extend(self.set_slice(key, Some(record)));
        }
        changed
    }
}

/// The hostname DNS uses for an endpoint without one: the address with `.`/`:` replaced by `-`
/// (IPv6 ending in `-` gets a `0`, as CoreDNS does).
fn dashed(address: &IpAddr) -> String {
    let mut s = address.to_string().replace(['.', ':'], "-");
    if s.ends_with('-') {
        s.push('0');
    }
    s
}
