//! What the users of the simulated ClusterSet do: which member exports which service, with
//! which endpoints. Every exported service has the same shape everywhere (one TCP port,
//! ClusterSetIP), so there is no conflict: what an importer must hold follows from the exports
//! alone, whatever the faults.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::labels;
use atoll_api::v1beta1::ServiceExport;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use crate::apiserver::Member;

pub use crate::apiserver::{NAMESPACE, OTHER_NAMESPACE};

/// The services members may export.
pub const SERVICES: [&str; 3] = ["web", "api", "db"];

/// Services one member may export together (changed only by a mass unexport): enough MCS
/// slices of one source cluster in one namespace for a withdrawal to delete them with a
/// collection.
pub const BULK: [&str; 8] = [
    "bulk-0", "bulk-1", "bulk-2", "bulk-3", "bulk-4", "bulk-5", "bulk-6", "bulk-7",
];

/// What a member moving its services to new names exports instead of [`BULK`] (see the mass
/// unexport fault).
pub const RENAMED: [&str; 8] = [
    "moved-0", "moved-1", "moved-2", "moved-3", "moved-4", "moved-5", "moved-6", "moved-7",
];

/// Services of other shapes, in [`OTHER_NAMESPACE`]: a headless one (`peers`, two ports) and a
/// ClusterSetIP one with two ports (`grpc`).
pub const EXTRA: [&str; 2] = ["peers", "grpc"];

/// The namespace `service` lives in.
pub fn namespace_of(service: &str) -> &'static str {
    if EXTRA.contains(&service) {
        OTHER_NAMESPACE
    } else {
        NAMESPACE
    }
}

/// `service`'s ports (name, port), the same in every member.
fn ports_of(service: &str) -> &'static [(&'static str, i32)] {
    match service {
        "peers" => &[("tcp", 7000), ("gossip", 7001)],
        "grpc" => &[("grpc", 50051), ("http", 8080)],
        _ => &[("tcp", 80)],
    }
}

/// Who exports what: member -> service -> the last octet of its one endpoint (changing it is
/// an endpoint change).
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Scenario {
    pub exports: BTreeMap<String, BTreeMap<String, u8>>,
    /// Endpoint copies the hub refuses for good (member, service): say their names are too
    /// long. Part of the world, not a fault that ends: a fault-free run has them too.
    pub refused: BTreeSet<(String, String)>,
}

impl Scenario {
    /// Who exports `service`.
    pub fn exporters(&self, service: &str) -> BTreeSet<&str> {
        self.exports
            .iter()
            .filter(|(_, s)| s.contains_key(service))
            .map(|(m, _)| m.as_str())
            .collect()
    }
}

/// The metadata of `name`, an object of `service`.
fn meta(service: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(namespace_of(service).to_owned()),
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

/// The member objects for exporting `service` with one endpoint `10.2<index>.0.<octet>`.
pub fn export(member: &mut Member, service: &str, octet: u8, now: &Time) {
    let mut svc = Service {
        metadata: meta(service, service),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            cluster_ip: (service == "peers").then(|| "None".to_owned()),
            ip_families: Some(vec!["IPv4".to_owned()]),
            ports: Some(
                ports_of(service)
                    .iter()
                    .map(|(name, port)| ServicePort {
                        name: Some((*name).to_owned()),
                        port: *port,
                        protocol: Some("TCP".to_owned()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    };
    svc.metadata.labels = Some(BTreeMap::from([("app".to_owned(), service.to_owned())]));
    member.apply_service(svc, now);
    set_endpoint(member, service, octet, now);
    let export = ServiceExport {
        metadata: meta(service, service),
        spec: None,
        status: None,
    };
    if member
        .exports
        .get(&atoll_api::keys::ObjectKey::new(
            namespace_of(service),
            service,
        ))
        .is_none()
    {
        member
            .exports
            .put(export, &mut member.counters, now, |_, _| {});
    }
}

/// The endpoint of `service` becomes `octet`.
pub fn set_endpoint(member: &mut Member, service: &str, octet: u8, now: &Time) {
    let mut slice = EndpointSlice {
        metadata: meta(service, &format!("{service}-local")),
        address_type: "IPv4".to_owned(),
        endpoints: vec![Endpoint {
            addresses: vec![format!("10.{}.0.{octet}", 200 + member.index)],
            conditions: Some(EndpointConditions {
                ready: Some(true),
                serving: Some(true),
                terminating: Some(false),
            }),
            ..Default::default()
        }],
        ports: Some(
            ports_of(service)
                .iter()
                .map(|(name, port)| EndpointPort {
                    name: Some((*name).to_owned()),
                    port: Some(*port),
                    protocol: Some("TCP".to_owned()),
                    ..Default::default()
                })
                .collect(),
        ),
    };
    slice.metadata.labels = Some(BTreeMap::from([
        (
            labels::KUBERNETES_SERVICE_NAME.to_owned(),
            service.to_owned(),
        ),
        (
            labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
            labels::CORE_ENDPOINTSLICE_MANAGER.to_owned(),
        ),
    ]));
    member
        .slices
        .put(slice, &mut member.counters, now, |_, _| {});
}

/// The member stops exporting `service` (the export goes; the Service stays).
pub fn unexport(member: &mut Member, service: &str) {
    let key = atoll_api::keys::ObjectKey::new(namespace_of(service), service);
    member.exports.delete(&key, &mut member.counters);
}
