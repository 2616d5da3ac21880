//! One reconcile pass: desired state from the stores, compared with observed state, differences
//! written. Passes run after every batch of watch events (debounced) and, while the last pass
//! had errors, every few seconds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use atoll_api::hub::{self, ExportedService, ExportedServiceSpec};
use atoll_api::multicluster::{ServiceImportType, export_condition, import_condition};
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_api::{Condition, ConditionStatus, labels};
use atoll_core::ClusterId;
use atoll_core::cluster_id::is_dns_label;
use atoll_core::export::{self, Validity};
use atoll_core::import::{self, MANAGED_BY_LABEL, MANAGED_BY_VALUE};
use atoll_core::merge::{MergedService, merge};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;
use tokio::sync::Notify;

use crate::events;
use crate::metrics::Metrics;
use crate::stores::Stores;
use crate::writer::{self, WriteCounter, already_applied};
use crate::{AgentConfig, Telemetry};

/// (namespace, name) of a service.
type ServiceKey = (String, String);

/// State kept across passes.
pub struct Context {
    /// API writes so far.
    pub writes: WriteCounter,
    /// Metrics to update.
    pub metrics: Metrics,
    /// Malformed hub records already reported (uid@resourceVersion), so each is logged once.
    reported: Mutex<BTreeSet<String>>,
    /// Imports this member holds, to measure export-to-import latency once per import.
    imported: Mutex<BTreeSet<ServiceKey>>,
    /// Publishes Events on ServiceExports.
    recorder: Recorder,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("writes", &self.writes)
            .finish_non_exhaustive()
    }
}

impl Context {
    /// Fresh state feeding `metrics`.
    pub fn new(metrics: Metrics, recorder: Recorder) -> Self {
        Self {
            recorder,
            writes: WriteCounter::new(metrics.writes.clone()),
            metrics,
            reported: Mutex::default(),
            imported: Mutex::default(),
        }
    }
}

/// Runs passes forever: first once every watch has listed, then after each change.
pub async fn run_loop(
    config: &AgentConfig,
    stores: &Stores,
    trigger: &Notify,
    telemetry: &Telemetry,
) {
    stores.wait_until_ready().await;
    tracing::info!(cluster = %config.cluster_id, "every watch has listed once; reconciling");
    let reporter = Reporter {
        controller: "atoll-agent".to_owned(),
        instance: Some(config.cluster_id.to_string()),
    };
    let context = Context::new(
        telemetry.metrics.clone(),
        Recorder::new(config.member.clone(), reporter),
    );
    let mut had_errors = false;
    loop {
        if had_errors {
            tokio::select! {
                () = trigger.notified() => {}
                () = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
        } else {
            trigger.notified().await;
        }
        tokio::time::sleep(config.debounce).await;
        let started = Instant::now();
        let before = context.writes.total();
        let errors = reconcile_once(config, stores, &context).await;
        telemetry.ready.store(true, Ordering::Relaxed);
        context
            .metrics
            .reconcile_seconds
            .observe(started.elapsed().as_secs_f64());
        context.metrics.write_errors.inc_by(errors as u64);
        let writes = context.writes.total() - before;
        if writes > 0 || errors > 0 {
            tracing::info!(
                writes,
                errors,
                took_ms = started.elapsed().as_millis() as u64,
                "reconciled"
            );
        }
        had_errors = errors > 0;
    }
}

/// Counts failed writes of one pass, logging each.
#[derive(Debug, Default)]
struct Errors(usize);

impl Errors {
    fn note<T>(&mut self, what: &str, result: Result<T, kube::Error>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(error) => {
                tracing::warn!(%error, "{what} failed");
                self.0 += 1;
                None
            }
        }
    }
}

/// One pass; returns the number of failed writes.
pub async fn reconcile_once(config: &AgentConfig, stores: &Stores, context: &Context) -> usize {
    let mut errors = Errors::default();
    let exports = Exports::from_stores(config, stores);
    let published = publish(config, stores, &exports, context, &mut errors).await;
    let merged = merge_records(stores, context);
    import(config, stores, &merged, context, &mut errors).await;
    export_status(
        config,
        stores,
        &exports,
        &published,
        &merged,
        context,
        &mut errors,
    )
    .await;
    errors.0
}

