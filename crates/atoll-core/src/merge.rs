//! The merge: every member's export records of one `namespace/name` in, one ServiceImport
//! spec, its exported labels and annotations, the per-cluster ports and one Conflict verdict out.
//!
//! Rules (KEP-1645's conflict resolution): the oldest export wins every property that differs
//! (oldest by [`crate::precedence`]: the member's `exportCreated`, but never earlier than the
//! hub's creation of its record; ties broken by the claim, then the cluster id); ports are
//! merged by name, then by (protocol, port), as a union in precedence order; every
//! constituent export gets the same verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

use atoll_api::hub::{ExportedService, ExportedServiceSpec};
use atoll_api::multicluster::{ServiceImportSpec, ServicePort, export_condition as reason};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// A property on which the constituent exports of a service disagree.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConflictKind {
    Port,
    Type,
    SessionAffinity,
    SessionAffinityConfig,
    InternalTrafficPolicy,
    TrafficDistribution,
    IpFamily,
    Labels,
    Annotations,
    ClusterSelectors,
}

impl ConflictKind {
    /// The reason it gives on the `Conflict` condition (a CamelCase word, comma-joined with
    /// the others when several apply).
    pub fn reason(self) -> &'static str {
        match self {
            Self::Port => reason::REASON_PORT_CONFLICT,
            Self::Type => reason::REASON_TYPE_CONFLICT,
            Self::SessionAffinity => reason::REASON_SESSION_AFFINITY_CONFLICT,
            Self::SessionAffinityConfig => reason::REASON_SESSION_AFFINITY_CONFIG_CONFLICT,
            Self::InternalTrafficPolicy => reason::REASON_INTERNAL_TRAFFIC_POLICY_CONFLICT,
            Self::TrafficDistribution => reason::REASON_TRAFFIC_DISTRIBUTION_CONFLICT,
            Self::IpFamily => reason::REASON_IP_FAMILY_CONFLICT,
            Self::Labels => reason::REASON_LABELS_CONFLICT,
            Self::Annotations => reason::REASON_ANNOTATIONS_CONFLICT,
            Self::ClusterSelectors => reason::REASON_CLUSTER_SELECTORS_CONFLICT,
        }
    }

    /// The field, as an operator would name it in a message.
    pub fn field(self) -> &'static str {
        match self {
            Self::Port => "ports",
            Self::Type => "type (headless or not)",
            Self::SessionAffinity => "sessionAffinity",
            Self::SessionAffinityConfig => "sessionAffinityConfig",
            Self::InternalTrafficPolicy => "internalTrafficPolicy",
            Self::TrafficDistribution => "trafficDistribution",
            Self::IpFamily => "ipFamilies",
            Self::Labels => "exportedLabels",
            Self::Annotations => "exportedAnnotations",
            Self::ClusterSelectors => "clusterSelectors",
        }
    }
}

/// The Conflict verdict shared by every constituent export of a service.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Conflicts {
    /// The properties that differ; empty means no conflict.
    pub kinds: BTreeSet<ConflictKind>,
    /// Clusters whose export differs from the winner's in at least one property.
    pub disagreeing: BTreeSet<String>,
}

impl Conflicts {
    /// Whether any property conflicts.
    pub fn any(&self) -> bool {
        !self.kinds.is_empty()
    }

    /// The condition reason: the conflict reasons joined with commas (valid against the CRD
    /// pattern), or `NoConflicts`.
    pub fn reason(&self) -> String {
        if self.kinds.is_empty() {
            return reason::REASON_NO_CONFLICTS.to_owned();
        }
        self.kinds
            .iter()
            .map(|k| k.reason())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The condition message: which fields, who won and why, who disagrees.
    pub fn message(&self, winner: &str) -> String {
        if self.kinds.is_empty() {
            return String::new();
        }
        let fields: Vec<&str> = self.kinds.iter().map(|k| k.field()).collect();
        let mut message = format!(
            "exports of this service disagree on {}; the oldest export, from cluster {winner}, wins",
            fields.join(", ")
        );
        let others: Vec<&str> = self.disagreeing.iter().map(String::as_str).collect();
        let _ = write!(message, " (clusters that differ: {})", others.join(", "));
        message
    }
}

/// The merged view of one exported service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergedService {
    pub namespace: String,
    pub name: String,
    /// The ServiceImport spec, without `ips` (those come from each importer's derived Service).
    pub spec: ServiceImportSpec,
    /// Labels for the ServiceImport, from the winner's `exportedLabels`.
    pub labels: BTreeMap<String, String>,
    /// Annotations for the ServiceImport, from the winner's `exportedAnnotations`.
    pub annotations: BTreeMap<String, String>,
    /// KEP-5939: the winner's cluster selectors (the whole list: lists are compared whole).
    pub cluster_selectors: Vec<atoll_api::cluster_selector::ClusterSelector>,
    /// Exporting clusters, sorted.
    pub clusters: Vec<String>,
    /// The cluster whose export has precedence.
    pub winner: String,
    /// When the winner's (the oldest) export counts from.
    pub oldest_export: Time,
    /// The verdict for every constituent export.
    pub conflicts: Conflicts,
    /// For each exporting cluster, the import ports its Service really exposes: traffic to a
    /// port may only reach clusters listed for it (a cluster that lacks a port must
    /// not receive traffic for it).
    pub cluster_ports: BTreeMap<String, Vec<ServicePort>>,
}

fn protocol(port: &ServicePort) -> &str {
    port.protocol.as_deref().unwrap_or("TCP")
}

/// Same port as seen by clients: name, protocol and number (appProtocol is a hint only).
fn same_port(a: &ServicePort, b: &ServicePort) -> bool {
    a.name == b.name && protocol(a) == protocol(b) && a.port == b.port
}

