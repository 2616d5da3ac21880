//! The reconcile loop: thin I/O around `atoll_core::reconciler`. Once every watch has listed
//! (and the kept liveness decisions are read, or a short wait for them is over) it waits for
//! watch events (debounced), a deadline the reconciler names or a change of leadership; then it
//! hands the stores' contents to the reconciler, carries out the step it returns through the
//! writer, and hands the outcome back. Reading the kept decisions never holds the loop: a read
//! that fails is retried in a task of its own ([`crate::kept::Reader`]) while the loop runs on
//! (heartbeats included), and keeps nothing until one succeeds.

use std::time::Instant;

use atoll_core::announce::Announcement;
use atoll_core::plan::Member;
use atoll_core::reconciler::{Config, Keeping, KeptRead, Reconciler, Tick};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::events::{Recorder, Reporter};
use tokio::sync::Notify;

use crate::config::{AgentConfig, Error, FIRST_PASS, KEPT_READ, Telemetry};
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

/// How long the first pass waits for the kept liveness decisions before it starts without them
/// (it takes them in when they come; nothing is kept before).
const READ_KEPT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

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
    let mut reader = crate::kept::Reader::start(
        config.member.clone(),
        config.kept.clone(),
        telemetry.metrics.kept_read_failures.clone(),
    );
    reader.ask();
    tokio::spawn({
        let (id, member, hub) = (
            config.cluster_id.clone(),
            config.member.clone(),
            config.hub.clone(),
        );
        let gauge = telemetry.metrics.missing_permissions.clone();
        async move { crate::access::check(&id, &member, &hub, &gauge).await }
    });
    stores.wait_until_ready(&telemetry.readiness).await?;
    tracing::info!(cluster = %config.cluster_id, "every watch has listed once; reconciling");
    let kept = match reader.wait(READ_KEPT_WAIT).await {
        Some(read) => {
            took_kept(&read, config, telemetry);
            read
        }
        None => {
            tracing::warn!(config_map = %config.kept, "the kept liveness decisions are not read yet: starting without them (no cluster is used before it is seen to beat; nothing is kept until they are read)");
            KeptRead::Unreadable
        }
    };
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
    let mut held = std::collections::BTreeSet::new();
    let mut keeping = KeepingReport::default();
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
        // A replica that becomes the leader continues from what its predecessor decided, once
        // it has read it (it keeps nothing before).
        if reconciler.gains_leadership(&tick) {
            reader.ask();
        }
        if let Some(read) = reader.answer() {
            took_kept(&read, config, telemetry);
            reconciler.kept_read(read);
        }
        let step = reconciler.step(&tick, stores.snapshot(), &stores.leases.state());
        let planned = started.elapsed();
        stores.beats.judged(&step.liveness);
        report::liveness(m, &step);
        reported.log(reconciler.report());
        report::totals(m, reconciler.report());
        // What the store left out (each member's byte budget) is reported beside what the
        // caps left out.
        let (budget, bytes) = stores.budget.report();
        let mut over = step.over.clone();
        over.extend(crate::budget::over_limits(&budget, bytes));
        held = crate::budget::publish_held(&budget, &m.member_hub_bytes, &held);
        rejections
            .publish(&context, reconciler.report(), &over, step.lead)
            .await;
        m.pass_services.observe(step.services as f64);
        if step.lead {
            let execute =
                crate::executing::execute(&config.hub, &config.member, &step, &targets, &context);
            let outcome = renewing_meanwhile(
                execute,
                &mut reconciler,
                &config.hub,
                &step.keeping,
                &targets,
                &context,
            )
            .await;
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
        m.sources_unconfirmed
            .set(gauge(reconciler.unconfirmed().len()));
        if step.lead {
            keeping
                .report(&reconciler.keeping(), config, &context)
                .await;
        } else {
            // Only the leader keeps: a standby has nothing unsaved.
            m.kept_unsaved.set(0);
        }
        m.dirty_services.set(reconciler.waiting().map_or(-1, gauge));
        telemetry.readiness.done(FIRST_PASS);
    }
}

