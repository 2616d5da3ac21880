//! The hub objects of a simulated fleet, as members' agents publish them: per cluster and
//! service an ExportedService record and one ExportedEndpointSlice copy with [`ENDPOINTS`]
//! ready endpoints, in namespace [`NS`] of every member.

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::v1beta1::ServiceExport;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

/// Namespace of the simulated services.
pub const NS: &str = "bench-scale";
/// Endpoints of every simulated service.
pub const ENDPOINTS: usize = 10;

/// The simulated cluster `c` of the run of `size` (e.g. `sim50x200-07`).
pub fn cluster_name(size: &str, c: usize) -> String {
    format!("sim{size}-{c:02}")
}

/// The exported Service `name`: ClusterIP, one TCP port.
pub fn service_object(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            namespace: Some(NS.into()),
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some("10.96.0.10".into()),
            ip_families: Some(vec!["IPv4".into()]),
            ports: Some(vec![ServicePort {
                name: Some("tcp".into()),
                protocol: Some("TCP".into()),
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

/// `cluster`'s record of service `name`, exported now.
pub fn record(cluster: &str, name: &str) -> ExportedService {
    let mut export = ServiceExport::new(name, None);
    export.metadata.namespace = Some(NS.into());
    export.metadata.creation_timestamp = Some(Time(Timestamp::now()));
    atoll_core::export::record(cluster, &export, &service_object(name))
}

/// `cluster`'s copy of the EndpointSlice of service `name`, one ready endpoint per address.
pub fn copy(cluster: &str, name: &str, addresses: &[String]) -> ExportedEndpointSlice {
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            namespace: Some(NS.into()),
            name: Some(format!("{name}-bench")),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![a.clone()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ports: Some(vec![EndpointPort {
            name: Some("tcp".into()),
            protocol: Some("TCP".into()),
            port: Some(8080),
            ..Default::default()
        }]),
    };
    atoll_core::export::hub_slice(cluster, NS, name, &slice)
}

/// The [`ENDPOINTS`] addresses of service `s` of cluster `c` (distinct across the fleet).
pub fn addresses(c: usize, s: usize) -> Vec<String> {
    (0..ENDPOINTS)
        .map(|e| format!("10.{}.{}.{}", 100 + c / 256, s % 256, 10 * (c % 25) + e + 1))
        .collect()
}
