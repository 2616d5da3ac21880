//! Import side of a pass: the hub's records, checked and merged per service, become this
//! member's ServiceImports, derived Services and MCS EndpointSlices; what is no longer wanted goes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use atoll_api::hub::{self, ExportedService, ExportedServiceSpec};
use atoll_api::labels;
use atoll_api::multicluster::{ServiceImportType, import_condition};
use atoll_api::v1beta1::ServiceImport;
use atoll_core::ClusterId;
use atoll_core::cluster_id::is_dns_label;
use atoll_core::import::{self, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use atoll_core::merge::{MergedService, merge};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::AgentConfig;
use crate::reconcile::{Context, Errors, ServiceKey, condition, same_conditions};
use crate::stores::Stores;
use crate::writer::{self, already_applied};

/// Why a hub record is not trusted, if it is not.
fn record_problem(record: &ExportedService) -> Option<String> {
    let spec = &record.spec;
    if let Err(e) = ClusterId::new(&spec.cluster) {
        return Some(e.to_string());
    }
    if record.namespace().as_deref() != Some(hub::namespace_for(&spec.cluster).as_str()) {
        return Some(format!(
            "claims cluster {} but is stored in another member's namespace",
            spec.cluster
        ));
    }
    let label = |s: &str| s.len() <= 63 && is_dns_label(s);
    if !label(&spec.namespace) || !label(&spec.name) {
        return Some("namespace or name is not a DNS label".to_owned());
    }
    if record.name_any() != hub::record_name(&spec.namespace, &spec.name) {
        return Some("object name does not match the service it describes".to_owned());
    }
    None
}

/// Every trusted record on the hub, merged per service.
pub(crate) fn merge_records(
    stores: &Stores,
    context: &Context,
) -> BTreeMap<ServiceKey, MergedService> {
    let mut groups: BTreeMap<ServiceKey, Vec<ExportedServiceSpec>> = BTreeMap::new();
    let (mut trusted, mut rejected) = (0, 0);
    for record in stores.records.state() {
        if let Some(problem) = record_problem(&record) {
            rejected += 1;
            let key = format!(
                "{}@{}",
                record.uid().unwrap_or_default(),
                record.resource_version().unwrap_or_default()
            );
            if context
                .reported
                .lock()
                .is_ok_and(|mut seen| seen.insert(key))
            {
                tracing::warn!(record = %record.name_any(), namespace = ?record.namespace(), problem, "ignoring a malformed hub record");
            }
            continue;
        }
        groups
            .entry((record.spec.namespace.clone(), record.spec.name.clone()))
            .or_default()
            .push(record.spec.clone());
        trusted += 1;
    }
    context.metrics.records.set(trusted);
    context.metrics.records_rejected.set(rejected);
    let merged: BTreeMap<ServiceKey, MergedService> = groups
        .into_iter()
        .filter_map(|(key, records)| {
            let refs: Vec<&ExportedServiceSpec> = records.iter().collect();
            merge(&refs).map(|m| (key, m))
        })
        .collect();
    let conflicts = merged.values().filter(|m| m.conflicts.any()).count();
    context
        .metrics
        .conflicts
        .set(i64::try_from(conflicts).unwrap_or(i64::MAX));
    merged
}

/// Import side: ServiceImports, derived Services and MCS EndpointSlices in this member.
pub(crate) async fn import(
    config: &AgentConfig,
    stores: &Stores,
    merged: &BTreeMap<ServiceKey, MergedService>,
    context: &Context,
    errors: &mut Errors,
) {
    let member = &config.member;
    let namespaces: BTreeSet<String> = stores
        .namespaces
        .state()
        .iter()
        .filter(|n| n.metadata.deletion_timestamp.is_none())
        .map(|n| n.name_any())
        .collect();
    let mut copies: BTreeMap<(String, String, String), Vec<Arc<EndpointSlice>>> = BTreeMap::new();
    for copy in stores.hub_slices.state() {
        let l = copy.labels();
        let (Some(cluster), Some(ns), Some(svc)) = (
            l.get(hub::LABEL_CLUSTER),
            l.get(hub::LABEL_SERVICE_NAMESPACE),
            l.get(hub::LABEL_SERVICE_NAME),
        ) else {
            continue;
        };
        if copy.namespace().as_deref() != Some(hub::namespace_for(cluster).as_str()) {
            continue;
        }
        copies
            .entry((ns.clone(), svc.clone(), cluster.clone()))
            .or_default()
            .push(copy.clone());
    }

    // Services are independent: import them concurrently, so one slow write does not hold up
    // the rest and a burst of exports converges in a few round trips.
    let results: Vec<ServiceResult> = futures::stream::iter(merged.iter())
        .map(|((ns, name), m)| {
            import_service(config, stores, context, &namespaces, &copies, ns, name, m)
        })
        .buffer_unordered(16)
        .collect()
        .await;
    let mut want_imports = BTreeSet::new();
    let mut want_derived = BTreeSet::new();
    let mut want_slices = BTreeSet::new();
    let mut skipped = 0i64;
    for r in results {
        want_imports.extend(r.imports);
        want_derived.extend(r.derived);
        want_slices.extend(r.slices);
        skipped += i64::from(r.skipped);
        errors.0 += r.errors.0;
    }

    context
        .metrics
        .imports
        .set(i64::try_from(want_imports.len()).unwrap_or(i64::MAX));
    context.metrics.imports_skipped.set(skipped);
    // Remove what we own and no longer want.
    let stale_imports: Vec<ServiceKey> = stores
        .imports
        .state()
        .iter()
        .filter(|i| owned(i.labels()))
        .map(|i| (i.namespace().unwrap_or_default(), i.name_any()))
        .filter(|key| !want_imports.contains(key))
        .collect();
    let stale_derived: Vec<ServiceKey> = stores
        .services
        .state()
        .iter()
        .filter(|s| owned(s.labels()) && s.labels().contains_key(labels::SERVICE_NAME))
        .map(|s| (s.namespace().unwrap_or_default(), s.name_any()))
        .filter(|key| !want_derived.contains(key))
        .collect();
    let stale_slices: Vec<ServiceKey> = stores
        .mcs_slices
        .state()
        .iter()
        .map(|s| (s.namespace().unwrap_or_default(), s.name_any()))
        .filter(|key| !want_slices.contains(key))
        .collect();
    errors.0 += writer::delete_all::<ServiceImport>(member, stale_imports, &context.writes).await;
    errors.0 += writer::delete_all::<Service>(member, stale_derived, &context.writes).await;
    errors.0 += writer::delete_all::<EndpointSlice>(member, stale_slices, &context.writes).await;
}

/// What importing one service wanted and how it went.
#[derive(Default)]
struct ServiceResult {
    imports: Vec<ServiceKey>,
    derived: Vec<ServiceKey>,
    slices: Vec<ServiceKey>,
    /// Not imported: the namespace does not exist in this cluster.
    skipped: bool,
    errors: Errors,
}

/// The ServiceImport, derived Service and MCS slices of one merged service in this member.
#[allow(clippy::too_many_arguments)]
async fn import_service(
    config: &AgentConfig,
    stores: &Stores,
    context: &Context,
    namespaces: &BTreeSet<String>,
    copies: &BTreeMap<(String, String, String), Vec<Arc<EndpointSlice>>>,
    ns: &String,
    name: &String,
    m: &MergedService,
) -> ServiceResult {
    let member = &config.member;
    let mut out = ServiceResult::default();
    let mut errors = Errors::default();
    if !namespaces.contains(ns) {
        // Namespace sameness: Atoll never creates namespaces. Say so once per service.
        out.skipped = true;
        let key = format!("namespace-missing/{ns}/{name}");
        if context
            .reported
            .lock()
            .is_ok_and(|mut seen| seen.insert(key))
        {
            tracing::warn!(namespace = %ns, service = %name, "not importing: the namespace does not exist in this cluster; create it to receive the import");
        }
        out.errors = errors;
        return out;
    }
    let services: Api<Service> = Api::namespaced(member.clone(), ns);
    // Why this cluster cannot give the import a VIP of its families, if it cannot.
    let mut family_problem = None;
    let (ips, families) = match import::derived_service(m) {
        Some(desired) => {
            let derived_name = desired.name_any();
            out.derived.push((ns.clone(), derived_name.clone()));
            let observed = stores
                .services
                .get(&ObjectRef::new(&derived_name).within(ns));
            let current = match observed {
                Some(o) if already_applied(o.as_ref(), &desired) => Some(o.as_ref().clone()),
                _ => {
                    let applied = writer::apply(&services, &desired, &context.writes).await;
                    if let Err(e) = &applied {
                        family_problem = ip_family_problem(e);
                    }
                    errors.note("applying derived Service", applied)
                }
            };
            let spec = current.and_then(|s| s.spec).unwrap_or_default();
            let ips: Vec<String> = spec
                .cluster_ips
                .unwrap_or_default()
                .into_iter()
                .filter(|ip| ip != "None")
                .collect();
            (ips, spec.ip_families.unwrap_or_default())
        }
        None => (Vec::new(), m.spec.ip_families.clone()),
    };
    let ready = m.spec.type_ == ServiceImportType::Headless || !ips.is_empty();
    let mut desired = import::service_import(m, ips, families);
    let status = desired.status.take().unwrap_or_default();
    out.imports.push((ns.clone(), name.clone()));
    let imports: Api<ServiceImport> = Api::namespaced(member.clone(), ns);
    let observed = stores.imports.get(&ObjectRef::new(name).within(ns));
    let spec_current = observed.as_ref().is_some_and(|o| {
        o.spec == desired.spec
            && o.metadata.labels == desired.metadata.labels
            && annotations_current(o, &desired)
    });
    if !spec_current {
        let applied = errors.note(
            "applying ServiceImport",
            writer::apply(&imports, &desired, &context.writes).await,
        );
        if observed.is_none() && applied.is_some() {
            observe_import_latency(context, m, ns, name);
        }
    }
    let previous = observed
        .as_ref()
        .and_then(|o| o.status.clone())
        .unwrap_or_default();
    let conditions = vec![if ready {
        condition(
            import_condition::READY,
            true,
            import_condition::REASON_READY,
            String::new(),
            &previous.conditions,
        )
    } else if let Some(problem) = family_problem {
        condition(
            import_condition::READY,
            false,
            import_condition::REASON_IP_FAMILY_NOT_SUPPORTED,
            format!(
                "this cluster cannot allocate a cluster IP of the service's IP families: {problem}"
            ),
            &previous.conditions,
        )
    } else {
        condition(
            import_condition::READY,
            false,
            import_condition::REASON_PENDING,
            "waiting for the derived Service's cluster IP".to_owned(),
            &previous.conditions,
        )
    }];
    if previous.clusters != status.clusters
        || previous.endpoint_slice_objects != status.endpoint_slice_objects
        || !same_conditions(&previous.conditions, &conditions)
    {
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "status": {
                "clusters": status.clusters,
                "conditions": conditions,
                "endpointSliceObjects": status.endpoint_slice_objects,
            }
        });
        errors.note(
            "applying ServiceImport status",
            writer::apply_status(&imports, name, &partial, &context.writes).await,
        );
    }

    let slices: Api<EndpointSlice> = Api::namespaced(member.clone(), ns);
    for cluster in &m.clusters {
        let source: Vec<&EndpointSlice> = copies
            .get(&(ns.clone(), name.clone(), cluster.clone()))
            .map(|v| v.iter().map(Arc::as_ref).collect())
            .unwrap_or_default();
        for slice in import::mcs_slices(m, cluster, &source) {
            let slice_name = slice.name_any();
            out.slices.push((ns.clone(), slice_name.clone()));
            let observed = stores
                .mcs_slices
                .get(&ObjectRef::new(&slice_name).within(ns));
            if !observed.is_some_and(|o| already_applied(o.as_ref(), &slice)) {
                errors.note(
                    "applying MCS EndpointSlice",
                    writer::apply(&slices, &slice, &context.writes).await,
                );
            }
        }
    }
    out.errors = errors;
    out
}

