//! Per-member caps on what an importer takes from the hub.
//!
//! Every record costs every importer a ClusterIP (its derived Service) and every endpoint a
//! place in an MCS slice, so one member publishing without bound could exhaust the Service
//! CIDR, the memory and the apiserver of every cluster. An importer therefore takes at most
//! [`Limits::records`] records and [`Limits::endpoints`] endpoints (in endpoint copies) from each
//! member: the oldest on the hub first (by the hub's creation time, then name, the same order
//! in every importer), so a member that goes over the limit only loses what it published last
//! and what it had keeps working.
//!
//! This runs on the whole view of the hub, before a pass is restricted to some services: whether
//! one service's record is taken depends on the member's other records. [`Caps`] remembers what
//! it left out, so a pass can mark the services whose part changed without an event of theirs
//! (a record deleted makes room for another service's).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService};
use atoll_api::keys::{ObjectKey, ServiceKey};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::budget::Kind;
use crate::keys::{of_copy, of_record};
use crate::validate::Reason;

/// How much an importer takes from each member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Records (exported services) per member.
    pub records: usize,
    /// Endpoints, over all of a member's endpoint copies.
    pub endpoints: usize,
    /// Service ports, over all of a member's records (each becomes a port of a derived
    /// Service: what every importer's kube-proxy programs).
    pub ports: usize,
    /// Endpoint-port pairs of one service, over a member's copies of it (what kube-proxy
    /// programs for it, and the bound of its SRV records).
    pub endpoint_ports: usize,
    /// Endpoint-port pairs over all of a member's copies (bounds its DNS records in every
    /// importer: an A/AAAA record per endpoint, an SRV record per named port of each).
    pub member_endpoint_ports: usize,
    /// Bytes of a member's hub objects held in memory (see [`crate::budget`]).
    pub hub_bytes: usize,
}

impl Limits {
    pub const DEFAULT_RECORDS: usize = 2000;
    pub const DEFAULT_ENDPOINTS: usize = 20_000;
    /// Two ports per record at the record limit, on average.
    pub const DEFAULT_PORTS: usize = 4000;
    /// A StatefulSet of 1,000 pods with 50 ports, or 5,000 with 10.
    pub const DEFAULT_ENDPOINT_PORTS: usize = 50_000;
    /// Five ports for each endpoint at the endpoint limit: about 21 MiB of `atoll dns` zone
    /// (`make bench-memory`).
    pub const DEFAULT_MEMBER_ENDPOINT_PORTS: usize = 100_000;
    /// Four times what a member at the record and endpoint limits publishes with typical
    /// objects (2,000 records of ~0.7 KB, 20,000 endpoints of ~0.15 KB in copies: ~4.4 MB).
    pub const DEFAULT_HUB_BYTES: usize = 24 << 20;
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            records: Self::DEFAULT_RECORDS,
            endpoints: Self::DEFAULT_ENDPOINTS,
            ports: Self::DEFAULT_PORTS,
            endpoint_ports: Self::DEFAULT_ENDPOINT_PORTS,
            member_endpoint_ports: Self::DEFAULT_MEMBER_ENDPOINT_PORTS,
            hub_bytes: Self::DEFAULT_HUB_BYTES,
        }
    }
}

/// What one member publishes, counted for the fast path of [`Caps::admit_counted`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub records: usize,
    pub endpoints: usize,
    pub ports: usize,
    /// Endpoint-port pairs over all its copies: a bound of any one service's.
    pub endpoint_ports: usize,
}

impl Counts {
    /// The counts of a member's `records` and `copies`.
    pub fn of(records: &[Arc<ExportedService>], copies: &[Arc<ExportedEndpointSlice>]) -> Self {
        let sum = |n: &mut usize, add: usize| *n = n.saturating_add(add);
        let mut counts = Self {
            records: records.len(),
            ..Self::default()
        };
        for r in records {
            sum(&mut counts.ports, r.spec.ports.len());
        }
        for c in copies {
            sum(&mut counts.endpoints, c.spec.endpoints.len());
            sum(&mut counts.endpoint_ports, endpoint_ports(c));
        }
        counts
    }

