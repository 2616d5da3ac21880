//! The service an object names, read from its own names and labels only. A leaf of the
//! crate: the plan, the liveness view and the dirty queue all key services this way.
//!
//! Each helper comes borrowed (`*_ref`, a [`KeyRef`] into the object, for filtering without
//! allocating) and owned (a [`ServiceKey`]).

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ServiceKey;
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// `(namespace, name)` of a service, borrowed from the object that concerns it.
pub type KeyRef<'a> = (&'a str, &'a str);

/// The service key of a borrowed one.
pub fn owned((namespace, name): KeyRef<'_>) -> ServiceKey {
    ServiceKey::new(namespace, name)
}

/// The object's own namespace and name.
pub fn named_ref(meta: &ObjectMeta) -> Option<KeyRef<'_>> {
    Some((meta.namespace.as_deref()?, meta.name.as_deref()?))
}

/// The object's namespace and the service its `label` names.
pub fn labelled_ref<'a>(meta: &'a ObjectMeta, label: &str) -> Option<KeyRef<'a>> {
    let name = meta.labels.as_ref()?.get(label)?;
    Some((meta.namespace.as_deref()?, name.as_str()))
}

pub fn record_ref(record: &ExportedService) -> KeyRef<'_> {
    (&record.spec.namespace, &record.spec.name)
}

pub fn copy_ref(copy: &ExportedEndpointSlice) -> KeyRef<'_> {
    (&copy.spec.namespace, &copy.spec.service)
}

/// The service a namespaced object of that service's name concerns (a ServiceExport, a
/// ServiceImport).
pub fn named(meta: &ObjectMeta) -> Option<ServiceKey> {
    named_ref(meta).map(owned)
}

/// The service a local EndpointSlice belongs to.
pub fn of_service_slice(slice: &EndpointSlice) -> Option<ServiceKey> {
    labelled_ref(&slice.metadata, labels::KUBERNETES_SERVICE_NAME).map(owned)
}

/// The imported service an MCS EndpointSlice belongs to, borrowed.
pub fn mcs_slice_ref(slice: &McsSlice) -> Option<KeyRef<'_>> {
    Some((&slice.namespace, slice.label(labels::SERVICE_NAME)?))
}

/// The imported service an MCS EndpointSlice belongs to.
pub fn of_mcs_slice(slice: &McsSlice) -> Option<ServiceKey> {
    mcs_slice_ref(slice).map(owned)
}

/// The service a hub record describes.
pub fn of_record(record: &ExportedService) -> ServiceKey {
    owned(record_ref(record))
}

/// The service a hub slice copy says it belongs to (even when it is stored in the wrong
/// namespace, so a full pass and a pass over that service judge it alike).
pub fn of_copy(copy: &ExportedEndpointSlice) -> ServiceKey {
    owned(copy_ref(copy))
}
