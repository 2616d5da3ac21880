//! The reconcile loop: thin I/O around `atoll_core::reconciler`. Once every watch has listed
//! and the kept liveness decisions are read, it waits for watch events (debounced), a deadline
//! the reconciler names or a change of leadership; then it hands the stores' contents to the
//! reconciler, carries out the step it returns through the writer, and hands the outcome back.

use std::time::Instant;

use atoll_api::keys::ObjectKey;
use atoll_core::plan::Member;
use atoll_core::reconciler::{Config, Reconciler, Tick};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::Notify;

use crate::config::{AgentConfig, Error, FIRST_PASS, Telemetry};
use crate::dirty::Dirty;
use crate::events::Announcer;
use crate::fence::Fence;
use crate::report::{self, Reported};
use crate::stores::Stores;
use crate::writer::{self, Context, Targets, WriteCounter};

/// How long heartbeats (and other changes that mark no service) are gathered before a step
/// takes them in, unless a change that marks a service, or a new claim, comes first. At 250 members renewing
/// every 10 s, 25 Leases move each second; a step for each would keep the loop busy, and every
/// endpoint change would wait behind one. A beat seen this much later only delays a withdrawal
/// by as much (the grace counts from when the importer sees a beat).
const WAKE_ONLY_BATCH: std::time::Duration = std::time::Duration::from_millis(250);

/// How long reading the kept liveness decisions may take before the agent starts without them.
const READ_KEPT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn gauge(value: usize) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// Runs passes until the process ends; fails only if a watch ends before its first list.
pub async fn run_loop(
    config: &AgentConfig,
    stores: &Stores,
    inbox: &Dirty,
    trigger: &Notify,
    telemetry: &Telemetry,
    fence: &Fence,
    mut leading: tokio::sync::watch::Receiver<bool>,
) -> Result<(), Error> {
    stores.wait_until_ready(&telemetry.readiness).await?;
    tracing::info!(cluster = %config.cluster_id, "every watch has listed once; reconciling");
    let kept = read_kept(config).await;
    let reporter = Reporter {
        controller: "atoll-agent".to_owned(),
        instance: Some(config.cluster_id.to_string()),
    };
    let context = Context {
        writes: WriteCounter::new(telemetry.metrics.writes.clone()),
        metrics: telemetry.metrics.clone(),
        announcer: Announcer {
            recorder: Recorder::new(config.member.clone(), reporter),
            fence: fence.clone(),
        },
        fence: fence.clone(),
    };
    let targets = Targets {
        cluster_id: config.cluster_id.to_string(),
        interval: config.heartbeat,
        grace: config.member_grace,
        kept: config.kept.clone(),
    };
    let member = Member {
        id: config.cluster_id.clone(),
        profile: config.profile.clone(),
    };
    let settings = atoll_core::liveness::Settings::new(config.heartbeat, config.member_grace);
    let mut reconciler = Reconciler::new(
        Config {
            limits: config.limits,
            safety_net: config.safety_net,
            ..Config::new(member, settings)
        },
        kept,
        Instant::now(),
        &Time(Timestamp::now()),
    );
    let m = &context.metrics;
    let mut reported = Reported::default();
    let mut rejections = crate::rejections::Rejections::default();
    let mut first = true;
    loop {
        // When a change woke the loop: what a step took in, counted from its first wake.
        let mut woke = Instant::now();
        if !first && !reconciler.ready() && inbox.is_empty() {
            let wake = reconciler.next_wake(Instant::now());
            let sleep = async {
                match wake {
                    Some(after) => tokio::time::sleep(after).await,
                    None => std::future::pending().await,
                }
            };
            let mut woken = false;
            tokio::select! {
                () = trigger.notified() => {
                    woken = true;
                    woke = Instant::now();
                }
                () = sleep => {}
                changed = leading.changed() => if changed.is_err() { return Ok(()) },
            }
            if woken && !inbox.pressing() {
                let marked = async {
                    while !inbox.pressing() {
                        trigger.notified().await;
                    }
                };
                tokio::select! {
                    _ = tokio::time::timeout(WAKE_ONLY_BATCH, marked) => {}
                    changed = leading.changed() => if changed.is_err() { return Ok(()) },
                }
            }
            tokio::time::sleep(config.debounce).await;
        }
        first = false;
        reconciler.marks().absorb(inbox.drain());
        let started = Instant::now();
        let before = context.writes.total();
        let tick = Tick {
            now: started,
            wall: Time(Timestamp::now()),
            leading: fence.leading(started),
        };
        // A replica that becomes the leader continues from what its predecessor decided.
        if reconciler.gains_leadership(&tick)
            && let Some(kept) = read_kept(config).await
        {
            reconciler.adopt(&kept);
        }
        let step = reconciler.step(&tick, stores.snapshot(), &stores.leases.state());
        let planned = started.elapsed();
        report::liveness(m, &step);
        reported.log(reconciler.report());
        report::totals(m, reconciler.report());
        rejections
            .publish(&context, reconciler.report(), &step.over, step.lead)
            .await;
        m.pass_services.observe(step.services as f64);
        if step.lead {
            let outcome =
                writer::execute(&config.hub, &config.member, &step, &targets, &context).await;
            let errors = outcome.errors;
            reconciler.outcome(outcome, Instant::now());
            let took = started.elapsed();
            m.reconcile_seconds.observe(took.as_secs_f64());
            if step.scope.is_none() {
                m.full_passes.inc();
                m.full_pass_seconds.set(took.as_secs_f64());
            }
            let writes = context.writes.total() - before;
            if writes > 0 || errors > 0 {
                tracing::info!(
                    writes,
                    errors,
                    services = step.scope.as_ref().map(|s| s.len()),
                    took_ms = took.as_millis() as u64,
                    planned_ms = planned.as_millis() as u64,
                    waited_ms = started.saturating_duration_since(woke).as_millis() as u64,
                    "reconciled"
                );
            }
        }
        m.unpublishable.set(gauge(reconciler.unpublishable()));
        m.dirty_services.set(reconciler.waiting().map_or(-1, gauge));
        telemetry.readiness.done(FIRST_PASS);
    }
}

/// What a predecessor kept; `None` when nothing was kept, or it cannot be read (logged: the
/// agent then judges every cluster afresh, as a new one would).
async fn read_kept(config: &AgentConfig) -> Option<atoll_core::liveness::Persisted> {
    let key: &ObjectKey = &config.kept;
    match tokio::time::timeout(READ_KEPT_TIMEOUT, crate::kept::read(&config.member, key)).await {
        Ok(Ok(kept)) => {
            if let Some(k) = &kept {
                tracing::info!(config_map = %key, clusters = k.sources.len(), "continuing from the kept liveness decisions");
            }
            kept
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, config_map = %key, "reading the kept liveness decisions failed: judging every source cluster afresh");
            None
        }
        Err(_) => {
            tracing::warn!(config_map = %key, "reading the kept liveness decisions timed out: judging every source cluster afresh");
            None
        }
    }
}