    /// Whether every limit holds (for any one service's pairs: all of them together do).
    fn within(&self, limits: &Limits) -> bool {
        self.records <= limits.records
            && self.endpoints <= limits.endpoints
            && self.ports <= limits.ports
            && self.endpoint_ports <= limits.endpoint_ports.min(limits.member_endpoint_ports)
    }
}

/// A member over a limit, and what of it was left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OverLimit {
    pub cluster: String,
    /// [`Reason::TooManyRecords`], [`Reason::TooManyPorts`], [`Reason::TooManyEndpoints`],
    /// [`Reason::TooManyEndpointPorts`]; from the store's budget ([`crate::budget`]):
    /// [`Reason::OverByteBudget`] and [`Reason::Annotation`].
    pub reason: Reason,
    /// What was left out: records or endpoint copies.
    pub kind: Kind,
    /// What the member publishes: records, ports, endpoints, endpoint-port pairs, bytes.
    pub published: usize,
    pub limit: usize,
    /// Objects (records or copies) left out.
    pub ignored: usize,
    /// The services of what was left out.
    pub services: BTreeSet<ServiceKey>,
    /// The one service a per-service limit is about (`None`: a limit of the whole member).
    pub service: Option<ServiceKey>,
}

impl OverLimit {
    /// For people: what the member does and what the importer leaves out.
    pub fn message(&self) -> String {
        let objects = match self.kind {
            Kind::Record => "records",
            Kind::Copy => "endpoint copies",
        };
        let (member, published, limit, ignored) =
            (&self.cluster, self.published, self.limit, self.ignored);
        match self.reason {
            Reason::OverByteBudget => format!(
                "member {member}'s hub objects take more bytes than the budget of {limit} (--max-hub-bytes-per-member): {ignored} {objects} ({published} bytes) are not held here, their services not imported from it"
            ),
            Reason::Annotation => format!(
                "member {member} publishes {ignored} records whose exported annotations take more bytes than an import may carry ({limit}): they are not held here ({published} bytes)"
            ),
            Reason::TooManyEndpointPorts => {
                let (of, of_it) = match &self.service {
                    Some(service) => (format!(" for {service}"), " of it"),
                    None => (" over its copies".to_owned(), ""),
                };
                format!(
                    "member {member} publishes {published} endpoint-port pairs{of}, more than the limit of {limit}: its {ignored} newest endpoint copies{of_it} are ignored"
                )
            }
            reason => {
                let what = match reason {
                    Reason::TooManyRecords => "records",
                    Reason::TooManyPorts => "Service ports",
                    _ => "endpoints",
                };
                format!(
                    "member {member} publishes {published} {what}, more than the limit of {limit}: its {ignored} newest {objects} are ignored"
                )
            }
        }
    }
}

/// What the caps let through.
#[derive(Clone, Debug, Default)]
pub struct Admitted {
    pub records: Vec<Arc<ExportedService>>,
    pub copies: Vec<Arc<ExportedEndpointSlice>>,
    pub over: Vec<OverLimit>,
    /// Services whose objects were taken in one pass and left out in the other.
    pub touched: BTreeSet<ServiceKey>,
}

/// The member whose hub namespace holds an object.
fn member(meta: &ObjectMeta) -> Option<&str> {
    meta.namespace
        .as_deref()?
        .strip_prefix(hub::NAMESPACE_PREFIX)
}

/// Oldest on the hub first, then by name.
fn age_order(meta: &ObjectMeta) -> (Option<k8s_openapi::jiff::Timestamp>, Option<&str>) {
    (
        meta.creation_timestamp.as_ref().map(|t| t.0),
        meta.name.as_deref(),
    )
}

/// Objects of each member (in the view's order).
fn by_member<T>(
    objects: &[Arc<T>],
    meta: impl Fn(&T) -> &ObjectMeta,
) -> BTreeMap<&str, Vec<&Arc<T>>> {
    let mut members: BTreeMap<&str, Vec<&Arc<T>>> = BTreeMap::new();
    for object in objects {
        if let Some(m) = member(meta(object)) {
            members.entry(m).or_default().push(object);
        }
    }
    members
}

