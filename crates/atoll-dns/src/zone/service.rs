//! The names of one imported service: `<svc>.<ns>.svc.<zone>` and everything under it, built
//! from its catalog records alone, so a change to one service re-encodes that service only.

use atoll_api::multicluster::ServiceImportType;
use std::collections::{BTreeMap, BTreeSet};

use crate::wire::{encode_name, rtype};

use super::catalog::{ImportRecord, SliceRecord};
use super::missing::Missing;
use super::records::{Builder, MAX_SERVICE_RECORDS, Node, Ttls, srv_rdata};

/// The encoded names of one service, sorted for binary search.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct ServiceNames {
    nodes: Vec<(Box<[u8]>, Node)>,
    missing: Vec<(Box<[u8]>, Missing)>,
    /// Bytes of pre-encoded records.
    pub bytes: usize,
    /// Records left out: over a name's [`MAX_RRSET`](super::records::MAX_RRSET) or the
    /// service's [`MAX_SERVICE_RECORDS`].
    pub trimmed: u64,
}

/// `<svc>.<ns>` in wire format without the root: how a service is found from a query name,
/// whose labels before `.svc.<zone>` are the same bytes. `None` unless both are single labels
/// (a Service's name and namespace always are; a ServiceImport of another name could not be
/// told apart from a service of another name in DNS).
pub(super) fn service_label_key(namespace: &str, name: &str) -> Option<Vec<u8>> {
    if namespace.contains('.') || name.contains('.') {
        return None;
    }
    let mut key = encode_name(&format!("{name}.{namespace}"))?;
    key.pop();
    Some(key)
}

impl ServiceNames {
    /// The names of service `name` in `namespace`, imported as `import`, with the ready
    /// endpoints of `slices`; `None` when its own name cannot be encoded (too long). Other
    /// names that cannot be encoded are left out.
    pub fn build<'a>(
        zone: &str,
        ttls: Ttls,
        (namespace, name): (&str, &str),
        import: &ImportRecord,
        slices: impl Iterator<Item = &'a SliceRecord>,
    ) -> Option<Self> {
        let full = |relative: String| encode_name(&format!("{relative}.{zone}"));
        let mut b = Builder::with_budget(MAX_SERVICE_RECORDS);
        let mut missing = BTreeMap::new();
        let base = full(format!("{name}.{namespace}.svc"))?;
        let slices: Vec<&SliceRecord> = slices.collect();
        // Per-endpoint names resolve for every type of service.
        for slice in &slices {
            if let Some(cluster_name) = full(format!("{}.{name}.{namespace}.svc", slice.cluster))
                && !slice.endpoints.is_empty()
            {
                missing.insert(cluster_name.into_boxed_slice(), Missing::ClusterScopedName);
            }
            if slice.cluster.is_empty() {
                continue;
            }
            for e in &slice.endpoints {
                if let Some(host) = full(format!(
                    "{}.{}.{name}.{namespace}.svc",
                    e.hostname, slice.cluster
                )) {
                    for address in &e.addresses {
                        b.add_address(&host, address);
                    }
                }
            }
        }
        match import.kind {
            ServiceImportType::ClusterSetIP => {
                clusterset_ip(&mut b, &base, import, (namespace, name), |relative| {
                    full(relative)
                });
            }
            ServiceImportType::Headless => {
                if slices.iter().all(|s| s.endpoints.is_empty()) {
                    missing.insert(base.into_boxed_slice(), Missing::NoReadyEndpoints);
                } else {
                    headless(&mut b, &base, &slices, (namespace, name), |relative| {
                        full(relative)
                    });
                }
            }
        }
        let over_budget = b.over_budget();
        let nodes = b.encode(ttls);
        let bytes = nodes
            .iter()
            .fold(0usize, |sum, (_, n)| sum.saturating_add(n.bytes()));
        let trimmed = nodes
            .iter()
            .fold(over_budget, |sum, (_, n)| sum.saturating_add(n.trimmed()));
        Some(Self {
            nodes,
            missing: missing.into_iter().collect(),
            bytes,
            trimmed,
        })
    }

    /// Number of names that exist.
    pub fn names(&self) -> usize {
        self.nodes.len()
    }

    /// The node of `name` (lowercase wire format), if it exists.
    pub fn node(&self, name: &[u8]) -> Option<&Node> {
        self.nodes
            .binary_search_by(|(n, _)| n.as_ref().cmp(name))
            .ok()
            .map(|i| &self.nodes[i].1)
    }

    /// Why `name` does not exist, when this service knows.
    pub fn missing(&self, name: &[u8]) -> Option<Missing> {
        self.missing
            .binary_search_by(|(n, _)| n.as_ref().cmp(name))
            .ok()
            .map(|i| self.missing[i].1)
    }
}

