//! `atoll explain` on the local ClusterSet names the first broken hop of a service, with a fix,
//! (its latency is printed here and measured against its target in `make bench`); `atoll status` lists the members and this member's imports.

use std::time::{Duration, Instant};

use atoll_api::hub::{self, ExportedService};
use atoll_testing::mcs::{HELLO_PORTS, deploy_and_export, wait_endpoints, wait_import_clusters};
use atoll_testing::membership::atoll;
use atoll_testing::{ClusterSet, fixtures};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

/// `atoll explain ns/name` from c3, inspecting every member; (exit code, stdout).
fn explain(set: &ClusterSet, ns: &str, name: &str) -> anyhow::Result<(i32, String)> {
    let kubeconfig = set.kubeconfig.display().to_string();
    let service = format!("{ns}/{name}");
    let started = Instant::now();
    let out = atoll(&[
        "explain",
        &service,
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "kwok-c3",
        "--inspect-contexts",
        "kwok-c1,kwok-c2",
        "--heartbeat-seconds",
        "2",
        "--member-grace-seconds",
        "12",
    ])?;
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!(
        "atoll explain {service}: {:.0} ms",
        took.as_secs_f64() * 1000.0
    );
    Ok((out.status.code().unwrap_or(-1), stdout))
}

fn first_broken(stdout: &str) -> Option<&str> {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix("first broken hop: "))
}

#[tokio::test]
async fn a_healthy_service_explains_as_healthy() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xhealthy").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(&set.members[2], &ns.name, "hello", 1).await?;
    wait_endpoints(&set.members[2], &ns.name, "hello", 2).await?;
    let (code, out) = explain(&set, &ns.name, "hello")?;
    assert_eq!(code, 0, "{out}");
    assert!(out.lines().any(|l| l.trim() == "healthy"), "{out}");
    assert!(out.contains("DNS"), "{out}");
    ns.cleanup().await
}

#[tokio::test]
async fn a_missing_namespace_in_the_importer_is_the_first_broken_hop() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace_in("xmissing", &set.members[..2]).await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(&set.members[0], &ns.name, "hello", 1).await?;
    let (code, out) = explain(&set, &ns.name, "hello")?;
    assert_eq!(code, 1, "{out}");
    assert_eq!(first_broken(&out), Some("namespace in c3"), "{out}");
    assert!(
        out.contains(&format!("kubectl create namespace {}", ns.name)),
        "{out}"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn an_export_without_its_service_is_the_first_broken_hop() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xinvalid").await?;
    fixtures::export(&set.members[1].client, &ns.name, "ghost", &[]).await?;
    atoll_testing::mcs::wait_export_condition(
        &set.members[1],
        &ns.name,
        "ghost",
        "Valid",
        "False",
        "NoService",
    )
    .await?;
    let (code, out) = explain(&set, &ns.name, "ghost")?;
    assert_eq!(code, 1, "{out}");
    assert_eq!(first_broken(&out), Some("export in c2"), "{out}");
    assert!(
        out.contains(&format!("create the Service {}/ghost in c2", ns.name)),
        "{out}"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn a_conflict_is_the_first_broken_hop() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xconflict").await?;
    deploy_and_export(&set.members[0], &ns.name, HELLO_PORTS, false).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    deploy_and_export(&set.members[1], &ns.name, &[("tcp", "TCP", 43, 43)], false).await?;
    wait_import_clusters(&set.members[2], &ns.name, "hello", 2).await?;
    let (code, out) = explain(&set, &ns.name, "hello")?;
    assert_eq!(code, 1, "{out}");
    assert_eq!(first_broken(&out), Some("merge"), "{out}");
    assert!(out.contains("PortConflict"), "{out}");
    ns.cleanup().await
}

#[tokio::test]
async fn a_withdrawn_source_cluster_is_the_first_broken_hop() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xwithdrawn").await?;
    let hub_client = set.members[0].client.clone();
    // A member c7 whose heartbeat never moves: c3's agent withdraws it after the grace, and
    // explain says so from the agent's own verdict (no clock compared).
    let member_ns = hub::namespace_for("c7");
    let mut namespace = k8s_openapi::api::core::v1::Namespace::default();
    namespace.metadata.name = Some(member_ns.clone());
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(hub_client.clone())
        .create(&PostParams::default(), &namespace)
        .await;
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": "c7", "namespace": ns.name, "name": "gone",
        "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP",
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}], "ipFamilies": ["IPv4"]
    }))?;
    let mut record = ExportedService::new(&hub::record_name(&ns.name, "gone"), spec);
    record.metadata.namespace = Some(member_ns.clone());
    let records: Api<ExportedService> = Api::namespaced(hub_client.clone(), &member_ns);
    records
        .patch(
            &record.name_any(),
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&record),
        )
        .await?;
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": { "name": "atoll-heartbeat", "namespace": member_ns,
                      "annotations": { hub::BEAT_ANNOTATION: "1" } },
        "spec": { "holderIdentity": "c7" },
    });
    Api::<Lease>::namespaced(hub_client.clone(), &member_ns)
        .patch(
            "atoll-heartbeat",
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&lease),
        )
        .await?;
    // The grace hack/agents.sh gives the agents is 12 s.
    let mut last = (0, String::new());
    for _ in 0..60 {
        last = explain(&set, &ns.name, "gone")?;
        if first_broken(&last.1) == Some("source cluster c7") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    }
    let _ = Api::<k8s_openapi::api::core::v1::Namespace>::all(hub_client)
        .delete(&member_ns, &Default::default())
        .await;
    let (code, out) = last;
    assert_eq!(code, 1, "{out}");
    assert_eq!(first_broken(&out), Some("source cluster c7"), "{out}");
    assert!(
        out.contains("c7 withdrawn by the agent of c3: no heartbeat within its grace"),
        "{out}"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn status_lists_members_and_imports() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xstatus").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(&set.members[2], &ns.name, "hello", 1).await?;
    let kubeconfig = set.kubeconfig.display().to_string();
    let out = atoll(&[
        "status",
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "kwok-c3",
        "-o",
        "json",
        "--heartbeat-seconds",
        "2",
        "--member-grace-seconds",
        "12",
    ])?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let status: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    assert_eq!(status["member"], "c3");
    for id in ["c1", "c2", "c3"] {
        let row = status["members"]
            .as_array()
            .and_then(|m| m.iter().find(|r| r["id"] == id))
            .unwrap_or_else(|| panic!("{id} missing: {status}"));
        assert_eq!(row["state"], "live", "{row}");
        assert_eq!(row["heartbeat_lease"], true, "{row}");
    }
    let service = format!("{}/hello", ns.name);
    let import = status["imports"]
        .as_array()
        .and_then(|i| i.iter().find(|r| r["service"] == service.as_str()))
        .unwrap_or_else(|| panic!("{service} missing: {status}"));
    assert_eq!(import["sources"], serde_json::json!(["c2"]));
    ns.cleanup().await
}
