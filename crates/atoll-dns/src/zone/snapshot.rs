//! The zone snapshot: fixed names at the apex, and per service the names built from the
//! [`Catalog`], in copy-on-write shards.

use std::sync::Arc;

use atoll_api::keys::ServiceKey;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::wire::{encode_name, push_rr, rtype};

use super::catalog::Catalog;
use super::config::{MIN_UDP_PAYLOAD, ZoneConfig};
use super::missing::Missing;
use super::records::{Builder, Node, Ttls};
use super::service::{ServiceNames, service_label_key};
use super::shards::Sharded;

/// An immutable snapshot of the zone. Cloning one is cheap (its maps share their shards), and
/// [`Zone::updated`] re-encodes only the services that changed.
#[derive(Debug, Clone)]
pub struct Zone {
    pub(crate) apex: Vec<u8>,
    zone: String,
    ttls: Ttls,
    /// The apex (NS, SOA), `dns-version` (TXT) and `svc` (no records).
    fixed: Vec<(Vec<u8>, Node)>,
    /// Services by [`service_label_key`].
    services: Sharded<Arc<ServiceNames>>,
    /// Namespaces with at least one imported service (by their label), and how many.
    namespaces: Sharded<usize>,
    /// What `<ns>.svc.<zone>` of an imported namespace holds: no records (NODATA).
    empty: Node,
    /// The SOA record (owner = apex) for authority sections.
    pub(crate) soa: Vec<u8>,
    /// False until the first full sync: every query then gets SERVFAIL.
    pub(crate) synced: bool,
    /// [`ZoneConfig::max_udp_payload`], at least [`MIN_UDP_PAYLOAD`].
    pub(crate) max_udp_payload: u16,
    /// Number of names, for metrics.
    pub names: usize,
    /// Bytes of pre-encoded records, for metrics.
    pub bytes: usize,
    /// Records left out of the zone at its caps, for metrics.
    pub trimmed: u64,
}

/// Where a name under the zone would be, from its labels.
enum Place<'n> {
    /// `<anything>.<svc>.<ns>.svc.<zone>`: the service's [`service_label_key`] and its
    /// namespace label; `depth` counts the labels under the zone.
    Service {
        key: &'n [u8],
        namespace: &'n [u8],
        depth: usize,
    },
    /// `<ns>.svc.<zone>`.
    Namespace(&'n [u8]),
    Elsewhere,
}

impl Zone {
    /// A zone that answers SERVFAIL to everything (before the first sync).
    pub fn unsynced(config: &ZoneConfig) -> Self {
        let mut zone = Self::empty(config);
        zone.synced = false;
        zone
    }

    /// Builds the zone from the cluster's ServiceImports and MCS EndpointSlices. Objects that
    /// cannot be represented (invalid names, unparseable addresses) are skipped.
    pub fn build(
        config: &ZoneConfig,
        imports: &[&ServiceImport],
        slices: &[&EndpointSlice],
    ) -> Self {
        Self::of_catalog(config, &Catalog::of(imports, slices))
    }

    /// The synced zone of everything in `catalog`.
    pub fn of_catalog(config: &ZoneConfig, catalog: &Catalog) -> Self {
        Self::empty(config).updated(catalog, &catalog.services())
    }