/// Precedence order: oldest export first (see [`crate::precedence`]), each record with the
/// time it counts from.
fn precedence(records: Vec<(&ExportedServiceSpec, Time)>) -> Vec<(&ExportedServiceSpec, Time)> {
    let mut ordered = records;
    ordered.sort_by(|(a, ta), (b, tb)| {
        crate::precedence::key(ta, &a.cluster).cmp(&crate::precedence::key(tb, &b.cluster))
    });
    // One export per cluster: a duplicate (a malformed hub) loses to the earlier one.
    let mut seen = BTreeSet::new();
    ordered.retain(|(r, _)| seen.insert(r.cluster.clone()));
    ordered
}

/// Merges the export records of one service as the hub holds them: each export counts from
/// the later of its claimed time and the hub's creation of its record. All records must name
/// the same namespace and name; returns `None` when there are none.
pub fn merge_records(records: &[&ExportedService]) -> Option<MergedService> {
    merge_ranked(
        records
            .iter()
            .map(|r| (&r.spec, crate::precedence::of_record(r)))
            .collect(),
    )
}

/// Merges export records whose claimed times are taken as they are (records not read from a
/// hub). All records must name the same namespace and name; returns `None` when there are none.
pub fn merge(records: &[&ExportedServiceSpec]) -> Option<MergedService> {
    merge_ranked(
        records
            .iter()
            .map(|r| (*r, r.export_created.clone()))
            .collect(),
    )
}

fn merge_ranked(records: Vec<(&ExportedServiceSpec, Time)>) -> Option<MergedService> {
    let ranked = precedence(records);
    let oldest = ranked.first()?.1.clone();
    let ordered: Vec<&ExportedServiceSpec> = ranked.into_iter().map(|(r, _)| r).collect();
    let winner = *ordered.first()?;
    let mut conflicts = Conflicts::default();
    let mut note = |kind: ConflictKind, cluster: &str, differs: bool| {
        if differs {
            conflicts.kinds.insert(kind);
            conflicts.disagreeing.insert(cluster.to_owned());
        }
    };

    let mut ports: Vec<ServicePort> = Vec::new();
    let mut winner_set: Vec<ServicePort> = winner.ports.clone();
    winner_set.sort();
    for record in &ordered {
        let mut record_set = record.ports.clone();
        record_set.sort();
        note(
            ConflictKind::Port,
            &record.cluster,
            record_set != winner_set,
        );
        for port in &record.ports {
            let taken = ports.iter().any(|p| {
                p.name == port.name || (protocol(p) == protocol(port) && p.port == port.port)
            });
            if !taken {
                ports.push(port.clone());
            }
        }
        let w = winner;
        note(ConflictKind::Type, &record.cluster, record.type_ != w.type_);
        note(
            ConflictKind::SessionAffinity,
            &record.cluster,
            affinity(&record.session_affinity) != affinity(&w.session_affinity),
        );
        note(
            ConflictKind::SessionAffinityConfig,
            &record.cluster,
            record.session_affinity_config != w.session_affinity_config,
        );
        note(
            ConflictKind::InternalTrafficPolicy,
            &record.cluster,
            traffic_policy(&record.internal_traffic_policy)
                != traffic_policy(&w.internal_traffic_policy),
        );
        note(
            ConflictKind::TrafficDistribution,
            &record.cluster,
            record.traffic_distribution != w.traffic_distribution,
        );
        note(
            ConflictKind::IpFamily,
            &record.cluster,
            record.ip_families != w.ip_families,
        );
        note(
            ConflictKind::Labels,
            &record.cluster,
            record.exported_labels != w.exported_labels,
        );
        note(
            ConflictKind::Annotations,
            &record.cluster,
            record.exported_annotations != w.exported_annotations,
        );
        note(
            ConflictKind::ClusterSelectors,
            &record.cluster,
            record.cluster_selectors != w.cluster_selectors,
        );
    }
    ports.sort_by(|a, b| {
        (a.name.as_deref(), protocol(a), a.port).cmp(&(b.name.as_deref(), protocol(b), b.port))
    });

    let cluster_ports = ordered
        .iter()
        .map(|r| {
            let served = ports
                .iter()
                .filter(|p| r.ports.iter().any(|own| same_port(own, p)))
                .cloned()
                .collect();
            (r.cluster.clone(), served)
        })
        .collect();
    let mut clusters: Vec<String> = ordered.iter().map(|r| r.cluster.clone()).collect();
    clusters.sort();

    let mut spec = ServiceImportSpec::new(winner.type_);
    spec.ports = ports;
    spec.session_affinity = winner.session_affinity.clone();
    spec.session_affinity_config = winner.session_affinity_config.clone();
    spec.ip_families = winner.ip_families.clone();
    spec.internal_traffic_policy = winner.internal_traffic_policy.clone();
    spec.traffic_distribution = winner.traffic_distribution.clone();
    Some(MergedService {
        namespace: winner.namespace.clone(),
        name: winner.name.clone(),
        spec,
        labels: winner.exported_labels.clone(),
        annotations: winner.exported_annotations.clone(),
        cluster_selectors: winner.cluster_selectors.clone(),
        clusters,
        winner: winner.cluster.clone(),
        oldest_export: oldest,
        conflicts,
        cluster_ports,
    })
}

/// Unset and `None` are the same affinity.
fn affinity(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("None")
}

/// Unset and `Cluster` are the same policy (the apiserver's default).
fn traffic_policy(value: &Option<String>) -> &str {
    value.as_deref().unwrap_or("Cluster")
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "merge_precedence_tests.rs"]
mod precedence_tests;
