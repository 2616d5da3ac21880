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

#[tokio::test]
async fn malformed_selectors_and_selectors_on_a_headless_service_are_invalid() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("selectors-invalid").await?;
    let c2 = &set.members[1];
    deploy_service(c2, &ns.name, "headless", 1, HELLO_PORTS, true).await?;
    fixtures::export_annotated(
        &c2.client,
        &ns.name,
        "headless",
        &[(SELECTORS_ANNOTATION, REGIONAL)],
    )
    .await?;
    wait_export_condition(
        c2,
        &ns.name,
        "headless",
        "Valid",
        "False",
        "InvalidServiceType",
    )
    .await?;

    deploy_service(c2, &ns.name, "typo", 1, HELLO_PORTS, false).await?;
    let typo = r#"[{"propertySelector":{"matchExpressions":[{"key":"region","operator":"Near","values":["a"]}]}}]"#;
    fixtures::export_annotated(
        &c2.client,
        &ns.name,
        "typo",
        &[(SELECTORS_ANNOTATION, typo)],
    )
    .await?;
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
    deploy_service(c2, &ns.name, "fine", 1, HELLO_PORTS, false).await?;
    fixtures::export_annotated(
        &c2.client,
        &ns.name,
        "fine",
        &[(SELECTORS_ANNOTATION, REGIONAL)],
    )
    .await?;
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
    deploy_service(c1, &ns.name, "hello", 1, HELLO_PORTS, false).await?;
    fixtures::export_annotated(
        &c1.client,
        &ns.name,
        "hello",
        &[(SELECTORS_ANNOTATION, REGIONAL)],
    )
    .await?;
    wait_import(c3, &ns.name, "hello", |_| Ok(())).await?;
    // creationTimestamp has 1 s resolution: make the second export clearly younger.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    deploy_service(c2, &ns.name, "hello", 1, HELLO_PORTS, false).await?;
    fixtures::export_annotated(
        &c2.client,
        &ns.name,
        "hello",
        &[(SELECTORS_ANNOTATION, ZONAL)],
    )
    .await?;
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