/// The member's exports with their validity and what they publish.
struct Exports {
    validity: BTreeMap<ServiceKey, Validity>,
    records: BTreeMap<String, ExportedService>,
    slices: BTreeMap<String, EndpointSlice>,
    /// Hub record name -> the export it belongs to.
    record_owner: BTreeMap<String, ServiceKey>,
}

impl Exports {
    fn from_stores(config: &AgentConfig, stores: &Stores) -> Self {
        let cluster = config.cluster_id.as_str();
        let mut slices_by_service: BTreeMap<ServiceKey, Vec<Arc<EndpointSlice>>> = BTreeMap::new();
        for slice in stores.service_slices.state() {
            if let (Some(ns), Some(svc)) = (
                slice.namespace(),
                slice.labels().get(labels::KUBERNETES_SERVICE_NAME).cloned(),
            ) {
                slices_by_service.entry((ns, svc)).or_default().push(slice);
            }
        }
        let mut out = Self {
            validity: BTreeMap::new(),
            records: BTreeMap::new(),
            slices: BTreeMap::new(),
            record_owner: BTreeMap::new(),
        };
        for export in stores.exports.state() {
            let (Some(ns), name) = (export.namespace(), export.name_any()) else {
                continue;
            };
            if export.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let service = stores.services.get(&ObjectRef::new(&name).within(&ns));
            let validity = Validity::of(service.as_deref());
            if let (Validity::Valid, Some(service)) = (&validity, service) {
                let record = export::record(cluster, &export, &service);
                let record_name = record.name_any();
                out.record_owner
                    .insert(record_name.clone(), (ns.clone(), name.clone()));
                out.records.insert(record_name, record);
                for slice in slices_by_service
                    .get(&(ns.clone(), name.clone()))
                    .into_iter()
                    .flatten()
                {
                    let copy = export::hub_slice(cluster, &ns, &name, slice);
                    out.slices.insert(copy.name_any(), copy);
                }
            }
            out.validity.insert((ns, name), validity);
        }
        out
    }
}

/// Export side: make the hub hold exactly our records and slice copies. Returns the exports
/// whose record the hub holds as desired.
async fn publish(
    config: &AgentConfig,
    stores: &Stores,
    exports: &Exports,
    context: &Context,
    errors: &mut Errors,
) -> BTreeSet<ServiceKey> {
    let hub_ns = hub::namespace_for(config.cluster_id.as_str());
    let mut published = BTreeSet::new();

    let observed: BTreeMap<String, Arc<ExportedService>> = stores
        .records
        .state()
        .into_iter()
        .filter(|r| r.namespace().as_deref() == Some(hub_ns.as_str()))
        .map(|r| (r.name_any(), r))
        .collect();
    // Exports are independent: publish them concurrently, so a burst of exports does not queue
    // behind one write round trip each.
    let changed: Vec<&ExportedService> = exports
        .records
        .iter()
        .filter(|(name, desired)| {
            !observed
                .get(*name)
                .is_some_and(|o| o.spec == desired.spec && o.labels() == desired.labels())
        })
        .map(|(_, desired)| desired)
        .collect();
    let failed = writer::apply_all(&config.hub, changed, &context.writes).await;
    errors.0 += failed.len();
    for (name, owner) in &exports.record_owner {
        if !failed.contains(name) {
            published.insert(owner.clone());
        }
    }
    let stale: Vec<ServiceKey> = observed
        .keys()
        .filter(|n| !exports.records.contains_key(*n))
        .map(|n| (hub_ns.clone(), n.clone()))
        .collect();
    errors.0 += writer::delete_all::<ExportedService>(&config.hub, stale, &context.writes).await;

    let observed: BTreeMap<String, Arc<EndpointSlice>> = stores
        .hub_slices
        .state()
        .into_iter()
        .filter(|s| s.namespace().as_deref() == Some(hub_ns.as_str()))
        .map(|s| (s.name_any(), s))
        .collect();
    let changed: Vec<&EndpointSlice> = exports
        .slices
        .iter()
        .filter(|(name, desired)| {
            !observed
                .get(*name)
                .is_some_and(|o| already_applied(o.as_ref(), *desired))
        })
        .map(|(_, desired)| desired)
        .collect();
    errors.0 += writer::apply_all(&config.hub, changed, &context.writes)
        .await
        .len();
    let stale: Vec<ServiceKey> = observed
        .keys()
        .filter(|n| !exports.slices.contains_key(*n))
        .map(|n| (hub_ns.clone(), n.clone()))
        .collect();
    errors.0 += writer::delete_all::<EndpointSlice>(&config.hub, stale, &context.writes).await;
    published
}

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
fn merge_records(stores: &Stores, context: &Context) -> BTreeMap<ServiceKey, MergedService> {
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

fn condition(
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    previous: &[Condition],
) -> Condition {
    let status = if status {
        ConditionStatus::True
    } else {
        ConditionStatus::False
    };
    // Keep the transition time while the status stays the same.
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| Time(Timestamp::now()));
    Condition {
        type_: type_.to_owned(),
        status,
        observed_generation: None,
        last_transition_time,
        reason: reason.to_owned(),
        message,
    }
}

