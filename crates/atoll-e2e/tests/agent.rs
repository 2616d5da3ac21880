//! The agent on the local ClusterSet (3 real apiservers, hub = c1, agents run by
//! `hack/agents.sh`): exports become imports in every member, per KEP-1645.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_api::labels;
use atoll_api::multicluster::{EndpointSliceObjects, ServiceImportType};
use atoll_testing::fixtures;
use atoll_testing::mcs::{
    CONVERGE, HELLO_PORTS, deploy_and_export, deploy_service, import, mcs_slices, wait_endpoints,
    wait_export_condition, wait_gone_everywhere, wait_import, wait_import_clusters,
};
use atoll_testing::{ClusterSet, Member, agent_admin_port, metric, wait_for, wait_metric};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};

#[tokio::test]
async fn export_becomes_an_import_in_every_cluster_and_unexport_removes_it() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("export").await?;
    let exporter = &set.members[1];
    deploy_and_export(exporter, &ns.name, HELLO_PORTS, false).await?;
    let service = Api::<Service>::namespaced(exporter.client.clone(), &ns.name)
        .get("hello")
        .await?;
    let service_spec = service.spec.unwrap_or_default();

    for member in &set.members {
        let import = wait_import(member, &ns.name, "hello", |i| {
            // Spec and status are separate writes: wait for both.
            let spec = i.spec.as_ref().ok_or("no spec")?;
            let clusters = i.status.as_ref().map(|s| s.clusters.len()).unwrap_or(0);
            if spec.ips.is_empty() || clusters == 0 {
                Err(format!("ips {:?}, {clusters} clusters in status", spec.ips))
            } else {
                Ok(())
            }
        })
        .await?;
        let spec = import.spec.unwrap();
        assert_eq!(spec.type_, ServiceImportType::ClusterSetIP);
        assert_eq!(
            spec.ips.len(),
            spec.ip_families.len(),
            "{}: one IP per family",
            member.context
        );
        let mut ports: Vec<(Option<String>, Option<String>, i32)> = spec
            .ports
            .iter()
            .map(|p| (p.name.clone(), p.protocol.clone(), p.port))
            .collect();
        ports.sort();
        assert_eq!(
            ports,
            vec![
                (Some("tcp".into()), Some("TCP".into()), 42),
                (Some("udp".into()), Some("UDP".into()), 42)
            ]
        );
        assert_eq!(spec.session_affinity, service_spec.session_affinity);
        assert_eq!(
            spec.internal_traffic_policy,
            service_spec.internal_traffic_policy
        );
        let clusters: Vec<String> = import
            .status
            .unwrap_or_default()
            .clusters
            .into_iter()
            .map(|c| c.cluster)
            .collect();
        assert_eq!(clusters, vec!["c2"]);

        let slices = wait_endpoints(member, &ns.name, "hello", 2).await?;
        for slice in &slices {
            let l = slice.labels();
            assert_eq!(
                l.get(labels::SOURCE_CLUSTER).map(String::as_str),
                Some("c2")
            );
            assert_ne!(
                l.get(labels::ENDPOINTSLICE_MANAGED_BY).map(String::as_str),
                Some(labels::CORE_ENDPOINTSLICE_MANAGER)
            );
            assert!(
                slice
                    .endpoints
                    .iter()
                    .all(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
            );
        }
    }
    wait_export_condition(exporter, &ns.name, "hello", "Valid", "True", "Valid").await?;
    wait_export_condition(exporter, &ns.name, "hello", "Ready", "True", "Exported").await?;
    wait_export_condition(
        exporter,
        &ns.name,
        "hello",
        "Conflict",
        "False",
        "NoConflicts",
    )
    .await?;

    fixtures::unexport(&exporter.client, &ns.name, "hello").await?;
    wait_gone_everywhere(&set, &ns.name, "hello").await?;
    ns.cleanup().await
}

/// Per source cluster: the number of endpoints and the sorted `(name, protocol, port)` of
/// every port of its MCS slices.
type BySource = BTreeMap<String, (usize, Vec<(String, String, i32)>)>;

