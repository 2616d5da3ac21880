//! What members published that this importer leaves out: the `hub_rejected` gauges by member,
//! kind and reason, a log line and Warning Events once per version of each problem: on the
//! ServiceImport it concerns when this member imports the service, and on the member's id
//! ClusterProperty for what concerns no import (a member over its limits). Records rejected as
//! a whole are also logged and announced on the ClusterProperty by the reconcile loop.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::keys::ObjectKey;
use atoll_core::announce::Announcement;
use atoll_core::caps::OverLimit;
use atoll_core::plan::{HubKind, Rejected, Report};
use atoll_core::text::printable;

use crate::events;
use crate::metrics::RejectedLabels;
use crate::writer::Context;

/// What was already reported, so each problem is announced once while it lasts; only the
/// problems of the last pass are kept.
#[derive(Debug, Default)]
pub struct Rejections {
    announced: BTreeSet<String>,
    logged: BTreeSet<String>,
    gauges: BTreeSet<RejectedLabels>,
}

fn labels(cluster: &str, kind: &str, reason: &str) -> RejectedLabels {
    RejectedLabels {
        cluster: cluster.to_owned(),
        kind: kind.to_owned(),
        reason: reason.to_owned(),
    }
}

/// The Event announcing `r`.
fn announcement(r: &Rejected) -> Announcement {
    let member = printable(&r.cluster);
    let object = printable(&r.record.to_string());
    let problem = printable(&r.problem);
    let (reason, note) = match r.kind {
        HubKind::Record => (
            "HubRecordRejected",
            format!("ignoring member {member}'s record {object}: {problem}"),
        ),
        HubKind::Copy => (
            "HubEndpointsRejected",
            format!("ignoring member {member}'s endpoint copy {object}: {problem}"),
        ),
        HubKind::Endpoint => (
            "HubEndpointsRejected",
            format!(
                "ignoring {} endpoint(s) of member {member}'s copy {object}: {problem}",
                r.count
            ),
        ),
    };
    Announcement {
        warning: true,
        reason: reason.to_owned(),
        note,
        action: "Import",
    }
}

/// One problem to log and announce.
struct Notice {
    /// One notice per version of a problem.
    version: String,
    announcement: Announcement,
    /// The import it concerns here, where its Event goes; else the member's ClusterProperty.
    import: Option<ObjectKey>,
    /// Whether to log it here (whole records are logged by the reconcile loop).
    log: bool,
}

/// Every problem of the last pass worth an Event.
fn notices(report: &Report, over: &[OverLimit]) -> Vec<Notice> {
    let mut now = Vec::new();
    for r in report.rejected.iter().chain(&report.dropped) {
        let import = report
            .imported
            .contains(&r.service)
            .then(|| ObjectKey::new(&r.service.namespace, &r.service.name));
        // A whole record for a service not imported here is announced on the member by the
        // reconcile loop already.
        if r.kind == HubKind::Record && import.is_none() {
            continue;
        }
        now.push(Notice {
            version: r.version.clone(),
            announcement: announcement(r),
            import,
            log: r.kind != HubKind::Record,
        });
    }
    for o in over {
        now.push(Notice {
            version: format!("{}:{}:{}", o.cluster, o.reason, o.published),
            announcement: Announcement {
                warning: true,
                reason: "MemberOverLimit".to_owned(),
                note: printable(&o.message()),
                action: "Import",
            },
            import: None,
            log: true,
        });
    }
    now
}

impl Rejections {
    /// Sets the gauges from what the last pass left out (`report`) and the members over their
    /// limits (`over`); when this replica `leads`, announces what is new.
    pub async fn publish(
        &mut self,
        context: &Context,
        report: &Report,
        over: &[OverLimit],
        leads: bool,
    ) {
        let mut counts: BTreeMap<RejectedLabels, usize> = BTreeMap::new();
        for r in report.rejected.iter().chain(&report.dropped) {
            *counts
                .entry(labels(&r.cluster, r.kind.as_str(), r.reason.as_str()))
                .or_default() += r.count;
        }
        for o in over {
            let kind = match o.reason {
                atoll_core::validate::Reason::TooManyRecords => HubKind::Record,
                _ => HubKind::Copy,
            };
            *counts
                .entry(labels(&o.cluster, kind.as_str(), o.reason.as_str()))
                .or_default() += o.ignored;
        }
        let family = &context.metrics.hub_rejected;
        for gone in self.gauges.iter().filter(|l| !counts.contains_key(*l)) {
            family.get_or_create(gone).set(0);
        }
        for (l, n) in &counts {
            family
                .get_or_create(l)
                .set(i64::try_from(*n).unwrap_or(i64::MAX));
        }
        self.gauges = counts.into_keys().collect();

        let now = notices(report, over);
        for n in now
            .iter()
            .filter(|n| n.log && !self.logged.contains(&n.version))
        {
            tracing::warn!(reason = %n.announcement.reason, import = ?n.import.as_ref().map(ToString::to_string), "{}", n.announcement.note);
        }
        self.logged = now.iter().map(|n| n.version.clone()).collect();
        if !leads {
            return;
        }
        for n in now.iter().filter(|n| !self.announced.contains(&n.version)) {
            match &n.import {
                Some(key) => {
                    events::announce_on(&context.recorder, "ServiceImport", key, &n.announcement)
                        .await
                }
                None => events::announce_on_member(&context.recorder, &n.announcement, None).await,
            }
        }
        self.announced = self.logged.clone();
    }
}
