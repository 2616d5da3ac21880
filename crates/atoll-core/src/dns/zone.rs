//! Building the zone snapshot from cluster objects.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::IpAddr;

use atoll_api::labels;
use atoll_api::multicluster::ServiceImportType;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use super::wire::{self, encode_name, push_rr, push_rr_tail, rtype};

/// The largest UDP answer Atoll sends by default, and what its OPT record advertises: the DNS
/// flag day 2020 value, which fits an unfragmented IPv6 packet on common links. Honouring
/// whatever size a requester claims (up to 65,535 bytes) would let a spoofed 60-byte query
/// draw a kilobytes-long answer at a victim.
pub const DEFAULT_MAX_UDP_PAYLOAD: u16 = 1232;
/// The smallest UDP payload size there is: plain DNS's, and the floor of any EDNS size (RFC 6891
/// §6.2.3 says smaller values count as 512).
pub const MIN_UDP_PAYLOAD: u16 = 512;

/// Settings of the served zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConfig {
    /// The zone, `clusterset.local` by default.
    pub zone: String,
    /// TTL of every service record (CoreDNS uses 5 s).
    pub ttl: u32,
    /// TTL of the `dns-version` TXT record.
    pub txt_ttl: u32,
    /// The largest UDP answer the server sends, whatever the requester's EDNS size; also the
    /// size its OPT record advertises. Values under 512 count as 512.
    pub max_udp_payload: u16,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        Self {
            zone: "clusterset.local".to_owned(),
            ttl: 5,
            txt_ttl: 28800,
            max_udp_payload: DEFAULT_MAX_UDP_PAYLOAD,
        }
    }
}

/// Why a name under the zone does not exist; sent as an Extended DNS Error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// No ServiceImport of that name in an imported namespace.
    NoSuchService,
    /// No ServiceImport at all in that namespace.
    NamespaceNotImported,
    /// A headless service without ready endpoints (the spec wants NXDOMAIN).
    NoReadyEndpoints,
    /// `<clusterid>.<svc>.<ns>.svc.<zone>` is reserved and never resolves.
    ClusterScopedName,
    /// Anything else under the zone.
    NoSuchName,
}

impl Missing {
    /// The Extended DNS Error text.
    pub fn text(self) -> &'static str {
        match self {
            Self::NoSuchService => "no such service is imported into this cluster",
            Self::NamespaceNotImported => {
                "no service of this namespace is imported into this cluster"
            }
            Self::NoReadyEndpoints => "the headless service has no ready endpoints",
            Self::ClusterScopedName => {
                "<clusterid>.<service> names are reserved by the MCS DNS spec"
            }
            Self::NoSuchName => "no such name in the clusterset zone",
        }
    }
}

/// Pre-encoded records of one type at one name: the answer RRs (owner = pointer to the
/// question) and the additional RRs (owners spelled out).
#[derive(Debug, Clone, Default)]
pub(super) struct RrSet {
    pub answers: Vec<u8>,
    pub answer_count: u16,
    pub additional: Vec<u8>,
    pub additional_count: u16,
}

/// A name that exists; a type without an entry gets NODATA.
#[derive(Debug, Clone, Default)]
pub(super) struct Node {
    pub sets: Vec<(u16, RrSet)>,
}

/// An immutable snapshot of the zone.
#[derive(Debug, Clone)]
pub struct Zone {
    pub(super) apex: Vec<u8>,
    pub(super) nodes: HashMap<Vec<u8>, Node>,
    pub(super) missing: HashMap<Vec<u8>, Missing>,
    pub(super) namespaces: HashSet<Vec<u8>>,
    /// The SOA record (owner = apex) for authority sections.
    pub(super) soa: Vec<u8>,
    /// False until the first full sync: every query then gets SERVFAIL.
    pub(super) synced: bool,
    /// [`ZoneConfig::max_udp_payload`], at least [`MIN_UDP_PAYLOAD`].
    pub(super) max_udp_payload: u16,
    /// Number of names, for metrics.
    pub names: usize,
    /// Bytes of pre-encoded records, for metrics.
    pub bytes: usize,
}

/// A ready endpoint as DNS sees it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct EndpointRecord {
    cluster: String,
    hostname: String,
    addresses: Vec<IpAddr>,
    /// (port name, protocol, port) from its slice.
    ports: Vec<(Option<String>, String, i32)>,
}

/// The hostname DNS uses for an endpoint without one: the address with `.`/`:` replaced by `-`
/// (IPv6 ending in `-` gets a `0`, as CoreDNS does).
pub fn dashed(address: &IpAddr) -> String {
    let mut s = address.to_string().replace(['.', ':'], "-");
    if s.ends_with('-') {
        s.push('0');
    }
    s
}

