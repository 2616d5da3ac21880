//! Atoll's statement of the upstream MCS conformance specs that need no exec into pods
//! (mcs-spec.md §6.2, C1–C15, C22, and an API-level form of C23), run against the local
//! ClusterSet with the upstream fixture: Service `hello` (tcp/42, udp/42, ClientIP affinity
//! 10 s, PreferDualStack, labels `dummy-svc`), a 1-replica Deployment, and a ServiceExport
//! exporting `dummy-label`/`dummy-annotation`. c0 is the first context (the older exporter).
//!
//! The upstream Go suite cannot be fetched here (its module is not served by the module proxy),
//! so these specs restate its assertions from the digest; they are written from scratch.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::Duration;

use atoll_api::labels;
use atoll_api::multicluster::{ServiceImportType, ServicePort};
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_testing::fixtures::{self, Port};
use atoll_testing::mcs::{
    CONVERGE, HELLO_PORTS, import, mcs_slices, wait_export_condition, wait_import,
};
use atoll_testing::{ClusterSet, Member, TestNamespace, wait_for};
use k8s_openapi::api::core::v1::{ClientIPConfig, Service, SessionAffinityConfig};
use kube::api::{ObjectMeta, Patch, PatchParams};
use kube::{Api, ResourceExt};

/// How long conformance watches that something stays (or stays absent).
const STAYS: Duration = Duration::from_secs(5);

fn dummy(key: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(key.to_owned(), "dummy".to_owned())])
}

