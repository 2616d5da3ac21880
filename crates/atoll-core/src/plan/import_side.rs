//! Import side of a plan: for every merged service whose namespace exists here, the derived
//! Service, the ServiceImport with its status and the MCS EndpointSlices; everything Atoll owns
//! here that no merged service wants any more is deleted. An MCS slice that is no longer
//! wanted while its service, source cluster and family get a slice written in this pass (a
//! renamed slice, after an upgrade changed the naming) stays until that slice is observed, so
//! no importer ever holds fewer endpoints than before.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::hub::ExportedEndpointSlice;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use atoll_api::v1beta1::ServiceImport;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

use super::input::{Feedback, Observed, Refusal};
use super::output::{ImportApply, ImportStatus, MemberWrites};
use super::report::{self, HubKind, Rejected, Report};
use super::selected::{self, Properties};
use crate::conditions::{VipProblem, import_ready, same_conditions, source_clusters};
use crate::diff::{already_applied, owned, same_own_annotations};
use crate::import::{self, Dropped, EndpointCheck};
use crate::keys::{self, of_copy};
use crate::merge::MergedService;
use crate::slice_diff::slice_applied;
use crate::trust::{copy_family, slice_copy_owner};
use crate::validate::{AddressPolicy, Cidr, Family};

/// `(service namespace, service name, source cluster)` -> that cluster's hub slice copies,
/// each with its address family.
type Copies<'a> = BTreeMap<(String, String, String), Vec<(&'a ExportedEndpointSlice, Family)>>;

/// `(namespace, service, source cluster, address type)` of an MCS slice.
type SliceGroup = (String, String, String, String);

fn group_of(meta: &ObjectMeta, address_type: &str) -> Option<SliceGroup> {
    let label = |key: &str| meta.labels.as_ref()?.get(key).map(String::as_str);
    group(meta.namespace.as_deref(), label, address_type)
}

/// [`group_of`] a kept slice.
fn group_of_kept(slice: &McsSlice) -> Option<SliceGroup> {
    group(
        Some(&slice.namespace),
        |key| slice.label(key),
        &slice.address_type,
    )
}

fn group<'a>(
    namespace: Option<&str>,
    label: impl Fn(&str) -> Option<&'a str>,
    address_type: &str,
) -> Option<SliceGroup> {
    Some((
        namespace?.to_owned(),
        label(labels::SERVICE_NAME)?.to_owned(),
        label(labels::SOURCE_CLUSTER)?.to_owned(),
        address_type.to_owned(),
    ))
}

/// The member objects observed, by key, the hub's slice copies and the clock.
struct Here<'a> {
    services: BTreeMap<ObjectKey, &'a Service>,
    imports: BTreeMap<ObjectKey, &'a ServiceImport>,
    slices: BTreeMap<ObjectKey, &'a McsSlice>,
    copies: Copies<'a>,
    now: &'a Time,
    liveness: &'a crate::liveness::Liveness,
    /// This member's cluster id: its own endpoints are not judged by `policy`.
    own: &'a str,
    policy: AddressPolicy,
    /// Cluster properties, for KEP-5939 cluster selectors.
    properties: Properties,
    /// The selections this importer's last passes applied (see `crate::selection::hold`).
    selections: &'a BTreeMap<ServiceKey, crate::selection::Selection>,
}

/// What the plan wants to exist in this member; everything else Atoll owns goes.
#[derive(Default)]
struct Wanted {
    imports: BTreeSet<ObjectKey>,
    derived: BTreeSet<ObjectKey>,
    slices: BTreeSet<ObjectKey>,
    /// Slice groups that get a slice written in this pass.
    pending: BTreeSet<SliceGroup>,
}

/// The importer's own address ranges, refused for other members' endpoints.
fn address_policy(observed: &Observed) -> AddressPolicy {
    let service_cidrs = observed
        .service_cidrs
        .iter()
        .flat_map(|c| c.spec.iter().flat_map(|s| s.cidrs.iter().flatten()))
        .filter_map(|c| c.parse::<Cidr>().ok())
        .collect();
    AddressPolicy {
        service_cidrs,
        denied: observed.denied_cidrs.clone(),
        nodes: observed.node_addresses.clone(),
    }
}

/// A copy (or some of its endpoints) left out, for the report.
fn dropped(
    copy: &ExportedEndpointSlice,
    kind: HubKind,
    problem: crate::validate::Problem,
    count: usize,
) -> Rejected {
    let what = (kind == HubKind::Endpoint).then(|| problem.reason.as_str());
    Rejected {
        record: ObjectKey::of(&copy.metadata),
        service: of_copy(copy),
        version: report::version(&copy.metadata, what),
        problem: problem.message,
        kind,
        cluster: report::stored_by(&copy.metadata),
        reason: problem.reason,
        count,
    }
}