/// Puts a member's objects in the order they count against its limit (only a member over a
/// limit needs it: every pass runs the caps over the whole view).
fn oldest_first<T>(list: &mut [&Arc<T>], meta: impl Fn(&T) -> &ObjectMeta) {
    list.sort_by(|a, b| age_order(meta(a)).cmp(&age_order(meta(b))));
}

/// How many of `list`'s first objects fit in `limit` when each weighs `weight`.
fn prefix_within<T>(list: &[T], limit: usize, weight: impl Fn(&T) -> usize) -> usize {
    let mut taken = 0usize;
    list.iter()
        .take_while(|o| {
            taken = taken.saturating_add(weight(o));
            taken <= limit
        })
        .count()
}

/// Endpoint-port pairs of a copy: what kube-proxy programs for it.
fn endpoint_ports(copy: &ExportedEndpointSlice) -> usize {
    copy.spec
        .endpoints
        .len()
        .saturating_mul(copy.spec.ports.len().max(1))
}

/// The objects the limits left out, by kind (a record and a copy may share a name), with
/// their services.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ignored {
    pub records: BTreeMap<ObjectKey, ServiceKey>,
    pub copies: BTreeMap<ObjectKey, ServiceKey>,
}

/// What of `records` and `copies` the limits let through, and which objects they left out.
pub fn admit(
    limits: &Limits,
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
) -> (Admitted, Ignored) {
    let mut ignored = Ignored::default();
    let mut over = Vec::new();
    for (cluster, mut list) in by_member(records, |r| &r.metadata) {
        let ports: usize = list.iter().map(|r| r.spec.ports.len()).sum();
        if list.len() <= limits.records && ports <= limits.ports {
            continue;
        }
        oldest_first(&mut list, |r| &r.metadata);
        // The oldest records up to both limits; from the first that does not fit, none.
        let fits = prefix_within(&list, limits.ports, |r| r.spec.ports.len()).min(limits.records);
        let left_out = &list[fits..];
        ignored.records.extend(
            left_out
                .iter()
                .map(|r| (ObjectKey::of(&r.metadata), of_record(r))),
        );
        let (reason, published, limit) = if fits == limits.records {
            (Reason::TooManyRecords, list.len(), limits.records)
        } else {
            (Reason::TooManyPorts, ports, limits.ports)
        };
        over.push(OverLimit {
            cluster: cluster.to_owned(),
            reason,
            kind: Kind::Record,
            published,
            limit,
            ignored: left_out.len(),
            services: left_out.iter().map(|r| of_record(r)).collect(),
            service: None,
        });
    }
    for (cluster, list) in by_member(copies, |c| &c.metadata) {
        // One service's copies first: those over its endpoint-port limit are left out before
        // they count against the member's endpoints.
        let mut by_service: BTreeMap<ServiceKey, Vec<&Arc<ExportedEndpointSlice>>> =
            BTreeMap::new();
        for copy in list {
            by_service.entry(of_copy(copy)).or_default().push(copy);
        }
        let mut within = Vec::new();
        for (service, mut copies) in by_service {
            let pairs: usize = copies.iter().map(|c| endpoint_ports(c)).sum();
            if pairs <= limits.endpoint_ports {
                within.extend(copies);
                continue;
            }
            oldest_first(&mut copies, |c| &c.metadata);
            let fits = prefix_within(&copies, limits.endpoint_ports, |c| endpoint_ports(c));
            let left_out = copies.split_off(fits);
            within.extend(copies);
            ignored.copies.extend(
                left_out
                    .iter()
                    .map(|c| (ObjectKey::of(&c.metadata), of_copy(c))),
            );
            over.push(OverLimit {
                cluster: cluster.to_owned(),
                reason: Reason::TooManyEndpointPorts,
                kind: Kind::Copy,
                published: pairs,
                limit: limits.endpoint_ports,
                ignored: left_out.len(),
                services: BTreeSet::from([service.clone()]),
                service: Some(service),
            });
        }
        let mut list = within;
        let published: usize = list.iter().map(|c| c.spec.endpoints.len()).sum();
        let pairs: usize = list.iter().map(|c| endpoint_ports(c)).sum();
        if published <= limits.endpoints && pairs <= limits.member_endpoint_ports {
            continue;
        }
        oldest_first(&mut list, |c| &c.metadata);
        // The oldest copies up to both limits; from the first that does not fit, none.
        let by_endpoints = prefix_within(&list, limits.endpoints, |c| c.spec.endpoints.len());
        let by_pairs = prefix_within(&list, limits.member_endpoint_ports, |c| endpoint_ports(c));
        let fits = by_endpoints.min(by_pairs);
        let left_out = &list[fits..];
        ignored.copies.extend(
            left_out
                .iter()
                .map(|c| (ObjectKey::of(&c.metadata), of_copy(c))),
        );
        let (reason, published, limit) = if by_endpoints <= by_pairs {
            (Reason::TooManyEndpoints, published, limits.endpoints)
        } else {
            (
                Reason::TooManyEndpointPorts,
                pairs,
                limits.member_endpoint_ports,
            )
        };
        over.push(OverLimit {
            cluster: cluster.to_owned(),
            reason,
            kind: Kind::Copy,
            published,
            limit,
            ignored: left_out.len(),
            services: left_out.iter().map(|c| of_copy(c)).collect(),
            service: None,
        });
    }
    let kept = |left_out: &BTreeMap<ObjectKey, ServiceKey>, meta: &ObjectMeta| {
        left_out.is_empty() || !left_out.contains_key(&ObjectKey::of(meta))
    };
    let admitted = Admitted {
        records: records
            .iter()
            .filter(|r| kept(&ignored.records, &r.metadata))
            .cloned()
            .collect(),
        copies: copies
            .iter()
            .filter(|c| kept(&ignored.copies, &c.metadata))
            .cloned()
            .collect(),
        over,
        touched: BTreeSet::new(),
    };
    (admitted, ignored)
}

