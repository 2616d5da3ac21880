//! One reconcile pass as a pure function: what the agent's stores observed (plus what earlier
//! writes taught it) in, the complete list of writes out. The agent's writer only executes a
//! [`Plan`]; every decision (what to publish, what to import, what to delete, which condition
//! to set, which Event to send) is made here, so unit tests can assert exact plans.
//!
//! Two decisions need the result of a write, and wait for the watch to show it rather than
//! guessing: a ClusterSetIP import is written once its derived Service (whose cluster IPs
//! become the import's `spec.ips`) is observed, and an export's `Ready` condition is set once
//! the hub is observed holding its record. A refused write is remembered in [`Feedback`] and
//! reported in the next plan's conditions instead.

mod collections;
mod export_side;
mod import_side;
mod input;
mod output;
mod pinned;
mod report;
pub mod scope;
mod selected;
#[cfg(test)]
mod tests;

pub use collections::{COLLECT_AT_LEAST, collect_slice_deletions};
pub use input::{Feedback, Member, Observed, Refusal, Sources};
pub use output::{
    ExportStatus, HubWrites, ImportApply, ImportStatus, MemberWrites, Plan, ProfileStatus,
    Published, SliceCollection,
};
pub use pinned::pinned_services;
pub use report::{HubKind, Rejected, Report};

use std::collections::BTreeMap;

use atoll_api::hub::{ExportedService, NAMESPACE_POLICY, NamespacePolicySpec};
use atoll_api::inventory::Property;
use atoll_api::keys::{ObjectKey, ServiceKey};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::keys::of_record;
use crate::merge::{MergedService, merge_records};
use crate::trust::record_rejection;

/// The plan of one pass for `member`, at time `now`.
pub fn plan(member: &Member, observed: &Observed, feedback: &Feedback, now: &Time) -> Plan {
    let policy = observed
        .policies
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(NAMESPACE_POLICY))
        .map(|p| p.spec.clone())
        .unwrap_or_default();
    let mut report = Report::default();
    let merged = merge_trusted(observed, &policy, &mut report);
    report.conflicting = merged
        .iter()
        .filter(|(_, m)| m.conflicts.any())
        .map(|(k, _)| k.clone())
        .collect();
    report.merged = merged.len();
    let cluster = member.id.as_str();
    let (hub, export_statuses, published) =
        export_side::plan(cluster, observed, &policy, feedback, &merged, now);
    let member_writes = import_side::plan(cluster, observed, feedback, &merged, now, &mut report);
    Plan {
        hub,
        published,
        profile: profile_status(member, observed, now),
        member: member_writes,
        export_statuses,
        report,
    }
}

/// The ClusterProfile's properties when they no longer mirror the member's ClusterProperties
/// (observation times do not count as a difference).
fn profile_status(member: &Member, observed: &Observed, now: &Time) -> Option<ProfileStatus> {
    let key = member.profile.as_ref()?;
    let profile = observed
        .profiles
        .iter()
        .find(|p| &ObjectKey::of(&p.metadata) == key)?;
    let want = crate::membership::mirrored_properties(
        observed
            .properties
            .iter()
            .filter_map(|p| Some((p.metadata.name.as_deref()?, p.spec.as_ref()?.value.as_str()))),
        now,
    );
    let have = profile
        .status
        .as_ref()
        .map(|s| s.properties.as_slice())
        .unwrap_or_default();
    let pairs = |props: &[Property]| -> Vec<(String, String)> {
        let mut v: Vec<_> = props
            .iter()
            .map(|p| (p.name.clone(), p.value.clone()))
            .collect();
        v.sort();
        v
    };
    (pairs(&want) != pairs(have)).then(|| ProfileStatus {
        key: key.clone(),
        properties: want,
    })
}

/// Every trusted hub record, merged per service; untrusted ones go to the report.
fn merge_trusted(
    observed: &Observed,
    policy: &NamespacePolicySpec,
    report: &mut Report,
) -> BTreeMap<ServiceKey, MergedService> {
    // Every record the hub holds is checked and reported, even one the liveness view leaves
    // out (a forged record in a member's namespace does not match that member's claim).
    for record in &observed.records {
        if let Some(problem) = record_rejection(record) {
            let meta = &record.metadata;
            report.rejected.push(Rejected {
                record: ObjectKey::of(meta),
                service: of_record(record),
                version: report::version(meta, None),
                problem: problem.message,
                kind: HubKind::Record,
                cluster: report::stored_by(meta),
                reason: problem.reason,
                count: 1,
            });
        }
    }
    let mut groups: BTreeMap<ServiceKey, Vec<&ExportedService>> = BTreeMap::new();
    for record in observed.source_records() {
        if record_rejection(record).is_some() {
            continue;
        }
        *report.trusted.entry(of_record(record)).or_default() += 1;
        if crate::namespaces::excluded(policy, &record.spec.namespace).is_some() {
            let key = of_record(record);
            if !report.excluded.contains(&key) {
                report.excluded.push(key);
            }
            continue;
        }
        groups.entry(of_record(record)).or_default().push(record);
    }
    groups
        .into_iter()
        .filter_map(|(key, records)| merge_records(&records).map(|m| (key, m)))
        .collect()
}