fn endpoints_and_ports_by_source(slices: &[EndpointSlice]) -> BySource {
    let mut out = BySource::new();
    for slice in slices {
        let source = slice
            .labels()
            .get(labels::SOURCE_CLUSTER)
            .cloned()
            .unwrap_or_default();
        let entry = out.entry(source).or_default();
        entry.0 += slice.endpoints.len();
        entry.1.extend(slice.ports.iter().flatten().map(|p| {
            (
                p.name.clone().unwrap_or_default(),
                p.protocol.clone().unwrap_or_default(),
                p.port.unwrap_or_default(),
            )
        }));
        entry.1.sort();
    }
    out
}

#[tokio::test]
async fn port_conflict_keeps_the_oldest_ports_and_flags_both_exports() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("conflict").await?;
    let (first, second) = (&set.members[0], &set.members[1]);
    deploy_and_export(first, &ns.name, HELLO_PORTS, false).await?;
    wait_import(first, &ns.name, "hello", |_| Ok(())).await?;
    // creationTimestamp has 1 s resolution: make the second export clearly younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    deploy_and_export(second, &ns.name, &[("tcp", "TCP", 43, 43)], false).await?;
    for member in [first, second] {
        wait_export_condition(
            member,
            &ns.name,
            "hello",
            "Conflict",
            "True",
            "PortConflict",
        )
        .await?;
    }
    for member in &set.members {
        let import = wait_import_clusters(member, &ns.name, "hello", 2).await?;
        let ports: Vec<i32> = import.spec.unwrap().ports.iter().map(|p| p.port).collect();
        assert_eq!(
            ports,
            vec![42, 42],
            "{}: the oldest export's ports win",
            member.context
        );
    }
    // c3 gets both clusters' endpoints, but only c1's on the import's ports: c2's Service
    // exposes none of them (43 only), so c2's endpoints come with no port at all.
    let c3 = &set.members[2];
    let want = BTreeMap::from([
        (
            "c1".to_owned(),
            (
                2,
                vec![
                    ("tcp".to_owned(), "TCP".to_owned(), 42),
                    ("udp".to_owned(), "UDP".to_owned(), 42),
                ],
            ),
        ),
        ("c2".to_owned(), (2, vec![])),
    ]);
    wait_for(
        "c3's MCS slices: c1's 2 endpoints on tcp/42 and udp/42, c2's 2 endpoints on no port",
        CONVERGE,
        || async {
            let got = endpoints_and_ports_by_source(&mcs_slices(c3, &ns.name, "hello").await?);
            Ok(if got == want { Ok(()) } else { Err(got) })
        },
    )
    .await?;
    ns.cleanup().await
}

#[tokio::test]
async fn headless_export_imports_without_vip_and_with_families() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("headless").await?;
    deploy_and_export(&set.members[2], &ns.name, HELLO_PORTS, true).await?;
    for member in &set.members {
        let import = wait_import(member, &ns.name, "hello", |_| Ok(())).await?;
        let spec = import.spec.unwrap();
        assert_eq!(spec.type_, ServiceImportType::Headless);
        assert!(spec.ips.is_empty(), "headless imports never get ips");
        assert!(
            !spec.ip_families.is_empty(),
            "ipFamilies must be set on headless imports too"
        );
        wait_endpoints(member, &ns.name, "hello", 2).await?;
        let derived = atoll_core::derived::derived_service_name(&ns.name, "hello");
        assert!(
            Api::<Service>::namespaced(member.client.clone(), &ns.name)
                .get_opt(&derived)
                .await?
                .is_none()
        );
    }
    ns.cleanup().await
}