/// Conditions equal apart from their transition times.
fn same_conditions(a: &[Condition], b: &[Condition]) -> bool {
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

/// Import side: ServiceImports, derived Services and MCS EndpointSlices in this member.
async fn import(
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
    if previous.clusters != status.clusters || !same_conditions(&previous.conditions, &conditions) {
        let partial = json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "status": { "clusters": status.clusters, "conditions": conditions }
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

/// Valid, Ready and Conflict on every local ServiceExport.
async fn export_status(
    config: &AgentConfig,
    stores: &Stores,
    exports: &Exports,
    published: &BTreeSet<ServiceKey>,
    merged: &BTreeMap<ServiceKey, MergedService>,
    context: &Context,
    errors: &mut Errors,
) {
    let cluster = config.cluster_id.as_str();
    let mut updates = Vec::new();
    for export in stores.exports.state() {
        let (Some(ns), name) = (export.namespace(), export.name_any()) else {
            continue;
        };
        let key = (ns.clone(), name.clone());
        let Some(validity) = exports.validity.get(&key) else {
            continue;
        };
        let previous = export.status.clone().unwrap_or_default().conditions;
        let (valid, reason, message) = validity.condition();
        let mut conditions = vec![condition(
            export_condition::VALID,
            valid,
            reason,
            message,
            &previous,
        )];
        conditions.push(if !valid {
            condition(
                export_condition::READY,
                false,
                export_condition::REASON_FAILED,
                "not exported: the ServiceExport is not valid".to_owned(),
                &previous,
            )
        } else if published.contains(&key) {
            condition(
                export_condition::READY,
                true,
                export_condition::REASON_EXPORTED,
                "exported to the ClusterSet's hub".to_owned(),
                &previous,
            )
        } else {
            condition(
                export_condition::READY,
                false,
                export_condition::REASON_PENDING,
                "waiting to publish the export on the hub".to_owned(),
                &previous,
            )
        });
        if let Some(m) = merged
            .get(&key)
            .filter(|m| valid && m.clusters.iter().any(|c| c == cluster))
        {
            let c = &m.conflicts;
            conditions.push(condition(
                export_condition::CONFLICT,
                c.any(),
                &c.reason(),
                c.message(&m.winner),
                &previous,
            ));
        }
        if !same_conditions(&previous, &conditions) {
            updates.push((export, previous, conditions));
        }
    }
    // Status writes of different exports are independent: send them concurrently.
    let failed = futures::stream::iter(updates)
        .map(|(export, previous, conditions)| async move {
            let (ns, name) = (export.namespace().unwrap_or_default(), export.name_any());
            for event in events::transitions(&previous, &conditions) {
                if let Err(error) = context.recorder.publish(&event, &export.object_ref(&())).await {
                    tracing::warn!(%error, export = %name, "publishing an Event failed");
                }
            }
            let api: Api<ServiceExport> = Api::namespaced(config.member.clone(), &ns);
            let partial = json!({
                "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
                "status": { "conditions": conditions }
            });
            let result = writer::apply_status(&api, &name, &partial, &context.writes).await;
            if let Err(error) = &result {
                tracing::warn!(%error, export = %name, namespace = %ns, "updating ServiceExport status failed");
            }
            result.is_err()
        })
        .buffer_unordered(16)
        .filter(|failed| std::future::ready(*failed))
        .count()
        .await;
    errors.0 += failed;
}
