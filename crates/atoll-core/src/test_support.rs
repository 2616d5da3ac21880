//! Builders shared by the unit tests of several modules.

use atoll_api::hub::ExportedEndpointSlice;
use atoll_api::multicluster::ServicePort;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};

/// `cluster`'s hub copy of a slice of `demo/web` of `address_type`, one endpoint per address.
pub(crate) fn copy_of(
    cluster: &str,
    address_type: &str,
    addresses: &[&str],
) -> ExportedEndpointSlice {
    let slice = EndpointSlice {
        address_type: address_type.into(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![(*a).into()],
                ..Default::default()
            })
            .collect(),
        metadata: Default::default(),
        ports: None,
    };
    crate::export::hub_slice(cluster, "demo", "web", &slice)
}

/// An MCS port; an empty `name` means an unnamed port.
pub(crate) fn port(name: &str, protocol: &str, number: i32) -> ServicePort {
    ServicePort {
        name: (!name.is_empty()).then(|| name.to_owned()),
        protocol: Some(protocol.to_owned()),
        app_protocol: None,
        port: number,
    }
}
