//! Namespace sameness: a member that lacks a service's namespace gets no import (Atoll never
//! creates namespaces) and its agent counts the skip in
//! `atoll_agent_imports_skipped_namespace_missing`.
//!
//! Its own test binary, because that gauge is one count for the whole agent: while other tests
//! run beside it (tests of one binary run in parallel), a test namespace already deleted in c3
//! whose export in another member is not deleted yet counts too. Test binaries run one after
//! another, so here only earlier binaries' namespaces still being deleted can move it; the test
//! waits for those to be gone and then expects exactly one more skip for its own service.

use atoll_testing::mcs::{HELLO_PORTS, deploy_and_export, import, wait_import};
use atoll_testing::{ClusterSet, agent_admin_port, fixtures, metric, wait_for, wait_metric};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

const SKIPPED: &str = "atoll_agent_imports_skipped_namespace_missing";

/// Waits until no member has a namespace being deleted.
async fn wait_no_terminating_namespaces(set: &ClusterSet) -> anyhow::Result<()> {
    wait_for(
        "earlier tests' namespaces deleted in every member",
        std::time::Duration::from_secs(120),
        || async {
            let mut terminating = Vec::new();
            for member in &set.members {
                let namespaces = Api::<Namespace>::all(member.client.clone())
                    .list(&ListParams::default())
                    .await?;
                terminating.extend(
                    namespaces
                        .items
                        .iter()
                        .filter(|n| n.metadata.deletion_timestamp.is_some())
                        .map(|n| format!("{}:{}", member.context, n.name_any())),
                );
            }
            Ok(if terminating.is_empty() {
                Ok(())
            } else {
                Err(terminating)
            })
        },
    )
    .await
}

#[tokio::test]
async fn a_member_without_the_namespace_gets_no_import() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let c3 = &set.members[2];
    let port = agent_admin_port(2)?;
    wait_no_terminating_namespaces(&set).await?;
    // What stays now (0, unless a failed run left an export in a namespace c3 lacks).
    let before = metric(port, SKIPPED).await?;

    let ns = set.namespace_in("partial", &set.members[..2]).await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members[..2] {
        wait_import(member, &ns.name, "hello", |_| Ok(())).await?;
    }
    // c3's agent saw the export and says why it does not import it.
    wait_metric(port, SKIPPED, before + 1.0).await?;
    assert!(
        Api::<Namespace>::all(c3.client.clone())
            .get_opt(&ns.name)
            .await?
            .is_none(),
        "c3 must not get the namespace created for it"
    );
    assert!(
        import(c3, &ns.name, "hello").await?.is_none(),
        "c3 has an import in a namespace it lacks"
    );

    // Unexported, the skip is gone again.
    fixtures::unexport(&set.members[1].client, &ns.name, "hello").await?;
    wait_metric(port, SKIPPED, before).await?;
    ns.cleanup().await
}