/// Records export-to-import latency the first time this agent creates an import, measured from
/// the oldest constituent export's creation.
fn observe_import_latency(context: &Context, merged: &MergedService, ns: &str, name: &str) {
    let first_time = context
        .imported
        .lock()
        .is_ok_and(|mut seen| seen.insert((ns.to_owned(), name.to_owned())));
    if first_time {
        let age = Timestamp::now().duration_since(merged.oldest_export.0);
        context
            .metrics
            .export_to_import_seconds
            .observe(age.as_secs_f64().max(0.0));
    }
}

/// The apiserver's reason, when it refused a derived Service for its IP families (for example
/// an IPv6-only service imported into an IPv4-only cluster).
fn ip_family_problem(error: &kube::Error) -> Option<String> {
    match error {
        kube::Error::Api(e)
            if e.code == 422 && e.message.to_ascii_lowercase().contains("famil") =>
        {
            Some(e.message.clone())
        }
        _ => None,
    }
}

fn owned(labels: &BTreeMap<String, String>) -> bool {
    labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_VALUE)
}

/// The annotations we set are present with our values, and no exported annotation we set
/// earlier lingers (every annotation on an owned import is ours, except kubectl's).
fn annotations_current(observed: &ServiceImport, desired: &ServiceImport) -> bool {
    let ours = |a: &BTreeMap<String, String>| -> BTreeMap<String, String> {
        a.iter()
            .filter(|(k, _)| !k.starts_with("kubectl.kubernetes.io/"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    };
    ours(observed.annotations()) == ours(desired.annotations())
}
