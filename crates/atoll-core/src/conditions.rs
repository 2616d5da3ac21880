//! Status conditions of ServiceExports and ServiceImports, with the clock passed in: the same
//! inputs always give the same conditions, and a condition keeps its transition time while its
//! status stays the same.

use atoll_api::keys::ServiceKey;
use atoll_api::multicluster::{export_condition as ec, import_condition as ic};
use atoll_api::{Condition, ConditionStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::export::Validity;
use crate::merge::Conflicts;

/// A condition of `type_`, keeping the previous transition time when the status is unchanged.
pub fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    previous: &[Condition],
    now: &Time,
) -> Condition {
    let status = if status {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map_or_else(|| now.clone(), |c| c.last_transition_time.clone());
    Condition {
        type_: type_.to_owned(),
        status,
        observed_generation: None,
        last_transition_time,
        reason: reason.to_owned(),
        message,
    }
}

/// Conditions equal apart from their transition times and order.
pub fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
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

/// Where an export's hub record stands, as far as `Ready` is concerned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publication {
    /// The hub holds the record as desired.
    Published,
    /// The last attempt to write the record failed with this message.
    Failed(String),
}

/// Valid, Ready and (when this cluster takes part in a merge) Conflict of one export.
/// `conflict` is the merge verdict and its winner, when the merge includes this cluster.
pub fn export_conditions(
    validity: &Validity,
    publication: &Publication,
    conflict: Option<(&Conflicts, &str)>,
    previous: &[Condition],
    now: &Time,
) -> Vec<Condition> {
    let (valid, reason, message) = validity.condition();
    let mut conditions = vec![condition(ec::VALID, valid, reason, message, previous, now)];
    conditions.push(match (valid, publication) {
        (false, _) => condition(
            ec::READY,
            false,
            ec::REASON_FAILED,
            "not exported: the ServiceExport is not valid".to_owned(),
            previous,
            now,
        ),
        (true, Publication::Published) => condition(
            ec::READY,
            true,
            ec::REASON_EXPORTED,
            "exported to the ClusterSet's hub".to_owned(),
            previous,
            now,
        ),
        (true, Publication::Failed(error)) => condition(
            ec::READY,
            false,
            ec::REASON_PENDING,
            format!("publishing the export on the hub failed, retrying: {error}"),
            previous,
            now,
        ),
    });
    if let (true, Some((conflicts, winner))) = (valid, conflict) {
        conditions.push(condition(
            ec::CONFLICT,
            conflicts.any(),
            &conflicts.reason(),
            conflicts.message(winner),
            previous,
            now,
        ));
    }
    conditions
}

/// Why an import has no cluster IP yet, if it has none.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VipProblem {
    /// This cluster cannot allocate an IP of the import's families (the apiserver said so).
    FamilyNotSupported(String),
    /// The derived Service could not be written for another reason.
    Failed(String),
    /// The derived Service exists but has no cluster IP yet.
    Pending,
}

/// The `Ready` condition of a ServiceImport: true once it is usable (a VIP for ClusterSetIP,
/// always for Headless).
pub fn import_ready(problem: Option<&VipProblem>, previous: &[Condition], now: &Time) -> Condition {
    let (ready, reason, message) = match problem {
        None => (true, ic::REASON_READY, String::new()),
        Some(VipProblem::FamilyNotSupported(why)) => (
            false,
            ic::REASON_IP_FAMILY_NOT_SUPPORTED,
            format!(
                "this cluster cannot allocate a cluster IP of the service's IP families: {why}"
            ),
        ),
        Some(VipProblem::Failed(why)) => (
            false,
            ic::REASON_PENDING,
            format!("writing the derived Service failed, retrying: {why}"),
        ),
        Some(VipProblem::Pending) => (
            false,
            ic::REASON_PENDING,
            "waiting for the derived Service's cluster IP".to_owned(),
        ),
    };
    condition(ic::READY, ready, reason, message, previous, now)
}

/// Condition type on ServiceImports: whether every source cluster is live (Atoll's own,
/// domain-prefixed, as the upstream schema allows).
pub const SOURCE_CLUSTERS: &str = "hub.atoll.dev/SourceClusters";
pub const REASON_ALL_LIVE: &str = "AllLive";
pub const REASON_WITHDRAWN: &str = "SourcesWithdrawn";
pub const REASON_STALE: &str = "SourcesStale";
pub const REASON_UNMATCHED: &str = "SourcesUnmatched";

