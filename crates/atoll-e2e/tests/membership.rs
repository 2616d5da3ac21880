//! Membership and identity on the local ClusterSet, which `hack/env-up.sh` joined with
//! `atoll join` (every agent runs with the hub credentials join issued): what a member's
//! credentials may do on the hub, forged records, the namespace policy, and the admission policy
//! that keeps imported objects the agent's. Its own test binary, run with the disruptive ones:
//! it stops c2's agent for a while, reads agent-wide gauges and changes the ClusterSet's
//! namespace policy.

use std::time::Duration;

use atoll_api::hub::{self, ExportedService, NAMESPACE_POLICY, NamespacePolicy};
use atoll_api::v1beta1::ServiceImport;
use atoll_testing::mcs::{
    HELLO_PORTS, deploy_and_export, import, mcs_slices, wait_export_condition, wait_import,
    wait_import_clusters,
};
use atoll_testing::membership::{agent_log, hub_client_of, kubectl};
use atoll_testing::{ClusterSet, Undo, agent_admin_port, metric, wait_for, wait_metric};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

/// A record for `ns/name` claiming `claims`, stored in `stored_in`'s hub namespace.
fn record(stored_in: &str, claims: &str, ns: &str, name: &str) -> anyhow::Result<ExportedService> {
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": claims, "namespace": ns, "name": name,
        "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP",
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}], "ipFamilies": ["IPv4"]
    }))?;
    let mut record = ExportedService::new(&hub::record_name(ns, name), spec);
    record.metadata.namespace = Some(hub::namespace_for(stored_in));
    record.metadata.labels = Some([(hub::LABEL_CLUSTER.to_owned(), claims.to_owned())].into());
    Ok(record)
}

/// Renews a heartbeat Lease (without a claim) in `namespace` every second until aborted.
async fn renew_heartbeat(client: kube::Client, namespace: String) {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(client, &namespace);
    loop {
        let lease = serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": { "name": atoll_api::hub::LEASE_NAME, "namespace": namespace },
            // A MicroTime: the apiserver takes exactly six fractional digits.
            "spec": { "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(k8s_openapi::jiff::Timestamp::now()) },
        });
        let _ = leases
            .patch(
                atoll_api::hub::LEASE_NAME,
                &PatchParams::apply("atoll-e2e").force(),
                &Patch::Apply(&lease),
            )
            .await;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

async fn ensure_namespace(client: &kube::Client, name: &str) -> anyhow::Result<()> {
    let mut namespace = k8s_openapi::api::core::v1::Namespace::default();
    namespace.metadata.name = Some(name.to_owned());
    match Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

fn code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(e) => Some(e.code),
        _ => None,
    }
}

#[tokio::test]
async fn member_credentials_write_only_their_own_hub_namespace() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let c2_on_hub = hub_client_of(&set.members[1]).await?;
    // Into c3's namespace: refused by the hub.
    let theirs: Api<ExportedService> = Api::namespaced(c2_on_hub.clone(), "atoll-c3");
    let refused = theirs
        .create(
            &PostParams::default(),
            &record("c3", "c3", "demo", "spoof")?,
        )
        .await
        .expect_err("c2's credentials wrote into atoll-c3");
    assert_eq!(code(&refused), Some(403), "{refused}");
    // Reading every member's records is allowed; the hub's own workloads are not.
    Api::<ExportedService>::all(c2_on_hub.clone())
        .list(&ListParams::default())
        .await?;
    for denied in [
        Api::<EndpointSlice>::all(c2_on_hub.clone())
            .list(&ListParams::default())
            .await
            .map(|_| ()),
        Api::<k8s_openapi::api::core::v1::Secret>::all(c2_on_hub.clone())
            .list(&ListParams::default())
            .await
            .map(|_| ()),
        Api::<k8s_openapi::api::core::v1::Service>::all(c2_on_hub.clone())
            .list(&ListParams::default())
            .await
            .map(|_| ()),
    ] {
        let error = denied.expect_err("member credentials read the hub's workloads");
        assert_eq!(code(&error), Some(403), "{error}");
    }
    Ok(())
}

