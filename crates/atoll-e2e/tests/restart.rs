//! Restarts must be invisible: an agent that restarts with a warm start deletes, recreates and
//! rewrites nothing, and a hub outage freezes imports in place. Runs in its own test binary
//! (after `agent.rs`) because it restarts agents and the hub.

use std::time::Duration;

use atoll_testing::fixtures;
use atoll_testing::mcs::{
    HELLO_PORTS, deploy_and_export, deploy_service, import_snapshot, settled_snapshot,
    wait_endpoints, wait_import, wait_import_clusters,
};
use atoll_testing::{ClusterSet, Undo};

/// Waits until every member imports `ns/hello` with 2 endpoints, then until the objects stop
/// changing (status writes settle), and returns their snapshot.
async fn converged(set: &ClusterSet, ns: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    for member in &set.members {
        wait_import(member, ns, "hello", |i| {
            if i.spec.as_ref().is_some_and(|s| !s.ips.is_empty()) {
                Ok(())
            } else {
                Err("no ips".into())
            }
        })
        .await?;
        wait_endpoints(member, ns, "hello", 2).await?;
    }
    settled_snapshot(set, ns, "hello").await
}

#[tokio::test]
async fn restarts_neither_delete_nor_rewrite_imports() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("restart").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    let before = converged(&set, &ns.name).await?;
    assert!(
        before.len() >= 9,
        "expected import, derived Service and slice in 3 members: {before:?}"
    );

    // Whatever happens below, the agents run and c1's control plane is up when the test ends.
    let _restore = Undo::new(|| {
        let _ = fixtures::cluster("start", "c1");
        let _ = fixtures::agents("start", &["c1", "c2", "c3"]);
    });

    // Warm restart of every agent: nothing may be deleted, recreated or rewritten.
    fixtures::agents("restart", &["c1", "c2", "c3"])?;
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(
        import_snapshot(&set, &ns.name, "hello").await?,
        before,
        "agent restart changed imports"
    );

    // Hub outage (c1's whole control plane): imports elsewhere stay exactly as they are.
    fixtures::cluster("stop", "c1")?;
    tokio::time::sleep(Duration::from_secs(3)).await;
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
        "hub outage changed imports"
    );
    fixtures::cluster("start", "c1")?;

    // After the hub returns, new exports flow again and the old imports were never touched.
    fixtures::export(&set.members[2].client, &ns.name, "hello", &[]).await?;
    deploy_service(&set.members[2], &ns.name, "hello", 1, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 2).await?;
    }
    let after = import_snapshot(&set, &ns.name, "hello").await?;
    for (key, uid, _) in &before {
        let same = after.iter().find(|(k, _, _)| k == key).map(|(_, u, _)| u);
        assert_eq!(same, Some(uid), "{key} was deleted or recreated");
    }
    ns.cleanup().await
}
