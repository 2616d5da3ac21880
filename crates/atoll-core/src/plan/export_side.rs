//! Export side of a plan: the records and slice copies this member's hub namespace must hold
//! for its valid ServiceExports, and the Valid/Ready/Conflict conditions of those exports.

use std::collections::BTreeMap;

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService, NamespacePolicySpec};
use atoll_api::keys::{ObjectKey, ServiceKey};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::input::{Feedback, Observed};
use super::output::{ExportStatus, HubWrites, Published};
use crate::announce::transitions;
use crate::conditions::{Publication, export_conditions, same_conditions};
use crate::export::{self, Validity};
use crate::keys::{of_copy, of_service_slice};
use crate::merge::MergedService;

pub(super) fn plan(
    cluster: &str,
    observed: &Observed,
    policy: &NamespacePolicySpec,
    feedback: &Feedback,
    merged: &BTreeMap<ServiceKey, MergedService>,
    now: &Time,
) -> (HubWrites, Vec<ExportStatus>, Published) {
    let services: BTreeMap<ServiceKey, &Service> = observed
        .services
        .iter()
        .map(|s| (key_of(&s.metadata), s.as_ref()))
        .collect();
    let mut slices_by_service: BTreeMap<ServiceKey, Vec<&EndpointSlice>> = BTreeMap::new();
    for slice in &observed.service_slices {
        if let Some(service) = of_service_slice(slice) {
            slices_by_service.entry(service).or_default().push(slice);
        }
    }

    // What the hub should hold for each live export.
    let mut validity: BTreeMap<ServiceKey, Validity> = BTreeMap::new();
    let mut records: BTreeMap<String, (ServiceKey, ExportedService)> = BTreeMap::new();
    let mut copies: BTreeMap<String, ExportedEndpointSlice> = BTreeMap::new();
    for export in &observed.exports {
        if export.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let key = key_of(&export.metadata);
        let service = services.get(&key).copied();
        let verdict = match crate::namespaces::excluded(policy, &key.namespace) {
            Some(why) => Validity::NamespaceExcluded(why),
            None => Validity::of(export, service),
        };
        if let (Validity::Valid, Some(service)) = (&verdict, service) {
            let record = export::record(cluster, export, service);
            let name = record.metadata.name.clone().unwrap_or_default();
            for slice in slices_by_service.get(&key).into_iter().flatten() {
                let copy = export::hub_slice(cluster, &key.namespace, &key.name, slice);
                copies.insert(copy.metadata.name.clone().unwrap_or_default(), copy);
            }
            records.insert(name, (key.clone(), record));
        }
        validity.insert(key, verdict);
    }

    let mut published = Published::new();
    for (name, (key, _)) in &records {
        published
            .entry(key.clone())
            .or_default()
            .push(crate::liveness::record_claim_name(name));
    }
    for (name, copy) in &copies {
        published
            .entry(of_copy(copy))
            .or_default()
            .push(crate::liveness::copy_claim_name(name));
    }
    let own = hub::namespace_for(cluster);
    let mut writes = HubWrites::default();
    // A record is current only if spec and labels are equal: a field dropped from the export
    // (say, an exported label) must reach the hub too, which containment would not notice.
    let (apply, delete) = sync(
        &own,
        &observed.records,
        records.iter().map(|(n, (_, r))| (n, r)),
        |o, d| o.spec == d.spec && o.metadata.labels == d.metadata.labels,
    );
    let pending: std::collections::BTreeSet<ServiceKey> = apply
        .iter()
        .filter_map(|n| records.get(n))
        .map(|(k, _)| k.clone())
        .collect();
    writes.apply_records = apply
        .iter()
        .filter_map(|n| records.get(n))
        .map(|(_, r)| r.clone())
        .collect();
    writes.delete_records = delete;
    let (apply, delete) = sync(&own, &observed.hub_slices, copies.iter(), |o, d| {
        o.spec == d.spec && o.metadata.labels == d.metadata.labels
    });
    // Copies still to write: their export is Ready only once they are on the hub too.
    let copies_pending: std::collections::BTreeSet<ServiceKey> = apply
        .iter()
        .filter_map(|n| copies.get(n))
        .map(of_copy)
        .collect();
    writes.apply_slices = apply
        .iter()
        .filter_map(|n| copies.get(n))
        .cloned()
        .collect();
    writes.delete_slices = delete;

    let mut statuses = Vec::new();
    for export in &observed.exports {
        let key = key_of(&export.metadata);
        let Some(verdict) = validity.get(&key) else {
            continue;
        };
        let record_failure = pending
            .contains(&key)
            .then(|| feedback.publish_failures.get(&key))
            .flatten()
            .map(|refusal| refusal.message.clone());
        let copy_failure = copies_pending
            .contains(&key)
            .then(|| feedback.copy_failures.get(&key))
            .flatten()
            .map(|(name, refusal)| format!("endpoint copy {name}: {}", refusal.message));
        let publication = match (
            record_failure.or(copy_failure),
            pending.contains(&key) || copies_pending.contains(&key),
        ) {
            (Some(message), _) => Publication::Failed(message),
            // Written in this pass: Ready is set once the hub is seen holding it.
            (None, true) => continue,
            (None, false) => Publication::Published,
        };
        let conflict = merged
            .get(&key)
            .filter(|m| m.clusters.iter().any(|c| c == cluster))
            .map(|m| (&m.conflicts, m.winner.as_str()));
        let previous = export
            .status
            .as_ref()
            .map(|s| s.conditions.as_slice())
            .unwrap_or_default();
        let conditions = export_conditions(verdict, &publication, conflict, previous, now);
        if !same_conditions(previous, &conditions) {
            statuses.push(ExportStatus {
                key: ObjectKey::new(&key.namespace, &key.name),
                uid: export.metadata.uid.clone(),
                announcements: transitions(previous, &conditions),
                conditions,
            });
        }
    }
    (writes, statuses, published)
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> ServiceKey {
    ServiceKey {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
    }
}

/// Which of `desired` (by name) to apply in `namespace`, given what `observed` holds there, and
/// which observed objects there to delete because they are not desired.
fn sync<'a, K>(
    namespace: &str,
    observed: &[std::sync::Arc<K>],
    desired: impl Iterator<Item = (&'a String, &'a K)>,
    current: impl Fn(&K, &K) -> bool,
) -> (Vec<String>, Vec<ObjectKey>)
where
    K: kube_meta::HasMeta + 'a,
{
    let here: BTreeMap<&str, &K> = observed
        .iter()
        .filter(|o| o.meta().namespace.as_deref() == Some(namespace))
        .map(|o| (o.meta().name.as_deref().unwrap_or_default(), o.as_ref()))
        .collect();
    let mut wanted = std::collections::BTreeSet::new();
    let mut apply = Vec::new();
    for (name, want) in desired {
        wanted.insert(name.as_str());
        if !here.get(name.as_str()).is_some_and(|o| current(o, want)) {
            apply.push(name.clone());
        }
    }
    let delete = here
        .keys()
        .filter(|name| !wanted.contains(*name))
        .map(|name| ObjectKey::new(namespace, name))
        .collect();
    (apply, delete)
}

/// Access to the metadata of the hub object kinds, without depending on a client crate.
mod kube_meta {
    use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    pub(crate) trait HasMeta {
        fn meta(&self) -> &ObjectMeta;
    }

    impl HasMeta for ExportedService {
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
    }

    impl HasMeta for ExportedEndpointSlice {
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
    }
}