#[tokio::test]
async fn a_forged_record_in_a_members_own_namespace_is_ignored_and_reported() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("forged").await?;
    let name = "forged";
    let c2_on_hub = hub_client_of(&set.members[1]).await?;
    let ports: Vec<u16> = (0..set.members.len())
        .map(agent_admin_port)
        .collect::<Result<_, _>>()?;
    let mut before = Vec::new();
    for port in &ports {
        before.push(metric(*port, "atoll_agent_hub_records_rejected").await?);
    }
    // A compromised c2: its agent replaced by someone holding its hub credentials (a running
    // agent would remove the record, as it keeps its namespace to exactly its own exports).
    atoll_testing::fixtures::agents("stop", &["c2"])?;
    let _agent = Undo::new(|| {
        let _ = atoll_testing::fixtures::agents("start", &["c2"]);
    });
    // c2 may write its own namespace, but claims to be c3 there.
    let ours: Api<ExportedService> = Api::namespaced(c2_on_hub, "atoll-c2");
    let forged = record("c2", "c3", &ns.name, name)?;
    ours.create(&PostParams::default(), &forged).await?;
    let record_name = forged.name_any();
    let _remove = {
        let (set, object) = (
            set.clone(),
            format!("exportedservices.hub.atoll.dev/{record_name}"),
        );
        Undo::new(move || {
            let _ = kubectl(
                &set,
                "kwok-c1",
                &["-n", "atoll-c2", "delete", "--ignore-not-found", &object],
            );
        })
    };
    let importers = [0, 2];
    for i in importers {
        wait_metric(
            ports[i],
            "atoll_agent_hub_records_rejected",
            before[i] + 1.0,
        )
        .await?;
    }
    for i in importers {
        let member = &set.members[i];
        assert!(
            import(member, &ns.name, name).await?.is_none(),
            "{} imported a forged record",
            member.context
        );
        let cluster = format!("c{}", i + 1);
        let log = agent_log(&set, &cluster)?;
        assert!(
            log.lines()
                .any(|l| l.contains("ignoring a malformed hub record")
                    && l.contains(&record_name)
                    && l.contains("claims cluster c3")),
            "{cluster}'s log does not report the forged record"
        );
        wait_for(
            &format!("a HubRecordRejected Event in {}", member.context),
            Duration::from_secs(20),
            || async {
                let events = Api::<Event>::namespaced(member.client.clone(), "default")
                    .list(&ListParams::default())
                    .await?;
                let found = events.items.iter().any(|e| {
                    e.reason.as_deref() == Some("HubRecordRejected")
                        && e.note.as_deref().is_some_and(|n| n.contains(&record_name))
                });
                Ok(if found { Ok(()) } else { Err("no such Event") })
            },
        )
        .await?;
    }
    ours.delete(&record_name, &DeleteParams::default()).await?;
    for i in importers {
        wait_metric(ports[i], "atoll_agent_hub_records_rejected", before[i]).await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn an_excluded_namespace_is_neither_exported_nor_imported_until_the_policy_allows_it()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("excluded").await?;
    let hub_client = set.members[0].client.clone();
    let policies: Api<NamespacePolicy> = Api::all(hub_client.clone());
    let original = policies.get(NAMESPACE_POLICY).await?;
    let _restore = {
        let set = set.clone();
        let patch = serde_json::json!({ "spec": original.spec }).to_string();
        Undo::new(move || {
            let _ = kubectl(
                &set,
                "kwok-c1",
                &[
                    "patch",
                    "namespacepolicy",
                    NAMESPACE_POLICY,
                    "--type",
                    "merge",
                    "-p",
                    &patch,
                ],
            );
        })
    };
    let mut exclude = original.spec.exclude.clone();
    exclude.push(ns.name.clone());
    let patch = serde_json::json!({ "spec": { "exclude": exclude } });
    policies
        .patch(
            NAMESPACE_POLICY,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;

    let exporter = &set.members[1];
    deploy_and_export(exporter, &ns.name, HELLO_PORTS, false).await?;
    wait_export_condition(
        exporter,
        &ns.name,
        "hello",
        "Valid",
        "False",
        "NamespaceExcluded",
    )
    .await?;
    let export =
        Api::<atoll_api::v1beta1::ServiceExport>::namespaced(exporter.client.clone(), &ns.name)
            .get("hello")
            .await?;
    let valid = export
        .status
        .unwrap_or_default()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Valid")
        .unwrap_or_else(|| panic!("no Valid condition"));
    assert!(
        valid.message.contains("NamespacePolicy clusterset"),
        "{}",
        valid.message
    );
    // A record for that namespace published by hand, as a member without an agent (whose
    // agent would remove it from its own namespace), is not imported. The member is new in
    // every run and its heartbeat is renewed meanwhile: a member with no heartbeat is withdrawn
    // after the grace (12 s here), and so would be one an earlier test left records of.
    let hand = format!("hand-{}", ns.name.rsplit('-').next().unwrap_or("x"));
    let hand_ns = hub::namespace_for(&hand);
    ensure_namespace(&hub_client, &hand_ns).await?;
    let heartbeat = tokio::spawn(renew_heartbeat(hub_client.clone(), hand_ns.clone()));
    let _stop_heartbeat = Undo::new(move || heartbeat.abort());
    let records: Api<ExportedService> = Api::namespaced(hub_client.clone(), &hand_ns);
    records
        .patch(
            &hub::record_name(&ns.name, "byhand"),
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&record(&hand, &hand, &ns.name, "byhand")?),
        )
        .await?;
    for (i, member) in set.members.iter().enumerate() {
        let port = agent_admin_port(i)?;
        wait_for(
            &format!("{} counting the excluded service", member.context),
            Duration::from_secs(20),
            || async {
                let n = metric(port, "atoll_agent_imports_excluded_namespace").await?;
                Ok(if n >= 1.0 { Ok(()) } else { Err(n) })
            },
        )
        .await?;
        for name in ["hello", "byhand"] {
            assert!(
                import(member, &ns.name, name).await?.is_none(),
                "{name} imported"
            );
        }
    }
    // The policy changes; no restart: both services arrive.
    let patch = serde_json::json!({ "spec": { "exclude": original.spec.exclude } });
    policies
        .patch(
            NAMESPACE_POLICY,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    wait_export_condition(exporter, &ns.name, "hello", "Valid", "True", "Valid").await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
        wait_import(member, &ns.name, "byhand", |_| Ok(())).await?;
    }
    records
        .delete(
            &hub::record_name(&ns.name, "byhand"),
            &DeleteParams::default(),
        )
        .await?;
    Api::<k8s_openapi::api::core::v1::Namespace>::all(hub_client.clone())
        .delete(&hand_ns, &DeleteParams::background())
        .await?;
    ns.cleanup().await
}

