//! Export side of a pass: which local ServiceExports are valid, what this member publishes on
//! the hub for them, and the Valid/Ready/Conflict conditions written back on them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use atoll_api::hub::{self, ExportedService};
use atoll_api::labels;
use atoll_api::multicluster::export_condition;
use atoll_api::v1beta1::ServiceExport;
use atoll_core::export::{self, Validity};
use atoll_core::merge::MergedService;
use futures::StreamExt;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};
use serde_json::json;

use crate::AgentConfig;
use crate::events;
use crate::reconcile::{Context, Errors, ServiceKey, condition, same_conditions};
use crate::stores::Stores;
use crate::writer::{self, already_applied};

/// The member's exports with their validity and what they publish.
pub(crate) struct Exports {
    validity: BTreeMap<ServiceKey, Validity>,
    records: BTreeMap<String, ExportedService>,
    slices: BTreeMap<String, EndpointSlice>,
    /// Hub record name -> the export it belongs to.
    record_owner: BTreeMap<String, ServiceKey>,
}

impl Exports {
    pub(crate) fn from_stores(config: &AgentConfig, stores: &Stores) -> Self {
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
pub(crate) async fn publish(
    config: &AgentConfig,
    stores: &Stores,
    exports: &Exports,
    context: &Context,
    errors: &mut Errors,
) -> BTreeSet<ServiceKey> {
    let hub_ns = hub::namespace_for(config.cluster_id.as_str());
    // A record is current only if spec and labels are equal: a field dropped from the export
    // (say, an exported label) must reach the hub too, which containment would not notice.
    let (failed, delete_errors) = writer::sync_namespace(
        &config.hub,
        &stores.records,
        &hub_ns,
        &exports.records,
        |observed, desired| observed.spec == desired.spec && observed.labels() == desired.labels(),
        &context.writes,
    )
    .await;
    errors.0 += failed.len() + delete_errors;
    let published = exports
        .record_owner
        .iter()
        .filter(|(name, _)| !failed.contains(*name))
        .map(|(_, owner)| owner.clone())
        .collect();
    let (failed, delete_errors) = writer::sync_namespace(
        &config.hub,
        &stores.hub_slices,
        &hub_ns,
        &exports.slices,
        already_applied,
        &context.writes,
    )
    .await;
    errors.0 += failed.len() + delete_errors;
    published
}

/// Valid, Ready and Conflict on every local ServiceExport.
pub(crate) async fn export_status(
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