/// mcs-api v0.5.2: every import Atoll writes says its MCS EndpointSlices are present, through
/// both served versions (CoreDNS still reads v1alpha1), for ClusterSetIP and headless imports.
#[tokio::test]
async fn imports_say_their_endpoint_slice_objects_are_present() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("esobjects").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    deploy_service(&set.members[2], &ns.name, "web", 1, HELLO_PORTS, true).await?;
    fixtures::export(&set.members[2].client, &ns.name, "web", &[]).await?;
    for member in &set.members {
        for name in ["hello", "web"] {
            wait_import(member, &ns.name, name, |i| {
                match i.status.as_ref().and_then(|s| s.endpoint_slice_objects) {
                    Some(EndpointSliceObjects::Present) => Ok(()),
                    other => Err(format!("endpointSliceObjects = {other:?}")),
                }
            })
            .await?;
            let alpha = Api::<atoll_api::v1alpha1::ServiceImport>::namespaced(
                member.client.clone(),
                &ns.name,
            )
            .get(name)
            .await?;
            assert_eq!(
                alpha.status.and_then(|s| s.endpoint_slice_objects),
                Some(EndpointSliceObjects::Present),
                "{}: v1alpha1 view of {name}",
                member.context
            );
        }
    }
    ns.cleanup().await
}