fn clusterset_ip(
    b: &mut Builder,
    base: &[u8],
    import: &ImportRecord,
    (namespace, name): (&str, &str),
    full: impl Fn(String) -> Option<Vec<u8>>,
) {
    b.touch(base);
    for ip in &import.ips {
        b.add_address(base, ip);
    }
    let distinct: BTreeSet<i32> = import.ports.iter().map(|p| p.port).collect();
    let weight = srv_weight(distinct.len());
    for port in &distinct {
        let Ok(port) = u16::try_from(*port) else {
            continue;
        };
        b.add(base, rtype::SRV, srv_rdata(weight, port, base));
        for ip in &import.ips {
            b.add_additional(base, rtype::SRV, base, ip);
        }
    }
    for p in &import.ports {
        let (Some(port_name), Ok(port)) = (p.name.as_deref(), u16::try_from(p.port)) else {
            continue;
        };
        let Some(srv_name) = full(format!(
            "_{port_name}._{}.{name}.{namespace}.svc",
            p.protocol
        )) else {
            continue;
        };
        b.add(&srv_name, rtype::SRV, srv_rdata(100, port, base));
        for ip in &import.ips {
            b.add_additional(&srv_name, rtype::SRV, base, ip);
        }
    }
}

fn headless(
    b: &mut Builder,
    base: &[u8],
    slices: &[&SliceRecord],
    (namespace, name): (&str, &str),
    full: impl Fn(String) -> Option<Vec<u8>>,
) {
    b.touch(base);
    for slice in slices {
        for e in &slice.endpoints {
            for address in &e.addresses {
                b.add_address(base, address);
            }
        }
    }
    // SRV targets: (target, port) for the bare name, and per `_port._proto` name.
    let mut bare: BTreeSet<(Vec<u8>, u16)> = BTreeSet::new();
    let mut named: BTreeMap<Vec<u8>, BTreeSet<(Vec<u8>, u16)>> = BTreeMap::new();
    for slice in slices.iter().filter(|s| !s.cluster.is_empty()) {
        for e in &slice.endpoints {
            let Some(target) = full(format!(
                "{}.{}.{name}.{namespace}.svc",
                e.hostname, slice.cluster
            )) else {
                continue;
            };
            let mut srv_names: Vec<Vec<u8>> = Vec::new();
            for p in &slice.ports {
                let Ok(port) = u16::try_from(p.port) else {
                    continue;
                };
                bare.insert((target.clone(), port));
                if let Some(port_name) = &p.name
                    && let Some(srv_name) = full(format!(
                        "_{port_name}._{}.{name}.{namespace}.svc",
                        p.protocol
                    ))
                {
                    named
                        .entry(srv_name.clone())
                        .or_default()
                        .insert((target.clone(), port));
                    srv_names.push(srv_name);
                }
            }
            for address in &e.addresses {
                b.add_additional(base, rtype::SRV, &target, address);
                for srv_name in &srv_names {
                    b.add_additional(srv_name, rtype::SRV, &target, address);
                }
            }
        }
    }
    let weight = srv_weight(bare.len());
    for (target, port) in &bare {
        b.add(base, rtype::SRV, srv_rdata(weight, *port, target));
    }
    for (srv_name, targets) in named {
        let weight = srv_weight(targets.len());
        for (target, port) in targets {
            b.add(&srv_name, rtype::SRV, srv_rdata(weight, port, &target));
        }
    }
}

/// The SRV weight of each of `targets` records sharing a name: 100 split evenly (at least 0).
fn srv_weight(targets: usize) -> u16 {
    u16::try_from(100usize.checked_div(targets.max(1)).unwrap_or(0)).unwrap_or(0)
}
