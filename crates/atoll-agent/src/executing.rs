//! The agent's side of `atoll_core::executor`: each call the executor asks for, made through
//! the kube client by `crate::writer` (fenced, counted, and logged once when it fails, with
//! kind, namespace, name and the API's message), and answered as the refusal the executor
//! learns from.

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::inventory::ClusterProfile;
use atoll_api::keys::ObjectKey;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::executor::{Apiserver, Notice, Write};
use atoll_core::plan::{Refusal, SliceCollection};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use serde_json::json;

use atoll_core::reconciler::{Outcome, Step};

use crate::events;
use crate::writer::{
    Context, Targets, WriteError, apply, apply_status, delete, keep, renew, report, write,
};

#[cfg(test)]
mod tests;

/// Carries out `step` with `atoll_core::executor` (the order of the writes and what their
/// answers teach are its; the simulation runs the same), each call made by [`KubeApi`].
pub async fn execute(
    hub: &Client,
    member: &Client,
    step: &Step,
    targets: &Targets,
    context: &Context,
) -> Outcome {
    let api = KubeApi {
        hub,
        member,
        targets,
        context,
    };
    atoll_core::executor::execute(&api, step).await
}

/// This replica writing to the hub and to its member.
struct KubeApi<'a> {
    hub: &'a Client,
    member: &'a Client,
    targets: &'a Targets,
    context: &'a Context,
}

impl Apiserver for KubeApi<'_> {
    async fn write(&self, call: Write<'_>) -> Result<(), Refusal> {
        let (hub, member, context) = (self.hub, self.member, self.context);
        let written: Result<(), WriteError> = match call {
            Write::Keep(kept) => {
                return keep(member, kept, self.targets, context)
                    .await
                    .map_err(|message| Refusal { code: 0, message });
            }
            Write::Renew(renewal, keeping, last_error) => {
                let renewed = renew(hub, renewal, keeping, last_error, self.targets, context).await;
                return if renewed {
                    Ok(())
                } else {
                    Err(Refusal {
                        code: 0,
                        message: "the heartbeat renewal failed".to_owned(),
                    })
                };
            }
            Write::Record(record) => apply::<ExportedService>(hub, record, context)
                .await
                .map(drop),
            Write::Copy(copy) => apply::<ExportedEndpointSlice>(hub, copy, context)
                .await
                .map(drop),
            Write::DeleteRecord(key) => delete::<ExportedService>(hub, key, context).await,
            Write::DeleteCopy(key) => delete::<ExportedEndpointSlice>(hub, key, context).await,
            Write::Profile(status) => {
                let partial = json!({
                    "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
                    "status": { "properties": status.properties },
                });
                apply_status::<ClusterProfile>(hub, &status.key, &partial, context).await
            }
            Write::Derived(service) => apply::<Service>(member, service, context).await.map(drop),
            Write::Import(import) => {
                let applied = apply::<ServiceImport>(member, &import.object, context).await;
                if let (Ok(_), Some(first)) = (&applied, &import.first_export) {
                    let age = Timestamp::now().duration_since(first.0);
                    context
                        .metrics
                        .export_to_import_seconds
                        .observe(age.as_secs_f64().max(0.0));
                }
                applied.map(drop)
            }
            Write::Slice(slice) => apply::<EndpointSlice>(member, slice, context)
                .await
                .map(drop),
            Write::DeleteImport(key) => delete::<ServiceImport>(member, key, context).await,
            Write::DeleteDerived(key) => delete::<Service>(member, key, context).await,
            Write::DeleteSlice(key) => delete::<EndpointSlice>(member, key, context).await,
            Write::DeleteSlices(collection) => delete_collection(member, collection, context).await,
            Write::ImportStatus(status) => {
                let partial = json!({
                    "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
                    "status": status.status,
                });
                apply_status::<ServiceImport>(member, &status.key, &partial, context).await
            }
            Write::ExportStatus(status) => {
                let partial = json!({
                    "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
                    "status": { "conditions": status.conditions },
                });
                apply_status::<ServiceExport>(member, &status.key, &partial, context).await
            }
        };
        written.map_err(|error| {
            report(&context.metrics, &error);
            error.refusal()
        })
    }

    async fn notice(&self, notice: Notice<'_>) -> bool {
        match notice {
            Notice::Event(event) => events::publish(&self.context.announcer, event).await,
            Notice::CollectionRefused(collection) => {
                tracing::warn!(
                    namespace = %collection.namespace,
                    source_clusters = %collection.source_clusters.join(","),
                    "the collection was refused: deleting its {} slices one by one",
                    collection.slices.len()
                );
                true
            }
        }
    }
}

/// Deletes every MCS slice Atoll holds for some withdrawn source clusters in one namespace, in
/// one request (`deletecollection` by label; its error names the selector where a name would
/// be). What a refusal leads to is the executor's.
async fn delete_collection(
    client: &Client,
    collection: &SliceCollection,
    context: &Context,
) -> Result<(), WriteError> {
    let selector = collection.selector();
    let key = ObjectKey::new(&collection.namespace, &selector);
    tracing::info!(
        namespace = %collection.namespace,
        source_clusters = %collection.source_clusters.join(","),
        slices = collection.slices.len(),
        "deleting every MCS EndpointSlice of withdrawn source clusters in the namespace at once"
    );
    write(
        client,
        &key,
        "deletecollection",
        context,
        |api: Api<EndpointSlice>| async move {
            let params = ListParams::default().labels(&selector);
            api.delete_collection(&DeleteParams::background(), &params)
                .await
                .map(|_| ())
        },
    )
    .await
}
