//! One member writing at every bound the hub CRDs allow (issue 43), object by object, for
//! `make bench-memory`: records with the largest exported annotations or the most and longest
//! ports, endpoint copies with the most and longest endpoints; and, for `atoll dns`, the MCS
//! slices an importer writes for one member at its endpoint-port caps.

use std::collections::BTreeMap;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::fleet::{NS, copy, record};

/// The attacking member.
pub const MEMBER: &str = "flood";

/// What one attack writes, object by object.
#[derive(Clone, Copy, Debug)]
pub enum Attack {
    /// Records with four 250 KiB exported annotations (~1 MiB: over what an import may carry).
    HugeAnnotations,
    /// Records with one 235 KiB exported annotation (within what an import may carry).
    LargeAnnotations,
    /// Records with 1,000 ports, each with the longest name and appProtocol.
    WidePorts,
    /// Copies with 1,000 endpoints of the longest hostname and zone, 20 IPv6 addresses each
    /// (~1.4 MB: under the hub's 1.5 MiB object limit).
    WideCopies,
}

impl Attack {
    pub const ALL: [Attack; 4] = [
        Attack::HugeAnnotations,
        Attack::LargeAnnotations,
        Attack::WidePorts,
        Attack::WideCopies,
    ];

    /// For the table.
    pub fn describe(self) -> &'static str {
        match self {
            Self::HugeAnnotations => "records, 4 × 250 KiB exported annotations",
            Self::LargeAnnotations => "records, 1 × 235 KiB exported annotation",
            Self::WidePorts => "records, 1,000 ports of the longest names",
            Self::WideCopies => "copies, 1,000 endpoints × 20 IPv6 addresses",
        }
    }

    /// Whether it writes records (else copies).
    pub fn records(self) -> bool {
        !matches!(self, Self::WideCopies)
    }

    /// The `i`-th record of the attack.
    pub fn record(self, i: usize) -> ExportedService {
        let mut r = record(MEMBER, &format!("s{i:04}"));
        match self {
            Self::HugeAnnotations => {
                r.spec.exported_annotations = (0..4)
                    .map(|v| (format!("flood.example.com/a{v}"), "x".repeat(250 * 1024)))
                    .collect::<BTreeMap<_, _>>();
            }
            Self::LargeAnnotations => {
                r.spec.exported_annotations =
                    BTreeMap::from([("flood.example.com/a".to_owned(), "x".repeat(235 * 1024))]);
            }
            Self::WidePorts => {
                r.spec.ports = (0..1000)
                    .map(|p| atoll_api::multicluster::ServicePort {
                        name: Some(format!("{p:04}{}", "p".repeat(59))),
                        protocol: Some("TCP".into()),
                        port: 1000 + p,
                        app_protocol: Some(format!("{}/{}", "a".repeat(253), "b".repeat(63))),
                    })
                    .collect();
            }
            Self::WideCopies => {}
        }
        r
    }

    /// The `i`-th copy of the attack.
    pub fn copy(self, i: usize) -> ExportedEndpointSlice {
        let mut c = copy(MEMBER, &format!("s{i:04}"), &[]);
        c.spec.address_type = "IPv6".into();
        c.spec.endpoints = (0..1000u32)
            .map(|e| {
                let endpoint = Endpoint {
                    addresses: (0..20u32)
                        .map(|a| format!("fd00:{i:x}:{e:x}:{a:x}:1111:2222:3333:4444"))
                        .collect(),
                    conditions: Some(EndpointConditions {
                        ready: Some(true),
                        ..Default::default()
                    }),
                    hostname: Some(format!("{e:04}{}", "h".repeat(59))),
                    zone: Some("z".repeat(63)),
                    ..Default::default()
                };
                atoll_api::endpoint::PortableEndpoint::from(&endpoint)
            })
            .collect();
        c
    }
}

/// What an importer writes for `services` headless services of the attacking member, each
/// with `endpoints` endpoints and `ports` named ports (its ServiceImports and MCS slices of
/// 100 endpoints), for `atoll dns` to build its zone from.
pub fn headless_import(
    services: usize,
    endpoints: usize,
    ports: usize,
) -> anyhow::Result<(Vec<ServiceImport>, Vec<EndpointSlice>)> {
    let mut imports = Vec::new();
    let mut slices = Vec::new();
    let port_list: Vec<EndpointPort> = (0..ports)
        .map(|p| EndpointPort {
            name: Some(format!("p{p}")),
            port: Some(1000 + p as i32),
            protocol: Some("TCP".into()),
            ..Default::default()
        })
        .collect();
    for s in 0..services {
        let name = format!("h{s:03}");
        let ports: Vec<serde_json::Value> = port_list
            .iter()
            .map(|p| serde_json::json!({"name": p.name, "protocol": "TCP", "port": p.port}))
            .collect();
        let mut import: ServiceImport = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": name},
            "spec": {"type": "Headless", "ports": ports},
        }))?;
        import.metadata.namespace = Some(NS.into());
        imports.push(import);
        for (index, chunk) in (0..endpoints).collect::<Vec<_>>().chunks(100).enumerate() {
            slices.push(EndpointSlice {
                metadata: ObjectMeta {
                    name: Some(atoll_core::mcs_names::slice_name(
                        &name, MEMBER, "IPv4", index,
                    )),
                    namespace: Some(NS.into()),
                    labels: Some(BTreeMap::from([
                        (atoll_api::labels::SERVICE_NAME.to_owned(), name.clone()),
                        (
                            atoll_api::labels::SOURCE_CLUSTER.to_owned(),
                            MEMBER.to_owned(),
                        ),
                        (
                            atoll_api::labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
                            atoll_api::labels::ATOLL_ENDPOINTSLICE_MANAGER.to_owned(),
                        ),
                    ])),
                    ..Default::default()
                },
                address_type: "IPv4".into(),
                endpoints: chunk
                    .iter()
                    .map(|e| Endpoint {
                        addresses: vec![format!("10.{s}.{}.{}", e / 250, 1 + e % 250)],
                        hostname: Some(format!("pod-{e}")),
                        conditions: Some(EndpointConditions {
                            ready: Some(true),
                            ..Default::default()
                        }),
                        ..Default::default()
                    })
                    .collect(),
                ports: Some(port_list.clone()),
            });
        }
    }
    Ok((imports, slices))
}
