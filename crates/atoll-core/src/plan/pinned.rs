//! The services a pinned source cluster takes part in (see `crate::liveness`: a cluster whose
//! hub objects this importer cannot judge yet). Their imports, derived Services and MCS slices
//! are left exactly as they are until the cluster is judged, so an importer that starts against
//! a wiped or restored hub deletes nothing before the grace.

use std::collections::BTreeSet;

use atoll_api::keys::ServiceKey;
use atoll_api::labels;

use super::input::Observed;
use crate::keys::{of_mcs_slice, of_record};

/// Every service a pinned cluster takes part in, as this member and the hub show it: its MCS
/// slices here, imports that name it as a source, and its records on the hub now (not for a
/// cluster pinned only because it has not been seen to beat: nothing of it is here to keep).
pub fn pinned_services(observed: &Observed) -> BTreeSet<ServiceKey> {
    let pinned = &observed.liveness.pinned;
    if pinned.is_empty() {
        return BTreeSet::new();
    }
    let mut services = BTreeSet::new();
    for slice in &observed.mcs_slices {
        let source = slice.label(labels::SOURCE_CLUSTER);
        if source.is_some_and(|c| pinned.contains(c))
            && let Some(key) = of_mcs_slice(slice)
        {
            services.insert(key);
        }
    }
    for import in &observed.imports {
        let names_pinned = import
            .status
            .as_ref()
            .is_some_and(|s| s.clusters.iter().any(|c| pinned.contains(&c.cluster)));
        if names_pinned {
            services.insert(ServiceKey::new(
                import.metadata.namespace.as_deref().unwrap_or_default(),
                import.metadata.name.as_deref().unwrap_or_default(),
            ));
        }
    }
    for record in &observed.records {
        let cluster = record
            .metadata
            .namespace
            .as_deref()
            .and_then(|ns| ns.strip_prefix(atoll_api::hub::NAMESPACE_PREFIX));
        let unconfirmed = |c: &str| observed.liveness.unconfirmed.contains(c);
        if cluster.is_some_and(|c| pinned.contains(c) && !unconfirmed(c)) {
            services.insert(of_record(record));
        }
    }
    services
}
