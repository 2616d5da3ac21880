//! Prometheus metrics of the agent.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of an API write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WriteLabels {
    pub kind: String,
    pub verb: String,
}

/// Labels of a per-cluster metric.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub cluster: String,
}

/// Labels of what a member published that this importer leaves out.
#[derive(Clone, Debug, Hash, PartialEq, Eq, PartialOrd, Ord, EncodeLabelSet)]
pub struct RejectedLabels {
    /// The member whose hub namespace holds it.
    pub cluster: String,
    /// `record`, `copy` or `endpoint`.
    pub kind: String,
    /// Why (`atoll_core::validate::Reason`).
    pub reason: String,
}

/// Labels of a failed API write.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    pub kind: String,
}

/// The kinds the agent writes (`kind` of `atoll_agent_api_writes` and `..._api_write_errors`).
pub const WRITTEN_KINDS: &[&str] = &[
    "ConfigMap",
    "EndpointSlice",
    "ExportedEndpointSlice",
    "ExportedService",
    "Lease",
    "Service",
    "ServiceExport",
    "ServiceImport",
];

/// Every metric the agent exports.
#[derive(Debug, Clone)]
pub struct Metrics {
    /// Hub records seen in the last pass, trusted ones only.
    pub records: Gauge,
    /// Hub records ignored as malformed in the last pass.
    pub records_rejected: Gauge,
    /// Records, copies and endpoints left out now, by member, kind and reason.
    pub hub_rejected: Family<RejectedLabels, Gauge>,
    /// Bytes of each member's hub objects held here (within `--max-hub-bytes-per-member`).
    pub member_hub_bytes: Family<ClusterLabels, Gauge>,
    /// `--max-hub-bytes-per-member`.
    pub member_hub_bytes_budget: Gauge,
    /// ServiceImports this member should hold.
    pub imports: Gauge,
    /// Imported services whose exports conflict.
    pub conflicts: Gauge,
    /// Exported services not imported here because their namespace does not exist here.
    pub imports_skipped: Gauge,
    /// Exported services not imported because the namespace policy excludes their namespace.
    pub imports_excluded: Gauge,
    /// API writes by kind and verb.
    pub writes: Family<WriteLabels, Counter>,
    /// Failed API writes, by kind.
    pub write_errors: Family<KindLabels, Counter>,
    /// Heartbeat Lease renewals, and those that failed.
    pub heartbeats: Counter,
    pub heartbeat_failures: Counter,
    /// 1 while this replica leads (writes), 0 while it stands by.
    pub leader: Gauge,
    /// Times this replica became the leader.
    pub leader_transitions: Counter,
    /// Seconds since each source cluster's heartbeat last changed, as seen here.
    pub source_last_seen: Family<ClusterLabels, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// 1 while a source cluster is withdrawn.
    pub source_withdrawn: Family<ClusterLabels, Gauge>,
    /// 1 while a source cluster's hub objects have not matched its claim for longer than the
    /// grace (the last matching set is imported meanwhile).
    pub source_claim_unmatched: Family<ClusterLabels, Gauge>,
    /// 1 while the services a source cluster takes part in are left as they are (this agent
    /// started and cannot judge that cluster's objects yet).
    pub source_pinned: Family<ClusterLabels, Gauge>,
    /// The source clusters the per-cluster gauges above hold label sets for: a cluster that
    /// leaves the ClusterSet loses them (a gauge kept at its last value would say a departed
    /// member is still withdrawn, or seen, forever).
    pub reported_clusters: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<String>>>,
    /// 1 while this agent cannot see its own heartbeat on the hub (nothing is withdrawn then).
    pub hub_blind: Gauge,
    /// Records and endpoint copies this member cannot publish: their writes keep failing, so
    /// its heartbeat does not claim them.
    pub unpublishable: Gauge,
    /// Withdrawals and restorations of source clusters.
    pub withdrawals: Counter,
    pub restorations: Counter,
    /// Duration of reconcile passes.
    pub reconcile_seconds: Histogram,
    /// Services each pass planned (every service in a full pass).
    pub pass_services: Histogram,
    /// Services waiting for a pass.
    pub dirty_services: Gauge,
    /// Full passes (start-up, relists, the periodic safety net) and the last one's duration.
    pub full_passes: Counter,
    pub full_pass_seconds: Gauge<f64, std::sync::atomic::AtomicU64>,
    /// From a ServiceExport's creation to this member first holding the ServiceImport
    /// (creation timestamps have 1 s resolution, so this is coarse).
    pub export_to_import_seconds: Histogram,
    /// Failed reads and writes of the kept liveness decisions (the ConfigMap in the member).
    pub kept_read_failures: Counter,
    pub kept_write_failures: Counter,
    /// 1 while the kept liveness decisions are not saved: unread, or their writes failing.
    pub kept_unsaved: Gauge,
    /// Source clusters this process has not seen beat yet (their services are left as they are).
    pub sources_unconfirmed: Gauge,
    /// Permissions the agent's credentials lack for what it reads and writes (checked at start).
    pub missing_permissions: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            records: Gauge::default(),
            records_rejected: Gauge::default(),
            hub_rejected: Family::default(),
            member_hub_bytes: Family::default(),
            member_hub_bytes_budget: Gauge::default(),
            imports: Gauge::default(),
            conflicts: Gauge::default(),
            imports_skipped: Gauge::default(),
            imports_excluded: Gauge::default(),
            writes: Family::default(),
            write_errors: Family::default(),
            heartbeats: Counter::default(),
            heartbeat_failures: Counter::default(),
            leader: Gauge::default(),
            leader_transitions: Counter::default(),
            source_last_seen: Family::default(),
            source_withdrawn: Family::default(),
            source_claim_unmatched: Family::default(),
            source_pinned: Family::default(),
            reported_clusters: Default::default(),
            hub_blind: Gauge::default(),
            unpublishable: Gauge::default(),
            withdrawals: Counter::default(),
            restorations: Counter::default(),
            reconcile_seconds: Histogram::new(exponential_buckets(0.0005, 2.0, 16)),
            pass_services: Histogram::new(exponential_buckets(1.0, 4.0, 9)),
            dirty_services: Gauge::default(),
            full_passes: Counter::default(),
            full_pass_seconds: Gauge::default(),
            export_to_import_seconds: Histogram::new(exponential_buckets(0.05, 2.0, 12)),
            kept_read_failures: Counter::default(),
            kept_write_failures: Counter::default(),
            kept_unsaved: Gauge::default(),
            sources_unconfirmed: Gauge::default(),
            missing_permissions: Gauge::default(),
        }
    }
}

