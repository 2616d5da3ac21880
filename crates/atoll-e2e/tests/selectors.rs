//! KEP-5939 cluster selectors on the local ClusterSet (3 real apiservers, hub = c1, agents run
//! by `hack/agents.sh`): the three conditions the KEP defines, and the list an import uses.
//! The selectors are read from the annotation `atoll.dev/cluster-selectors` (the upstream CRDs
//! do not have `spec.clusterSelectors` yet).

use std::time::Duration;

use atoll_core::selection::SELECTORS_ANNOTATION;
use atoll_testing::mcs::{
    HELLO_PORTS, deploy_service, import, wait_export_condition, wait_import, wait_import_clusters,
};
use atoll_testing::{ClusterSet, fixtures};

const REGIONAL: &str = r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#;
const ZONAL: &str =
    r#"[{"propertySelector":{"matchLabels":{"zone":"@SameAsImporter@"}}},{"propertySelector":{}}]"#;

/// Deploys `name` (one pod; `headless`: `clusterIP: None`) in `member` and exports it with
/// `selectors` in the annotation.
async fn deploy_with_selectors(
    member: &atoll_testing::Member,
    ns: &str,
    name: &str,
    headless: bool,
    selectors: &str,
) -> anyhow::Result<()> {
    deploy_service(member, ns, name, 1, HELLO_PORTS, headless).await?;
    fixtures::export_annotated(
        &member.client,
        ns,
        name,
        &[(SELECTORS_ANNOTATION, selectors)],
    )
    .await
}

#[tokio::test]
async fn malformed_selectors_and_selectors_on_a_headless_service_are_invalid() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("selectors-invalid").await?;
    let c2 = &set.members[1];
    deploy_with_selectors(c2, &ns.name, "headless", true, REGIONAL).await?;
    wait_export_condition(
        c2,
        &ns.name,
        "headless",
        "Valid",
        "False",
        "InvalidServiceType",
    )
    .await?;

    let typo = r#"[{"propertySelector":{"matchExpressions":[{"key":"region","operator":"Near","values":["a"]}]}}]"#;
    deploy_with_selectors(c2, &ns.name, "typo", false, typo).await?;
    wait_export_condition(
        c2,
        &ns.name,
        "typo",
        "Valid",
        "False",
        "InvalidClusterSelector",
    )
    .await?;
    // A valid export made after the invalid ones: once every member imports it, their passes
    // saw the invalid ones, so no import of those is a result.
    deploy_with_selectors(c2, &ns.name, "fine", false, REGIONAL).await?;
    for m in &set.members {
        wait_import_clusters(m, &ns.name, "fine", 1).await?;
        for invalid in ["headless", "typo"] {
            assert!(
                import(m, &ns.name, invalid).await?.is_none(),
                "{}: an invalid export is not imported",
                m.context
            );
        }
    }
    // Fixed: the export becomes valid and is imported.
    fixtures::export_annotated(&c2.client, &ns.name, "typo", &[]).await?;
    wait_export_condition(c2, &ns.name, "typo", "Valid", "True", "Valid").await?;
    for m in &set.members {
        wait_import_clusters(m, &ns.name, "typo", 1).await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn different_selector_lists_conflict_and_the_oldest_list_is_imported() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("selectors-conflict").await?;
    let (c1, c2, c3) = (&set.members[0], &set.members[1], &set.members[2]);
    deploy_with_selectors(c1, &ns.name, "hello", false, REGIONAL).await?;
    wait_import(c3, &ns.name, "hello", |_| Ok(())).await?;
    // creationTimestamp has 1 s resolution: make the second export clearly younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    deploy_with_selectors(c2, &ns.name, "hello", false, ZONAL).await?;
    for member in [c1, c2] {
        wait_export_condition(
            member,
            &ns.name,
            "hello",
            "Conflict",
            "True",
            "ClusterSelectorsConflict",
        )
        .await?;
    }
    let want = atoll_core::selection::parse(REGIONAL)?;
    for member in &set.members {
        let imported = wait_import_clusters(member, &ns.name, "hello", 2).await?;
        let shown = imported
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(SELECTORS_ANNOTATION))
            .map(|text| atoll_core::selection::parse(text))
            .transpose()?;
        assert_eq!(
            shown.as_ref(),
            Some(&want),
            "{}: the import shows the oldest export's list",
            member.context
        );
    }
    // The same list on both: no conflict.
    fixtures::export_annotated(
        &c2.client,
        &ns.name,
        "hello",
        &[(SELECTORS_ANNOTATION, REGIONAL)],
    )
    .await?;
    for member in [c1, c2] {
        wait_export_condition(
            member,
            &ns.name,
            "hello",
            "Conflict",
            "False",
            "NoConflicts",
        )
        .await?;
    }
    ns.cleanup().await
}

/// Gives `member` the ClusterProperty `region` = `value`.
async fn set_region(member: &atoll_testing::Member, value: &str) -> anyhow::Result<()> {
    use atoll_api::about::v1beta1::ClusterProperty;
    use kube::api::{Patch, PatchParams};
    let property = ClusterProperty::new(
        "region",
        Some(atoll_api::about::ClusterPropertySpec {
            value: value.to_owned(),
        }),
    );
    kube::Api::<ClusterProperty>::all(member.client.clone())
        .patch(
            "region",
            &PatchParams::apply("atoll-e2e").force(),
            &Patch::Apply(&property),
        )
        .await?;
    Ok(())
}