pub(super) fn plan(
    own: &str,
    observed: &Observed,
    feedback: &Feedback,
    merged: &BTreeMap<ServiceKey, MergedService>,
    now: &Time,
    report: &mut Report,
) -> MemberWrites {
    let namespaces: BTreeSet<&str> = observed
        .namespaces
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .filter_map(|n| n.metadata.name.as_deref())
        .collect();
    let mut copies: Copies = BTreeMap::new();
    for copy in observed.source_copies() {
        match copy_family(copy) {
            Ok(family) => {
                if let Some(owner) = slice_copy_owner(copy) {
                    copies.entry(owner).or_default().push((copy, family));
                }
            }
            Err(problem) => report
                .dropped
                .push(dropped(copy, HubKind::Copy, problem, 1)),
        }
    }
    let here = Here {
        services: by_key(&observed.services, |s| &s.metadata),
        imports: by_key(&observed.imports, |i| &i.metadata),
        slices: observed
            .mcs_slices
            .iter()
            .map(|s| (s.key(), s.as_ref()))
            .collect(),
        copies,
        now,
        liveness: &observed.liveness,
        own,
        policy: address_policy(observed),
        properties: Properties::of(observed, own),
        selections: &observed.selections,
    };

    let mut writes = MemberWrites::default();
    let mut wanted = Wanted::default();
    // Services a pinned source takes part in stay exactly as they are: nothing written, nothing
    // of theirs deleted but a withdrawn cluster's slices.
    let pinned = super::pinned::pinned_services(observed);
    keep_as_they_are(&pinned, &here, &mut wanted);
    for (key, m) in merged {
        if pinned.contains(key) {
            continue;
        }
        if !namespaces.contains(key.namespace.as_str()) {
            // Namespace sameness: Atoll never creates namespaces.
            report.skipped.push(key.clone());
            continue;
        }
        let failure = feedback.derived_failures.get(key);
        import_service(m, failure, &here, &mut wanted, &mut writes, report);
    }
    report.imported = wanted
        .imports
        .iter()
        .map(|k| ServiceKey::new(&k.namespace, &k.name))
        .collect();

    writes.delete_imports = here
        .imports
        .iter()
        .filter(|(k, i)| owned(i.metadata.labels.as_ref()) && !wanted.imports.contains(*k))
        .map(|(k, _)| k.clone())
        .collect();
    for key in &writes.delete_imports {
        let service = ServiceKey::new(&key.namespace, &key.name);
        let sources: Vec<&str> = observed
            .liveness
            .withdrawn
            .iter()
            .filter(|(_, w)| w.services.contains(&service))
            .map(|(c, _)| c.as_str())
            .collect();
        if !sources.is_empty() {
            writes.withdrawn_imports.push((
                key.clone(),
                crate::announce::Announcement {
                    warning: true,
                    reason: "SourceClusterWithdrawn".to_owned(),
                    note: format!(
                        "removing the import: every source cluster ({}) is withdrawn, no heartbeat for longer than the grace",
                        sources.join(", ")
                    ),
                    action: "Withdraw",
                },
            ));
        }
    }
    writes.delete_derived = here
        .services
        .iter()
        .filter(|(k, s)| {
            let labels = s.metadata.labels.as_ref();
            owned(labels)
                && labels.is_some_and(|l| l.contains_key(labels::SERVICE_NAME))
                && !wanted.derived.contains(*k)
        })
        .map(|(k, _)| k.clone())
        .collect();
    writes.delete_slices = here
        .slices
        .iter()
        .filter(|(k, s)| {
            !wanted.slices.contains(*k)
                && !group_of_kept(s).is_some_and(|g| wanted.pending.contains(&g))
        })
        .map(|(k, _)| k.clone())
        .collect();
    writes
}

/// Marks every object Atoll owns here for the services `keep` as wanted, so none is deleted.
fn keep_as_they_are(keep: &BTreeSet<ServiceKey>, here: &Here<'_>, wanted: &mut Wanted) {
    if keep.is_empty() {
        return;
    }
    let of_label = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(labels::SERVICE_NAME))
            .map(|name| ServiceKey::new(meta.namespace.as_deref().unwrap_or_default(), name))
    };
    for key in here.imports.keys() {
        if keep.contains(&ServiceKey::new(&key.namespace, &key.name)) {
            wanted.imports.insert(key.clone());
        }
    }
    for (key, service) in &here.services {
        if of_label(&service.metadata).is_some_and(|s| keep.contains(&s)) {
            wanted.derived.insert(key.clone());
        }
    }
    // A withdrawal is never held back by a pin: a withdrawn cluster's slices leave a pinned
    // service too (a cluster not yet seen to beat must not keep a dead one's endpoints in).
    let withdrawn = |slice: &atoll_api::mcs_slice::McsSlice| {
        slice
            .label(labels::SOURCE_CLUSTER)
            .is_some_and(|c| here.liveness.withdrawn.contains_key(c))
    };
    for (key, slice) in &here.slices {
        if !withdrawn(slice) && keys::of_mcs_slice(slice).is_some_and(|s| keep.contains(&s)) {
            wanted.slices.insert(key.clone());
        }
    }
}

