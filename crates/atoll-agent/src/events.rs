//! Kubernetes Events on ServiceExports: emitted only when a condition changes, so an operator
//! running `kubectl describe serviceexport` sees what happened and the steady state stays free
//! of writes.

use atoll_api::multicluster::export_condition as ec;
use atoll_api::{Condition, ConditionStatus};
use kube::runtime::events::{Event, EventType};

fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn changed(previous: Option<&Condition>, now: &Condition) -> bool {
    previous.is_none_or(|p| p.status != now.status || p.reason != now.reason)
}

/// The Events that announce the change from `previous` to `now` conditions.
pub fn transitions(previous: &[Condition], now: &[Condition]) -> Vec<Event> {
    let mut events = Vec::new();
    if let Some(valid) = find(now, ec::VALID)
        && valid.status == ConditionStatus::False
        && changed(find(previous, ec::VALID), valid)
    {
        events.push(Event {
            type_: EventType::Warning,
            reason: valid.reason.clone(),
            note: Some(valid.message.clone()),
            action: "Validate".to_owned(),
            secondary: None,
        });
    }
    if let Some(ready) = find(now, ec::READY)
        && ready.status == ConditionStatus::True
        && changed(find(previous, ec::READY), ready)
    {
        events.push(Event {
            type_: EventType::Normal,
            reason: ec::REASON_EXPORTED.to_owned(),
            note: Some(ready.message.clone()),
            action: "Publish".to_owned(),
            secondary: None,
        });
    }
    let before = find(previous, ec::CONFLICT);
    if let Some(conflict) = find(now, ec::CONFLICT) {
        if conflict.status == ConditionStatus::True && changed(before, conflict) {
            events.push(Event {
                type_: EventType::Warning,
                reason: "ExportConflict".to_owned(),
                note: Some(format!("{}: {}", conflict.reason, conflict.message)),
                action: "Merge".to_owned(),
                secondary: None,
            });
        } else if conflict.status == ConditionStatus::False
            && before.is_some_and(|b| b.status == ConditionStatus::True)
        {
            events.push(Event {
                type_: EventType::Normal,
                reason: "ConflictResolved".to_owned(),
                note: Some("the exports of this service agree again".to_owned()),
                action: "Merge".to_owned(),
                secondary: None,
            });
        }
    }
    events
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
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].reason, "ExportConflict");
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
        assert!(matches!(events[0].type_, EventType::Warning));
    }
}
