//! Builders for the objects end-to-end tests create in member clusters: a Deployment whose
//! pods kwok runs on the cluster's fake node, its Service, and a ServiceExport.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use atoll_api::v1beta1::ServiceExport;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, PodSpec, PodTemplateSpec, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{DeleteParams, ObjectMeta, Patch, PatchParams};
use kube::{Api, Client};

const MANAGER: &str = "atoll-e2e";

/// A Service port: (name, protocol, port, target port).
pub type Port<'a> = (&'a str, &'a str, i32, i32);

fn meta(name: &str, ns: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        ..Default::default()
    }
}

/// Applies a Deployment `name` with `replicas` pods labelled `app=name`.
pub async fn deployment(
    client: &Client,
    ns: &str,
    name: &str,
    replicas: i32,
) -> anyhow::Result<()> {
    let labels = BTreeMap::from([("app".to_owned(), name.to_owned())]);
    let deployment = Deployment {
        metadata: meta(name, ns),
        spec: Some(DeploymentSpec {
            replicas: Some(replicas),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..Default::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "app".into(),
                        image: Some("hello".into()),
                        ..Default::default()
                    }],
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    };
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&deployment),
        )
        .await
        .with_context(|| format!("applying Deployment {ns}/{name}"))?;
    Ok(())
}

/// A Service selecting `app=<selector>` with the given ports; `headless` sets `clusterIP: None`.
pub fn service(
    ns: &str,
    name: &str,
    selector: &str,
    ports: &[Port<'_>],
    headless: bool,
) -> Service {
    Service {
        metadata: meta(name, ns),
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([("app".to_owned(), selector.to_owned())])),
            cluster_ip: headless.then(|| "None".to_owned()),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, proto, port, target)| ServicePort {
                        name: Some((*n).to_owned()),
                        protocol: Some((*proto).to_owned()),
                        port: *port,
                        target_port: Some(
                            k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(*target),
                        ),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Server-side applies `service`.
pub async fn apply_service(client: &Client, service: &Service) -> anyhow::Result<()> {
    let ns = service.metadata.namespace.clone().unwrap_or_default();
    let name = service.metadata.name.clone().unwrap_or_default();
    Api::<Service>::namespaced(client.clone(), &ns)
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(service),
        )
        .await
        .with_context(|| format!("applying Service {ns}/{name}"))?;
    Ok(())
}

/// Creates (or updates) the ServiceExport `ns/name`, optionally with exported labels.
pub async fn export(
    client: &Client,
    ns: &str,
    name: &str,
    exported_labels: &[(&str, &str)],
) -> anyhow::Result<()> {
    let spec = (!exported_labels.is_empty()).then(|| atoll_api::multicluster::ServiceExportSpec {
        exported_labels: exported_labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        exported_annotations: BTreeMap::new(),
        cluster_selectors: None,
    });
    apply_export(client, ns, ServiceExport::new(name, spec)).await
}

/// Server-side applies `object` as the ServiceExport of `ns`.
async fn apply_export(client: &Client, ns: &str, mut object: ServiceExport) -> anyhow::Result<()> {
    let name = object.metadata.name.clone().unwrap_or_default();
    object.metadata.namespace = Some(ns.to_owned());
    Api::<ServiceExport>::namespaced(client.clone(), ns)
        .patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("applying ServiceExport {ns}/{name}"))?;
    Ok(())
}

/// Applies the ServiceExport `ns/name` with an empty spec and exactly these annotations
/// (server-side apply: an annotation left out of a later call is removed).
pub async fn export_annotated(
    client: &Client,
    ns: &str,
    name: &str,
    annotations: &[(&str, &str)],
) -> anyhow::Result<()> {
    let mut object = ServiceExport::new(name, None);
    object.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    apply_export(client, ns, object).await
}

/// Deletes the ServiceExport `ns/name`.
pub async fn unexport(client: &Client, ns: &str, name: &str) -> anyhow::Result<()> {
    Api::<ServiceExport>::namespaced(client.clone(), ns)
        .delete(name, &DeleteParams::default())
        .await
        .with_context(|| format!("deleting ServiceExport {ns}/{name}"))?;
    Ok(())
}

/// Runs `hack/agents.sh <action> <clusters>` (start, stop or restart agents).
pub fn agents(action: &str, clusters: &[&str]) -> anyhow::Result<()> {
    hack("agents.sh", action, clusters)
}

/// [`agents`] with the heartbeat interval and grace the started agents use (the environment
/// `hack/agents.sh` reads).
pub fn agents_with_rhythm(
    action: &str,
    clusters: &[&str],
    heartbeat_seconds: u64,
    grace_seconds: u64,
) -> anyhow::Result<()> {
    let (heartbeat, grace) = (heartbeat_seconds.to_string(), grace_seconds.to_string());
    agents_with_env(
        action,
        clusters,
        &[
            ("ATOLL_HEARTBEAT_SECONDS", &heartbeat),
            ("ATOLL_MEMBER_GRACE_SECONDS", &grace),
        ],
    )
}

/// [`agents`] with `env` set for `hack/agents.sh` (e.g. `ATOLL_AGENT_ARGS`).
pub fn agents_with_env(
    action: &str,
    clusters: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<()> {
    hack_with("agents.sh", action, clusters, env)
}

/// [`agents`] without waiting for the agents started to be ready (one that must stay not
/// ready, e.g. while its member's MCS CRDs are not served).
pub fn agents_unready(action: &str, clusters: &[&str]) -> anyhow::Result<()> {
    agents_with_env(action, clusters, &[("ATOLL_NO_WAIT_READY", "1")])
}

/// Runs `hack/cluster.sh <action> <cluster>` (stop or start one cluster's control plane).
pub fn cluster(action: &str, cluster: &str) -> anyhow::Result<()> {
    hack("cluster.sh", action, &[cluster])
}

fn hack(script: &str, action: &str, args: &[&str]) -> anyhow::Result<()> {
    hack_with(script, action, args, &[])
}

fn hack_with(
    script: &str,
    action: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> anyhow::Result<()> {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../hack")
        .join(script);
    let status = std::process::Command::new(&script)
        .arg(action)
        .args(args)
        .envs(env.iter().copied())
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    anyhow::ensure!(
        status.success(),
        "{} {action} failed: {status}",
        script.display()
    );
    Ok(())
}