/// The caps of one importer, remembering what they left out in the last pass.
#[derive(Clone, Debug, Default)]
pub struct Caps {
    limits: Limits,
    ignored: Ignored,
}

/// The services of the objects in one of `a` and `b` but not the other.
fn changed(
    a: &BTreeMap<ObjectKey, ServiceKey>,
    b: &BTreeMap<ObjectKey, ServiceKey>,
    into: &mut BTreeSet<ServiceKey>,
) {
    for (key, service) in a.iter().chain(b) {
        if a.contains_key(key) != b.contains_key(key) {
            into.insert(service.clone());
        }
    }
}

impl Caps {
    pub fn new(limits: Limits) -> Self {
        Self {
            limits,
            ignored: Ignored::default(),
        }
    }

    /// [`admit`](Self::admit) for a view whose members' objects are counted in `published`
    /// (cluster → counts): while no member is over a limit, and none was at the last call, the
    /// view passes as it is without looking at each object (an importer of a large fleet runs
    /// this at every pass).
    pub fn admit_counted(
        &mut self,
        records: Vec<Arc<ExportedService>>,
        copies: Vec<Arc<ExportedEndpointSlice>>,
        published: &BTreeMap<String, Counts>,
    ) -> Admitted {
        let within = published.values().all(|c| c.within(&self.limits));
        if within && self.ignored == Ignored::default() {
            return Admitted {
                records,
                copies,
                ..Admitted::default()
            };
        }
        self.admit(&records, &copies)
    }

    /// What of the view the limits let through now, with the services whose part changed
    /// since the last call.
    pub fn admit(
        &mut self,
        records: &[Arc<ExportedService>],
        copies: &[Arc<ExportedEndpointSlice>],
    ) -> Admitted {
        let (mut admitted, ignored) = admit(&self.limits, records, copies);
        changed(
            &ignored.records,
            &self.ignored.records,
            &mut admitted.touched,
        );
        changed(&ignored.copies, &self.ignored.copies, &mut admitted.touched);
        self.ignored = ignored;
        admitted
    }
}

#[cfg(test)]
#[path = "caps_tests.rs"]
mod tests;
