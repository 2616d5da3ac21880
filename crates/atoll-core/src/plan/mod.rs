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

mod export_side;
mod import_side;
pub mod scope;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use atoll_api::Condition;
use atoll_api::about::v1beta1::ClusterProperty;
use atoll_api::hub::{
    ExportedEndpointSlice, ExportedService, ExportedServiceSpec, NAMESPACE_POLICY, NamespacePolicy,
    NamespacePolicySpec,
};
use atoll_api::inventory::{ClusterProfile, Property};
use atoll_api::multicluster::ServiceImportStatus;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::ClusterId;
use crate::announce::Announcement;
use crate::merge::{MergedService, merge};
use crate::trust::record_problem;

/// `(namespace, name)` of a service.
pub type ServiceKey = (String, String);

/// Namespace and name of one object.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The key of a namespaced object, from its metadata.
    pub fn of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> Self {
        Self {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// Everything the agent's watches hold at the start of a pass.
#[derive(Clone, Debug, Default)]
pub struct Observed {
    /// Member: ServiceExports.
    pub exports: Vec<Arc<ServiceExport>>,
    /// Member: Services (exported ones and the derived ones Atoll owns).
    pub services: Vec<Arc<Service>>,
    /// Member: EndpointSlices of local Services (not MCS slices, not hub copies).
    pub service_slices: Vec<Arc<EndpointSlice>>,
    /// Member: the MCS EndpointSlices Atoll wrote.
    pub mcs_slices: Vec<Arc<EndpointSlice>>,
    /// Member: namespaces.
    pub namespaces: Vec<Arc<Namespace>>,
    /// Member: ServiceImports.
    pub imports: Vec<Arc<ServiceImport>>,
    /// Hub: every member's ExportedService records.
    pub records: Vec<Arc<ExportedService>>,
    /// Hub: every member's EndpointSlice copies.
    pub hub_slices: Vec<Arc<ExportedEndpointSlice>>,
    /// Hub: the ClusterSet's NamespacePolicy (at most the one named `clusterset` counts).
    pub policies: Vec<Arc<NamespacePolicy>>,
    /// Member: its ClusterProperties.
    pub properties: Vec<Arc<ClusterProperty>>,
    /// Hub: this member's ClusterProfile, when it has one.
    pub profiles: Vec<Arc<ClusterProfile>>,
    /// Which source clusters are withdrawn or stale, from `crate::liveness::Tracker`.
    pub liveness: crate::liveness::Liveness,
    /// The records and copies to import from, when they differ from what the hub holds now:
    /// the tracker's view, without withdrawn clusters and with the last claimed sets of
    /// clusters whose objects do not match their claims. `None`: import what the hub holds.
    /// (The export side always compares with what the hub holds.)
    pub sources: Option<Sources>,
}

/// What the import side merges.
#[derive(Clone, Debug, Default)]
pub struct Sources {
    pub records: Vec<Arc<ExportedService>>,
    pub copies: Vec<Arc<ExportedEndpointSlice>>,
}

impl Observed {
    /// The records the import side merges.
    pub fn source_records(&self) -> &[Arc<ExportedService>] {
        self.sources.as_ref().map_or(&self.records, |s| &s.records)
    }

    /// The endpoint copies the import side turns into MCS EndpointSlices.
    pub fn source_copies(&self) -> &[Arc<ExportedEndpointSlice>] {
        self.sources
            .as_ref()
            .map_or(&self.hub_slices, |s| &s.copies)
    }
}

/// Who is planning: the member's cluster id and, once joined, its ClusterProfile on the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    pub id: ClusterId,
    pub profile: Option<ObjectKey>,
}

impl Member {
    /// A member without a ClusterProfile to keep current.
    pub fn new(id: ClusterId) -> Self {
        Self { id, profile: None }
    }
}

/// A write the API refused: its HTTP status (0 when no answer came) and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub code: u16,
    pub message: String,
}

impl Refusal {
    /// Whether the apiserver refused a Service for its IP families (say an IPv6-only service
    /// imported into an IPv4-only cluster).
    pub fn is_ip_family_problem(&self) -> bool {
        self.code == 422 && self.message.to_ascii_lowercase().contains("famil")
    }
}

/// What the writer learned in the previous pass that no watch shows: the writes that failed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Feedback {
    /// Exports whose hub record could not be written.
    pub publish_failures: BTreeMap<ServiceKey, Refusal>,
    /// Imports whose derived Service could not be written.
    pub derived_failures: BTreeMap<ServiceKey, Refusal>,
}

