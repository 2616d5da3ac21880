//! Prometheus metrics of the DNS server. Query counters are created up front for every
//! (type, rcode) pair so the hot path only increments an atomic.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::answer::Outcome;
use crate::wire::{rcode, rtype};

/// Query types counted separately; everything else is `other`.
const TYPES: [(u16, &str); 6] = [
    (rtype::A, "A"),
    (rtype::AAAA, "AAAA"),
    (rtype::SRV, "SRV"),
    (rtype::TXT, "TXT"),
    (rtype::SOA, "SOA"),
    (rtype::NS, "NS"),
];
const RCODES: [(u8, &str); 8] = [
    (rcode::NOERROR, "NOERROR"),
    (rcode::FORMERR, "FORMERR"),
    (rcode::SERVFAIL, "SERVFAIL"),
    (rcode::NXDOMAIN, "NXDOMAIN"),
    (rcode::NOTIMP, "NOTIMP"),
    (rcode::REFUSED, "REFUSED"),
    (rcode::BADVERS, "BADVERS"),
    (u8::MAX, "dropped"),
];

/// Why a TCP connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpClose {
    /// The client closed it.
    Client,
    /// No complete query within the idle timeout.
    Idle,
    /// Open for the longest time a connection may last.
    Lifetime,
    /// It had sent the most queries one connection may send.
    QueryLimit,
    /// The server is stopping.
    Stop,
    /// A message that cannot be answered (not a query), or a socket error.
    Error,
}

impl TcpClose {
    const ALL: [Self; 6] = [
        Self::Client,
        Self::Idle,
        Self::Lifetime,
        Self::QueryLimit,
        Self::Stop,
        Self::Error,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Client => "client",
            Self::Idle => "idle",
            Self::Lifetime => "lifetime",
            Self::QueryLimit => "query_limit",
            Self::Stop => "stop",
            Self::Error => "error",
        }
    }
}

/// Why a TCP connection was reset as soon as it was accepted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpReject {
    /// The most connections allowed were open.
    Limit,
    /// The most connections allowed from one address were open from its address.
    PerSource,
}

impl TcpReject {
    const ALL: [Self; 2] = [Self::Limit, Self::PerSource];

