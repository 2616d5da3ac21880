//! Liveness of source clusters on the local ClusterSet (heartbeats every 2 s, a 12 s grace, as
//! `hack/agents.sh` runs the agents): silent or dead clusters are withdrawn after the grace and
//! return when they heartbeat again; hub outages, hub wipes and skewed clocks withdraw nothing.
//! Disruptive (stops agents and control planes): run one test at a time, after the others. The
//! dead-cluster test sorts last: a restarted kwok control plane runs no pods for minutes.
//! Measured times are printed to stderr (`-- --nocapture`).

use std::time::{Duration, Instant};

use atoll_api::hub::{self, ExportedService};
use atoll_testing::mcs::{
    HELLO_PORTS, deploy_and_export, deploy_service, import, import_snapshot, settled_snapshot,
    slice_sources, wait_import_clusters, wait_sources,
};
use atoll_testing::membership::kubectl;
use atoll_testing::{ClusterSet, Member, Undo, fixtures, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

/// The grace `hack/agents.sh` gives the agents.
const GRACE: Duration = Duration::from_secs(12);

/// Waits until `member` has an Event with `reason` on the ServiceImport `ns/name`.
async fn has_event(member: &Member, ns: &str, name: &str, reason: &str) -> anyhow::Result<bool> {
    wait_for(
        &format!("a {reason} Event on {ns}/{name} in {}", member.context),
        Duration::from_secs(10),
        || async {
            let events = Api::<Event>::namespaced(member.client.clone(), ns)
                .list(&ListParams::default())
                .await?;
            let found = events.items.iter().any(|e| {
                e.reason.as_deref() == Some(reason)
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
            });
            Ok(if found { Ok(()) } else { Err("none yet") })
        },
    )
    .await?;
    Ok(true)
}

/// c2 silent (`stop` stops it): c1 and c3 keep its endpoints within the grace, then withdraw
/// them, removing the import only c2 exported; `start` brings it back.
async fn withdraw_and_restore(
    set: &ClusterSet,
    ns: &str,
    stop: impl FnOnce() -> anyhow::Result<()>,
    start: impl FnOnce() -> anyhow::Result<()>,
    what: &str,
) -> anyhow::Result<()> {
    let (c1, c3) = (&set.members[0], &set.members[2]);
    stop()?;
    let stopped = Instant::now();
    tokio::time::sleep(GRACE - Duration::from_secs(4)).await;
    for member in [c1, c3] {
        assert_eq!(
            slice_sources(member, ns, "both").await?,
            ["c2", "c3"],
            "{}: c2 withdrawn before the grace",
            member.context
        );
        assert!(import(member, ns, "only").await?.is_some());
    }
    for member in [c1, c3] {
        wait_sources(member, ns, "both", &["c3"], Duration::from_secs(30)).await?;
        eprintln!(
            "{what}: {} withdrew c2 {:.1} s after it stopped (grace {} s)",
            member.context,
            stopped.elapsed().as_secs_f64(),
            GRACE.as_secs()
        );
        wait_for(
            &format!("`only` removed in {}", member.context),
            Duration::from_secs(10),
            || async {
                Ok(match import(member, ns, "only").await? {
                    None => Ok(()),
                    Some(_) => Err("present"),
                })
            },
        )
        .await?;
        // The writer applies the import's status after the slice deletions, so it may follow
        // them by a moment; it must follow.
        let status = wait_for(
            &format!("`both` lists only c3 in {}", member.context),
            Duration::from_secs(10),
            || async {
                let status = import(member, ns, "both")
                    .await?
                    .and_then(|i| i.status)
                    .unwrap_or_default();
                let only_c3 = status.clusters.len() == 1 && status.clusters[0].cluster == "c3";
                Ok(if only_c3 {
                    Ok(status)
                } else {
                    Err("c2 still listed")
                })
            },
        )
        .await?;
        let condition = status
            .conditions
            .iter()
            .find(|c| c.type_ == "hub.atoll.dev/SourceClusters")
            .map(|c| (c.reason.clone(), c.message.clone()))
            .unwrap_or_default();
        assert_eq!(condition.0, "SourcesWithdrawn", "{condition:?}");
        assert!(condition.1.contains("withdrawn: c2"), "{condition:?}");
        assert!(has_event(member, ns, "both", "SourceClusterWithdrawn").await?);
        assert!(has_event(member, ns, "only", "SourceClusterWithdrawn").await?);
    }
    let started = Instant::now();
    start()?;
    for member in [c1, c3] {
        wait_sources(member, ns, "both", &["c2", "c3"], Duration::from_secs(60)).await?;
        wait_import_clusters(member, ns, "only", 1).await?;
        eprintln!(
            "{what}: {} restored c2 {:.1} s after it started",
            member.context,
            started.elapsed().as_secs_f64()
        );
        assert!(has_event(member, ns, "both", "SourceClusterRestored").await?);
    }
    Ok(())
}

#[tokio::test]
async fn a_silent_agent_is_withdrawn_after_the_grace_and_comes_back() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let _agent = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2"]);
    });
    let ns = atoll_testing::mcs::two_services(&set, "silent").await?;
    withdraw_and_restore(
        &set,
        &ns.name,
        || fixtures::agents("stop", &["c2"]),
        || fixtures::agents("start", &["c2"]),
        "agent stopped",
    )
    .await?;
    ns.cleanup().await
}

