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

/// The Event announcing what of one hub object (`parts`, one per reason) is left out.
fn announcement(parts: &[Rejected]) -> Announcement {
    let Some(r) = parts.first() else {
        return Announcement {
            warning: true,
            reason: "HubEndpointsRejected".to_owned(),
            note: String::new(),
            action: "Import",
        };
    };
    let member = printable(&r.cluster);
    let object = printable(&r.record.to_string());
    let problems = parts
        .iter()
        .map(|p| match p.kind {
            HubKind::Endpoint => format!("{} for {}", p.count, printable(&p.problem)),
            _ => printable(&p.problem),
        })
        .collect::<Vec<_>>()
        .join("; ");
    let (reason, note) = match r.kind {
        HubKind::Record => (
            "HubRecordRejected",
            format!("ignoring member {member}'s record {object}: {problems}"),
        ),
        HubKind::Copy => (
            "HubEndpointsRejected",
            format!("ignoring member {member}'s endpoint copy {object}: {problems}"),
        ),
        HubKind::Endpoint => (
            "HubEndpointsRejected",
            format!(
                "ignoring {} endpoint(s) of member {member}'s copy {object}: {problems}",
                parts.iter().map(|p| p.count).sum::<usize>()
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
    /// What it is about (the Event's related object): a hub object, or the member's hub
    /// namespace.
    object: Option<k8s_openapi::api::core::v1::ObjectReference>,
    /// Whether to log it here (whole records are logged by the reconcile loop).
    log: bool,
}

/// Every problem of the last pass worth an Event. The endpoints of one copy left out for
/// several reasons make one notice: Events are aggregated by their object, reason and related
/// object, not their note, so a second one would only count as a repeat of the first.
fn notices(report: &Report, over: &[OverLimit]) -> Vec<Notice> {
    let imported = |r: &Rejected| {
        report
            .imported
            .contains(&r.service)
            .then(|| ObjectKey::new(&r.service.namespace, &r.service.name))
    };
    let mut now = Vec::new();
    for r in &report.rejected {
        // A whole record for a service not imported here is announced on the member by the
        // reconcile loop already.
        if let Some(import) = imported(r) {
            now.push(Notice {
                version: r.version.clone(),
                announcement: announcement(std::slice::from_ref(r)),
                import: Some(import),
                object: Some(events::hub_object("ExportedService", &r.record)),
                log: false,
            });
        }
    }
    let mut by_copy: BTreeMap<(&ObjectKey, HubKind), Vec<&Rejected>> = BTreeMap::new();
    for r in &report.dropped {
        by_copy.entry((&r.record, r.kind)).or_default().push(r);
    }
    for parts in by_copy.into_values() {
        let parts: Vec<Rejected> = parts.into_iter().cloned().collect();
        now.push(Notice {
            version: parts
                .iter()
                .map(|r| r.version.as_str())
                .collect::<Vec<_>>()
                .join(","),
            announcement: announcement(&parts),
            import: parts.first().and_then(imported),
            object: parts
                .first()
                .map(|r| events::hub_object("ExportedEndpointSlice", &r.record)),
            log: true,
        });
    }
    for o in over {
        now.push(Notice {
            version: format!("{}:{}:{}", o.cluster, o.reason, o.published),
            announcement: Announcement {
                warning: true,
                // Events are aggregated by object and reason: each limit has its own reason, or
                // a member over two would show only the first.
                reason: over_reason(o.reason).to_owned(),
                note: printable(&o.message()),
                action: "Import",
            },
            import: None,
            // The member's hub namespace: Events are aggregated by object, reason and related
            // object, so without it a second member over the same limit would only count as a
            // repeat of the first.
            object: Some(k8s_openapi::api::core::v1::ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("Namespace".to_owned()),
                name: Some(atoll_api::hub::namespace_for(&o.cluster)),
                ..Default::default()
            }),
            log: true,
        });
    }
    now
}

/// The Event reason of a member over a limit.
fn over_reason(reason: atoll_core::validate::Reason) -> &'static str {
    use atoll_core::validate::Reason;
    match reason {
        Reason::TooManyPorts => "MemberOverPortLimit",
        Reason::TooManyEndpointPorts => "MemberOverEndpointPortLimit",
        Reason::OverByteBudget => "MemberOverByteBudget",
        Reason::Annotation => "MemberRecordsTooLarge",
        _ => "MemberOverLimit",
    }
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
            let kind = match o.kind {
                atoll_core::budget::Kind::Record => HubKind::Record,
                atoll_core::budget::Kind::Copy => HubKind::Copy,
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
        // Only what was published counts as announced: an Event the fence or the API refused
        // is tried again on the next pass.
        let mut announced = BTreeSet::new();
        for n in &now {
            if self.announced.contains(&n.version) {
                announced.insert(n.version.clone());
                continue;
            }
            let related = n.object.clone();
            let published = match &n.import {
                Some(key) => {
                    events::announce_about(
                        &context.announcer,
                        "ServiceImport",
                        key,
                        &n.announcement,
                        related,
                    )
                    .await
                }
                None => {
                    events::announce_on_member(&context.announcer, &n.announcement, related).await
                }
            };
            if published {
                announced.insert(n.version.clone());
            }
        }
        self.announced = announced;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atoll_api::keys::ServiceKey;
    use atoll_core::validate::Reason;

    fn rejected(kind: HubKind, service: &str) -> Rejected {
        Rejected {
            record: ObjectKey::new("atoll-x-c3", &format!("demo.{service}")),
            service: ServiceKey::new("demo", service),
            version: format!("{service}@1/{}", kind.as_str()),
            problem: "port 70000 is out of range (1-65535)\u{1b}[2J".to_owned(),
            kind,
            cluster: "x-c3".to_owned(),
            reason: Reason::Port,
            count: 3,
        }
    }

    #[test]
    fn problems_go_to_the_import_they_concern_or_to_the_member() {
        let report = Report {
            rejected: vec![
                rejected(HubKind::Record, "web"),
                rejected(HubKind::Record, "lonely"),
            ],
            dropped: vec![rejected(HubKind::Endpoint, "web"), {
                let mut cidr = rejected(HubKind::Endpoint, "web");
                cidr.reason = Reason::ServiceCidr;
                cidr.count = 1;
                cidr.problem = "address 10.101.0.1 is inside this cluster's Service CIDR".into();
                cidr
            }],
            imported: [ServiceKey::new("demo", "web")].into(),
            ..Default::default()
        };
        let over = OverLimit {
            cluster: "x-c3".to_owned(),
            reason: Reason::TooManyRecords,
            kind: atoll_core::budget::Kind::Record,
            published: 2001,
            limit: 2000,
            ignored: 1,
            services: Default::default(),
            service: None,
        };
        let n = notices(&report, std::slice::from_ref(&over));
        let summary: Vec<(&str, Option<String>, bool)> = n
            .iter()
            .map(|n| {
                (
                    n.announcement.reason.as_str(),
                    n.import.as_ref().map(ToString::to_string),
                    n.log,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                ("HubRecordRejected", Some("demo/web".to_owned()), false),
                ("HubEndpointsRejected", Some("demo/web".to_owned()), true),
                ("MemberOverLimit", None, true),
            ],
            "a record of a service not imported here is announced by the loop, on the member"
        );
        let note = &n[1].announcement.note;
        assert!(
            note.starts_with("ignoring 4 endpoint(s) of member x-c3's copy"),
            "{note}"
        );
        assert!(
            note.contains("1 for address 10.101.0.1"),
            "one Event per copy: {note}"
        );
        assert!(
            !n[0].announcement.note.contains('\u{1b}'),
            "member-written text is escaped"
        );
        assert!(n[2].announcement.note.contains("publishes 2001 records"));
    }
}