impl Metrics {
    /// Registers every metric under the `atoll_agent` prefix.
    pub fn register(&self, registry: &mut Registry) {
        // Every kind's failure counter exists from the start at 0: a counter that first appears
        // with the value of a burst of failures shows Prometheus no increase, so alerts on
        // write failures (AtollAPIWritesFailing) would miss the first burst.
        for kind in WRITTEN_KINDS {
            self.write_errors
                .get_or_create(&KindLabels {
                    kind: (*kind).to_owned(),
                })
                .inc_by(0);
        }
        let r = registry.sub_registry_with_prefix("atoll_agent");
        r.register(
            "hub_records",
            "Trusted ExportedService records on the hub",
            self.records.clone(),
        );
        r.register(
            "hub_records_rejected",
            "Malformed hub records ignored",
            self.records_rejected.clone(),
        );
        r.register(
            "hub_rejected",
            "Records, endpoint copies and endpoints members published that this importer leaves out, by member, kind and reason",
            self.hub_rejected.clone(),
        );
        r.register(
            "member_hub_bytes",
            "Bytes of each member's hub objects (records and endpoint copies, as the hub serves them) held in this agent's memory; at most --max-hub-bytes-per-member each",
            self.member_hub_bytes.clone(),
        );
        r.register(
            "member_hub_bytes_budget",
            "Bytes of one member's hub objects this agent holds at most (--max-hub-bytes-per-member)",
            self.member_hub_bytes_budget.clone(),
        );
        r.register(
            "imports",
            "ServiceImports this member holds",
            self.imports.clone(),
        );
        r.register(
            "conflicts",
            "Imported services whose exports conflict",
            self.conflicts.clone(),
        );
        r.register(
            "imports_skipped_namespace_missing",
            "Exported services not imported because their namespace does not exist in this cluster",
            self.imports_skipped.clone(),
        );
        r.register(
            "imports_excluded_namespace",
            "Exported services not imported because the ClusterSet's NamespacePolicy excludes their namespace",
            self.imports_excluded.clone(),
        );
        r.register(
            "api_writes",
            "API writes by kind and verb",
            self.writes.clone(),
        );
        r.register(
            "api_write_errors",
            "Failed API writes by kind",
            self.write_errors.clone(),
        );
        r.register(
            "heartbeats",
            "Renewals of this member's heartbeat Lease",
            self.heartbeats.clone(),
        );
        r.register(
            "leader",
            "1 while this agent replica leads (writes), 0 while it stands by",
            self.leader.clone(),
        );
        r.register(
            "leader_transitions",
            "Times this agent replica became the leader",
            self.leader_transitions.clone(),
        );
        r.register(
            "heartbeat_failures",
            "Failed renewals of this member's heartbeat Lease",
            self.heartbeat_failures.clone(),
        );
        r.register(
            "source_cluster_last_seen_seconds",
            "Seconds since each source cluster's heartbeat Lease last changed, on this importer's clock",
            self.source_last_seen.clone(),
        );
        r.register(
            "source_cluster_withdrawn",
            "1 while a source cluster's endpoints are withdrawn here",
            self.source_withdrawn.clone(),
        );
        r.register(
            "source_cluster_claim_unmatched",
            "1 while a source cluster's hub objects have not matched its claim for longer than the grace (the last matching set is imported)",
            self.source_claim_unmatched.clone(),
        );
        r.register(
            "source_cluster_pinned",
            "1 while the services a source cluster takes part in are left as they are (this agent cannot judge its hub objects yet)",
            self.source_pinned.clone(),
        );
        r.register(
            "hub_blind",
            "1 while this agent cannot see its own heartbeat on the hub (it withdraws nothing meanwhile)",
            self.hub_blind.clone(),
        );
        r.register(
            "unpublishable_objects",
            "Records and endpoint copies of this member whose hub writes keep failing (not claimed by its heartbeat)",
            self.unpublishable.clone(),
        );
        r.register(
            "source_cluster_withdrawals",
            "Source clusters withdrawn",
            self.withdrawals.clone(),
        );
        r.register(
            "source_cluster_restorations",
            "Withdrawn source clusters restored",
            self.restorations.clone(),
        );
        r.register(
            "reconcile_seconds",
            "Duration of reconcile passes",
            self.reconcile_seconds.clone(),
        );
        r.register(
            "pass_services",
            "Services planned by each reconcile pass",
            self.pass_services.clone(),
        );
        r.register(
            "dirty_services",
            "Services waiting for a reconcile pass",
            self.dirty_services.clone(),
        );
        r.register(
            "full_passes",
            "Reconcile passes over every service (start-up, relists, the periodic safety net)",
            self.full_passes.clone(),
        );
        r.register(
            "full_pass_seconds",
            "Duration of the last full reconcile pass",
            self.full_pass_seconds.clone(),
        );
        r.register(
            "kept_read_failures",
            "Failed reads of the kept liveness decisions in the member (retried; nothing is kept until one succeeds)",
            self.kept_read_failures.clone(),
        );
        r.register(
            "kept_write_failures",
            "Failed writes of the kept liveness decisions in the member (retried; the heartbeat never waits for them)",
            self.kept_write_failures.clone(),
        );
        r.register(
            "kept_unsaved",
            "1 while the kept liveness decisions are not saved in the member (unread, or their writes failing)",
            self.kept_unsaved.clone(),
        );
        r.register(
            "source_clusters_unconfirmed",
            "Source clusters this agent process has not seen beat yet (the services they take part in are left as they are)",
            self.sources_unconfirmed.clone(),
        );
        r.register(
            "missing_permissions",
            "Permissions the agent's credentials lack for what it reads and writes (checked at start; the log names them)",
            self.missing_permissions.clone(),
        );
        r.register(
            "export_to_import_seconds",
            "Time from ServiceExport creation to the ServiceImport existing in this member",
            self.export_to_import_seconds.clone(),
        );
    }
}
