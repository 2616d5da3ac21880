//! Builders shared by the unit tests of several modules.

use atoll_api::multicluster::ServicePort;

/// An MCS port; an empty `name` means an unnamed port.
pub(crate) fn port(name: &str, protocol: &str, number: i32) -> ServicePort {
    ServicePort {
        name: (!name.is_empty()).then(|| name.to_owned()),
        protocol: Some(protocol.to_owned()),
        app_protocol: None,
        port: number,
    }
}