#[tokio::test]
async fn users_cannot_change_imported_objects_but_the_agent_still_can() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("owned").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    let user = &set.members[2];
    wait_import_clusters(user, &ns.name, "hello", 1).await?;
    let imports: Api<ServiceImport> = Api::namespaced(user.client.clone(), &ns.name);
    let refused = imports
        .delete("hello", &DeleteParams::default())
        .await
        .expect_err("a user deleted an imported ServiceImport");
    let message = refused.to_string();
    assert!(message.contains("managed by Atoll"), "{message}");
    assert!(
        message.contains("ServiceExport"),
        "says what to do instead: {message}"
    );
    atoll_testing::mcs::wait_endpoints(user, &ns.name, "hello", 2).await?;
    let slices = mcs_slices(user, &ns.name, "hello").await?;
    let slice = slices.first().unwrap_or_else(|| panic!("no MCS slice"));
    let edit = serde_json::json!({ "endpoints": [] });
    let refused = Api::<EndpointSlice>::namespaced(user.client.clone(), &ns.name)
        .patch(
            &slice.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&edit),
        )
        .await
        .expect_err("a user emptied an MCS EndpointSlice");
    assert!(
        refused.to_string().contains("managed by Atoll"),
        "{refused}"
    );
    // The agent keeps working: a second exporter reaches this import.
    deploy_and_export(&set.members[0], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(user, &ns.name, "hello", 2).await?;
    ns.cleanup().await
}

/// Whether the agent process of `cluster` (run by `hack/agents.sh`) is alive.
fn agent_running(set: &ClusterSet, cluster: &str) -> bool {
    let pid_file = set
        .kubeconfig
        .with_file_name("procs")
        .join(format!("agent-{cluster}.pid"));
    std::fs::read_to_string(pid_file)
        .ok()
        .and_then(|pid| pid.trim().parse::<i32>().ok())
        .is_some_and(|pid| std::path::Path::new(&format!("/proc/{pid}")).exists())
}

fn set_id_property(set: &ClusterSet, context: &str, value: &str) -> anyhow::Result<()> {
    let patch = serde_json::json!({ "spec": { "value": value } }).to_string();
    kubectl(
        set,
        context,
        &[
            "patch",
            "clusterproperties.about.k8s.io",
            atoll_api::labels::CLUSTER_ID_PROPERTY,
            "--type",
            "merge",
            "-p",
            &patch,
        ],
    )
}