/// A Service without a ServiceExport is never imported, even beside an exported one. The
/// upstream suite's form of this ("should be inaccessible") probes with `nc` from pods and never
/// runs here; this is its API-level form. The exported neighbour proves the agents processed the
/// namespace, so the absence cannot come from agents that are down.
#[tokio::test]
async fn a_service_that_is_not_exported_is_never_imported() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("notexported").await?;
    let exporter = &set.members[0];
    deploy_service(exporter, &ns.name, "private", 1, HELLO_PORTS, false).await?;
    deploy_and_export(exporter, &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    // `private` was created before `hello`'s Service on the same watch, so the exporter's pass
    // that published `hello` (which needs hello's Service in its store) had seen it too.
    for member in &set.members {
        assert!(
            import(member, &ns.name, "private").await?.is_none(),
            "{}: a Service without a ServiceExport was imported",
            member.context
        );
        assert!(
            mcs_slices(member, &ns.name, "private").await?.is_empty(),
            "{}: MCS slices for a Service without a ServiceExport",
            member.context
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn invalid_exports_say_why_and_import_nothing() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("invalid").await?;
    let member = &set.members[1];
    fixtures::export(&member.client, &ns.name, "missing", &[]).await?;
    wait_export_condition(member, &ns.name, "missing", "Valid", "False", "NoService").await?;

    let mut external = fixtures::service(&ns.name, "external", "none", &[], false);
    if let Some(spec) = external.spec.as_mut() {
        spec.type_ = Some("ExternalName".into());
        spec.external_name = Some("example.invalid".into());
        spec.selector = None;
        spec.ports = None;
    }
    fixtures::apply_service(&member.client, &external).await?;
    fixtures::export(&member.client, &ns.name, "external", &[]).await?;
    wait_export_condition(
        member,
        &ns.name,
        "external",
        "Valid",
        "False",
        "InvalidServiceType",
    )
    .await?;
    wait_export_condition(member, &ns.name, "external", "Ready", "False", "Failed").await?;
    // A valid export from the same cluster, made after the invalid ones: once every member
    // imports it, the agents have made passes that saw the invalid exports, so their absence
    // is a result and not agents that are down or slow (the upstream suite only waits 5 s).
    deploy_and_export(member, &ns.name, HELLO_PORTS, false).await?;
    for m in &set.members {
        wait_import_clusters(m, &ns.name, "hello", 1).await?;
    }
    for m in &set.members {
        assert!(
            import(m, &ns.name, "external").await?.is_none(),
            "{}",
            m.context
        );
        assert!(
            import(m, &ns.name, "missing").await?.is_none(),
            "{}",
            m.context
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn endpoint_churn_reaches_every_cluster() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("churn").await?;
    let exporter = &set.members[1];
    deploy_and_export(exporter, &ns.name, HELLO_PORTS, false).await?;
    wait_endpoints(&set.members[0], &ns.name, "hello", 2).await?;
    let scale = serde_json::json!({"spec": {"replicas": 4}});
    Api::<Deployment>::namespaced(exporter.client.clone(), &ns.name)
        .patch("hello", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    for member in &set.members {
        wait_endpoints(member, &ns.name, "hello", 4).await?;
    }
    let scale = serde_json::json!({"spec": {"replicas": 1}});
    Api::<Deployment>::namespaced(exporter.client.clone(), &ns.name)
        .patch("hello", &PatchParams::default(), &Patch::Merge(&scale))
        .await?;
    for member in &set.members {
        wait_endpoints(member, &ns.name, "hello", 1).await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn service_property_conflicts_keep_the_oldest_values() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("props").await?;
    let (first, second) = (&set.members[0], &set.members[1]);
    deploy_and_export(first, &ns.name, HELLO_PORTS, false).await?;
    wait_import(first, &ns.name, "hello", |_| Ok(())).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut service = fixtures::service(&ns.name, "hello", "hello", HELLO_PORTS, false);
    if let Some(spec) = service.spec.as_mut() {
        spec.session_affinity = Some("ClientIP".into());
        spec.session_affinity_config = Some(k8s_openapi::api::core::v1::SessionAffinityConfig {
            client_ip: Some(k8s_openapi::api::core::v1::ClientIPConfig {
                timeout_seconds: Some(30),
            }),
        });
        spec.internal_traffic_policy = Some("Local".into());
        spec.traffic_distribution = Some("PreferClose".into());
    }
    fixtures::deployment(&second.client, &ns.name, "hello", 1).await?;
    fixtures::apply_service(&second.client, &service).await?;
    fixtures::export(&second.client, &ns.name, "hello", &[]).await?;
    let reason = "SessionAffinityConflict,SessionAffinityConfigConflict,InternalTrafficPolicyConflict,TrafficDistributionConflict";
    for member in [first, second] {
        wait_export_condition(member, &ns.name, "hello", "Conflict", "True", reason).await?;
    }
    for member in &set.members {
        let spec = wait_import(member, &ns.name, "hello", |_| Ok(()))
            .await?
            .spec
            .unwrap();
        assert_eq!(
            spec.session_affinity.as_deref(),
            Some("None"),
            "{}",
            member.context
        );
        assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
        assert_eq!(spec.traffic_distribution, None);
    }
    ns.cleanup().await
}

/// Writes an ExportedService by hand into hub namespace `atoll-<stored_in>` that claims to come
/// from `claims` and export `ns/name` with the given IP families; returns its API and name.
/// Renews a heartbeat Lease for cluster `id` on `hub` every second (the administrator's
/// client; no claim, so importers take its objects as they are) until the task is aborted.
fn keep_beating(hub: &Member, id: &str) -> tokio::task::JoinHandle<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let namespace = atoll_api::hub::namespace_for(id);
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), &namespace);
    tokio::spawn(async move {
        loop {
            let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(
                k8s_openapi::jiff::Timestamp::now(),
            );
            let lease = serde_json::json!({
                "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                "metadata": { "name": atoll_api::hub::LEASE_NAME, "namespace": namespace },
                "spec": { "renewTime": now },
            });
            let params = PatchParams::apply("atoll-e2e").force();
            if let Err(error) = leases
                .patch(atoll_api::hub::LEASE_NAME, &params, &Patch::Apply(&lease))
                .await
            {
                eprintln!("renewing the heartbeat of {namespace} failed: {error}");
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    })
}

async fn hand_made_record(
    hub: &Member,
    stored_in: &str,
    claims: &str,
    ns: &str,
    name: &str,
    families: &[&str],
) -> anyhow::Result<(Api<atoll_api::hub::ExportedService>, String)> {
    use atoll_api::hub::{self, ExportedService, ExportedServiceSpec};
    use k8s_openapi::api::core::v1::Namespace;
    let member_ns = hub::namespace_for(stored_in);
    let object = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(member_ns.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    // Already there from an earlier test is fine.
    let _ = Api::<Namespace>::all(hub.client.clone())
        .create(&kube::api::PostParams::default(), &object)
        .await;
    let spec: ExportedServiceSpec = serde_json::from_value(serde_json::json!({
        "cluster": claims, "namespace": ns, "name": name,
        "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP",
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}], "ipFamilies": families
    }))?;
    let mut record = ExportedService::new(&hub::record_name(ns, name), spec);
    record.metadata.namespace = Some(member_ns.clone());
    record.metadata.labels = Some([(hub::LABEL_CLUSTER.to_owned(), claims.to_owned())].into());
    let records: Api<ExportedService> = Api::namespaced(hub.client.clone(), &member_ns);
    records
        .patch(
            &record.name_any(),
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&record),
        )
        .await?;
    Ok((records, record.name_any()))
}

/// Agents' count of malformed hub records they ignore.
const REJECTED: &str = "atoll_agent_hub_records_rejected";

/// Waits until the agent of member `i` reports `want[i]` ignored hub records, for every `i`.
async fn wait_rejected(want: &[f64]) -> anyhow::Result<()> {
    for (i, want) in want.iter().enumerate() {
        wait_metric(agent_admin_port(i)?, REJECTED, *want).await?;
    }
    Ok(())
}

#[tokio::test]
async fn malformed_hub_records_are_ignored() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("malformed").await?;
    // The gauge counts every malformed record on the hub. No other test makes one, but a run
    // that failed before deleting its record leaves it behind: compare with the count before.
    let mut before = Vec::new();
    for i in 0..set.members.len() {
        before.push(metric(agent_admin_port(i)?, REJECTED).await?);
    }
    // Stored in the namespace of c9 but claiming to come from c3: importers must not trust it
    // (a member may only speak for itself).
    let (records, name) =
        hand_made_record(&set.members[0], "c9", "c3", &ns.name, "spoofed", &["IPv4"]).await?;
    // Every agent saw the record and rejected it, exactly this one more.
    let with_it: Vec<f64> = before.iter().map(|b| b + 1.0).collect();
    wait_rejected(&with_it).await?;
    // And a neighbour exported afterwards is imported everywhere: the passes that rejected the
    // record have written what they planned.
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    for member in &set.members {
        assert!(
            import(member, &ns.name, "spoofed").await?.is_none(),
            "{} imported a spoofed record",
            member.context
        );
    }
    records.delete(&name, &Default::default()).await?;
    wait_rejected(&before).await?;
    ns.cleanup().await
}

#[tokio::test]
async fn an_ip_family_the_cluster_lacks_is_reported_on_the_import() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("ipv6").await?;
    // An IPv6-only service from a member (c9) whose record we write by hand: the local
    // clusters are IPv4-only, so no importer can give it a VIP.
    // c9 beats (importers use no cluster they have not seen beat). Whatever happens, its
    // Lease and record leave with the test: a member left silent on the hub is withdrawn
    // everywhere after the grace, which later tests would count.
    let beating = keep_beating(&set.members[0], "c9");
    let _gone = {
        let (set, record) = (set.clone(), atoll_api::hub::record_name(&ns.name, "v6only"));
        atoll_testing::Undo::new(move || {
            let hub = set.members[0].context.clone();
            let namespace = atoll_api::hub::namespace_for("c9");
            for (kind, name) in [
                ("exportedservices.hub.atoll.dev", record.as_str()),
                ("lease", atoll_api::hub::LEASE_NAME),
            ] {
                let _ = atoll_testing::membership::kubectl(
                    &set,
                    &hub,
                    &["delete", kind, name, "-n", &namespace, "--ignore-not-found"],
                );
            }
        })
    };
    let (records, name) =
        hand_made_record(&set.members[0], "c9", "c9", &ns.name, "v6only", &["IPv6"]).await?;
    for member in &set.members {
        wait_import(member, &ns.name, "v6only", |i| {
            let ready = i
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"));
            match ready {
                Some(c) if c.reason == "IPFamilyNotSupported" => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await?;
    }
    records.delete(&name, &Default::default()).await?;
    for member in &set.members {
        wait_for(
            &format!("v6only import gone from {}", member.context),
            CONVERGE,
            || async {
                Ok(if import(member, &ns.name, "v6only").await?.is_none() {
                    Ok(())
                } else {
                    Err("present")
                })
            },
        )
        .await?;
    }
    beating.abort();
    ns.cleanup().await
}
