//! One reconcile pass: desired state from the stores, compared with observed state, differences
//! written. Passes run after every batch of watch events (debounced) and, while the last pass
//! had errors, every few seconds. A pass runs the export side (`export_side`: publish on the
//! hub, conditions on ServiceExports) and the import side (`import_side`: merge the hub's
//! records into this member's objects).

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use atoll_api::{Condition, ConditionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::Notify;

use crate::export_side::{Exports, export_status, publish};
use crate::import_side::{import, merge_records};
use crate::metrics::Metrics;
use crate::stores::Stores;
use crate::writer::WriteCounter;
use crate::{AgentConfig, Telemetry};

/// (namespace, name) of a service.
pub(crate) type ServiceKey = (String, String);

/// State kept across passes.
pub struct Context {
    /// API writes so far.
    pub(crate) writes: WriteCounter,
    /// Metrics to update.
    pub(crate) metrics: Metrics,
    /// Malformed hub records already reported (uid@resourceVersion), so each is logged once.
    pub(crate) reported: Mutex<BTreeSet<String>>,
    /// Imports this member holds, to measure export-to-import latency once per import.
    pub(crate) imported: Mutex<BTreeSet<ServiceKey>>,
    /// Publishes Events on ServiceExports.
    pub(crate) recorder: Recorder,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Fresh state feeding `metrics`.
    pub fn new(metrics: Metrics, recorder: Recorder) -> Self {
        Self {
            recorder,
            writes: WriteCounter::new(metrics.writes.clone()),
            metrics,
            reported: Mutex::default(),
            imported: Mutex::default(),
        }
    }
}

/// Runs passes forever: first once every watch has listed, then after each change.
pub async fn run_loop(
    config: &AgentConfig,
    stores: &Stores,
    trigger: &Notify,
    telemetry: &Telemetry,
) {
    stores.wait_until_ready().await;
    tracing::info!(cluster = %config.cluster_id, "every watch has listed once; reconciling");
    let reporter = Reporter {
        controller: "atoll-agent".to_owned(),
        instance: Some(config.cluster_id.to_string()),
    };
    let context = Context::new(
        telemetry.metrics.clone(),
        Recorder::new(config.member.clone(), reporter),
    );
    let mut had_errors = false;
    loop {
        if had_errors {
            tokio::select! {
                () = trigger.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        } else {
            trigger.notified().await;
        }
        tokio::time::sleep(config.debounce).await;
        let started = Instant::now();
        let before = context.writes.total();
        let errors = reconcile_once(config, stores, &context).await;
        telemetry.ready.store(true, Ordering::Relaxed);
        context
            .metrics
            .reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
        context.metrics.write_errors.inc_by(errors as u64);
        let writes = context.writes.total() - before;
        if writes > 0 || errors > 0 {
            tracing::info!(
                writes,
                errors,
                took_ms = started.elapsed().as_millis() as u64,
                "reconciled"
            );
        }
        had_errors = errors > 0;
    }
}

/// Counts failed writes of one pass, logging each.
#[derive(Debug, Default)]
pub(crate) struct Errors(pub(crate) usize);

impl Errors {
    pub(crate) fn note<T>(&mut self, what: &str, result: Result<T, kube::Error>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(%error, "{what} failed");
                self.0 += 1;
                None
            }
        }
    }
}

/// One pass; returns the number of failed writes.
pub async fn reconcile_once(config: &AgentConfig, stores: &Stores, context: &Context) -> usize {
    let mut errors = Errors::default();
    let exports = Exports::from_stores(config, stores);
    let published = publish(config, stores, &exports, context, &mut errors).await;
    let merged = merge_records(stores, context);
    import(config, stores, &merged, context, &mut errors).await;
    export_status(
        config,
        stores,
        &exports,
        &published,
        &merged,
        context,
        &mut errors,
    )
    .await;
    errors.0
}

pub(crate) fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    previous: &[Condition],
) -> Condition {
    let status = if status {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    // Keep the transition time while the status stays the same.
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    Condition {
        type_: type_.to_owned(),
        status,
        observed_generation: None,
        last_transition_time,
        reason: reason.to_owned(),
        message,
    }
}

/// Conditions equal apart from their transition times.
pub(crate) fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
    let key = |c: &Condition| {
        (
            c.type_.clone(),
            c.status,
            c.reason.clone(),
            c.message.clone(),
        )
    };
    let mut a: Vec<_> = a.iter().map(key).collect();
    let mut b: Vec<_> = b.iter().map(key).collect();
    a.sort();
    b.sort();
    a == b
}