impl Feedback {
    /// Takes in what a pass over `scope` (every service when `None`) learned: its failures
    /// replace those of the same services.
    pub fn absorb(&mut self, scope: Option<&BTreeSet<ServiceKey>>, pass: Feedback) {
        let Some(scope) = scope else {
            *self = pass;
            return;
        };
        self.publish_failures.retain(|k, _| !scope.contains(k));
        self.derived_failures.retain(|k, _| !scope.contains(k));
        self.publish_failures.extend(pass.publish_failures);
        self.derived_failures.extend(pass.derived_failures);
    }

    /// Whether `other` fails the same writes with the same status codes (messages may differ
    /// from one attempt to the next without meaning anything new).
    pub fn same_failures(&self, other: &Self) -> bool {
        let codes = |m: &BTreeMap<ServiceKey, Refusal>| -> Vec<(ServiceKey, u16)> {
            m.iter().map(|(k, r)| (k.clone(), r.code)).collect()
        };
        codes(&self.publish_failures) == codes(&other.publish_failures)
            && codes(&self.derived_failures) == codes(&other.derived_failures)
    }
}

/// Writes in this member's own hub namespace.
#[derive(Clone, Debug, Default)]
pub struct HubWrites {
    pub apply_records: Vec<ExportedService>,
    pub delete_records: Vec<ObjectKey>,
    pub apply_slices: Vec<ExportedEndpointSlice>,
    pub delete_slices: Vec<ObjectKey>,
}

impl HubWrites {
    pub fn is_empty(&self) -> bool {
        self.apply_records.is_empty()
            && self.delete_records.is_empty()
            && self.apply_slices.is_empty()
            && self.delete_slices.is_empty()
    }
}

/// A ServiceImport to apply (spec, labels, annotations; the status is separate).
#[derive(Clone, Debug, PartialEq)]
pub struct ImportApply {
    pub object: ServiceImport,
    /// Set when the import does not exist yet: the creation of the oldest constituent export,
    /// to measure export-to-import latency.
    pub first_export: Option<Time>,
}

/// A ServiceImport status to apply.
#[derive(Clone, Debug, PartialEq)]
pub struct ImportStatus {
    pub key: ObjectKey,
    pub status: ServiceImportStatus,
    /// Events for the ServiceImport (a source cluster withdrawn or restored).
    pub announcements: Vec<Announcement>,
}

/// Writes in this member.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MemberWrites {
    /// Derived Services (their cluster IPs become ClusterSetIP imports' `spec.ips`).
    pub apply_derived: Vec<Service>,
    /// ServiceImports; each before its status.
    pub apply_imports: Vec<ImportApply>,
    pub import_statuses: Vec<ImportStatus>,
    /// MCS EndpointSlices.
    pub apply_slices: Vec<EndpointSlice>,
    pub delete_imports: Vec<ObjectKey>,
    /// Events to publish on imports about to be deleted because every source cluster of theirs
    /// is withdrawn (the Event outlives the object, so `kubectl get events` says why).
    pub withdrawn_imports: Vec<(ObjectKey, Announcement)>,
    pub delete_derived: Vec<ObjectKey>,
    pub delete_slices: Vec<ObjectKey>,
}

/// New conditions for one ServiceExport, and the Events announcing the change.
#[derive(Clone, Debug, PartialEq)]
pub struct ExportStatus {
    pub key: ObjectKey,
    /// The export's uid, for the Events' object reference.
    pub uid: Option<String>,
    pub conditions: Vec<Condition>,
    pub announcements: Vec<Announcement>,
}

/// A hub record that is not used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub record: ObjectKey,
    /// The service the record describes.
    pub service: ServiceKey,
    /// `uid@resourceVersion`: one report per version of a record.
    pub version: String,
    pub problem: String,
}

/// What a plan found, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Hub records used in the merge, per service.
    pub trusted: BTreeMap<ServiceKey, usize>,
    /// Hub records ignored.
    pub rejected: Vec<Rejected>,
    /// Merged services whose exports disagree.
    pub conflicting: BTreeSet<ServiceKey>,
    /// Imports this member holds or is about to.
    pub imported: BTreeSet<ServiceKey>,
    /// Services not imported because their namespace does not exist in this member.
    pub skipped: Vec<ServiceKey>,
    /// Services not imported because the namespace policy excludes their namespace.
    pub excluded: Vec<ServiceKey>,
    /// Services merged by the pass: what it cost (a pass over a few services merges those).
    pub merged: usize,
}

