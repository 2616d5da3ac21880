//! Import side, pure: from a merged service and the exporting clusters' endpoint copies, the
//! objects an importing member holds: the ServiceImport, the derived Service (ClusterSetIP) and
//! one set of MCS EndpointSlices per source cluster and address family.

use std::collections::BTreeMap;

use atoll_api::hub::ExportedEndpointSlice;
use atoll_api::labels;
use atoll_api::multicluster::{
    ClusterStatus, EndpointSliceObjects, ServiceImportStatus, ServiceImportType, ServicePort,
};
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::core::v1::{Service, ServicePort as CorePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::derived::derived_service_name;
use crate::mcs_names::slice_name;
use crate::merge::MergedService;
use crate::validate::{AddressPolicy, Family, Problem};

/// Label Atoll puts on the ServiceImports and derived Services it owns in a member.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// Value of [`MANAGED_BY_LABEL`].
pub const MANAGED_BY_VALUE: &str = "atoll";
/// Most endpoints in one MCS EndpointSlice (the core controller's default is 100 too).
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// The name a derived Service port gets: the import port's own name, or, when the import has
/// several ports and this one is unnamed, a generated one (the apiserver rejects a multi-port
/// Service with an unnamed port). The generated name is never one of `ports`' own names: a
/// member could name a port `port-53-udp` and make the derived Service, and with it the whole
/// import, invalid.
pub fn derived_port_name(port: &ServicePort, ports: &[ServicePort]) -> Option<String> {
    match &port.name {
        Some(name) => Some(name.clone()),
        None if ports.len() <= 1 => None,
        None => {
            let base = format!(
                "port-{}-{}",
                port.port,
                port.protocol
                    .as_deref()
                    .unwrap_or("TCP")
                    .to_ascii_lowercase()
            );
            let taken = |name: &str| ports.iter().any(|p| p.name.as_deref() == Some(name));
            let mut name = base.clone();
            let mut n = 0usize;
            while taken(&name) {
                n += 1;
                name = format!("{base}-{n}");
            }
            Some(name)
        }
    }
}

/// The selector-less Service whose ClusterIPs become the import's `spec.ips` (ClusterSetIP only).
pub fn derived_service(merged: &MergedService) -> Option<Service> {
    if merged.spec.type_ != ServiceImportType::ClusterSetIP {
        return None;
    }
    let all = &merged.spec.ports;
    let ports = all
        .iter()
        .map(|p| CorePort {
            name: derived_port_name(p, all),
            protocol: p.protocol.clone(),
            app_protocol: p.app_protocol.clone(),
            port: p.port,
            target_port: Some(IntOrString::Int(p.port)),
            ..Default::default()
        })
        .collect();
    let families = &merged.spec.ip_families;
    Some(Service {
        metadata: ObjectMeta {
            name: Some(derived_service_name(&merged.namespace, &merged.name)),
            namespace: Some(merged.namespace.clone()),
            labels: Some(owned_labels([(labels::SERVICE_NAME, merged.name.as_str())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            ports: Some(ports),
            session_affinity: merged.spec.session_affinity.clone(),
            session_affinity_config: merged.spec.session_affinity_config.as_ref().map(|c| {
                k8s_openapi::api::core::v1::SessionAffinityConfig {
                    client_ip: c.client_ip.as_ref().map(|ip| {
                        k8s_openapi::api::core::v1::ClientIPConfig {
                            timeout_seconds: ip.timeout_seconds,
                        }
                    }),
                }
            }),
            ip_families: (!families.is_empty()).then(|| families.clone()),
            ip_family_policy: Some(
                if families.len() > 1 {
                    "PreferDualStack"
                } else {
                    "SingleStack"
                }
                .to_owned(),
            ),
            ..Default::default()
        }),
        status: None,
    })
}

fn owned_labels<'a>(
    extra: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> BTreeMap<String, String> {
    let mut map = BTreeMap::from([(MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned())]);
    map.extend(extra.into_iter().map(|(k, v)| (k.to_owned(), v.to_owned())));
    map
}

/// The ServiceImport. `ips` and `ip_families` come from the derived Service as the importing
/// apiserver allocated it (ClusterSetIP), or are empty and the winner's families (Headless).
pub fn service_import(
    merged: &MergedService,
    ips: Vec<String>,
    ip_families: Vec<String>,
) -> ServiceImport {
    let mut spec = merged.spec.clone();
    spec.ips = ips;
    spec.ip_families = ip_families;
    let mut object = ServiceImport::new(&merged.name, Some(spec));
    object.metadata.namespace = Some(merged.namespace.clone());
    let mut labels = merged.labels.clone();
    labels.extend(owned_labels([]));
    object.metadata.labels = Some(labels);
    let mut annotations = merged.annotations.clone();
    if merged.spec.type_ == ServiceImportType::ClusterSetIP {
        annotations.insert(
            labels::DERIVED_SERVICE.to_owned(),
            derived_service_name(&merged.namespace, &merged.name),
        );
    }
    // The import shows the selectors it uses (KEP-5939 puts them in its spec; the upstream
    // CRD does not have the field yet).
    if !merged.cluster_selectors.is_empty()
        && let Ok(text) = serde_json::to_string(&merged.cluster_selectors)
    {
        annotations.insert(crate::selection::SELECTORS_ANNOTATION.to_owned(), text);
    }
    // Never more than an object may carry: the selectors are shown for information only, and
    // go first (exported annotations leave room for the rest, see `validate::names`).
    let bytes = |a: &BTreeMap<String, String>| {
        a.iter().fold(0usize, |sum, (k, v)| {
            sum.saturating_add(k.len()).saturating_add(v.len())
        })
    };
    if bytes(&annotations) > crate::validate::names::MAX_ANNOTATION_BYTES {
        annotations.remove(crate::selection::SELECTORS_ANNOTATION);
    }
    object.metadata.annotations = (!annotations.is_empty()).then_some(annotations);
    object.status = Some(ServiceImportStatus {
        clusters: merged
            .clusters
            .iter()
            .map(|c| ClusterStatus { cluster: c.clone() })
            .collect(),
        conditions: Vec::new(),
        // Atoll maintains MCS EndpointSlices for every import it writes (possibly none, while no
        // source cluster has endpoints), so consumers may rely on reading them.
        endpoint_slice_objects: Some(EndpointSliceObjects::Present),
    });
    object
}

/// Whether an address from the hub may become an endpoint of an IPv4 or IPv6 slice: it must
/// be an IP in canonical form, and not loopback, link-local, multicast or unspecified (hub
/// records are untrusted input; [`crate::validate::addresses`] has every rule).
pub fn plausible_address(address: &str) -> bool {
    [Family::V4, Family::V6]
        .into_iter()
        .any(|family| crate::validate::addresses::address(address, family).is_ok())
}

/// How an importer judges the endpoints of one source cluster's copies.
#[derive(Clone, Copy, Debug)]
pub struct EndpointCheck<'a> {
    /// The importer's own ranges, refused for other members' endpoints.
    pub policy: &'a AddressPolicy,
    /// Whether the source cluster is another member than the importer.
    pub remote: bool,
}

/// Endpoints of one hub copy that were left out for one reason.
#[derive(Clone, Debug)]
pub struct Dropped<'a> {
    pub copy: &'a ExportedEndpointSlice,
    /// The first of them, as an example.
    pub problem: Problem,
    pub count: usize,
}

/// The endpoints of `copy` that pass `check`, with the problems of those that do not (one
/// entry per reason). An endpoint is dropped whole when any of its addresses is bad.
fn usable_endpoints<'a>(
    copy: &'a ExportedEndpointSlice,
    family: Family,
    check: &EndpointCheck<'_>,
    dropped: &mut Vec<Dropped<'a>>,
) -> Vec<Endpoint> {
    let mut kept = Vec::with_capacity(copy.spec.endpoints.len());
    let first = dropped.len();
    for endpoint in &copy.spec.endpoints {
        match crate::validate::endpoints::endpoint(endpoint, family, check.policy, check.remote) {
            Ok(()) => kept.push(Endpoint::from(endpoint)),
            Err(problem) => match dropped[first..]
                .iter_mut()
                .find(|d| d.problem.reason == problem.reason)
            {
                Some(d) => d.count += 1,
                None => dropped.push(Dropped {
                    copy,
                    problem,
                    count: 1,
                }),
            },
        }
    }
    kept
}

