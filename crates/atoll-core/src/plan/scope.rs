//! Which service a Service concerns (the keys of other objects are in [`crate::keys`]; a
//! Service's depends on whether Atoll owns it), and the part of what was observed that
//! concerns some services only.
//!
//! A pass over a few services plans from [`Observed::restrict`]: the objects of those services
//! and nothing else. Every decision of a plan is made per service (a merge, a record, an
//! import, its slices, the deletion of what a service no longer wants), so the writes of a
//! pass over the services `S` are exactly the writes a full pass makes for `S` (the
//! `scoped` tests check this on random worlds). Objects that concern no service (an MCS slice
//! without its service label, say) only a full pass looks at.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ServiceKey;
use atoll_api::labels;
use k8s_openapi::api::core::v1::Service;

use crate::keys::{
    KeyRef, copy_ref, labelled_ref, mcs_slice_ref, named, named_ref, of_copy, of_mcs_slice,
    of_record, of_service_slice, owned, record_ref,
};

use super::input::{Observed, Sources};

fn service_ref(service: &Service) -> Option<KeyRef<'_>> {
    let meta = &service.metadata;
    match labelled_ref(meta, labels::SERVICE_NAME) {
        Some(import) if crate::diff::owned(meta.labels.as_ref()) => Some(import),
        _ => named_ref(meta),
    }
}

/// The service a Service concerns: for a derived Service (Atoll's, labelled with the import
/// it carries the VIP of) that import, for any other Service itself.
pub fn of_service(service: &Service) -> Option<ServiceKey> {
    service_ref(service).map(owned)
}

/// A set of services, looked up without allocating (a pass filters every observed object):
/// a few keys (the usual scope of a pass: the services one change concerns) are compared one
/// by one, cheaper than hashing both names of every object; more keys are looked up with a
/// fast hash (the keys are not chosen by an attacker's input alone, and a collision costs
/// time, never a wrong answer).
enum Lookup<'a> {
    Few(Vec<(&'a str, &'a str)>),
    Many(HashMap<&'a str, HashSet<&'a str, Fast>, Fast>),
}

type Fast = foldhash::fast::RandomState;

/// Up to how many keys a lookup compares one by one.
const FEW: usize = 8;

impl<'a> Lookup<'a> {
    fn new(keys: &'a BTreeSet<ServiceKey>) -> Self {
        if keys.len() <= FEW {
            return Self::Few(
                keys.iter()
                    .map(|k| (k.namespace.as_str(), k.name.as_str()))
                    .collect(),
            );
        }
        let mut by_namespace: HashMap<&str, HashSet<&str, Fast>, Fast> = HashMap::default();
        for key in keys {
            by_namespace
                .entry(&key.namespace)
                .or_default()
                .insert(&key.name);
        }
        Self::Many(by_namespace)
    }

    fn is_empty(&self) -> bool {
        match self {
            Self::Few(keys) => keys.is_empty(),
            Self::Many(by_namespace) => by_namespace.is_empty(),
        }
    }

    fn has(&self, key: Option<KeyRef<'_>>) -> bool {
        let Some((namespace, name)) = key else {
            return false;
        };
        match self {
            Self::Few(keys) => keys.iter().any(|&(ns, n)| n == name && ns == namespace),
            Self::Many(by_namespace) => by_namespace
                .get(namespace)
                .is_some_and(|names| names.contains(name)),
        }
    }
}

fn keep<K>(
    objects: &[Arc<K>],
    lookup: &Lookup<'_>,
    key: impl Fn(&K) -> Option<KeyRef<'_>>,
) -> Vec<Arc<K>> {
    if lookup.is_empty() {
        return Vec::new();
    }
    objects
        .iter()
        .filter(|o| lookup.has(key(o)))
        .cloned()
        .collect()
}

impl Observed {
    /// What was observed of the services `keys`; what concerns no service (namespaces,
    /// policies, properties, the profile, the importer's own ranges, liveness) is kept whole.
    pub fn restrict(&self, keys: &BTreeSet<ServiceKey>) -> Observed {
        let lookup = Lookup::new(keys);
        let l = &lookup;
        let records = |r: &[Arc<ExportedService>]| keep(r, l, |r| Some(record_ref(r)));
        let copies = |c: &[Arc<ExportedEndpointSlice>]| keep(c, l, |c| Some(copy_ref(c)));
        Observed {
            exports: keep(&self.exports, l, |e| named_ref(&e.metadata)),
            services: keep(&self.services, l, service_ref),
            service_slices: keep(&self.service_slices, l, |s| {
                labelled_ref(&s.metadata, labels::KUBERNETES_SERVICE_NAME)
            }),
            mcs_slices: keep(&self.mcs_slices, l, mcs_slice_ref),
            namespaces: self.namespaces.clone(),
            imports: keep(&self.imports, l, |i| named_ref(&i.metadata)),
            records: records(&self.records),
            hub_slices: copies(&self.hub_slices),
            policies: self.policies.clone(),
            properties: self.properties.clone(),
            profiles: self.profiles.clone(),
            service_cidrs: self.service_cidrs.clone(),
            denied_cidrs: self.denied_cidrs.clone(),
            node_addresses: self.node_addresses.clone(),
            liveness: self.liveness.clone(),
            sources: self.sources.as_ref().map(|s| Sources {
                records: records(&s.records),
                copies: copies(&s.copies),
            }),
            unlisted: self.unlisted.clone(),
            // Read by the liveness tracker on the whole view, before any restriction.
            beats_seen: Default::default(),
            selections: self.selections.clone(),
        }
    }

    /// Every service some observed object concerns.
    pub fn service_keys(&self) -> BTreeSet<ServiceKey> {
        let mut keys = BTreeSet::new();
        keys.extend(self.exports.iter().filter_map(|e| named(&e.metadata)));
        keys.extend(self.services.iter().filter_map(|s| of_service(s)));
        keys.extend(
            self.service_slices
                .iter()
                .filter_map(|s| of_service_slice(s)),
        );
        keys.extend(self.mcs_slices.iter().filter_map(|s| of_mcs_slice(s)));
        keys.extend(self.imports.iter().filter_map(|i| named(&i.metadata)));
        keys.extend(self.records.iter().map(|r| of_record(r)));
        keys.extend(self.hub_slices.iter().map(|c| of_copy(c)));
        if let Some(sources) = &self.sources {
            keys.extend(sources.records.iter().map(|r| of_record(r)));
            keys.extend(sources.copies.iter().map(|c| of_copy(c)));
        }
        keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both ways of looking up (a few keys compared, more hashed) answer as the set does,
    /// at every scope size around the switch between them.
    #[test]
    fn a_lookup_answers_as_its_set_does() {
        let universe: Vec<ServiceKey> = ["a", "b", "ab"]
            .iter()
            .flat_map(|ns| (0..6).map(move |i| ServiceKey::new(ns, &format!("svc-{i}"))))
            .collect();
        for size in 0..universe.len() {
            let keys: BTreeSet<ServiceKey> =
                universe.iter().step_by(2).take(size).cloned().collect();
            let lookup = Lookup::new(&keys);
            assert_eq!(lookup.is_empty(), keys.is_empty());
            assert_eq!(matches!(lookup, Lookup::Few(_)), keys.len() <= FEW);
            for key in &universe {
                let found = lookup.has(Some((key.namespace.as_str(), key.name.as_str())));
                assert_eq!(
                    found,
                    keys.contains(key),
                    "{key:?} with {} keys",
                    keys.len()
                );
            }
            assert!(!lookup.has(None));
        }
    }
}
