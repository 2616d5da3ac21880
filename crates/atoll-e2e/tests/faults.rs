//! Faults that broke liveness before the reconciler became a state machine (the agents run with
//! 2 s heartbeats and a 12 s grace, as `hack/agents.sh` starts them), each tried on the local
//! ClusterSet:
//! - an importer restarted while a source is withdrawn does not bring it back;
//! - an importer that starts against a hub that lost a member's records deletes nothing of
//!   that member's before the grace;
//! - a hub write that keeps failing (a ResourceQuota on endpoint copies) is reported on the
//!   export and does not freeze the member's other changes, and recovers when lifted;
//! - members with 2 s and 10 s heartbeats side by side: no flapping, no writes while idle.
//!
//! Disruptive (stops and restarts agents): run one test at a time, after the others.

use std::time::{Duration, Instant};

use atoll_api::hub;
use atoll_api::multicluster::export_condition as ec;

use atoll_testing::faults::{COPY_QUOTA, exported, quota_on_copies};
use atoll_testing::mcs::{
    export_condition, import, import_snapshot, settled_snapshot, slice_sources,
    wait_import_clusters, wait_sources,
};
use atoll_testing::membership::kubectl;

use atoll_testing::{
    ClusterSet, Undo, agent_admin_port, fixtures, metric, metric_labelled, metric_samples, wait_for,
};
use kube::api::DeleteParams;

/// The grace `hack/agents.sh` gives the agents.
const GRACE: Duration = Duration::from_secs(12);

/// How long slices may take to reach an importer.
const WAIT: Duration = Duration::from_secs(40);