#[tokio::test]
async fn when_a_cluster_dies_it_is_withdrawn_after_the_grace_and_comes_back() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let _cluster = Undo::new(|| {
        let _ = fixtures::cluster("start", "c2");
        let _ = fixtures::agents("start", &["c2"]);
    });
    let ns = atoll_testing::mcs::two_services(&set, "dead").await?;
    withdraw_and_restore(
        &set,
        &ns.name,
        || {
            fixtures::agents("stop", &["c2"])?;
            fixtures::cluster("stop", "c2")
        },
        || {
            fixtures::cluster("start", "c2")?;
            fixtures::agents("start", &["c2"])
        },
        "cluster dead",
    )
    .await?;
    ns.cleanup().await
}

#[tokio::test]
async fn a_hub_outage_longer_than_the_grace_withdraws_nothing() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("huboutage").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    let before = settled_snapshot(&set, &ns.name, "hello").await?;
    let _hub = Undo::new(|| {
        let _ = fixtures::cluster("start", "c1");
    });
    fixtures::cluster("stop", "c1")?;
    tokio::time::sleep(GRACE + Duration::from_secs(8)).await;
    let others = ClusterSet {
        kubeconfig: set.kubeconfig.clone(),
        members: set.members[1..].to_vec(),
    };
    let during: Vec<_> = before
        .iter()
        .filter(|(k, _, _)| !k.starts_with("kwok-c1:"))
        .cloned()
        .collect();
    assert_eq!(
        import_snapshot(&others, &ns.name, "hello").await?,
        during,
        "outage withdrew"
    );
    fixtures::cluster("start", "c1")?;
    // Back, and for longer than a grace: still nothing changed anywhere.
    tokio::time::sleep(GRACE + Duration::from_secs(2)).await;
    assert_eq!(
        import_snapshot(&set, &ns.name, "hello").await?,
        before,
        "changed after the outage"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn a_wiped_hub_withdraws_nothing_and_is_published_again() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = atoll_testing::mcs::two_services(&set, "wipe").await?;
    let mut before = Vec::new();
    for name in ["both", "only"] {
        before.push(settled_snapshot(&set, &ns.name, name).await?);
    }
    // What a restore from an old backup would leave: no record, copy or heartbeat.
    let wiped = Instant::now();
    for member in ["c1", "c2", "c3"] {
        let namespace = hub::namespace_for(member);
        kubectl(
            &set,
            "kwok-c1",
            &[
                "-n",
                &namespace,
                "delete",
                "--all",
                "--wait=false",
                "exportedservices.hub.atoll.dev,exportedendpointslices.hub.atoll.dev",
            ],
        )?;
        kubectl(
            &set,
            "kwok-c1",
            &[
                "-n",
                &namespace,
                "delete",
                "--wait=false",
                "lease",
                "atoll-heartbeat",
            ],
        )?;
    }
    let records: Api<ExportedService> = Api::all(set.members[0].client.clone());
    let count =
        |items: Vec<ExportedService>| items.iter().filter(|r| r.spec.namespace == ns.name).count();
    wait_for(
        "every record published again",
        Duration::from_secs(20),
        || async {
            let n = count(records.list(&ListParams::default()).await?.items);
            Ok(if n == 3 { Ok(()) } else { Err(n) })
        },
    )
    .await?;
    eprintln!(
        "hub wipe: every record published again {:.1} s later",
        wiped.elapsed().as_secs_f64()
    );
    // Longer than a grace later nothing was deleted or recreated anywhere.
    tokio::time::sleep(GRACE + Duration::from_secs(2)).await;
    for (name, was) in ["both", "only"].iter().zip(&before) {
        let now = import_snapshot(&set, &ns.name, name).await?;
        for (key, uid, _) in was {
            let same = now.iter().find(|(k, _, _)| k == key).map(|(_, u, _)| u);
            assert_eq!(
                same,
                Some(uid),
                "{key} was deleted or recreated by the wipe"
            );
        }
    }
    ns.cleanup().await
}

