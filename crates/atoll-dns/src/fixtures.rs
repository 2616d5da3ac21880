//! ServiceImports and MCS EndpointSlices for the zone's and the answers' tests.

use atoll_api::labels;
use atoll_api::multicluster::{ServiceImportSpec, ServiceImportType, ServicePort};
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

pub fn mk_import(
    ns: &str,
    name: &str,
    type_: ServiceImportType,
    ips: &[&str],
    ports: &[(&str, &str, i32)],
) -> ServiceImport {
    let mut spec = ServiceImportSpec::new(type_);
    spec.ips = ips.iter().map(|s| (*s).to_owned()).collect();
    spec.ports = ports
        .iter()
        .map(|(n, p, port)| ServicePort {
            name: (!n.is_empty()).then(|| (*n).to_owned()),
            protocol: Some((*p).to_owned()),
            app_protocol: None,
            port: *port,
        })
        .collect();
    let mut import = ServiceImport::new(name, Some(spec));
    import.metadata.namespace = Some(ns.to_owned());
    import
}

/// An MCS slice as Atoll's agent writes it (managed by Atoll): endpoints are (address,
/// hostname, ready).
pub fn mk_slice(
    ns: &str,
    svc: &str,
    cluster: &str,
    family: &str,
    endpoints: &[(&str, Option<&str>, bool)],
) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{svc}-{cluster}-{family}")),
            namespace: Some(ns.to_owned()),
            labels: Some(
                [
                    (labels::SERVICE_NAME, svc),
                    (labels::SOURCE_CLUSTER, cluster),
                    (
                        labels::ENDPOINTSLICE_MANAGED_BY,
                        labels::ATOLL_ENDPOINTSLICE_MANAGER,
                    ),
                ]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            ),
            ..Default::default()
        },
        address_type: family.to_owned(),
        endpoints: endpoints
            .iter()
            .map(|(a, h, ready)| Endpoint {
                addresses: vec![(*a).to_owned()],
                hostname: h.map(str::to_owned),
                conditions: Some(EndpointConditions {
                    ready: Some(*ready),
                    ..Default::default()
                }),
                ..Default::default()
            })
            .collect(),
        ports: Some(vec![
            EndpointPort {
                name: Some("tcp".into()),
                protocol: Some("TCP".into()),
                port: Some(42),
                app_protocol: None,
            },
            EndpointPort {
                name: Some("udp".into()),
                protocol: Some("UDP".into()),
                port: Some(42),
                app_protocol: None,
            },
        ]),
    }
}