fn a_or_aaaa(address: &IpAddr) -> (u16, Vec<u8>) {
    match address {
        IpAddr::V4(a) => (rtype::A, a.octets().to_vec()),
        IpAddr::V6(a) => (rtype::AAAA, a.octets().to_vec()),
    }
}

fn srv_rdata(weight: u16, port: u16, target: &[u8]) -> Vec<u8> {
    let mut rdata = Vec::with_capacity(6 + target.len());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    rdata.extend_from_slice(&weight.to_be_bytes());
    rdata.extend_from_slice(&port.to_be_bytes());
    rdata.extend_from_slice(target);
    rdata
}

/// The records of one type at one name while the zone is being built: answer RDATAs and
/// additional records as (owner, type, RDATA). Flat vectors, sorted and de-duplicated once at
/// encoding: a build touches every name of the zone, and per-name tree maps would make its peak
/// memory many times the size of the zone it produces.
#[derive(Default)]
struct PendingSet {
    answers: Vec<Vec<u8>>,
    additional: Vec<(Vec<u8>, u16, Vec<u8>)>,
}

#[derive(Default)]
struct Builder {
    names: HashMap<Vec<u8>, Vec<(u16, PendingSet)>>,
}

impl Builder {
    fn sets(&mut self, name: &[u8]) -> &mut Vec<(u16, PendingSet)> {
        self.names.entry(name.to_vec()).or_default()
    }
    fn set(&mut self, name: &[u8], rtype: u16) -> &mut PendingSet {
        let sets = self.sets(name);
        let index = match sets.iter().position(|(t, _)| *t == rtype) {
            Some(index) => index,
            None => {
                sets.push((rtype, PendingSet::default()));
                sets.len() - 1
            }
        };
        &mut sets[index].1
    }
    fn touch(&mut self, name: &[u8]) {
        self.sets(name);
    }
    fn add(&mut self, name: &[u8], rtype: u16, rdata: Vec<u8>) {
        self.set(name, rtype).answers.push(rdata);
    }
    fn add_additional(
        &mut self,
        name: &[u8],
        rtype: u16,
        owner: &[u8],
        add_type: u16,
        rdata: Vec<u8>,
    ) {
        self.set(name, rtype)
            .additional
            .push((owner.to_vec(), add_type, rdata));
    }
}