#[tokio::test]
async fn a_restarted_importer_does_not_bring_back_a_cluster_it_withdrew() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2", "c3"]);
    });
    let ns = set.namespace("resurrect").await?;
    let (c2, c3) = (&set.members[1], &set.members[2]);
    exported(c2, &ns.name, "both").await?;
    exported(c3, &ns.name, "both").await?;
    wait_sources(c3, &ns.name, "both", &["c2", "c3"], WAIT).await?;

    fixtures::agents("stop", &["c2"])?;
    wait_sources(c3, &ns.name, "both", &["c3"], WAIT).await?;
    // c3's agent restarts (a helm upgrade, a drained node) while c2 is still dead: c2's
    // endpoints must not come back, not even for a moment.
    fixtures::agents("restart", &["c3"])?;
    let watched = Instant::now();
    while watched.elapsed() < GRACE {
        let got = slice_sources(c3, &ns.name, "both").await?;
        assert_eq!(
            got,
            ["c3"],
            "c2 came back in c3 {:.1} s after c3's agent restarted",
            watched.elapsed().as_secs_f64()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    eprintln!("restart during an outage: c2 stayed withdrawn for {GRACE:?} after c3's restart");
    fixtures::agents("start", &["c2"])?;
    wait_sources(c3, &ns.name, "both", &["c2", "c3"], WAIT).await?;
    ns.cleanup().await
}

#[tokio::test]
async fn an_importer_starting_against_a_wiped_hub_deletes_nothing_before_the_grace()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2", "c3"]);
    });
    let ns = set.namespace("wipedstart").await?;
    let (c2, c3) = (&set.members[1], &set.members[2]);
    exported(c2, &ns.name, "only").await?;
    wait_import_clusters(c3, &ns.name, "only", 1).await?;
    let before = settled_snapshot(&set, &ns.name, "only").await?;
    let in_c3: Vec<_> = before
        .iter()
        .filter(|(k, _, _)| k.starts_with("kwok-c3:"))
        .cloned()
        .collect();

    // c2 and c3 stop; c2's records and copies are wiped from the hub (as a restore from an
    // older backup would leave it), its Lease still claiming them; c3 starts.
    fixtures::agents("stop", &["c2", "c3"])?;
    kubectl(
        &set,
        "kwok-c1",
        &[
            "-n",
            &hub::namespace_for("c2"),
            "delete",
            "--all",
            "exportedservices.hub.atoll.dev,exportedendpointslices.hub.atoll.dev",
        ],
    )?;
    fixtures::agents("start", &["c3"])?;
    let started = Instant::now();
    let c3_only = ClusterSet {
        kubeconfig: set.kubeconfig.clone(),
        members: vec![c3.clone()],
    };
    // Up to the grace nothing of c2's may go (c2 is dead too, so it is withdrawn after it).
    while started.elapsed() < GRACE - Duration::from_secs(2) {
        let now = import_snapshot(&c3_only, &ns.name, "only").await?;
        for (key, uid, _) in &in_c3 {
            assert!(
                now.iter().any(|(k, u, _)| k == key && u == uid),
                "{key} was deleted {:.1} s after c3's agent started against the wiped hub",
                started.elapsed().as_secs_f64()
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // c2 comes back and publishes again: the import stays the same object.
    fixtures::agents("start", &["c2"])?;
    wait_import_clusters(c3, &ns.name, "only", 1).await?;
    let after = import_snapshot(&c3_only, &ns.name, "only").await?;
    let import_uid = |s: &[(String, String, String)]| {
        s.iter()
            .find(|(k, _, _)| k.contains(":ServiceImport/"))
            .map(|(_, u, _)| u.clone())
    };
    eprintln!(
        "importer started against a wiped hub: nothing of c2's deleted for {:.1} s",
        (GRACE - Duration::from_secs(2)).as_secs_f64()
    );
    assert_eq!(
        import_uid(&after),
        import_uid(&in_c3),
        "the import was re-created"
    );
    ns.cleanup().await
}

#[tokio::test]
async fn a_hub_write_that_keeps_failing_is_reported_and_recovers_when_lifted() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("quota").await?;
    let (c2, c3) = (&set.members[1], &set.members[2]);
    exported(c2, &ns.name, "first").await?;
    wait_import_clusters(c3, &ns.name, "first", 1).await?;
    wait_sources(c3, &ns.name, "first", &["c2"], WAIT).await?;

    // A quota on c2's hub namespace: no more endpoint copies than it has now.
    let (quotas, _lift) = quota_on_copies(&set, "c2").await?;

    // A second export: its copy cannot be written.
    exported(c2, &ns.name, "second").await?;
    wait_for(
        "Ready=False on the second export",
        Duration::from_secs(40),
        || async {
            Ok(
                match export_condition(c2, &ns.name, "second", ec::READY).await? {
                    Some(c)
                        if c.status == atoll_api::ConditionStatus::False
                            && c.message.contains("quota") =>
                    {
                        Ok(c)
                    }
                    other => Err(format!("{other:?}")),
                },
            )
        },
    )
    .await?;
    let port = agent_admin_port(1)?;
    assert!(
        metric(port, "atoll_agent_unpublishable_objects").await? >= 1.0,
        "the failing copy is counted"
    );
    // c2's other changes still reach c3 (its claim follows what the hub holds): a third
    // export's record (records are not under quota) is imported.
    let before = Instant::now();
    fixtures::export(&c2.client, &ns.name, "first", &[("e2e", "relabelled")]).await?;
    wait_for(
        "the first export's new label in c3",
        Duration::from_secs(30),
        || async {
            let i = import(c3, &ns.name, "first").await?;
            let labelled = i
                .as_ref()
                .and_then(|i| i.metadata.labels.as_ref())
                .is_some_and(|l| l.get("e2e").map(String::as_str) == Some("relabelled"));
            Ok(if labelled { Ok(()) } else { Err("not yet") })
        },
    )
    .await?;
    eprintln!(
        "a failing copy write: the member's other change reached c3 in {:.1} s",
        before.elapsed().as_secs_f64()
    );

    // Lifted: the copy is written and the export becomes Ready.
    quotas.delete(COPY_QUOTA, &DeleteParams::default()).await?;
    wait_for(
        "Ready=True on the second export",
        Duration::from_secs(60),
        || async {
            Ok(
                match export_condition(c2, &ns.name, "second", ec::READY).await? {
                    Some(c) if c.status == atoll_api::ConditionStatus::True => Ok(()),
                    other => Err(format!("{other:?}")),
                },
            )
        },
    )
    .await?;
    wait_sources(c3, &ns.name, "second", &["c2"], WAIT).await?;
    assert_eq!(
        metric(port, "atoll_agent_unpublishable_objects").await?,
        0.0
    );
    ns.cleanup().await
}

#[tokio::test]
async fn members_with_2s_and_10s_heartbeats_side_by_side_write_nothing_while_idle()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("restart", &["c2"]);
    });
    let ns = set.namespace("rhythm").await?;
    let (c2, c3) = (&set.members[1], &set.members[2]);
    exported(c2, &ns.name, "slow").await?;
    // c2 beats every 10 s and asks for a 40 s grace; c1 and c3 beat every 2 s with 12 s.
    fixtures::agents_with_rhythm("restart", &["c2"], 10, 40)?;
    wait_import_clusters(c3, &ns.name, "slow", 1).await?;
    let settled = settled_snapshot(&set, &ns.name, "slow").await?;
    // Namespaces earlier tests deleted are withdrawn while they terminate (their members'
    // claims move, and every importer keeps the accepted epochs): the ClusterSet is idle only
    // once they are gone.
    set.wait_no_terminating_namespaces(Duration::from_secs(180))
        .await?;
    // c2's restart began a new term, so its claim epoch moved: c3 keeps accepted epochs in its
    // liveness ConfigMap in batches (at most one write per batch), the last write the restart
    // causes. Idle starts after it.
    tokio::time::sleep(atoll_core::reconciler::EPOCH_BATCH + Duration::from_secs(5)).await;
    let port = agent_admin_port(2)?;
    let writes = || async { metric(port, "atoll_agent_api_writes_total").await };
    let heartbeats = || async { metric(port, "atoll_agent_heartbeats_total").await };
    let by_kind = || async { metric_samples(port, "atoll_agent_api_writes_total").await };
    let (w0, h0, k0) = (writes().await?, heartbeats().await?, by_kind().await?);
    // Five of c2's intervals: never stale, never withdrawn, nothing rewritten.
    let watched = Instant::now();
    while watched.elapsed() < Duration::from_secs(50) {
        // The ClusterSet's members (a hub-only member an earlier test left behind, silent,
        // is rightly withdrawn).
        for member in ["c1", "c2"] {
            assert_eq!(
                metric_labelled(
                    port,
                    "atoll_agent_source_cluster_withdrawn",
                    &[("cluster", member)]
                )
                .await?,
                0.0,
                "c3 withdrew {member}, beating at its own rhythm"
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (w1, h1, k1) = (writes().await?, heartbeats().await?, by_kind().await?);
    let idle_writes = (w1 - w0) - (h1 - h0);
    let written: Vec<String> = k1
        .iter()
        .filter_map(|(labels, n)| {
            let delta = n - k0.get(labels).copied().unwrap_or(0.0);
            (delta != 0.0).then(|| format!("{labels}: {delta}"))
        })
        .collect();
    eprintln!(
        "2 s and 10 s heartbeats side by side: c3 wrote {idle_writes} objects in 50 s idle ({} heartbeats; all writes by kind: {written:?})",
        h1 - h0
    );
    assert_eq!(idle_writes, 0.0, "writes while idle");
    assert_eq!(
        import_snapshot(&set, &ns.name, "slow").await?,
        settled,
        "an import was rewritten while idle"
    );
    ns.cleanup().await
}
