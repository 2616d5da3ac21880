//! A hostile member within the hub CRDs' bounds (issue 43): everything it writes, in its own
//! hub namespace with its own credentials, lands in every importer's watch; what an importer
//! holds and builds of it stays within the per-member budgets, the flooding member's own
//! services degrade as documented, and it is reported (`atoll_agent_hub_rejected` by reason,
//! `atoll_agent_member_hub_bytes`, MemberOverLimit Events). Nothing of any other member changes
//! in any importer (uids and resourceVersions of an honest service's import, derived Service
//! and slices).
//!
//! Run with the disruptive tests, one at a time: it adds members and writes tens of MiB into
//! the hub.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_api::hub;
use atoll_testing::events::wait_event;
use atoll_testing::hostile::*;
use atoll_testing::hub_member::HubMember;
use atoll_testing::mcs::import;
use atoll_testing::membership::agent_rss_mib;
use atoll_testing::{ClusterSet, agent_admin_port, metric, metric_labelled, wait_for};
use kube::api::{DeleteParams, PostParams};

/// `count` records named `<prefix><i>` for the namespace `ns` (which no member has: no import
/// anywhere), each with `values` exported annotations of `bytes` bytes, sixteen writers at a
/// time.
async fn annotated_records(
    member: &HubMember,
    ns: &str,
    prefix: &str,
    count: usize,
    values: usize,
    bytes: usize,
) -> anyhow::Result<()> {
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16 {
        let (records, id) = (member.records(), member.id.clone());
        let (ns, prefix) = (ns.to_owned(), prefix.to_owned());
        writers.spawn(async move {
            for i in (w..count).step_by(16) {
                let mut r = record(
                    &id,
                    &ns,
                    &format!("{prefix}{i}"),
                    tcp80(),
                    "ClusterSetIP",
                    NOW,
                )?;
                r.spec.exported_annotations = (0..values)
                    .map(|v| (format!("flood.example.com/a{v}"), "x".repeat(bytes)))
                    .collect::<BTreeMap<_, _>>();
                records.create(&PostParams::default(), &r).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    Ok(())
}

/// Waits until every importer's `atoll_agent_hub_rejected` of `cluster`'s records left out
/// for `reason` passes `ok`.
async fn wait_rejected_where(
    set: &ClusterSet,
    cluster: &str,
    reason: &str,
    ok: impl Fn(f64) -> bool,
) -> anyhow::Result<()> {
    let rejected = Rejected {
        cluster,
        kind: "record",
        reason,
    };
    rejected
        .wait(set, Duration::from_secs(120), |_, got| ok(got))
        .await
}

/// Resident memory of c3's agent once it settles (jemalloc hands freed pages back after its
/// 10 s decay).
async fn settled_rss(set: &ClusterSet) -> anyhow::Result<f64> {
    tokio::time::sleep(Duration::from_secs(12)).await;
    agent_rss_mib(set, "c3")
}

/// What a test may add to an agent's memory besides the budget: the agent's own bookkeeping of
/// the objects it leaves out and allocator slack.
const SLACK_MIB: f64 = 24.0;

#[tokio::test]
async fn a_member_flooding_bytes_costs_each_importer_at_most_its_budget() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-bytes", "web").await?;
    let budget = metric(agent_admin_port(2)?, "atoll_agent_member_hub_bytes_budget").await?;
    let rss_before = settled_rss(&set).await?;
    let flood = format!("flood-{}", fresh(&ns));

    // 120 records of ~1 MiB (four 250 KiB annotations: more than an import may carry): the
    // attack that took an agent from 38 to 167 MiB. Held by no importer.
    annotated_records(&member, &flood, "big", 120, 4, 250 * 1024).await?;
    wait_rejected_where(&set, &member.id, "annotation", |n| n == 120.0).await?;
    // Records of 200 KiB each (within the per-object limit), 8 MiB past the budget: the last
    // to arrive are not held.
    let fitting = 200 * 1024;
    let count = (budget as usize + (8 << 20)) / fitting + 1;
    annotated_records(&member, &flood, "fit", count, 1, fitting).await?;
    wait_rejected_where(&set, &member.id, "over-byte-budget", |n| n >= 1.0).await?;
    for i in 0..set.members.len() {
        let held = metric_labelled(
            agent_admin_port(i)?,
            "atoll_agent_member_hub_bytes",
            &[("cluster", &member.id)],
        )
        .await?;
        assert!(
            held <= budget && held > budget - 2.0 * fitting as f64,
            "c{} holds {held} bytes of {}, budget {budget}",
            i + 1,
            member.id
        );
    }
    let rss_after = settled_rss(&set).await?;
    let budget_mib = budget / f64::from(1 << 20);
    eprintln!(
        "c3's agent: {rss_before:.0} MiB before, {rss_after:.0} MiB with {} MiB written by {} (budget {budget_mib:.0} MiB)",
        (120 * 1000 + count * 200) / 1024,
        member.id
    );
    assert!(
        rss_after - rss_before <= budget_mib + SLACK_MIB,
        "c3's agent grew {:.0} MiB, more than the budget ({budget_mib:.0} MiB) and {SLACK_MIB} MiB",
        rss_after - rss_before
    );
    for m in &set.members {
        wait_event(m, "default", "a MemberOverByteBudget Event", |e| {
            e.reason.as_deref() == Some("MemberOverByteBudget")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains(&member.id) && n.contains("budget"))
        })
        .await?;
    }
    assert_eq!(
        atoll_testing::mcs::import_snapshot(&set, &ns.name, "web").await?,
        before,
        "other members' imports are untouched"
    );

    // Room made: what was left out for the budget comes back (a relist), nothing else moves.
    for i in 0..count / 2 {
        member
            .records()
            .delete(
                &hub::record_name(&flood, &format!("fit{i}")),
                &DeleteParams::default(),
            )
            .await?;
    }
    wait_rejected_where(&set, &member.id, "over-byte-budget", |n| n == 0.0).await?;
    unchanged(&set, ns, "web", &before).await
}

#[tokio::test]
async fn a_member_over_its_port_budgets_loses_only_its_own_newest_objects() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-ports", "web").await?;
    let post = PostParams::default();

    // Service ports: four records of 1,000 ports each fill the member's 4,000; one more
    // (newest, for a namespace every member has) is left out.
    let flood = format!("flood-{}", fresh(&ns));
    let thousand: Vec<serde_json::Value> = (0..1000)
        .map(|p| serde_json::json!({"name": format!("p{p}"), "protocol": "TCP", "port": 1000 + p}))
        .collect();
    for i in 0..4 {
        let r = record(
            &member.id,
            &flood,
            &format!("wide{i}"),
            thousand.clone().into(),
            "ClusterSetIP",
            NOW,
        )?;
        member.records().create(&post, &r).await?;
    }
    tokio::time::sleep(Duration::from_millis(1100)).await;
    publish(&member, &ns.name, "ported", &[]).await?;
    wait_rejected(&set, &member.id, "record", "too-many-ports", |_| 1.0).await?;

    // Endpoint-port pairs: a headless service with 20 copies of 1,000 endpoints and 100 ports
    // (2 million SRV records: the attack that crashed every `atoll dns`) is left out whole.
    let hundred: Vec<serde_json::Value> = (0..100)
        .map(|p| serde_json::json!({"name": format!("p{p}"), "protocol": "TCP", "port": 1000 + p}))
        .collect();
    let headless = record(
        &member.id,
        &ns.name,
        "many",
        hundred.clone().into(),
        "Headless",
        NOW,
    )?;
    member.records().create(&post, &headless).await?;
    for c in 0..20 {
        let addresses: Vec<String> = (0..1000)
            .map(|e| format!("10.{}.{}.{}", 100 + c, e / 250, 1 + e % 250))
            .collect();
        let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
        let mut copy = copy(&member.id, &ns.name, "many", &refs)?;
        copy.metadata.name = Some(hub::record_name(&ns.name, &format!("many-c{c}")));
        copy.spec.ports = serde_json::from_value(hundred.clone().into())?;
        member.copies().create(&post, &copy).await?;
    }
    let copies = Rejected {
        cluster: &member.id,
        kind: "copy",
        reason: "too-many-endpoint-ports",
    };
    copies
        .wait(&set, Duration::from_secs(60), |_, got| got == 20.0)
        .await?;
    for (i, m) in set.members.iter().enumerate() {
        assert!(
            import(m, &ns.name, "ported").await?.is_none(),
            "{} imported a record over the port budget",
            m.context
        );
        // Every `atoll dns` still answers (none crashed): the honest service resolves.
        let name = format!("web.{}.svc.clusterset.local", ns.name);
        let answer = atoll_testing::dns::ask(
            atoll_testing::dns_port(i)?,
            &name,
            hickory_proto::rr::RecordType::A,
        )?;
        let (code, ips) = atoll_testing::dns::addresses(&answer);
        assert_eq!(
            (code, ips.len()),
            (hickory_proto::op::ResponseCode::NoError, 1),
            "c{}'s atoll dns answers {name}",
            i + 1
        );
    }
    unchanged(&set, ns, "web", &before).await
}

#[tokio::test]
async fn the_hub_refuses_what_a_member_writes_past_its_quota() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("hostile-quota").await?;
    // Joined as `atoll join --hub-quota true` joins: with its ResourceQuota.
    let member = HubMember::join(&set, &fresh(&ns)).await?;
    let leaving = member.clone();
    let _leave = atoll_testing::Undo::new(move || leaving.leave());
    let quota: k8s_openapi::api::core::v1::ResourceQuota =
        kube::Api::namespaced(set.members[0].client.clone(), &member.namespace())
            .get(atoll_core::membership::QUOTA)
            .await?;
    // The apiserver writes quantities in canonical form ("2k"): the resources are compared.
    let hard = quota.spec.and_then(|s| s.hard).unwrap_or_default();
    assert_eq!(
        hard.keys().collect::<Vec<_>>(),
        atoll_core::membership::quota_hard()
            .keys()
            .collect::<Vec<_>>()
    );
    // Two Leases fill the quota (its heartbeat and a spare); the third is refused by the hub.
    let leases: kube::Api<k8s_openapi::api::coordination::v1::Lease> =
        kube::Api::namespaced(member.client.clone(), &member.namespace());
    let lease = |name: &str| {
        let mut l = k8s_openapi::api::coordination::v1::Lease::default();
        l.metadata.name = Some(name.to_owned());
        l
    };
    // The quota controller computes the first usage; until then the hub refuses every create.
    wait_for(
        "the quota's usage computed",
        Duration::from_secs(30),
        || async {
            Ok(
                match leases.create(&PostParams::default(), &lease("a")).await {
                    Ok(_) => Ok(()),
                    Err(e) => Err(e.to_string()),
                },
            )
        },
    )
    .await?;
    leases.create(&PostParams::default(), &lease("b")).await?;
    match leases.create(&PostParams::default(), &lease("c")).await {
        Err(kube::Error::Api(e)) if e.code == 403 && e.message.contains("exceeded quota") => {}
        other => panic!("a third Lease past the quota: {other:?}"),
    }
    ns.cleanup().await
}