impl Zone {
    /// A zone that answers SERVFAIL to everything (before the first sync).
    pub fn unsynced(config: &ZoneConfig) -> Self {
        let mut zone = Self::build(config, &[], &[]);
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
        let apex = encode_name(&config.zone).unwrap_or_else(|| vec![0]);
        let name = |relative: &str| -> Option<Vec<u8>> {
            let full = if relative.is_empty() {
                config.zone.clone()
            } else {
                format!("{relative}.{}", config.zone)
            };
            encode_name(&full)
        };
        let mut b = Builder::default();
        let mut missing = HashMap::new();
        let mut namespaces = HashSet::new();
        let ns_name = name("ns.dns").unwrap_or_default();

        b.add(&apex, rtype::NS, ns_name.clone());
        if let Some(v) = name("dns-version") {
            let mut txt = vec![5u8];
            txt.extend_from_slice(b"1.0.0");
            b.add(&v, rtype::TXT, txt);
        }
        if let Some(svc) = name("svc") {
            b.touch(&svc);
        }

        // Ready endpoints per (namespace, service).
        let mut endpoints: BTreeMap<(String, String), Vec<EndpointRecord>> = BTreeMap::new();
        for slice in slices {
            let l = slice.metadata.labels.clone().unwrap_or_default();
            let (Some(service), Some(ns)) = (
                l.get(labels::SERVICE_NAME),
                slice.metadata.namespace.clone(),
            ) else {
                continue;
            };
            let cluster = l
                .get(labels::SOURCE_CLUSTER)
                .cloned()
                .unwrap_or_default()
                .to_ascii_lowercase();
            let ports: Vec<(Option<String>, String, i32)> = slice
                .ports
                .iter()
                .flatten()
                .filter_map(|p| {
                    Some((
                        p.name.clone().filter(|n| !n.is_empty()),
                        p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                        p.port?,
                    ))
                })
                .collect();
            for e in &slice.endpoints {
                if e.conditions.as_ref().and_then(|c| c.ready) == Some(false) {
                    continue;
                }
                let addresses: Vec<IpAddr> =
                    e.addresses.iter().filter_map(|a| a.parse().ok()).collect();
                let Some(first) = addresses.first() else {
                    continue;
                };
                let hostname = e
                    .hostname
                    .clone()
                    .unwrap_or_else(|| dashed(first))
                    .to_ascii_lowercase();
                endpoints
                    .entry((ns.clone(), service.clone()))
                    .or_default()
                    .push(EndpointRecord {
                        cluster: cluster.clone(),
                        hostname,
                        addresses,
                        ports: ports.clone(),
                    });
            }
        }

        for import in imports {
            let (Some(ns), Some(svc), Some(spec)) = (
                import.metadata.namespace.as_deref(),
                import.metadata.name.as_deref(),
                import.spec.as_ref(),
            ) else {
                continue;
            };
            let Some(base) = name(&format!("{svc}.{ns}.svc")) else {
                continue;
            };
            if let Some(ns_label) = encode_name(ns) {
                namespaces.insert(ns_label[1..ns_label.len() - 1].to_vec());
            }
            if let Some(ns_node) = name(&format!("{ns}.svc")) {
                b.touch(&ns_node);
            }
            let ready = endpoints
                .get(&(ns.to_owned(), svc.to_owned()))
                .cloned()
                .unwrap_or_default();
            // Per-endpoint names resolve for every type of service.
            for e in &ready {
                if let Some(host) = name(&format!("{}.{}.{svc}.{ns}.svc", e.hostname, e.cluster))
                    .filter(|_| !e.cluster.is_empty())
                {
                    for address in &e.addresses {
                        let (t, rdata) = a_or_aaaa(address);
                        b.add(&host, t, rdata);
                    }
                }
                if let Some(cluster_name) = name(&format!("{}.{svc}.{ns}.svc", e.cluster)) {
                    missing.insert(cluster_name, Missing::ClusterScopedName);
                }
            }
            match spec.type_ {
                ServiceImportType::ClusterSetIP => {
                    let ips: Vec<IpAddr> =
                        spec.ips.iter().filter_map(|ip| ip.parse().ok()).collect();
                    b.touch(&base);
                    for ip in &ips {
                        let (t, rdata) = a_or_aaaa(ip);
                        b.add(&base, t, rdata);
                    }
                    let distinct: BTreeSet<i32> = spec.ports.iter().map(|p| p.port).collect();
                    let weight = (100 / distinct.len().max(1)) as u16;
                    for port in &distinct {
                        let Ok(port) = u16::try_from(*port) else {
                            continue;
                        };
                        b.add(&base, rtype::SRV, srv_rdata(weight, port, &base));
                        for ip in &ips {
                            let (t, rdata) = a_or_aaaa(ip);
                            b.add_additional(&base, rtype::SRV, &base, t, rdata);
                        }
                    }
                    for p in &spec.ports {
                        let (Some(port_name), Ok(port)) =
                            (p.name.as_deref(), u16::try_from(p.port))
                        else {
                            continue;
                        };
                        let proto = p.protocol.as_deref().unwrap_or("TCP").to_ascii_lowercase();
                        let Some(srv_name) = name(&format!("_{port_name}._{proto}.{svc}.{ns}.svc"))
                        else {
                            continue;
                        };
                        b.add(&srv_name, rtype::SRV, srv_rdata(100, port, &base));
                        for ip in &ips {
                            let (t, rdata) = a_or_aaaa(ip);
                            b.add_additional(&srv_name, rtype::SRV, &base, t, rdata);
                        }
                    }
                }
                ServiceImportType::Headless => {
                    if ready.is_empty() {
                        missing.insert(base, Missing::NoReadyEndpoints);
                        continue;
                    }
                    b.touch(&base);
                    for e in &ready {
                        for address in &e.addresses {
                            let (t, rdata) = a_or_aaaa(address);
                            b.add(&base, t, rdata);
                        }
                    }
                    let mut bare: BTreeSet<(Vec<u8>, u16)> = BTreeSet::new();
                    let mut named: BTreeMap<Vec<u8>, BTreeSet<(Vec<u8>, u16)>> = BTreeMap::new();
                    for e in ready.iter().filter(|e| !e.cluster.is_empty()) {
                        let Some(target) =
                            name(&format!("{}.{}.{svc}.{ns}.svc", e.hostname, e.cluster))
                        else {
                            continue;
                        };
                        for (port_name, proto, port) in &e.ports {
                            let Ok(port) = u16::try_from(*port) else {
                                continue;
                            };
                            bare.insert((target.clone(), port));
                            if let Some(port_name) = port_name
                                && let Some(srv_name) = name(&format!(
                                    "_{port_name}._{}.{svc}.{ns}.svc",
                                    proto.to_ascii_lowercase()
                                ))
                            {
                                named
                                    .entry(srv_name)
                                    .or_default()
                                    .insert((target.clone(), port));
                            }
                        }
                        for address in &e.addresses {
                            let (t, rdata) = a_or_aaaa(address);
                            b.add_additional(&base, rtype::SRV, &target, t, rdata.clone());
                            for (srv_name, _) in named.iter() {
                                b.add_additional(srv_name, rtype::SRV, &target, t, rdata.clone());
                            }
                        }
                    }
                    let weight = (100 / bare.len().max(1)) as u16;
                    for (target, port) in &bare {
                        b.add(&base, rtype::SRV, srv_rdata(weight, *port, target));
                    }
                    for (srv_name, targets) in named {
                        let weight = (100 / targets.len().max(1)) as u16;
                        for (target, port) in targets {
                            b.add(&srv_name, rtype::SRV, srv_rdata(weight, port, &target));
                        }
                    }
                }
            }
        }
        Self::encode(config, apex, b, missing, namespaces)
    }

