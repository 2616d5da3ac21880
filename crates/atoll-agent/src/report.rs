//! Log lines and metrics of a step: each problem logged once while it lasts, liveness changes
//! as they happen, gauges from what the passes found.

use std::collections::BTreeSet;

use atoll_api::keys::ServiceKey;
use atoll_core::plan::Report;
use atoll_core::reconciler::Step;

use crate::metrics::{ClusterLabels, Metrics};

/// Problems already logged, so each is logged once while it lasts. Only problems of the last
/// pass are kept, so the memory is bounded by what the stores hold.
#[derive(Debug, Default)]
pub struct Reported {
    rejected: BTreeSet<String>,
    skipped: BTreeSet<ServiceKey>,
    excluded: BTreeSet<ServiceKey>,
}

impl Reported {
    /// Logs what is new in `report`.
    pub fn log(&mut self, report: &Report) {
        let mut rejected = BTreeSet::new();
        for r in &report.rejected {
            if !self.rejected.contains(&r.version) {
                tracing::warn!(record = %r.record, problem = %r.problem, "ignoring a malformed hub record");
            }
            rejected.insert(r.version.clone());
        }
        self.rejected = rejected;
        let excluded: BTreeSet<ServiceKey> = report.excluded.iter().cloned().collect();
        for key in excluded.difference(&self.excluded) {
            tracing::warn!(namespace = %key.namespace, service = %key.name, "not importing: the ClusterSet's NamespacePolicy excludes the namespace");
        }
        self.excluded = excluded;
        let skipped: BTreeSet<ServiceKey> = report.skipped.iter().cloned().collect();
        for key in skipped.difference(&self.skipped) {
            tracing::warn!(namespace = %key.namespace, service = %key.name, "not importing: the namespace does not exist in this cluster; create it to receive the import");
        }
        self.skipped = skipped;
    }
}

fn gauge(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Liveness metrics and log lines of a step.
pub fn liveness(metrics: &Metrics, step: &Step) {
    let liveness = &step.liveness;
    metrics.hub_blind.set(i64::from(liveness.blind));
    forget_departed(metrics, liveness.last_seen_seconds.keys());
    for (cluster, seconds) in &liveness.last_seen_seconds {
        let labels = ClusterLabels {
            cluster: cluster.clone(),
        };
        metrics
            .source_last_seen
            .get_or_create(&labels)
            .set(*seconds);
        let flag = |on: bool| i64::from(on);
        metrics
            .source_withdrawn
            .get_or_create(&labels)
            .set(flag(liveness.withdrawn.contains_key(cluster)));
        metrics
            .source_claim_unmatched
            .get_or_create(&labels)
            .set(flag(liveness.unmatched.contains_key(cluster)));
        metrics
            .source_pinned
            .get_or_create(&labels)
            .set(flag(liveness.pinned.contains(cluster)));
    }
    let news = &step.news;
    for cluster in &news.withdrawn {
        metrics.withdrawals.inc();
        tracing::warn!(%cluster, "withdrawing a source cluster: its heartbeat has not moved for longer than its grace");
    }
    for cluster in &news.restored {
        metrics.restorations.inc();
        tracing::info!(%cluster, "restoring a source cluster: its heartbeat moves again");
    }
    for cluster in &news.forgotten {
        tracing::info!(%cluster, "forgetting a withdrawn source cluster: it left the hub (no heartbeat Lease, no hub objects)");
    }
    for cluster in &news.unmatched {
        tracing::warn!(%cluster, "a source cluster's hub objects have not matched what it claims for longer than its grace: importing the last set that did (see `atoll status`)");
    }
    match news.blind {
        Some(true) => tracing::warn!(
            "this agent's own heartbeat is not visible on the hub: imports stay as they are until it is"
        ),
        Some(false) => tracing::info!("this agent's own heartbeat is visible on the hub again"),
        None => {}
    }
}

/// Removes the per-cluster label sets of clusters no longer among `now` (they left the
/// ClusterSet), and remembers `now`.
fn forget_departed<'a>(metrics: &Metrics, now: impl Iterator<Item = &'a String>) {
    let now: BTreeSet<String> = now.cloned().collect();
    let Ok(mut reported) = metrics.reported_clusters.lock() else {
        return;
    };
    for cluster in reported.difference(&now) {
        let labels = ClusterLabels {
            cluster: cluster.clone(),
        };
        metrics.source_last_seen.remove(&labels);
        metrics.source_withdrawn.remove(&labels);
        metrics.source_claim_unmatched.remove(&labels);
        metrics.source_pinned.remove(&labels);
    }
    *reported = now;
}