fn want(rows: &[(&str, &str, usize)]) -> Vec<(String, String, bool, usize)> {
    rows.iter()
        .map(|(c, active, n)| ((*c).to_owned(), (*active).to_owned(), *active == "true", *n))
        .collect()
}

async fn wait_marks(
    member: &atoll_testing::Member,
    ns: &str,
    rows: &[(&str, &str, usize)],
) -> anyhow::Result<()> {
    let wanted = want(rows);
    atoll_testing::wait_for(
        &format!("MCS slices of {ns}/hello in {}: {wanted:?}", member.context),
        Duration::from_secs(60),
        || async {
            let got = atoll_testing::mcs::selection_marks(member, ns, "hello").await?;
            Ok(if got == wanted { Ok(()) } else { Err(got) })
        },
    )
    .await
}

#[tokio::test]
async fn importers_use_their_own_region_while_it_serves_and_fail_over_when_it_does_not()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("selectors-region").await?;
    let _regions = atoll_testing::Undo::new(|| {
        for context in ["kwok-c1", "kwok-c2", "kwok-c3"] {
            let _ = atoll_testing::membership::kubectl(
                &set,
                context,
                &["delete", "clusterproperty", "region", "--ignore-not-found"],
            );
        }
    });
    let (c1, c2, c3) = (&set.members[0], &set.members[1], &set.members[2]);
    let deployed = std::time::Instant::now();
    for (member, region) in [(c1, "a"), (c2, "a"), (c3, "b")] {
        set_region(member, region).await?;
        deploy_with_selectors(member, &ns.name, "hello", false, REGIONAL).await?;
    }
    // Region a's importers use c1 and c2; region b's uses c3.
    wait_marks(
        c1,
        &ns.name,
        &[("c1", "true", 1), ("c2", "true", 1), ("c3", "false", 1)],
    )
    .await?;
    wait_marks(
        c3,
        &ns.name,
        &[("c1", "false", 1), ("c2", "false", 1), ("c3", "true", 1)],
    )
    .await?;
    // `atoll explain` from c3 names the selector that decided and the clusters it uses.
    let kubeconfig = set.kubeconfig.display().to_string();
    let service = format!("{}/hello", ns.name);
    let out = atoll_testing::membership::atoll(&[
        "explain",
        &service,
        "--kubeconfig",
        &kubeconfig,
        "--context",
        "kwok-c3",
    ])?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let hop = stdout
        .lines()
        .find(|l| l.contains("cluster selection in c3"))
        .unwrap_or_default();
    assert!(
        hop.contains("selector 1 of 1") && hop.contains("active c3; inactive c1, c2"),
        "atoll explain:\n{stdout}"
    );

    // A selection is held only once the service is older than the hold here (its first
    // selection may predate the clusters' properties).
    let hold = Duration::from_secs(atoll_core::selection::MIN_HOLD_SECONDS as u64 + 2);
    tokio::time::sleep(hold.saturating_sub(deployed.elapsed())).await;
    // Region a has no endpoints left (its clusters' slices go): c1 fails over to every
    // cluster, and c3 serves.
    let failing = std::time::Instant::now();
    for member in [c1, c2] {
        fixtures::deployment(&member.client, &ns.name, "hello", 0).await?;
    }
    wait_marks(c1, &ns.name, &[("c3", "true", 1)]).await?;
    eprintln!(
        "region a scaled to zero: c1 uses c3 {:.1} s later",
        failing.elapsed().as_secs_f64()
    );
    // Back, but flapping: region a serves again at once after failing over. The selection
    // in place is held (`selection::MIN_HOLD_SECONDS`): c1 keeps c3's slice (same uid) while
    // region a comes and goes, then returns to region a once the hold is over.
    let c3_slice_in_c1 = || async {
        let slices = atoll_testing::mcs::mcs_slices(c1, &ns.name, "hello").await?;
        anyhow::Ok(
            slices
                .into_iter()
                .find(|s| {
                    let l = s.metadata.labels.clone().unwrap_or_default();
                    l.get(atoll_api::labels::SOURCE_CLUSTER).map(String::as_str) == Some("c3")
                        && l.get(atoll_core::selection::ACTIVE_LABEL)
                            .map(String::as_str)
                            == Some("true")
                })
                .and_then(|s| s.metadata.uid),
        )
    };
    let held = c3_slice_in_c1().await?;
    assert!(held.is_some(), "c1 uses c3 after the failover");
    for replicas in [1, 0, 1] {
        for member in [c1, c2] {
            fixtures::deployment(&member.client, &ns.name, "hello", replicas).await?;
        }
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(
            c3_slice_in_c1().await?,
            held,
            "a flap of region a replaced c3's slice in c1 within the hold"
        );
    }
    wait_marks(
        c1,
        &ns.name,
        &[("c1", "true", 1), ("c2", "true", 1), ("c3", "false", 1)],
    )
    .await?;
    let back = failing.elapsed().as_secs_f64();
    eprintln!("region a back: c1 uses it again {back:.1} s after the failover began");
    assert!(
        back >= atoll_core::selection::MIN_HOLD_SECONDS as f64 - 2.0,
        "failback after {back:.1} s, sooner than the hold"
    );
    // c3 changes region: c1 and c2 are no longer its neighbours.
    set_region(c3, "a").await?;
    wait_marks(
        c3,
        &ns.name,
        &[("c1", "true", 1), ("c2", "true", 1), ("c3", "true", 1)],
    )
    .await?;
    ns.cleanup().await
}
