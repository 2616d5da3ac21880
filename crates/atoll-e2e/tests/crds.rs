//! Atoll's CRDs on a real kube-apiserver: both versions served, upstream-shaped objects
//! accepted, and the validation the MCS API relies on enforced by the apiserver itself.

use atoll_api::multicluster::{ServiceImportSpec, ServiceImportType, ServicePort};
use atoll_api::{Condition, ConditionStatus, v1alpha1, v1beta1};
use atoll_testing::ClusterSet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::json;

/// A condition type the agent never writes: the agent sets its own conditions on the same
/// export as soon as it sees it, and the test must not race with it for one list entry.
const PROBE_TYPE: &str = "AtollE2EProbe";

fn condition(reason: &str) -> Condition {
    Condition {
        type_: PROBE_TYPE.into(),
        status: ConditionStatus::True,
        observed_generation: None,
        last_transition_time: Time(Timestamp::now()),
        reason: reason.into(),
        message: String::new(),
    }
}

#[tokio::test]
async fn bare_export_is_served_at_both_versions_in_every_member() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("crds").await?;
    for member in &set.members {
        let beta: Api<v1beta1::ServiceExport> = Api::namespaced(member.client.clone(), &ns.name);
        let created = beta
            .create(
                &PostParams::default(),
                &v1beta1::ServiceExport::new("hello", None),
            )
            .await?;
        assert!(
            created.spec.is_none(),
            "{}: the apiserver invented a spec",
            member.context
        );
        let alpha: Api<v1alpha1::ServiceExport> = Api::namespaced(member.client.clone(), &ns.name);
        let read = alpha.get("hello").await?;
        assert_eq!(
            read.metadata.uid, created.metadata.uid,
            "{}",
            member.context
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn status_conditions_are_validated_like_upstream() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("crds").await?;
    let client = set.members[0].client.clone();
    let exports: Api<v1beta1::ServiceExport> = Api::namespaced(client, &ns.name);
    exports
        .create(
            &PostParams::default(),
            &v1beta1::ServiceExport::new("hello", None),
        )
        .await?;
    let params = PatchParams::apply("atoll-e2e").force();

    // Comma-joined reasons match the CRD's reason pattern, and an empty message is fine.
    let status = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "status": { "conditions": [condition("PortConflict,TypeConflict")] }
    });
    let patched = exports
        .patch_status("hello", &params, &Patch::Apply(&status))
        .await?;
    let conditions = patched.status.map(|s| s.conditions).unwrap_or_default();
    let probes: Vec<_> = conditions
        .iter()
        .filter(|c| c.type_ == PROBE_TYPE)
        .collect();
    assert_eq!(probes.len(), 1, "{conditions:?}");
    assert_eq!(probes[0].reason, "PortConflict,TypeConflict");

    // A reason with a space breaks the CRD pattern: the apiserver must refuse it.
    let bad = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "status": { "conditions": [condition("Port Conflict")] }
    });
    let refused = exports
        .patch_status("hello", &params, &Patch::Apply(&bad))
        .await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref e)) if e.code == 422),
        "{refused:?}"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn service_import_spec_requires_ports_and_type() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("crds").await?;
    let imports: Api<v1beta1::ServiceImport> =
        Api::namespaced(set.members[1].client.clone(), &ns.name);
    let params = PatchParams::apply("atoll-e2e");

    let mut spec = ServiceImportSpec::new(ServiceImportType::ClusterSetIP);
    spec.ports = vec![ServicePort {
        name: Some("tcp".into()),
        protocol: Some("TCP".into()),
        app_protocol: None,
        port: 42,
    }];
    spec.ips = vec!["10.102.0.77".into()];
    spec.ip_families = vec!["IPv4".into()];
    let good = v1beta1::ServiceImport::new("hello", Some(spec.clone()));
    let stored = imports
        .patch("hello", &params, &Patch::Apply(&good))
        .await?;
    assert_eq!(stored.spec, Some(spec));

    let without_ports = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": { "name": "broken" }, "spec": { "type": "Headless" }
    });
    let refused = imports
        .patch("broken", &params, &Patch::Apply(&without_ports))
        .await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref e)) if e.code == 422),
        "{refused:?}"
    );

    let three_ips = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": { "name": "broken" },
        "spec": { "type": "ClusterSetIP", "ports": [], "ips": ["10.0.0.1", "10.0.0.2", "10.0.0.3"] }
    });
    let refused = imports
        .patch("broken", &params, &Patch::Apply(&three_ips))
        .await;
    assert!(
        matches!(refused, Err(kube::Error::Api(ref e)) if e.code == 422),
        "{refused:?}"
    );
    ns.cleanup().await
}