/// The upstream `hello` Service with the given ports.
fn hello_service(ns: &str, ports: &[Port<'_>], headless: bool) -> Service {
    let mut service = fixtures::service(ns, "hello", "hello", ports, headless);
    service.metadata.labels = Some(dummy("dummy-svc"));
    service.metadata.annotations = Some(dummy("dummy-svc"));
    if let Some(spec) = service.spec.as_mut() {
        spec.session_affinity = Some("ClientIP".into());
        spec.session_affinity_config = Some(SessionAffinityConfig {
            client_ip: Some(ClientIPConfig {
                timeout_seconds: Some(10),
            }),
        });
        spec.ip_family_policy = Some("PreferDualStack".into());
        spec.internal_traffic_policy = Some("Cluster".into());
        spec.traffic_distribution = Some("PreferClose".into());
    }
    service
}

/// Deploys `hello` on `member`; exports it unless `export` is false.
async fn deploy(
    member: &Member,
    ns: &str,
    service: Service,
    labels_value: &str,
    export: bool,
) -> anyhow::Result<()> {
    fixtures::deployment(&member.client, ns, "hello", 1).await?;
    fixtures::apply_service(&member.client, &service).await?;
    if export {
        export_hello(member, ns, labels_value).await?;
    }
    Ok(())
}

async fn export_hello(member: &Member, ns: &str, labels_value: &str) -> anyhow::Result<()> {
    let export = ServiceExport {
        metadata: ObjectMeta {
            name: Some("hello".into()),
            namespace: Some(ns.into()),
            labels: Some(dummy("dummy-svcexport")),
            annotations: Some(dummy("dummy-svcexport")),
            ..Default::default()
        },
        spec: Some(atoll_api::multicluster::ServiceExportSpec {
            exported_labels: BTreeMap::from([("dummy-label".into(), labels_value.into())]),
            exported_annotations: BTreeMap::from([(
                "dummy-annotation".into(),
                labels_value.into(),
            )]),
        }),
        status: None,
    };
    Api::<ServiceExport>::namespaced(member.client.clone(), ns)
        .patch(
            "hello",
            &PatchParams::apply("conformance").force(),
            &Patch::Apply(&export),
        )
        .await?;
    Ok(())
}

/// The two-cluster driver: c0 exports, its import appears, 1.1 s later c1 deploys and exports.
async fn two_clusters(
    set: &ClusterSet,
    ns: &str,
    c1_service: Service,
    c1_labels: &str,
) -> anyhow::Result<()> {
    deploy(
        &set.members[0],
        ns,
        hello_service(ns, HELLO_PORTS, false),
        "true",
        true,
    )
    .await?;
    wait_import(&set.members[0], ns, "hello", |_| Ok(())).await?;
    tokio::time::sleep(Duration::from_millis(1100)).await;
    deploy(&set.members[1], ns, c1_service, c1_labels, true).await
}

/// Waits for `Conflict=True` with `reason` on the exports of both c0 and c1.
async fn conflict_on_both(set: &ClusterSet, ns: &str, reason: &str) -> anyhow::Result<()> {
    for m in &set.members[..2] {
        wait_export_condition(m, ns, "hello", "Conflict", "True", reason).await?;
    }
    Ok(())
}

async fn stays(
    what: &str,
    mut check: impl AsyncFnMut() -> anyhow::Result<bool>,
) -> anyhow::Result<()> {
    let until = tokio::time::Instant::now() + STAYS;
    while tokio::time::Instant::now() < until {
        anyhow::ensure!(
            check().await?,
            "{what} did not hold for {} s",
            STAYS.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

async fn wait_absent_everywhere(set: &ClusterSet, ns: &str) -> anyhow::Result<()> {
    for m in &set.members {
        wait_for(
            &format!("no ServiceImport in {}", m.context),
            CONVERGE,
            || async {
                Ok(match import(m, ns, "hello").await? {
                    None => Ok(()),
                    Some(_) => Err("present"),
                })
            },
        )
        .await?;
    }
    Ok(())
}

async fn import_everywhere(set: &ClusterSet, ns: &str) -> anyhow::Result<Vec<ServiceImport>> {
    let mut out = Vec::new();
    for m in &set.members {
        out.push(
            wait_import(m, ns, "hello", |i| match i.spec.as_ref() {
                Some(s) if s.type_ == ServiceImportType::Headless || !s.ips.is_empty() => Ok(()),
                _ => Err("no ips yet".into()),
            })
            .await?,
        );
    }
    Ok(out)
}

async fn stored_service(member: &Member, ns: &str) -> anyhow::Result<Service> {
    Ok(Api::<Service>::namespaced(member.client.clone(), ns)
        .get("hello")
        .await?)
}

async fn setup(prefix: &str) -> anyhow::Result<(ClusterSet, TestNamespace)> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace(prefix).await?;
    Ok((set, ns))
}

#[tokio::test]
async fn c01_import_exists_while_any_cluster_exports() -> anyhow::Result<()> {
    let (set, ns) = setup("c01").await?;
    let (c0, c1) = (&set.members[0], &set.members[1]);
    two_clusters(
        &set,
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
    )
    .await?;
    stays("import on c0 with two exporters", async || {
        Ok(import(c0, &ns.name, "hello").await?.is_some())
    })
    .await?;
    fixtures::unexport(&c0.client, &ns.name, "hello").await?;
    stays("import on c0 after c0 unexported", async || {
        Ok(import(c0, &ns.name, "hello").await?.is_some())
    })
    .await?;
    fixtures::unexport(&c1.client, &ns.name, "hello").await?;
    wait_absent_everywhere(&set, &ns.name).await?;
    ns.cleanup().await
}

#[tokio::test]
async fn c02_only_exported_labels_and_annotations_propagate() -> anyhow::Result<()> {
    let (set, ns) = setup("c02").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
        true,
    )
    .await?;
    for i in import_everywhere(&set, &ns.name).await? {
        assert_eq!(
            i.labels().get("dummy-label").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            i.annotations().get("dummy-annotation").map(String::as_str),
            Some("true")
        );
        assert!(
            !i.labels().contains_key("dummy-svc") && !i.annotations().contains_key("dummy-svc")
        );
        assert!(!i.labels().contains_key("dummy-svcexport"));
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c03_conflicting_labels_keep_the_oldest_and_flag_both() -> anyhow::Result<()> {
    let (set, ns) = setup("c03").await?;
    two_clusters(
        &set,
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "other",
    )
    .await?;
    conflict_on_both(&set, &ns.name, "LabelsConflict,AnnotationsConflict").await?;
    for i in import_everywhere(&set, &ns.name).await? {
        assert_eq!(
            i.labels().get("dummy-label").map(String::as_str),
            Some("true")
        );
        assert_eq!(
            i.annotations().get("dummy-annotation").map(String::as_str),
            Some("true")
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c04_clusterip_export_imports_as_clustersetip_and_unexport_deletes() -> anyhow::Result<()> {
    let (set, ns) = setup("c04").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
        true,
    )
    .await?;
    wait_export_condition(&set.members[0], &ns.name, "hello", "Valid", "True", "Valid").await?;
    for i in import_everywhere(&set, &ns.name).await? {
        assert_eq!(
            i.spec.map(|s| s.type_),
            Some(ServiceImportType::ClusterSetIP)
        );
    }
    fixtures::unexport(&set.members[0].client, &ns.name, "hello").await?;
    wait_absent_everywhere(&set, &ns.name).await?;
    ns.cleanup().await
}

#[tokio::test]
async fn c05_to_c09_clustersetip_properties_match_the_service() -> anyhow::Result<()> {
    let (set, ns) = setup("c05").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
        true,
    )
    .await?;
    let service = stored_service(&set.members[0], &ns.name)
        .await?
        .spec
        .unwrap_or_default();
    for i in import_everywhere(&set, &ns.name).await? {
        let spec = i.spec.unwrap();
        // C5 session affinity (and config) as stored.
        assert_eq!(spec.session_affinity, service.session_affinity);
        let timeout = spec
            .session_affinity_config
            .and_then(|c| c.client_ip)
            .and_then(|c| c.timeout_seconds);
        let want = service
            .session_affinity_config
            .clone()
            .and_then(|c| c.client_ip)
            .and_then(|c| c.timeout_seconds);
        assert_eq!(timeout, want);
        // C6, C7.
        assert_eq!(
            spec.internal_traffic_policy,
            service.internal_traffic_policy
        );
        assert_eq!(spec.traffic_distribution, service.traffic_distribution);
        // C8: one IP per family, parseable, of the family at the same index.
        assert!(!spec.ips.is_empty());
        assert_eq!(spec.ips.len(), spec.ip_families.len());
        for (ip, family) in spec.ips.iter().zip(&spec.ip_families) {
            let parsed: IpAddr = ip.parse()?;
            assert_eq!(if parsed.is_ipv4() { "IPv4" } else { "IPv6" }, family);
        }
        // C9: ports equal the Service's.
        let mut want: Vec<ServicePort> = service
            .ports
            .clone()
            .unwrap_or_default()
            .into_iter()
            .map(|p| ServicePort {
                name: p.name,
                protocol: p.protocol,
                app_protocol: p.app_protocol,
                port: p.port,
            })
            .collect();
        want.sort_by(|a, b| a.name.cmp(&b.name));
        let mut got = spec.ports.clone();
        got.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(got, want);
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c10_two_clusters_expose_the_port_union_and_conflict() -> anyhow::Result<()> {
    let (set, ns) = setup("c10").await?;
    let ports: &[Port<'_>] = &[("tcp", "TCP", 42, 42), ("stcp", "SCTP", 142, 142)];
    two_clusters(
        &set,
        &ns.name,
        hello_service(&ns.name, ports, false),
        "true",
    )
    .await?;
    conflict_on_both(&set, &ns.name, "PortConflict").await?;
    for m in &set.members {
        wait_import(m, &ns.name, "hello", |i| {
            let names: Vec<String> = i
                .spec
                .iter()
                .flat_map(|s| &s.ports)
                .filter_map(|p| p.name.clone())
                .collect();
            if names == ["stcp", "tcp", "udp"] {
                Ok(())
            } else {
                Err(format!("{names:?}"))
            }
        })
        .await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c11_conflicting_ports_keep_the_oldest() -> anyhow::Result<()> {
    let (set, ns) = setup("c11").await?;
    two_clusters(
        &set,
        &ns.name,
        hello_service(&ns.name, &[("tcp", "TCP", 43, 43)], false),
        "true",
    )
    .await?;
    conflict_on_both(&set, &ns.name, "PortConflict").await?;
    for i in import_everywhere(&set, &ns.name).await? {
        let ports: Vec<(Option<String>, i32)> = i
            .spec
            .unwrap()
            .ports
            .into_iter()
            .map(|p| (p.name, p.port))
            .collect();
        assert_eq!(
            ports,
            vec![(Some("tcp".into()), 42), (Some("udp".into()), 42)]
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c12_c13_headless_imports_as_headless_without_ips() -> anyhow::Result<()> {
    let (set, ns) = setup("c12").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, true),
        "true",
        true,
    )
    .await?;
    for i in import_everywhere(&set, &ns.name).await? {
        assert_eq!(i.spec.map(|s| s.type_), Some(ServiceImportType::Headless));
    }
    for m in &set.members {
        stays("no ips on a Headless import", async || {
            Ok(import(m, &ns.name, "hello")
                .await?
                .and_then(|i| i.spec)
                .is_some_and(|s| s.ips.is_empty()))
        })
        .await?;
    }
    fixtures::unexport(&set.members[0].client, &ns.name, "hello").await?;
    wait_absent_everywhere(&set, &ns.name).await?;
    ns.cleanup().await
}

#[tokio::test]
async fn c14_externalname_is_invalid_and_never_imported() -> anyhow::Result<()> {
    let (set, ns) = setup("c14").await?;
    let mut service = hello_service(&ns.name, &[], false);
    if let Some(spec) = service.spec.as_mut() {
        *spec = k8s_openapi::api::core::v1::ServiceSpec {
            type_: Some("ExternalName".into()),
            external_name: Some("example.invalid".into()),
            ..Default::default()
        };
    }
    fixtures::apply_service(&set.members[0].client, &service).await?;
    export_hello(&set.members[0], &ns.name, "true").await?;
    wait_export_condition(
        &set.members[0],
        &ns.name,
        "hello",
        "Valid",
        "False",
        "InvalidServiceType",
    )
    .await?;
    for m in &set.members {
        stays("no import of an ExternalName service", async || {
            Ok(import(m, &ns.name, "hello").await?.is_none())
        })
        .await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c15_conflicting_headlessness_keeps_clustersetip() -> anyhow::Result<()> {
    let (set, ns) = setup("c15").await?;
    two_clusters(
        &set,
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, true),
        "true",
    )
    .await?;
    conflict_on_both(&set, &ns.name, "TypeConflict").await?;
    for i in import_everywhere(&set, &ns.name).await? {
        assert_eq!(
            i.spec.map(|s| s.type_),
            Some(ServiceImportType::ClusterSetIP)
        );
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c22_mcs_endpointslices_in_every_cluster_and_deleted_on_unexport() -> anyhow::Result<()> {
    let (set, ns) = setup("c22").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
        true,
    )
    .await?;
    import_everywhere(&set, &ns.name).await?;
    for m in &set.members {
        let families = import(m, &ns.name, "hello")
            .await?
            .and_then(|i| i.spec)
            .map(|s| s.ip_families)
            .unwrap_or_default();
        for family in families {
            wait_for(
                &format!("{family} MCS slice in {}", m.context),
                Duration::from_secs(60),
                || async {
                    let slices = mcs_slices(m, &ns.name, "hello").await?;
                    let good = slices.iter().any(|s| {
                        let l = s.labels();
                        s.address_type == family
                            && !s.endpoints.is_empty()
                            && l.get(labels::SERVICE_NAME).map(String::as_str) == Some("hello")
                            && l.contains_key(labels::SOURCE_CLUSTER)
                            && l.get(labels::ENDPOINTSLICE_MANAGED_BY)
                                .is_some_and(|v| v != labels::CORE_ENDPOINTSLICE_MANAGER)
                    });
                    Ok(if good { Ok(()) } else { Err(slices.len()) })
                },
            )
            .await?;
        }
    }
    fixtures::unexport(&set.members[0].client, &ns.name, "hello").await?;
    for m in &set.members {
        wait_for(
            &format!("MCS slices gone from {}", m.context),
            CONVERGE,
            || async {
                let n = mcs_slices(m, &ns.name, "hello").await?.len();
                Ok(if n == 0 { Ok(()) } else { Err(n) })
            },
        )
        .await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn c23_a_service_that_is_not_exported_is_not_imported() -> anyhow::Result<()> {
    // API-level form of "should be inaccessible": without an export no cluster may get an
    // import (and so no clusterset name or VIP). The upstream spec's nc probes are not run:
    // they would send packets to cluster IPs, which this environment forbids.
    let (set, ns) = setup("c23").await?;
    deploy(
        &set.members[0],
        &ns.name,
        hello_service(&ns.name, HELLO_PORTS, false),
        "true",
        false,
    )
    .await?;
    for m in &set.members {
        stays("no import without an export", async || {
            Ok(import(m, &ns.name, "hello").await?.is_none())
        })
        .await?;
    }
    ns.cleanup().await
}