/// Gauges of what the passes so far found.
pub fn totals(metrics: &Metrics, report: &Report) {
    metrics.records.set(gauge(report.trusted_records()));
    metrics.records_rejected.set(gauge(report.rejected.len()));
    metrics.conflicts.set(gauge(report.conflicting.len()));
    metrics.imports.set(gauge(report.imported.len()));
    metrics.imports_skipped.set(gauge(report.skipped.len()));
    metrics.imports_excluded.set(gauge(report.excluded.len()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use atoll_api::keys::ObjectKey;
    use atoll_core::plan::Rejected;

    fn rejected(version: &str) -> Rejected {
        Rejected {
            record: ObjectKey::new("atoll-c1", "demo.hello"),
            service: ServiceKey::new("demo", "hello"),
            version: version.to_owned(),
            problem: "bad".to_owned(),
            kind: Default::default(),
            cluster: "c1".to_owned(),
            reason: Default::default(),
            count: 1,
        }
    }

    fn exposed(metrics: &Metrics) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        metrics.register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn a_cluster_that_leaves_loses_its_gauges_and_blindness_is_exposed() {
        let metrics = Metrics::default();
        let seen = |clusters: &[&str]| clusters.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>();
        for cluster in ["c1", "c2"] {
            let labels = ClusterLabels {
                cluster: cluster.to_owned(),
            };
            metrics.source_withdrawn.get_or_create(&labels).set(1);
            metrics.source_last_seen.get_or_create(&labels).set(30.0);
        }
        forget_departed(&metrics, seen(&["c1", "c2"]).iter());
        metrics.hub_blind.set(1);
        let before = exposed(&metrics);
        assert!(
            before.contains("atoll_agent_source_cluster_withdrawn{cluster=\"c2\"} 1"),
            "{before}"
        );
        assert!(before.contains("atoll_agent_hub_blind 1"), "{before}");
        forget_departed(&metrics, seen(&["c1"]).iter());
        let after = exposed(&metrics);
        assert!(!after.contains("cluster=\"c2\""), "c2 left: {after}");
        assert!(
            after.contains("atoll_agent_source_cluster_withdrawn{cluster=\"c1\"} 1"),
            "{after}"
        );
    }

    #[test]
    fn every_written_kinds_failure_counter_starts_at_zero() {
        let text = exposed(&Metrics::default());
        for kind in crate::metrics::WRITTEN_KINDS {
            let line = format!("atoll_agent_api_write_errors_total{{kind=\"{kind}\"}} 0");
            assert!(text.contains(&line), "no {line} in {text}");
        }
    }

    #[test]
    fn reported_problems_are_only_those_of_the_last_pass() {
        let mut reported = Reported::default();
        let mut report = Report {
            rejected: vec![rejected("u1@1"), rejected("u2@1")],
            skipped: vec![ServiceKey::new("a", "x")],
            ..Default::default()
        };
        reported.log(&report);
        assert_eq!(reported.rejected.len(), 2);
        report.rejected = vec![rejected("u2@1")];
        report.skipped.clear();
        reported.log(&report);
        assert_eq!(
            reported.rejected,
            BTreeSet::from(["u2@1".to_owned()]),
            "records no longer rejected are forgotten"
        );
        assert!(reported.skipped.is_empty());
    }
}