impl Report {
    /// Hub records used in the merge.
    pub fn trusted_records(&self) -> usize {
        self.trusted.values().sum()
    }

    /// Takes in the report of a pass over `scope` (every service when `None`): it replaces
    /// what was known of those services, so the totals are those of the whole ClusterSet.
    pub fn absorb(&mut self, scope: Option<&BTreeSet<ServiceKey>>, pass: Report) {
        let Some(scope) = scope else {
            *self = pass;
            return;
        };
        self.trusted.retain(|k, _| !scope.contains(k));
        self.trusted.extend(pass.trusted);
        self.rejected.retain(|r| !scope.contains(&r.service));
        self.rejected.extend(pass.rejected);
        self.conflicting.retain(|k| !scope.contains(k));
        self.conflicting.extend(pass.conflicting);
        self.imported.retain(|k| !scope.contains(k));
        self.imported.extend(pass.imported);
        self.skipped.retain(|k| !scope.contains(k));
        self.skipped.extend(pass.skipped);
        self.excluded.retain(|k| !scope.contains(k));
        self.excluded.extend(pass.excluded);
        self.merged = pass.merged;
    }
}

/// New `status.properties` for this member's ClusterProfile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProfileStatus {
    pub key: ObjectKey,
    pub properties: Vec<Property>,
}

/// Names of the records (`r/<name>`) and copies (`s/<name>`) this member publishes, per
/// service.
pub type Published = BTreeMap<ServiceKey, Vec<String>>;

/// The digest a member claims for everything it publishes.
pub fn claim_digest(published: &Published) -> String {
    crate::liveness::digest(published.values().flatten().map(String::as_str))
}

/// Every write of one pass.
#[derive(Clone, Debug, Default)]
pub struct Plan {
    pub hub: HubWrites,
    /// Digest of the names of the records and copies this member publishes (its desired
    /// state), for the claim on its heartbeat Lease.
    pub claim_digest: String,
    /// Those names, per service (a pass over some services knows only theirs).
    pub published: Published,
    pub profile: Option<ProfileStatus>,
    pub member: MemberWrites,
    pub export_statuses: Vec<ExportStatus>,
    pub report: Report,
}

impl Plan {
    /// Number of API writes the plan makes (Events not counted).
    pub fn writes(&self) -> usize {
        let h = &self.hub;
        let m = &self.member;
        h.apply_records.len()
            + h.delete_records.len()
            + h.apply_slices.len()
            + h.delete_slices.len()
            + m.apply_derived.len()
            + m.apply_imports.len()
            + m.import_statuses.len()
            + m.apply_slices.len()
            + m.delete_imports.len()
            + m.delete_derived.len()
            + m.delete_slices.len()
            + self.export_statuses.len()
            + usize::from(self.profile.is_some())
    }
}

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
    let member_writes = import_side::plan(observed, feedback, &merged, now, &mut report);
    Plan {
        hub,
        claim_digest: claim_digest(&published),
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
        if let Some(problem) = record_problem(record) {
            let meta = &record.metadata;
            report.rejected.push(Rejected {
                record: ObjectKey::of(meta),
                service: scope::of_record(record),
                version: format!(
                    "{}@{}",
                    meta.uid.as_deref().unwrap_or_default(),
                    meta.resource_version.as_deref().unwrap_or_default()
                ),
                problem,
            });
        }
    }
    let mut groups: BTreeMap<ServiceKey, Vec<&ExportedServiceSpec>> = BTreeMap::new();
    for record in observed.source_records() {
        if record_problem(record).is_some() {
            continue;
        }
        *report.trusted.entry(scope::of_record(record)).or_default() += 1;
        if crate::namespaces::excluded(policy, &record.spec.namespace).is_some() {
            let key = (record.spec.namespace.clone(), record.spec.name.clone());
            if !report.excluded.contains(&key) {
                report.excluded.push(key);
            }
            continue;
        }
        groups
            .entry((record.spec.namespace.clone(), record.spec.name.clone()))
            .or_default()
            .push(&record.spec);
    }
    groups
        .into_iter()
        .filter_map(|(key, records)| merge(&records).map(|m| (key, m)))
        .collect()
}
