//! Which services an object concerns, and the part of what was observed that concerns some
//! services only.
//!
//! A pass over a few services plans from [`Observed::restrict`]: the objects of those services
//! and nothing else. Every decision of a plan is made per service (a merge, a record, an
//! import, its slices, the deletion of what a service no longer wants), so the writes of a
//! pass over the services `S` are exactly the writes a full pass makes for `S` (the
//! `scoped` tests check this on random worlds). Objects that concern no service (an MCS slice
//! without its service label, say) only a full pass looks at.

use std::collections::BTreeSet;
use std::sync::Arc;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::labels;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::{Observed, ServiceKey, Sources};
use crate::trust::slice_copy_owner;

/// The service a namespaced object of that service's name concerns (a ServiceExport, a
/// ServiceImport).
pub fn named(meta: &ObjectMeta) -> Option<ServiceKey> {
    Some((meta.namespace.clone()?, meta.name.clone()?))
}

/// The service a Service concerns: for a derived Service (Atoll's, labelled with the import
/// it carries the VIP of) that import, for any other Service itself.
pub fn of_service(service: &Service) -> Option<ServiceKey> {
    let meta = &service.metadata;
    match labelled(meta, labels::SERVICE_NAME) {
        Some(import) if crate::diff::owned(meta.labels.as_ref()) => Some(import),
        _ => named(meta),
    }
}

/// The service a local EndpointSlice belongs to.
pub fn of_service_slice(slice: &EndpointSlice) -> Option<ServiceKey> {
    labelled(&slice.metadata, labels::KUBERNETES_SERVICE_NAME)
}

/// The imported service an MCS EndpointSlice belongs to.
pub fn of_mcs_slice(slice: &EndpointSlice) -> Option<ServiceKey> {
    labelled(&slice.metadata, labels::SERVICE_NAME)
}

/// The service a hub record describes.
pub fn of_record(record: &ExportedService) -> ServiceKey {
    (record.spec.namespace.clone(), record.spec.name.clone())
}

/// The service a hub slice copy belongs to: the one it says (even when it is stored in the
/// wrong namespace, so a full pass and a pass over that service judge it alike).
pub fn of_copy(copy: &ExportedEndpointSlice) -> ServiceKey {
    slice_copy_owner(copy).map_or_else(
        || (copy.spec.namespace.clone(), copy.spec.service.clone()),
        |(namespace, service, _)| (namespace, service),
    )
}

fn labelled(meta: &ObjectMeta, label: &str) -> Option<ServiceKey> {
    let name = meta.labels.as_ref()?.get(label)?;
    Some((meta.namespace.clone()?, name.clone()))
}

fn keep<K>(
    objects: &[Arc<K>],
    keys: &BTreeSet<ServiceKey>,
    concerns: impl Fn(&K) -> bool,
) -> Vec<Arc<K>> {
    if keys.is_empty() {
        return Vec::new();
    }
    objects.iter().filter(|o| concerns(o)).cloned().collect()
}

impl Observed {
    /// What was observed of the services `keys`; what concerns no service (namespaces,
    /// policies, properties, the profile, liveness) is kept whole.
    pub fn restrict(&self, keys: &BTreeSet<ServiceKey>) -> Observed {
        let has = |key: Option<ServiceKey>| key.is_some_and(|k| keys.contains(&k));
        let records = |r: &[Arc<ExportedService>]| keep(r, keys, |r| keys.contains(&of_record(r)));
        let copies =
            |c: &[Arc<ExportedEndpointSlice>]| keep(c, keys, |c| keys.contains(&of_copy(c)));
        Observed {
            exports: keep(&self.exports, keys, |e| has(named(&e.metadata))),
            services: keep(&self.services, keys, |s| has(of_service(s))),
            service_slices: keep(&self.service_slices, keys, |s| has(of_service_slice(s))),
            mcs_slices: keep(&self.mcs_slices, keys, |s| has(of_mcs_slice(s))),
            namespaces: self.namespaces.clone(),
            imports: keep(&self.imports, keys, |i| has(named(&i.metadata))),
            records: records(&self.records),
            hub_slices: copies(&self.hub_slices),
            policies: self.policies.clone(),
            properties: self.properties.clone(),
            profiles: self.profiles.clone(),
            liveness: self.liveness.clone(),
            sources: self.sources.as_ref().map(|s| Sources {
                records: records(&s.records),
                copies: copies(&s.copies),
            }),
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