    fn label(self) -> &'static str {
        match self {
            Self::Limit => "limit",
            Self::PerSource => "per_source",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CloseLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct QueryLabels {
    qtype: &'static str,
    rcode: &'static str,
    transport: &'static str,
}

/// Every metric of the DNS server.
#[derive(Debug, Clone)]
pub struct DnsMetrics {
    family: Family<QueryLabels, Counter>,
    /// [transport][type][rcode]
    counters: Vec<Vec<Vec<Counter>>>,
    /// Sampled query handling time (parse, look up, encode), seconds.
    pub latency: Histogram,
    /// Truncated UDP answers.
    pub truncated: Counter,
    /// Unix time of the current snapshot.
    pub snapshot_timestamp: Gauge,
    /// Names in the current snapshot.
    pub snapshot_names: Gauge,
    /// Bytes of pre-encoded records in the current snapshot.
    pub snapshot_bytes: Gauge,
    /// Records left out of the current snapshot at the zone's caps (per name, per service).
    pub snapshot_trimmed: Gauge,
    /// Snapshots swapped in (the first one, then one per batch of changes).
    pub rebuilds: Counter,
    /// Time to make the next snapshot from a batch of changes, seconds: proportional to the
    /// services the batch changed, not to the zone.
    pub update_seconds: Histogram,
    /// Services re-encoded by snapshot updates.
    pub updated_services: Counter,
    /// MCS EndpointSlices ignored because no trusted controller manages them.
    pub untrusted_slices: Gauge,
    /// UDP packets dropped unanswered for their source address (see
    /// [`crate::server::udp::answerable_source`]).
    pub udp_dropped_sources: Counter,
    /// TCP connections open now.
    pub tcp_connections: Gauge,
    tcp_rejected: Family<CloseLabels, Counter>,
    tcp_closed: Family<CloseLabels, Counter>,
}

impl Default for DnsMetrics {
    fn default() -> Self {
        let family: Family<QueryLabels, Counter> = Family::default();
        let counters = ["udp", "tcp"]
            .iter()
            .map(|transport| {
                TYPES
                    .iter()
                    .map(|(_, t)| *t)
                    .chain(["other"])
                    .map(|qtype| {
                        RCODES
                            .iter()
                            .map(|(_, r)| {
                                family
                                    .get_or_create(&QueryLabels {
                                        qtype,
                                        rcode: r,
                                        transport,
                                    })
                                    .clone()
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        Self {
            family,
            counters,
            latency: Histogram::new(exponential_buckets(0.000_000_5, 2.0, 16)),
            truncated: Counter::default(),
            snapshot_timestamp: Gauge::default(),
            snapshot_names: Gauge::default(),
            snapshot_bytes: Gauge::default(),
            snapshot_trimmed: Gauge::default(),
            rebuilds: Counter::default(),
            update_seconds: Histogram::new(exponential_buckets(0.000_01, 2.0, 16)),
            updated_services: Counter::default(),
            untrusted_slices: Gauge::default(),
            udp_dropped_sources: Counter::default(),
            tcp_connections: Gauge::default(),
            tcp_rejected: {
                let family: Family<CloseLabels, Counter> = Family::default();
                for reason in TcpReject::ALL {
                    drop(family.get_or_create(&CloseLabels {
                        reason: reason.label(),
                    }));
                }
                family
            },
            tcp_closed: {
                let family: Family<CloseLabels, Counter> = Family::default();
                // Every reason shows up, at 0, before the first connection ends.
                for reason in TcpClose::ALL {
                    drop(family.get_or_create(&CloseLabels {
                        reason: reason.label(),
                    }));
                }
                family
            },
        }
    }
}

impl DnsMetrics {
    /// Counts one handled packet.
    pub fn count(&self, tcp: bool, outcome: &Outcome) {
        let t = outcome
            .qtype
            .and_then(|q| TYPES.iter().position(|(code, _)| *code == q))
            .unwrap_or(TYPES.len());
        let r = RCODES.iter().position(|(code, _)| {
            Some(*code) == outcome.rcode || (*code == u8::MAX && outcome.rcode.is_none())
        });
        if let Some(counter) = r.and_then(|r| self.counters.get(usize::from(tcp))?.get(t)?.get(r)) {
            counter.inc();
        }
        if outcome.truncated {
            self.truncated.inc();
        }
    }

    /// The counter of TCP connections reset as soon as accepted for `reason`.
    pub fn tcp_rejected(&self, reason: TcpReject) -> Counter {
        self.tcp_rejected
            .get_or_create(&CloseLabels {
                reason: reason.label(),
            })
            .clone()
    }

    /// The counter of TCP connections that ended for `reason`.
    pub fn tcp_closed(&self, reason: TcpClose) -> Counter {
        self.tcp_closed
            .get_or_create(&CloseLabels {
                reason: reason.label(),
            })
            .clone()
    }

    /// Registers every metric under the `atoll_dns` prefix.
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("atoll_dns");
        r.register(
            "queries",
            "DNS packets handled, by query type, response code and transport",
            self.family.clone(),
        );
        r.register(
            "query_seconds",
            "Sampled time to answer one query (1 in 64)",
            self.latency.clone(),
        );
        r.register(
            "truncated",
            "UDP answers truncated (TC) for size",
            self.truncated.clone(),
        );
        r.register(
            "snapshot_timestamp_seconds",
            "Unix time the current zone snapshot was built",
            self.snapshot_timestamp.clone(),
        );
        r.register(
            "snapshot_names",
            "Names in the current zone snapshot",
            self.snapshot_names.clone(),
        );
        r.register(
            "snapshot_bytes",
            "Bytes of pre-encoded records in the current snapshot",
            self.snapshot_bytes.clone(),
        );
        r.register(
            "snapshot_trimmed_records",
            "Records left out of the current snapshot: a name holding more than one message can carry, or a service past its record budget",
            self.snapshot_trimmed.clone(),
        );
        r.register(
            "snapshot_rebuilds",
            "Zone snapshots swapped in (the first, then one per batch of changes)",
            self.rebuilds.clone(),
        );
        r.register(
            "snapshot_update_seconds",
            "Time to make the next zone snapshot from a batch of changed services",
            self.update_seconds.clone(),
        );
        r.register(
            "snapshot_updated_services",
            "Services re-encoded by zone snapshot updates",
            self.updated_services.clone(),
        );
        r.register(
            "untrusted_slices",
            "MCS EndpointSlices ignored because their endpointslice.kubernetes.io/managed-by is \
             not a trusted controller (--trusted-slice-manager)",
            self.untrusted_slices.clone(),
        );
        r.register(
            "udp_dropped_sources",
            "UDP packets dropped unanswered because of their source (port 0, unspecified, \
             broadcast or multicast address)",
            self.udp_dropped_sources.clone(),
        );
        r.register(
            "tcp_connections",
            "TCP connections open",
            self.tcp_connections.clone(),
        );
        r.register(
            "tcp_rejected_connections",
            "TCP connections reset as soon as accepted, by the limit reached: limit \
             (--tcp-max-connections open) or per_source (--tcp-max-connections-per-source open \
             from its address)",
            self.tcp_rejected.clone(),
        );
        r.register(
            "tcp_closed_connections",
            "TCP connections ended, by reason",
            self.tcp_closed.clone(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limit_metrics_are_exported_under_their_documented_names() {
        let metrics = DnsMetrics::default();
        let mut registry = Registry::default();
        metrics.register(&mut registry);
        metrics.udp_dropped_sources.inc();
        metrics.tcp_rejected(TcpReject::PerSource).inc();
        metrics.tcp_connections.set(3);
        metrics.untrusted_slices.set(2);
        metrics.tcp_closed(TcpClose::QueryLimit).inc();
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "atoll_dns_udp_dropped_sources_total 1",
            "atoll_dns_tcp_rejected_connections_total{reason=\"per_source\"} 1",
            "atoll_dns_tcp_rejected_connections_total{reason=\"limit\"} 0",
            "atoll_dns_tcp_connections 3",
            "atoll_dns_untrusted_slices 2",
            "atoll_dns_tcp_closed_connections_total{reason=\"query_limit\"} 1",
            "atoll_dns_tcp_closed_connections_total{reason=\"idle\"} 0",
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "{line} missing from:\n{text}"
            );
        }
    }
}