#[tokio::test]
async fn an_agent_whose_cluster_id_changes_stops_and_writes_nothing_under_the_new_id()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let _restore = {
        let set = set.clone();
        Undo::new(move || {
            let _ = set_id_property(&set, "kwok-c3", "c3");
            let _ = atoll_testing::fixtures::agents("restart", &["c3"]);
        })
    };
    set_id_property(&set, "kwok-c3", "c3-renamed")?;
    wait_for("c3's agent to stop", Duration::from_secs(20), || async {
        Ok(if agent_running(&set, "c3") {
            Err("still running")
        } else {
            Ok(())
        })
    })
    .await?;
    let log = agent_log(&set, "c3")?;
    let last = log
        .lines()
        .rev()
        .find(|l| l.contains("error"))
        .unwrap_or_default();
    assert!(
        last.contains("changed from c3 to c3-renamed"),
        "the agent's last error names both ids: {last}"
    );
    // Nothing exists on the hub under the new id.
    let hub = &set.members[0].client;
    let renamed = Api::<ExportedService>::all(hub.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| {
            r.spec.cluster == "c3-renamed" || r.namespace().as_deref() == Some("atoll-c3-renamed")
        })
        .count();
    assert_eq!(renamed, 0);
    // Back to its id, the agent starts again.
    set_id_property(&set, "kwok-c3", "c3")?;
    atoll_testing::fixtures::agents("start", &["c3"])?;
    Ok(())
}

#[tokio::test]
async fn leaving_withdraws_a_member_and_its_id_cannot_be_taken_by_another_cluster()
-> anyhow::Result<()> {
    use atoll_api::inventory::ClusterProfile;
    use atoll_testing::membership::membership_command;
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("leave").await?;
    let c3 = &set.members[2];
    deploy_and_export(c3, &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    let _rejoin = {
        let set = set.clone();
        Undo::new(move || {
            let _ = membership_command(
                &set,
                "join",
                "c3",
                &["--cluster-id", "c3", "--clusterset", "local"],
            );
            let _ = atoll_testing::fixtures::agents("restart", &["c3"]);
        })
    };

    let left = membership_command(&set, "leave", "c3", &[])?;
    assert!(
        left.status.success(),
        "{}",
        String::from_utf8_lossy(&left.stderr)
    );
    for member in &set.members[..2] {
        wait_for(
            &format!("c3's service withdrawn from {}", member.context),
            Duration::from_secs(30),
            || async {
                Ok(match import(member, &ns.name, "hello").await? {
                    None => Ok(()),
                    Some(_) => Err("still imported"),
                })
            },
        )
        .await?;
    }
    let profiles: Api<ClusterProfile> =
        Api::namespaced(set.members[0].client.clone(), "atoll-inventory");
    assert!(
        profiles.get_opt("c3").await?.is_none(),
        "c3's ClusterProfile remains"
    );

    // c3, without its id property, tries to join as c2: refused, and nothing changes.
    kubectl(
        &set,
        "kwok-c3",
        &[
            "delete",
            "clusterproperties.about.k8s.io",
            atoll_api::labels::CLUSTER_ID_PROPERTY,
        ],
    )?;
    let hub_namespaces = |names: Vec<k8s_openapi::api::core::v1::Namespace>| -> Vec<String> {
        names
            .into_iter()
            .map(|n| n.name_any())
            .filter(|n| n.starts_with("atoll-"))
            .collect()
    };
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
        Api::all(set.members[0].client.clone());
    wait_for(
        "the hub namespace atoll-c3 deleted",
        Duration::from_secs(60),
        || async {
            Ok(match namespaces.get_opt("atoll-c3").await? {
                None => Ok(()),
                Some(_) => Err("still there"),
            })
        },
    )
    .await?;
    let before = hub_namespaces(namespaces.list(&ListParams::default()).await?.items);
    let refused = membership_command(
        &set,
        "join",
        "c3",
        &["--cluster-id", "c2", "--clusterset", "local"],
    )?;
    assert!(
        !refused.status.success(),
        "joining with a taken id succeeded"
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cluster id c2 is already used by another member"),
        "{stderr}"
    );
    assert_eq!(
        hub_namespaces(namespaces.list(&ListParams::default()).await?.items),
        before
    );
    let property = Api::<atoll_api::about::v1beta1::ClusterProperty>::all(c3.client.clone())
        .get_opt(atoll_api::labels::CLUSTER_ID_PROPERTY)
        .await?;
    assert!(property.is_none(), "a refused join created the id property");

    // Joining again as c3 brings its service back everywhere.
    let joined = membership_command(
        &set,
        "join",
        "c3",
        &["--cluster-id", "c3", "--clusterset", "local"],
    )?;
    assert!(
        joined.status.success(),
        "{}",
        String::from_utf8_lossy(&joined.stderr)
    );
    atoll_testing::fixtures::agents("restart", &["c3"])?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    assert!(profiles.get_opt("c3").await?.is_some());
    ns.cleanup().await
}