    /// This zone with the services of `changed` re-encoded from `catalog` (added, changed or
    /// gone), synced. Costs time in proportion to the changed services: every other service,
    /// and most of the maps holding them, are shared with `self`.
    pub fn updated<'a>(
        &self,
        catalog: &Catalog,
        changed: impl IntoIterator<Item = &'a ServiceKey>,
    ) -> Self {
        let mut zone = self.clone();
        zone.synced = true;
        for service in changed {
            zone.update_service(catalog, service);
        }
        zone
    }

    fn update_service(&mut self, catalog: &Catalog, service: &ServiceKey) {
        let (namespace, name) = (&service.namespace, &service.name);
        let Some(key) = service_label_key(namespace, name) else {
            return;
        };
        let Some(namespace_label) = encode_name(namespace).filter(|l| l.len() > 2) else {
            return;
        };
        let namespace_label = namespace_label
            .get(1..namespace_label.len().saturating_sub(1))
            .unwrap_or_default();
        let new = catalog.import(service).and_then(|import| {
            ServiceNames::build(
                &self.zone,
                self.ttls,
                (namespace, name),
                import,
                catalog.slices(service),
            )
            .map(Arc::new)
        });
        let sizes = |n: &ServiceNames| (n.names(), n.bytes, n.trimmed);
        let added = new.as_deref().map_or((0, 0, 0), sizes);
        let is_new = new.is_some();
        let old = self.services.set(&key, new);
        let removed = old.as_deref().map_or((0, 0, 0), sizes);
        // Saturating: an accounting slip must not take the server down.
        self.names = self.names.saturating_add(added.0).saturating_sub(removed.0);
        self.bytes = self.bytes.saturating_add(added.1).saturating_sub(removed.1);
        self.trimmed = self
            .trimmed
            .saturating_add(added.2)
            .saturating_sub(removed.2);
        match (old.is_some(), is_new) {
            (false, true) => {
                let count = self.namespaces.get(namespace_label).copied().unwrap_or(0);
                self.namespaces
                    .set(namespace_label, Some(count.saturating_add(1)));
                if count == 0 {
                    self.names = self.names.saturating_add(1);
                }
            }
            (true, false) => {
                let count = self.namespaces.get(namespace_label).copied().unwrap_or(1);
                if count <= 1 {
                    self.namespaces.set(namespace_label, None);
                    self.names = self.names.saturating_sub(1);
                } else {
                    self.namespaces
                        .set(namespace_label, Some(count.saturating_sub(1)));
                }
            }
            _ => {}
        }
    }

    fn empty(config: &ZoneConfig) -> Self {
        let apex = encode_name(&config.zone).unwrap_or_else(|| vec![0]);
        let ttls = Ttls {
            records: config.ttl,
            txt: config.txt_ttl,
        };
        let name = |relative: &str| encode_name(&format!("{relative}.{}", config.zone));
        let mut soa_rdata = name("ns.dns").unwrap_or_else(|| vec![0]);
        soa_rdata.extend(name("hostmaster").unwrap_or_else(|| vec![0]));
        for value in [1u32, 7200, 1800, 86400, config.ttl] {
            soa_rdata.extend_from_slice(&value.to_be_bytes());
        }
        let mut soa = Vec::new();
        push_rr(&mut soa, &apex, rtype::SOA, config.ttl, &soa_rdata);

        let mut b = Builder::default();
        b.add(&apex, rtype::NS, name("ns.dns").unwrap_or_default());
        b.add(&apex, rtype::SOA, soa_rdata);
        if let Some(v) = name("dns-version") {
            let mut txt = vec![5u8];
            txt.extend_from_slice(b"1.0.0");
            b.add(&v, rtype::TXT, txt);
        }
        if let Some(svc) = name("svc") {
            b.touch(&svc);
        }
        let fixed: Vec<(Vec<u8>, Node)> = b
            .encode(ttls)
            .into_iter()
            .map(|(owner, node)| (owner.into_vec(), node))
            .collect();
        let bytes = fixed
            .iter()
            .fold(soa.len(), |sum, (_, n)| sum.saturating_add(n.bytes()));
        Self {
            apex,
            zone: config.zone.clone(),
            ttls,
            names: fixed.len(),
            fixed,
            services: Sharded::default(),
            namespaces: Sharded::default(),
            empty: Node::default(),
            soa,
            synced: true,
            max_udp_payload: config.max_udp_payload.max(MIN_UDP_PAYLOAD),
            bytes,
            trimmed: 0,
        }
    }

    /// Where `name` (lowercase wire format, under the zone) belongs.
    fn place<'n>(&self, name: &'n [u8]) -> Place<'n> {
        // Offsets of the labels under the zone; a name has at most 127 labels.
        // Checked throughout: a malformed name finds nothing rather than a panic.
        let mut offsets = [0u8; 128];
        let mut depth = 0usize;
        let end = name.len().saturating_sub(self.apex.len());
        let mut at = 0usize;
        while at < end && depth < offsets.len() {
            if let Some(offset) = offsets.get_mut(depth) {
                *offset = u8::try_from(at).unwrap_or(u8::MAX);
            }
            depth = depth.saturating_add(1);
            let len = name.get(at).map_or(end, |l| usize::from(*l));
            at = at.saturating_add(len).saturating_add(1);
        }
        let offset = |i: usize| offsets.get(i).map_or(0, |o| usize::from(*o));
        let label = |i: usize| -> &[u8] {
            let start = offset(i);
            let len = name.get(start).map_or(0, |l| usize::from(*l));
            let first = start.saturating_add(1);
            name.get(first..first.saturating_add(len))
                .unwrap_or_default()
        };
        let back = |n: usize| depth.checked_sub(n);
        if let (Some(d3), Some(d2), Some(d1)) = (back(3), back(2), back(1))
            && label(d1) == b"svc"
        {
            Place::Service {
                key: name.get(offset(d3)..offset(d1)).unwrap_or_default(),
                namespace: label(d2),
                depth,
            }
        } else if depth == 2 && label(1) == b"svc" {
            Place::Namespace(label(0))
        } else {
            Place::Elsewhere
        }
    }

    /// The node of `name` (lowercase wire format, under the zone), if it exists.
    pub(crate) fn node(&self, name: &[u8]) -> Option<&Node> {
        if let Some((_, node)) = self.fixed.iter().find(|(n, _)| n.as_slice() == name) {
            return Some(node);
        }
        match self.place(name) {
            Place::Service { key, .. } => self.services.get(key)?.node(name),
            Place::Namespace(label) => self.namespaces.get(label).map(|_| &self.empty),
            Place::Elsewhere => None,
        }
    }

    /// Why `name` (lowercase wire format, under the zone) does not exist.
    pub(crate) fn why_missing(&self, name: &[u8]) -> Missing {
        match self.place(name) {
            Place::Service {
                key,
                namespace,
                depth,
            } => {
                if let Some(reason) = self.services.get(key).and_then(|s| s.missing(name)) {
                    reason
                } else if self.namespaces.get(namespace).is_none() {
                    Missing::NamespaceNotImported
                } else if depth == 3 {
                    Missing::NoSuchService
                } else {
                    Missing::NoSuchName
                }
            }
            Place::Namespace(_) => Missing::NamespaceNotImported,
            Place::Elsewhere => Missing::NoSuchName,
        }
    }

    /// Shards of the service and namespace maps this zone shares with `other`.
    #[cfg(test)]
    pub(crate) fn shared_shards(&self, other: &Self) -> usize {
        self.services
            .shared_shards(&other.services)
            .saturating_add(self.namespaces.shared_shards(&other.namespaces))
    }
}