/// A slice port as a sortable key: (name, protocol, number).
type PortKey = (Option<String>, Option<String>, Option<i32>);

/// The MCS EndpointSlices for one source cluster of a merged service, built from that
/// cluster's hub copies (each already checked by [`crate::trust::copy_family`]), and the
/// endpoints left out because `check` refuses them. Each slice holds endpoints of one address
/// family with one port mapping; ports are only those the source cluster's Service really
/// exposes, renamed to the derived Service's port names so kube-proxy can route them.
pub fn mcs_slices<'a>(
    merged: &MergedService,
    cluster: &str,
    copies: &[(&'a ExportedEndpointSlice, Family)],
    check: &EndpointCheck<'_>,
) -> (Vec<EndpointSlice>, Vec<Dropped<'a>>) {
    let served = merged
        .cluster_ports
        .get(cluster)
        .cloned()
        .unwrap_or_default();
    let all = &merged.spec.ports;
    // (address type, ports) -> endpoints, in a deterministic order.
    let mut groups: BTreeMap<(String, Vec<PortKey>), Vec<Endpoint>> = BTreeMap::new();
    let mut dropped = Vec::new();
    let mut sorted: Vec<&(&ExportedEndpointSlice, Family)> = copies.iter().collect();
    sorted.sort_by_key(|(s, _)| s.metadata.name.clone());
    for (copy, family) in sorted {
        let ports: Vec<EndpointPort> = served
            .iter()
            .filter_map(|p| {
                let source = copy.spec.ports.iter().find(|sp| {
                    sp.name.as_deref().filter(|n| !n.is_empty()) == p.name.as_deref()
                        && sp.protocol.as_deref().unwrap_or("TCP")
                            == p.protocol.as_deref().unwrap_or("TCP")
                })?;
                Some(EndpointPort {
                    name: derived_port_name(p, all),
                    protocol: p.protocol.clone(),
                    app_protocol: p.app_protocol.clone(),
                    port: source.port,
                })
            })
            .collect();
        let key_ports = ports
            .iter()
            .map(|p| (p.name.clone(), p.protocol.clone(), p.port))
            .collect();
        let endpoints = usable_endpoints(copy, *family, check, &mut dropped);
        groups
            .entry((copy.spec.address_type.to_string(), key_ports))
            .or_default()
            .extend(endpoints);
    }
    let derived = (merged.spec.type_ == ServiceImportType::ClusterSetIP)
        .then(|| derived_service_name(&merged.namespace, &merged.name));
    let mut slices = Vec::new();
    let mut index_per_family: BTreeMap<String, usize> = BTreeMap::new();
    for ((address_type, key_ports), endpoints) in groups {
        let ports: Vec<EndpointPort> = key_ports
            .into_iter()
            .map(|(name, protocol, port)| {
                let app_protocol = served
                    .iter()
                    .find(|p| derived_port_name(p, all) == name && p.protocol == protocol)
                    .and_then(|p| p.app_protocol.clone());
                EndpointPort {
                    name,
                    protocol,
                    port,
                    app_protocol,
                }
            })
            .collect();
        for chunk in endpoints.chunks(MAX_ENDPOINTS_PER_SLICE) {
            let index = index_per_family.entry(address_type.clone()).or_default();
            let name = slice_name(&merged.name, cluster, &address_type, *index);
            *index += 1;
            let mut slice_labels = BTreeMap::from([
                (labels::SERVICE_NAME.to_owned(), merged.name.clone()),
                (labels::SOURCE_CLUSTER.to_owned(), cluster.to_owned()),
                (
                    labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
                    labels::ATOLL_ENDPOINTSLICE_MANAGER.to_owned(),
                ),
            ]);
            if let Some(derived) = &derived {
                slice_labels.insert(labels::KUBERNETES_SERVICE_NAME.to_owned(), derived.clone());
            }
            slices.push(EndpointSlice {
                metadata: ObjectMeta {
                    name: Some(name),
                    namespace: Some(merged.namespace.clone()),
                    labels: Some(slice_labels),
                    ..Default::default()
                },
                address_type: address_type.clone(),
                endpoints: chunk.to_vec(),
                ports: Some(ports.clone()),
            });
        }
    }
    (slices, dropped)
}

#[cfg(test)]
#[path = "import_tests.rs"]
mod tests;
