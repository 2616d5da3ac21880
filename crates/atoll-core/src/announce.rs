//! What deserves a Kubernetes Event on a ServiceExport: a condition change an operator running
//! `kubectl describe serviceexport` should see. Only changes are announced, so the steady
//! state stays free of writes.

use atoll_api::multicluster::export_condition as ec;
use atoll_api::{Condition, ConditionStatus};

/// One Event to publish on the export.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Announcement {
    /// A Warning Event (otherwise Normal).
    pub warning: bool,
    pub reason: String,
    pub note: String,
    /// What Atoll was doing (the Event's `action`).
    pub action: &'static str,
}

fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn changed(previous: Option<&Condition>, now: &Condition) -> bool {
    previous.is_none_or(|p| p.status != now.status || p.reason != now.reason)
}

/// The Events that announce the change from `previous` to `now` conditions.
pub fn transitions(previous: &[Condition], now: &[Condition]) -> Vec<Announcement> {
    let mut out = Vec::new();
    if let Some(valid) = find(now, ec::VALID)
        && valid.status == ConditionStatus::False
        && changed(find(previous, ec::VALID), valid)
    {
        out.push(Announcement {
            warning: true,
            reason: valid.reason.clone(),
            note: valid.message.clone(),
            action: "Validate",
        });
    }
    if let Some(ready) = find(now, ec::READY)
        && ready.status == ConditionStatus::True
        && changed(find(previous, ec::READY), ready)
    {
        out.push(Announcement {
            warning: false,
            reason: ec::REASON_EXPORTED.to_owned(),
            note: ready.message.clone(),
            action: "Publish",
        });
    }
    let before = find(previous, ec::CONFLICT);
    if let Some(conflict) = find(now, ec::CONFLICT) {
        if conflict.status == ConditionStatus::True && changed(before, conflict) {
            out.push(Announcement {
                warning: true,
                reason: "ExportConflict".to_owned(),
                note: format!("{}: {}", conflict.reason, conflict.message),
                action: "Merge",
            });
        } else if conflict.status == ConditionStatus::False
            && before.is_some_and(|b| b.status == ConditionStatus::True)
        {
            out.push(Announcement {
                warning: false,
                reason: "ConflictResolved".to_owned(),
                note: "the exports of this service agree again".to_owned(),
                action: "Merge",
            });
        }
    }
    out
}

/// The Events for a ServiceImport whose source clusters were withdrawn or restored.
pub fn source_transitions(previous: &[Condition], now: &[Condition]) -> Vec<Announcement> {
    use crate::conditions::{REASON_WITHDRAWN, SOURCE_CLUSTERS};
    let before = find(previous, SOURCE_CLUSTERS);
    let Some(after) = find(now, SOURCE_CLUSTERS) else {
        return Vec::new();
    };
    let was = before.is_some_and(|b| b.reason == REASON_WITHDRAWN);
    let is = after.reason == REASON_WITHDRAWN;
    if is && (!was || before.is_some_and(|b| b.message != after.message)) {
        vec![Announcement {
            warning: true,
            reason: "SourceClusterWithdrawn".to_owned(),
            note: after.message.clone(),
            action: "Withdraw",
        }]
    } else if was && !is {
        vec![Announcement {
            warning: false,
            reason: "SourceClusterRestored".to_owned(),
            note: "every withdrawn source cluster is back".to_owned(),
            action: "Restore",
        }]
    } else {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn mk(type_: &str, status: ConditionStatus, reason: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status,
            observed_generation: None,
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            reason: reason.into(),
            message: "m".into(),
        }
    }

    #[test]
    fn conflict_appearing_warns_once() {
        let before = [mk(ec::CONFLICT, ConditionStatus::False, "NoConflicts")];
        let now = [mk(ec::CONFLICT, ConditionStatus::True, "PortConflict")];
        let events = transitions(&before, &now);
        assert_eq!(
            events,
            vec![Announcement {
                warning: true,
                reason: "ExportConflict".into(),
                note: "PortConflict: m".into(),
                action: "Merge",
            }]
        );
        assert!(
            transitions(&now, &now).is_empty(),
            "no event without a change"
        );
    }

    #[test]
    fn conflict_resolving_and_invalid_exports_are_announced() {
        let before = [mk(ec::CONFLICT, ConditionStatus::True, "PortConflict")];
        let now = [mk(ec::CONFLICT, ConditionStatus::False, "NoConflicts")];
        assert_eq!(transitions(&before, &now)[0].reason, "ConflictResolved");
        let invalid = [mk(ec::VALID, ConditionStatus::False, "NoService")];
        let events = transitions(&[], &invalid);
        assert_eq!(events[0].reason, "NoService");
        assert!(events[0].warning);
    }

    #[test]
    fn becoming_ready_is_announced_once() {
        let ready = [mk(ec::READY, ConditionStatus::True, "Exported")];
        assert_eq!(transitions(&[], &ready).len(), 1);
        assert!(transitions(&ready, &ready).is_empty());
    }
}