/// The MCS slices of `ns/name` in `member`: `(source cluster, active label)`, sorted.
async fn active_marks(
    member: &atoll_testing::Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String)>> {
    Ok(atoll_testing::mcs::selection_marks(member, ns, name)
        .await?
        .into_iter()
        .map(|(cluster, active, _, _)| (cluster, active))
        .collect())
}

#[tokio::test]
async fn a_member_claiming_another_members_id_joins_no_selector_meant_for_it() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("hostile-identity").await?;
    let (member, _leave) = hostile(&set, &fresh(&ns)).await?;
    // c3 exports `only` for every importer to use c3 alone.
    let c3 = &set.members[2];
    let only_c3 = r#"[{"propertySelector":{"matchLabels":{"cluster.clusterset.k8s.io":"c3"}}}]"#;
    atoll_testing::mcs::deploy_service(c3, &ns.name, "only", 1, &[("tcp", "TCP", 80, 80)], false)
        .await?;
    atoll_testing::fixtures::export_annotated(
        &c3.client,
        &ns.name,
        "only",
        &[(atoll_core::selection::SELECTORS_ANNOTATION, only_c3)],
    )
    .await?;
    for m in &set.members {
        atoll_testing::mcs::wait_import_clusters(m, &ns.name, "only", 1).await?;
    }
    // The hostile member claims c3's id and the ClusterSet in its own profile, with its own
    // credentials, and exports the service too, with an endpoint.
    member
        .claim_properties(&[
            ("cluster.clusterset.k8s.io", "c3"),
            ("clusterset.k8s.io", "local"),
        ])
        .await?;
    publish(&member, &ns.name, "only", &["10.250.0.17"]).await?;
    let wanted = vec![
        ("c3".to_owned(), "true".to_owned()),
        (member.id.clone(), "false".to_owned()),
    ];
    for m in &set.members {
        wait_for(
            &format!("{}: c3 active, {} inactive", m.context, member.id),
            Duration::from_secs(40),
            || async {
                let got = active_marks(m, &ns.name, "only").await?;
                Ok(if got == wanted { Ok(()) } else { Err(got) })
            },
        )
        .await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn a_1970_claim_racing_into_the_same_second_wins_no_tie() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-race", "web").await?;
    let c3 = &set.members[2];
    let hub_records: kube::Api<atoll_api::hub::ExportedService> =
        kube::Api::namespaced(set.members[0].client.clone(), "atoll-c3");
    // The hostile member watches for c3's new record and creates its own at once, claiming
    // 1970, headless (c3's is ClusterSetIP): tried until both land in one second of hub time.
    let mut raced = None;
    for attempt in 0..5 {
        let name = format!("race{attempt}");
        let c3_record = hub::record_name(&ns.name, &name);
        atoll_testing::mcs::deploy_service(
            c3,
            &ns.name,
            &name,
            1,
            &[("tcp", "TCP", 80, 80)],
            false,
        )
        .await?;
        atoll_testing::fixtures::export(&c3.client, &ns.name, &name, &[]).await?;
        let honest = loop {
            if let Some(r) = hub_records.get_opt(&c3_record).await? {
                break r;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let forged = record(
            &member.id,
            &ns.name,
            &name,
            tcp80(),
            "Headless",
            "1970-01-01T00:00:00Z",
        )?;
        let forged = post(&member, forged).await?;
        if forged.metadata.creation_timestamp == honest.metadata.creation_timestamp {
            raced = Some(name);
            break;
        }
    }
    let Some(name) = raced else {
        anyhow::bail!("no attempt landed both records in one second of hub time");
    };
    // c3 (the smaller id) wins the tie: the import stays ClusterSetIP everywhere, and the
    // hostile record conflicts.
    for m in &set.members {
        wait_for(
            &format!(
                "{}: {name} imported as ClusterSetIP from c3's record",
                m.context
            ),
            Duration::from_secs(30),
            || async {
                let i = import(m, &ns.name, &name).await?;
                let t = i.as_ref().and_then(|i| i.spec.as_ref()).map(|s| s.type_);
                Ok(
                    if t == Some(atoll_api::multicluster::ServiceImportType::ClusterSetIP) {
                        Ok(())
                    } else {
                        Err(format!("{t:?}"))
                    },
                )
            },
        )
        .await?;
    }
    unchanged(&set, ns, "web", &before).await
}

#[tokio::test]
async fn the_most_annotations_an_import_may_carry_are_imported_everywhere() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-annotated", "web").await?;
    // Exported annotations of exactly what an import may carry beside Atoll's own keys: the
    // importers' writes (with their keys added) stay within the apiserver's 256 KiB.
    let key = "flood.example.com/a";
    let max = atoll_core::validate::names::MAX_EXPORTED_ANNOTATION_BYTES;
    let mut r = record(
        &member.id,
        &ns.name,
        "annotated",
        tcp80(),
        "ClusterSetIP",
        NOW,
    )?;
    r.spec.exported_annotations = BTreeMap::from([(key.to_owned(), "x".repeat(max - key.len()))]);
    post(&member, r).await?;
    for m in &set.members {
        atoll_testing::mcs::wait_import_clusters(m, &ns.name, "annotated", 1).await?;
        let i = import(m, &ns.name, "annotated").await?;
        let carried = i
            .and_then(|i| i.metadata.annotations)
            .and_then(|a| a.get(key).map(String::len));
        assert_eq!(carried, Some(max - key.len()), "{}'s import", m.context);
    }
    unchanged(&set, ns, "web", &before).await
}