    fn encode(
        config: &ZoneConfig,
        apex: Vec<u8>,
        b: Builder,
        missing: HashMap<Vec<u8>, Missing>,
        namespaces: HashSet<Vec<u8>>,
    ) -> Self {
        let mut soa_rdata =
            encode_name(&format!("ns.dns.{}", config.zone)).unwrap_or_else(|| vec![0]);
        soa_rdata
            .extend(encode_name(&format!("hostmaster.{}", config.zone)).unwrap_or_else(|| vec![0]));
        for value in [1u32, 7200, 1800, 86400, config.ttl] {
            soa_rdata.extend_from_slice(&value.to_be_bytes());
        }
        let mut soa = Vec::new();
        push_rr(&mut soa, &apex, rtype::SOA, config.ttl, &soa_rdata);

        let mut nodes = HashMap::with_capacity(b.names.len() + 1);
        let mut bytes = soa.len();
        for (owner, mut types) in b.names {
            let mut node = Node::default();
            types.sort_by_key(|(t, _)| *t);
            for (t, pending) in types {
                let PendingSet {
                    answers: mut rdatas,
                    mut additional,
                } = pending;
                rdatas.sort();
                rdatas.dedup();
                additional.sort();
                additional.dedup();
                let ttl = if t == rtype::TXT {
                    config.txt_ttl
                } else {
                    config.ttl
                };
                let mut set = RrSet::default();
                for rdata in rdatas {
                    set.answers.extend_from_slice(&[0xc0, 0x0c]);
                    push_rr_tail(&mut set.answers, t, ttl, &rdata);
                    set.answer_count += 1;
                }
                for (add_owner, add_type, rdata) in additional {
                    push_rr(
                        &mut set.additional,
                        &add_owner,
                        add_type,
                        config.ttl,
                        &rdata,
                    );
                    set.additional_count += 1;
                }
                set.answers.shrink_to_fit();
                set.additional.shrink_to_fit();
                bytes += set.answers.len() + set.additional.len();
                node.sets.push((t, set));
            }
            nodes.insert(owner, node);
        }
        // The apex always answers SOA.
        let apex_node = nodes.entry(apex.clone()).or_default();
        let mut soa_set = RrSet::default();
        soa_set.answers.extend_from_slice(&[0xc0, 0x0c]);
        push_rr_tail(&mut soa_set.answers, rtype::SOA, config.ttl, &soa_rdata);
        soa_set.answer_count = 1;
        apex_node.sets.push((rtype::SOA, soa_set));
        let names = nodes.len();
        Self {
            apex,
            nodes,
            missing,
            namespaces,
            soa,
            synced: true,
            max_udp_payload: config.max_udp_payload.max(MIN_UDP_PAYLOAD),
            names,
            bytes,
        }
    }

    /// Why `name` (lowercase wire format, under the zone) does not exist.
    pub(super) fn why_missing(&self, name: &[u8]) -> Missing {
        if let Some(reason) = self.missing.get(name) {
            return *reason;
        }
        let relative: Vec<&[u8]> = wire::labels(name).collect();
        let depth = relative.len() - wire::labels(&self.apex).count();
        // ... <svc>.<ns>.svc.<zone>: the namespace label sits just before "svc".
        if depth >= 3 && relative[depth - 1] == b"svc" {
            if !self.namespaces.contains(relative[depth - 2]) {
                return Missing::NamespaceNotImported;
            }
            if depth == 3 {
                return Missing::NoSuchService;
            }
        } else if depth == 2 && relative[1] == b"svc" {
            return Missing::NamespaceNotImported;
        }
        Missing::NoSuchName
    }
}
