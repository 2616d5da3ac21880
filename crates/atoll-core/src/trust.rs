//! Hub objects are untrusted input: any writer of the hub could have made them. A record or a
//! slice copy is used only if it is consistent with the member namespace it is stored in.

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService};

use crate::cluster_id::{ClusterId, is_dns_label};

/// Why a hub record is not trusted, if it is not.
pub fn record_problem(record: &ExportedService) -> Option<String> {
    let spec = &record.spec;
    if let Err(e) = ClusterId::new(&spec.cluster) {
        return Some(e.to_string());
    }
    if record.metadata.namespace.as_deref() != Some(hub::namespace_for(&spec.cluster).as_str()) {
        return Some(format!(
            "claims cluster {} but is stored in another member's namespace",
            spec.cluster
        ));
    }
    let label = |s: &str| s.len() <= 63 && is_dns_label(s);
    if !label(&spec.namespace) || !label(&spec.name) {
        return Some("namespace or name is not a DNS label".to_owned());
    }
    if record.metadata.name.as_deref()
        != Some(hub::record_name(&spec.namespace, &spec.name).as_str())
    {
        return Some("object name does not match the service it describes".to_owned());
    }
    None
}

/// `(service namespace, service name, source cluster)` of a hub slice copy, when it is stored in
/// the hub namespace of the cluster it names and that cluster id is valid.
pub fn slice_copy_owner(copy: &ExportedEndpointSlice) -> Option<(String, String, String)> {
    let spec = &copy.spec;
    ClusterId::new(&spec.cluster).ok()?;
    (copy.metadata.namespace.as_deref() == Some(hub::namespace_for(&spec.cluster).as_str())).then(
        || {
            (
                spec.namespace.clone(),
                spec.service.clone(),
                spec.cluster.clone(),
            )
        },
    )
}