fn by_key<K>(
    objects: &[std::sync::Arc<K>],
    meta: impl Fn(&K) -> &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> BTreeMap<ObjectKey, &K> {
    objects
        .iter()
        .map(|o| (ObjectKey::of(meta(o)), o.as_ref()))
        .collect()
}

/// The writes for one merged service whose namespace exists here.
fn import_service(
    m: &MergedService,
    failure: Option<&Refusal>,
    here: &Here<'_>,
    wanted: &mut Wanted,
    writes: &mut MemberWrites,
    report: &mut Report,
) {
    let key = ObjectKey::new(&m.namespace, &m.name);
    wanted.imports.insert(key.clone());

    // The VIP: from the derived Service as this cluster's apiserver allocated it.
    let vip = match import::derived_service(m) {
        None => Some((Vec::new(), m.spec.ip_families.clone(), None)),
        Some(desired) => {
            let derived_key = ObjectKey::of(&desired.metadata);
            let observed = here.services.get(&derived_key).copied();
            if !observed.is_some_and(|o| already_applied(o, &desired)) {
                writes.apply_derived.push(desired);
            }
            wanted.derived.insert(derived_key);
            match (observed, failure) {
                (Some(service), _) => {
                    let spec = service.spec.clone().unwrap_or_default();
                    let ips: Vec<String> = spec
                        .cluster_ips
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|ip| ip != "None")
                        .collect();
                    let problem = ips.is_empty().then_some(VipProblem::Pending);
                    Some((ips, spec.ip_families.unwrap_or_default(), problem))
                }
                (None, Some(refusal)) => {
                    let problem = if refusal.is_ip_family_problem() {
                        VipProblem::FamilyNotSupported(refusal.message.clone())
                    } else {
                        VipProblem::Failed(refusal.message.clone())
                    };
                    Some((Vec::new(), m.spec.ip_families.clone(), Some(problem)))
                }
                // Being written in this pass: the import follows once it is observed.
                (None, None) => None,
            }
        }
    };

    if let Some((ips, families, problem)) = vip {
        let mut desired = import::service_import(m, ips, families);
        let status = desired.status.take().unwrap_or_default();
        let observed = here.imports.get(&key).copied();
        let current = observed.is_some_and(|o| {
            o.spec == desired.spec
                && o.metadata.labels == desired.metadata.labels
                && same_own_annotations(
                    o.metadata.annotations.as_ref(),
                    desired.metadata.annotations.as_ref(),
                )
        });
        if !current {
            writes.apply_imports.push(ImportApply {
                object: desired,
                first_export: observed.is_none().then(|| m.oldest_export.clone()),
            });
        }
        let previous = observed.and_then(|o| o.status.clone()).unwrap_or_default();
        let conditions = vec![
            import_ready(problem.as_ref(), &previous.conditions, here.now),
            source_clusters(m, here.liveness, &previous.conditions, here.now),
        ];
        if previous.clusters != status.clusters
            || previous.endpoint_slice_objects != status.endpoint_slice_objects
            || !same_conditions(&previous.conditions, &conditions)
        {
            writes.import_statuses.push(ImportStatus {
                key: key.clone(),
                announcements: crate::announce::source_transitions(
                    &previous.conditions,
                    &conditions,
                ),
                status: atoll_api::multicluster::ServiceImportStatus {
                    conditions,
                    ..status
                },
            });
        }
    }

    let mut per_cluster = Vec::with_capacity(m.clusters.len());
    for cluster in &m.clusters {
        let source = here
            .copies
            .get(&(m.namespace.clone(), m.name.clone(), cluster.clone()))
            .map(Vec::as_slice)
            .unwrap_or_default();
        let check = EndpointCheck {
            policy: &here.policy,
            remote: cluster != here.own,
        };
        let (slices, left_out) = import::mcs_slices(m, cluster, source, &check);
        report.dropped.extend(left_out.into_iter().map(
            |Dropped {
                 copy,
                 problem,
                 count,
             }| dropped(copy, HubKind::Endpoint, problem, count),
        ));
        per_cluster.push((cluster.clone(), slices));
    }
    let key = ServiceKey::new(&m.namespace, &m.name);
    let imported_since = here
        .imports
        .get(&ObjectKey::new(&m.namespace, &m.name))
        .and_then(|i| i.metadata.creation_timestamp.as_ref())
        .map(|t| t.0.as_second());
    if let Some(selection) = selected::mark(
        m,
        &here.properties,
        &mut per_cluster,
        here.selections.get(&key),
        imported_since,
        here.now.0.as_second(),
    ) {
        report.selections.insert(key, selection);
    }
    for (_, slices) in per_cluster {
        for slice in slices {
            let slice_key = ObjectKey::of(&slice.metadata);
            if !here
                .slices
                .get(&slice_key)
                .is_some_and(|o| slice_applied(o, &slice))
            {
                wanted
                    .pending
                    .extend(group_of(&slice.metadata, &slice.address_type));
                writes.apply_slices.push(slice);
            }
            wanted.slices.insert(slice_key);
        }
    }
}