/// Which of the service's source clusters are withdrawn (their endpoints no longer imported),
/// stale (late, still imported) or unmatched (their hub objects have not matched their claim for
/// longer than the grace: the last set that did is imported). The message names clusters only,
/// never a time, so it stays the same while nothing changes; when it changed is the condition's
/// transition time.
pub fn source_clusters(
    merged: &crate::merge::MergedService,
    liveness: &crate::liveness::Liveness,
    previous: &[Condition],
    now: &Time,
) -> Condition {
    let key = ServiceKey::new(&merged.namespace, &merged.name);
    let withdrawn: Vec<&str> = liveness
        .withdrawn
        .iter()
        .filter(|(_, w)| w.services.contains(&key))
        .map(|(c, _)| c.as_str())
        .collect();
    let among = |set: &dyn Fn(&str) -> bool| -> Vec<&str> {
        merged
            .clusters
            .iter()
            .map(String::as_str)
            .filter(|c| set(c))
            .collect()
    };
    let stale = among(&|c| liveness.stale.contains_key(c));
    let unmatched = among(&|c| liveness.unmatched.contains_key(c));
    let mut parts = Vec::new();
    if !withdrawn.is_empty() {
        parts.push(format!(
            "withdrawn: {} (no heartbeat within the grace; endpoints no longer imported)",
            withdrawn.join(", ")
        ));
    }
    if !stale.is_empty() {
        parts.push(format!(
            "stale: {} (heartbeat late; still imported)",
            stale.join(", ")
        ));
    }
    if !unmatched.is_empty() {
        parts.push(format!(
            "unmatched: {} (hub objects differ from what the member claims for longer than the grace; the last matching set is imported; run `atoll status`)",
            unmatched.join(", ")
        ));
    }
    let reason = if !withdrawn.is_empty() {
        REASON_WITHDRAWN
    } else if !stale.is_empty() {
        REASON_STALE
    } else if !unmatched.is_empty() {
        REASON_UNMATCHED
    } else {
        REASON_ALL_LIVE
    };
    condition(
        SOURCE_CLUSTERS,
        parts.is_empty(),
        reason,
        parts.join("; "),
        previous,
        now,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap_or(Timestamp::UNIX_EPOCH))
    }

    #[test]
    fn transition_time_is_kept_while_the_status_holds() {
        let first = condition("Ready", true, "Ready", String::new(), &[], &at(10));
        assert_eq!(first.last_transition_time, at(10));
        let again = condition(
            "Ready",
            true,
            "Ready",
            "other".into(),
            std::slice::from_ref(&first),
            &at(20),
        );
        assert_eq!(again.last_transition_time, at(10));
        let flipped = condition("Ready", false, "Pending", String::new(), &[first], &at(30));
        assert_eq!(flipped.last_transition_time, at(30));
    }

    #[test]
    fn same_conditions_ignores_times_and_order_but_not_reasons() {
        let a = condition("Valid", true, "Valid", String::new(), &[], &at(1));
        let b = condition("Ready", true, "Exported", String::new(), &[], &at(1));
        let a_later = condition("Valid", true, "Valid", String::new(), &[], &at(9));
        assert!(same_conditions(
            &[a.clone(), b.clone()],
            &[b.clone(), a_later]
        ));
        let other = condition("Valid", false, "NoService", String::new(), &[], &at(1));
        assert!(!same_conditions(&[a, b.clone()], &[b, other]));
    }

    #[test]
    fn invalid_exports_are_not_ready_and_carry_no_conflict() {
        let verdict = Conflicts::default();
        let conditions = export_conditions(
            &Validity::NoService,
            &Publication::Published,
            Some((&verdict, "c1")),
            &[],
            &at(1),
        );
        let summary: Vec<(&str, ConditionStatus, &str)> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status, c.reason.as_str()))
            .collect();
        assert_eq!(
            summary,
            vec![
                ("Valid", ConditionStatus::False, "NoService"),
                ("Ready", ConditionStatus::False, "Failed"),
            ]
        );
    }

    #[test]
    fn a_failed_publication_is_pending_with_the_error() {
        let conditions = export_conditions(
            &Validity::Valid,
            &Publication::Failed("forbidden".into()),
            None,
            &[],
            &at(1),
        );
        assert_eq!(conditions[1].reason, "Pending");
        assert!(conditions[1].message.contains("forbidden"));
        assert_eq!(
            conditions.len(),
            2,
            "no Conflict before the merge includes us"
        );
    }

    #[test]
    fn import_ready_says_why_not() {
        let family = import_ready(
            Some(&VipProblem::FamilyNotSupported(
                "IPv6 not configured".into(),
            )),
            &[],
            &at(1),
        );
        assert_eq!(
            (family.status, family.reason.as_str()),
            (ConditionStatus::False, "IPFamilyNotSupported")
        );
        let ready = import_ready(None, &[], &at(1));
        assert_eq!(
            (ready.status, ready.reason.as_str(), ready.message.as_str()),
            (ConditionStatus::True, "Ready", "")
        );
    }
}