/// Awaits `execute` (a leading step's writes) and renews the heartbeat meanwhile whenever one
/// is due: a pass writing thousands of objects must not stop this member's beat.
async fn renewing_meanwhile(
    execute: impl std::future::Future<Output = atoll_core::reconciler::Outcome>,
    reconciler: &mut Reconciler,
    hub: &kube::Client,
    keeping: &atoll_core::reconciler::Keeping,
    targets: &writer::Targets,
    context: &writer::Context,
) -> atoll_core::reconciler::Outcome {
    let mut execute = std::pin::pin!(execute);
    let check = (targets.interval / 4).max(INTERIM_CHECK);
    loop {
        tokio::select! {
            outcome = &mut execute => return outcome,
            () = tokio::time::sleep(check) => {}
        }
        if let Some(renewal) = reconciler.interim_renewal(Instant::now()) {
            // The pass's writes go on while the renewal is written.
            let mut finished = None;
            let last_error = reconciler.last_error().to_owned();
            let ok = {
                let mut renew = std::pin::pin!(writer::renew(
                    hub,
                    &renewal,
                    keeping,
                    &last_error,
                    targets,
                    context
                ));
                loop {
                    tokio::select! {
                        ok = &mut renew => break ok,
                        outcome = &mut execute, if finished.is_none() => finished = Some(outcome),
                    }
                }
            };
            reconciler.interim_answered(renewal, ok, Instant::now());
            if let Some(outcome) = finished {
                return outcome;
            }
        }
    }
}

/// How often a long pass looks whether a renewal is due, at least.
const INTERIM_CHECK: std::time::Duration = std::time::Duration::from_millis(250);

/// Logs what reading the kept decisions gave, and marks it done for readiness.
fn took_kept(read: &KeptRead, config: &AgentConfig, telemetry: &Telemetry) {
    match read {
        KeptRead::Found(k) => {
            tracing::info!(config_map = %config.kept, clusters = k.sources.len(), "continuing from the kept liveness decisions");
        }
        KeptRead::Absent => {
            tracing::info!(config_map = %config.kept, "no kept liveness decisions: every source cluster is judged afresh");
        }
        KeptRead::Unreadable => return,
    }
    telemetry.readiness.done(KEPT_READ);
}

/// How keeping the liveness decisions stood at the last report, so the log line, the Event and
/// the gauge change only when it does.
#[derive(Default)]
struct KeepingReport {
    failing: Option<bool>,
}

impl KeepingReport {
    async fn report(&mut self, keeping: &Keeping, config: &AgentConfig, context: &Context) {
        let failing = !matches!(keeping, Keeping::Kept);
        context.metrics.kept_unsaved.set(i64::from(failing));
        if self.failing == Some(failing) {
            return;
        }
        let announcement = match keeping {
            Keeping::Kept => {
                if self.failing.is_none() {
                    self.failing = Some(false);
                    return;
                }
                tracing::info!(config_map = %config.kept, "the kept liveness decisions are saved again");
                Announcement {
                    warning: false,
                    reason: "LivenessDecisionsKept".to_owned(),
                    note: format!(
                        "the liveness decisions are kept in ConfigMap {} again",
                        config.kept
                    ),
                    action: "Keep",
                }
            }
            Keeping::Unread => {
                // The reader logs each failed read; an Event only once it has failed for a while
                // would say more, so none here.
                self.failing = Some(true);
                return;
            }
            Keeping::Failing {
                failures, error, ..
            } => {
                tracing::warn!(config_map = %config.kept, failures, %error, "keeping the liveness decisions failed: retrying; heartbeats and imports go on (they never depend on it)");
                Announcement {
                    warning: true,
                    reason: "LivenessDecisionsNotKept".to_owned(),
                    note: format!(
                        "keeping the liveness decisions in ConfigMap {} failed: {}; retrying. Heartbeats and imports go on; a restarted agent judges source clusters afresh",
                        config.kept,
                        error.chars().take(512).collect::<String>()
                    ),
                    action: "Keep",
                }
            }
        };
        if crate::events::announce_on_member(&context.announcer, &announcement, None).await {
            self.failing = Some(failing);
        }
    }
}