#[tokio::test]
async fn a_member_with_a_skewed_clock_that_keeps_renewing_is_never_withdrawn() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("skew").await?;
    let hub_client = set.members[0].client.clone();
    // A member c8 (no agent) whose clock is hours off: its Lease's renewTime is 3 h in the past,
    // then 3 h in the future, and it renews every 2 s.
    let member_ns = hub::namespace_for("c8");
    let mut namespace = k8s_openapi::api::core::v1::Namespace::default();
    namespace.metadata.name = Some(member_ns.clone());
    match Api::<k8s_openapi::api::core::v1::Namespace>::all(hub_client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e.into()),
    }
    let _remove = {
        let set = set.clone();
        let member_ns = member_ns.clone();
        Undo::new(move || {
            let _ = kubectl(
                &set,
                "kwok-c1",
                &["delete", "namespace", &member_ns, "--wait=false"],
            );
        })
    };
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": "c8", "namespace": ns.name, "name": "skewed",
        "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP",
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}], "ipFamilies": ["IPv4"]
    }))?;
    let mut record = ExportedService::new(&hub::record_name(&ns.name, "skewed"), spec);
    record.metadata.namespace = Some(member_ns.clone());
    Api::<ExportedService>::namespaced(hub_client.clone(), &member_ns)
        .patch(
            &record.name_any(),
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&record),
        )
        .await?;
    let leases: Api<Lease> = Api::namespaced(hub_client.clone(), &member_ns);
    let renew = |offset_hours: i64| {
        let at = k8s_openapi::jiff::Timestamp::now()
            .checked_add(k8s_openapi::jiff::SignedDuration::from_hours(offset_hours))
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now());
        serde_json::json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": { "name": "atoll-heartbeat", "namespace": member_ns },
            "spec": { "holderIdentity": "c8", "renewTime": k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime(at) },
        })
    };
    let started = Instant::now();
    let mut imported_once = false;
    while started.elapsed() < GRACE * 3 {
        let offset = if started.elapsed() < GRACE * 3 / 2 {
            -3
        } else {
            3
        };
        leases
            .patch(
                "atoll-heartbeat",
                &PatchParams::apply("atoll-e2e").force(),
                &Patch::Apply(&renew(offset)),
            )
            .await?;
        for member in &set.members {
            let present = import(member, &ns.name, "skewed").await?.is_some();
            if imported_once {
                assert!(
                    present,
                    "{} withdrew c8 after {:.1} s although it renews",
                    member.context,
                    started.elapsed().as_secs_f64()
                );
            }
        }
        if !imported_once {
            let mut all = true;
            for member in &set.members {
                all &= import(member, &ns.name, "skewed").await?.is_some();
            }
            imported_once = all;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    assert!(imported_once, "c8's service was never imported");
    ns.cleanup().await
}

/// The writes (or errors, `errors`) of the agent of `members[index]` on EndpointSlices with
/// `verb` (every verb when `None`).
async fn slice_writes(index: usize, verb: Option<&str>, errors: bool) -> anyhow::Result<f64> {
    let port = atoll_testing::agent_admin_port(index)?;
    let mut labels = vec![("kind", "EndpointSlice")];
    labels.extend(verb.map(|v| ("verb", v)));
    let name = if errors {
        "atoll_agent_api_write_errors_total"
    } else {
        "atoll_agent_api_writes_total"
    };
    atoll_testing::metric_labelled(port, name, &labels).await
}

/// JSON-patches the agent's ClusterRole in c1.
fn patch_agent_role(kubeconfig: &std::path::Path, patch: &str) -> anyhow::Result<()> {
    let status = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args([
            "--context",
            "kwok-c1",
            "patch",
            "clusterrole",
            "atoll-agent",
        ])
        .args(["--type=json", "-p", patch])
        .stdout(std::process::Stdio::null())
        .status()?;
    anyhow::ensure!(
        status.success(),
        "kubectl patch clusterrole atoll-agent: {status}"
    );
    Ok(())
}

#[tokio::test]
async fn a_cluster_withdrawn_whole_leaves_in_one_request_per_namespace_or_one_by_one_if_refused()
-> anyhow::Result<()> {
    // c2 exports ten services; withdrawn, each importer deletes its ten slices there with one
    // `deletecollection` (a plan that named them one by one fails the first count). With the
    // verb taken out of c1's agent's ClusterRole, c1's collection is refused, counted as an
    // error, and the slices still go one by one (a writer without the fallback fails the wait).
    const SERVICES: usize = 10;
    let set = ClusterSet::from_env().await?;
    let _agent = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2"]);
    });
    let ns = set.namespace("collected").await?;
    let c2 = &set.members[1];
    let names: Vec<String> = (0..SERVICES).map(|i| format!("many-{i}")).collect();
    for name in &names {
        deploy_service(c2, &ns.name, name, 1, HELLO_PORTS, false).await?;
        fixtures::export(&c2.client, &ns.name, name, &[]).await?;
    }
    let imported = || async {
        for member in [&set.members[0], &set.members[2]] {
            for name in &names {
                wait_sources(member, &ns.name, name, &["c2"], Duration::from_secs(60)).await?;
            }
        }
        anyhow::Ok(())
    };
    imported().await?;

    // (collections, named deletes) of EndpointSlices by c1's and c3's agents.
    let counts = || async {
        let mut counts = Vec::new();
        for index in [0, 2] {
            counts.push((
                slice_writes(index, Some("deletecollection"), false).await?,
                slice_writes(index, Some("delete"), false).await?,
            ));
        }
        anyhow::Ok(counts)
    };
    let before = counts().await?;
    atoll_testing::mcs::withdraw_all_of_c2(&set, &ns.name).await?;
    for ((collections, deletes), (collections_before, deletes_before)) in
        counts().await?.into_iter().zip(before)
    {
        // At least one: a pass that plans before the watch shows the deletions may send
        // another.
        assert!(
            collections - collections_before >= 1.0,
            "a deletecollection"
        );
        assert!(
            deletes - deletes_before < SERVICES as f64,
            "not one by one: {deletes_before} -> {deletes}"
        );
    }
    fixtures::agents("start", &["c2"])?;
    imported().await?;

    // The agent's ClusterRole in c1 without `deletecollection` (restored when the test ends).
    let roles = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(set.members[0].client.clone());
    let role = roles.get("atoll-agent").await?;
    let rules = role.rules.unwrap_or_default();
    let (rule, verb) = rules
        .iter()
        .enumerate()
        .find_map(|(i, r)| {
            let slices = r.resources.as_ref()?.iter().any(|x| x == "endpointslices");
            let v = r.verbs.iter().position(|v| v == "deletecollection")?;
            slices.then_some((i, v))
        })
        .ok_or_else(|| {
            anyhow::anyhow!("the agent's ClusterRole has no deletecollection on endpointslices")
        })?;
    let path = format!("/rules/{rule}/verbs/{verb}");
    patch_agent_role(
        &set.kubeconfig,
        &format!(
            r#"[{{"op":"test","path":"{path}","value":"deletecollection"}},{{"op":"remove","path":"{path}"}}]"#
        ),
    )?;
    let kubeconfig = set.kubeconfig.clone();
    let role_back = Undo::new(move || {
        let add = format!(
            r#"[{{"op":"add","path":"/rules/{rule}/verbs/-","value":"deletecollection"}}]"#
        );
        let _ = patch_agent_role(&kubeconfig, &add);
    });
    wait_for(
        "RBAC to refuse c1's agent deletecollection",
        Duration::from_secs(30),
        || async {
            let allowed = std::process::Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&set.kubeconfig)
                .args(["--context", "kwok-c1", "auth", "can-i", "deletecollection"])
                .args(["endpointslices.discovery.k8s.io", "-n", &ns.name])
                .arg("--as=system:serviceaccount:atoll-system:atoll-agent")
                .stdout(std::process::Stdio::null())
                .status()?
                .success();
            Ok(if allowed {
                Err("still allowed")
            } else {
                Ok(())
            })
        },
    )
    .await?;
    let errors = slice_writes(0, None, true).await?;
    let deletes = slice_writes(0, Some("delete"), false).await?;
    atoll_testing::mcs::withdraw_all_of_c2(&set, &ns.name).await?;
    assert!(
        slice_writes(0, None, true).await? - errors >= 1.0,
        "the refused collection is counted"
    );
    assert!(
        slice_writes(0, Some("delete"), false).await? - deletes >= SERVICES as f64,
        "the slices went one by one"
    );
    drop(role_back);
    fixtures::agents("start", &["c2"])?;
    ns.cleanup().await
}
