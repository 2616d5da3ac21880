//! Hub objects are untrusted input: any writer of the hub could have made them, and a member
//! may write anything into its own hub namespace. A record or a slice copy is used only if it
//! is consistent with the member namespace it is stored in and every field passes the checks
//! of [`crate::validate`].

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};

use crate::validate::{self, Family, Problem};

/// Why a hub record is not trusted, with its reason, if it is not.
pub fn record_rejection(record: &ExportedService) -> Option<Problem> {
    validate::record::record(record).err()
}

/// Why a hub record is not trusted, if it is not.
pub fn record_problem(record: &ExportedService) -> Option<String> {
    record_rejection(record).map(|p| p.message)
}

/// `(service namespace, service name, source cluster)` of a hub slice copy, when it is stored in
/// the hub namespace of the cluster it names and that cluster id is valid.
pub fn slice_copy_owner(copy: &ExportedEndpointSlice) -> Option<(String, String, String)> {
    let spec = &copy.spec;
    validate::record::owner(&spec.cluster, copy.metadata.namespace.as_deref()).ok()?;
    Some((
        spec.namespace.clone(),
        spec.service.clone(),
        spec.cluster.clone(),
    ))
}

/// The family of a hub slice copy whose own fields may be used, or why not.
pub fn copy_family(copy: &ExportedEndpointSlice) -> Result<Family, Problem> {
    validate::endpoints::copy(copy)
}
