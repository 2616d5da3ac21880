//! A hostile member on the local ClusterSet (issue 22). Every attack is made with a member's
//! own hub credentials, never the administrator's: a member made on the hub exactly as
//! `atoll join` makes one (`atoll_testing::hub_member`: its namespace, ServiceAccount, RBAC and
//! a TokenRequest token), standing for a member whose token was stolen and whose agent is gone,
//! or, for its ClusterProfile, c2's own credentials from its Secret. Each attack is contained
//! (what the importers hold for anyone else keeps its uids and resourceVersions) and reported
//! (the `atoll_agent_hub_rejected` gauges by member, kind and reason, Events, conditions).
//!
//! Run with the disruptive tests, one at a time: it adds members to the ClusterSet and moves
//! agent-wide gauges.

use std::time::Duration;

use atoll_api::hub;
use atoll_api::inventory::ClusterProfile;
use atoll_api::multicluster::ServiceImportType;
use atoll_api::v1beta1::ServiceExport;
use atoll_testing::events::wait_event;
use atoll_testing::hostile::*;
use atoll_testing::mcs::{
    import, import_snapshot, mcs_slices, settled_snapshot, wait_endpoints, wait_import_clusters,
};
use atoll_testing::membership::{hub_client_of, membership_command};
use atoll_testing::{ClusterSet, Member, Undo, wait_for};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt};

#[tokio::test]
async fn colliding_slice_names_let_no_member_replace_another_members_endpoints()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("hostile-names").await?;
    // Under the old naming, `web` from `<r>-c3` and `web-<r>` from c3 were both
    // `web-<r>-c3-ipv4-0`.
    let r = fresh(&ns);
    let (member, _leave) = hostile(&set, &format!("{r}-c3")).await?;
    let honest = format!("web-{r}");
    honest_export(&set, &ns.name, &honest).await?;
    let before = settled_snapshot(&set, &ns.name, &honest).await?;

    publish(&member, &ns.name, "web", &["10.250.0.7"]).await?;
    for m in &set.members {
        let slices = wait_endpoints(m, &ns.name, "web", 1).await?;
        assert_eq!(slices[0].name_any(), format!("web.{}.ipv4.0", member.id));
        let theirs = mcs_slices(m, &ns.name, &honest).await?;
        assert_eq!(theirs.len(), 1);
        assert_eq!(theirs[0].name_any(), format!("{honest}.c3.ipv4.0"));
        assert_ne!(theirs[0].endpoints[0].addresses, ["10.250.0.7"]);
    }
    tokio::time::sleep(Duration::from_secs(3)).await;
    unchanged(&set, ns, &honest, &before).await
}

#[tokio::test]
async fn a_record_backdated_to_1970_wins_no_conflict() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-backdated", "dual").await?;
    // Later on the hub by more than the timestamps' resolution.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    post(
        &member,
        record(
            &member.id,
            &ns.name,
            "dual",
            tcp80(),
            "Headless",
            "1970-01-01T00:00:00Z",
        )?,
    )
    .await?;
    for m in &set.members {
        // The member may export the service: it joins, and loses the conflict.
        wait_import_clusters(m, &ns.name, "dual", 2).await?;
        let spec = import(m, &ns.name, "dual").await?.and_then(|i| i.spec);
        assert_eq!(
            spec.map(|s| s.type_),
            Some(ServiceImportType::ClusterSetIP),
            "{}",
            m.context
        );
    }
    // Reported: Conflict on the honest export, naming who wins and why.
    let c3 = &set.members[2];
    wait_for(
        "Conflict=True on c3's export",
        Duration::from_secs(30),
        || async {
            let export = Api::<ServiceExport>::namespaced(c3.client.clone(), &ns.name)
                .get("dual")
                .await?;
            let conflict = export
                .status
                .unwrap_or_default()
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Conflict" && c.reason == "TypeConflict");
            Ok(match conflict {
                Some(c) if c.message.contains("from cluster c3, wins") => Ok(()),
                other => Err(format!("{other:?}")),
            })
        },
    )
    .await?;
    // Contained: nothing but the ServiceImport's status (its source clusters) changed.
    let after = import_snapshot(&set, &ns.name, "dual").await?;
    let without_status = |s: &[(String, String, String)]| -> Vec<(String, String, String)> {
        s.iter()
            .map(|(k, uid, rv)| {
                (
                    k.clone(),
                    uid.clone(),
                    if k.contains(":ServiceImport/") {
                        String::new()
                    } else {
                        rv.clone()
                    },
                )
            })
            .collect()
    };
    assert_eq!(without_status(&after), without_status(&before));
    ns.cleanup().await
}

#[tokio::test]
async fn an_out_of_range_port_is_refused_and_a_bad_port_name_is_dropped_alone() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-ports", "web").await?;

    // The hub's schema refuses port 70000 on the member's own write.
    let out_of_range = serde_json::json!([{"name": "tcp", "protocol": "TCP", "port": 70000}]);
    let refused = post(
        &member,
        record(
            &member.id,
            &ns.name,
            "web",
            out_of_range,
            "ClusterSetIP",
            NOW,
        )?,
    )
    .await
    .expect_err("the hub took port 70000");
    assert!(
        matches!(&refused, kube::Error::Api(e) if e.code == 422),
        "{refused}"
    );
    // What the schema lets through, importers check: a port name the apiserver would refuse
    // on the derived Service.
    let bad_name = serde_json::json!([{"name": "Bad_Name", "protocol": "TCP", "port": 80}]);
    post(
        &member,
        record(&member.id, &ns.name, "web", bad_name, "ClusterSetIP", NOW)?,
    )
    .await?;
    wait_rejected(&set, &member.id, "record", "port", |_| 1.0).await?;
    for m in &set.members {
        wait_import_event(m, &ns.name, "web", "HubRecordRejected", "Bad_Name").await?;
    }
    // The co-exported service is untouched.
    unchanged(&set, ns, "web", &before).await
}

/// The first address of `member`'s own Service CIDR.
async fn a_service_address(member: &Member) -> anyhow::Result<std::net::Ipv4Addr> {
    use k8s_openapi::api::networking::v1::ServiceCIDR;
    let cidrs = Api::<ServiceCIDR>::all(member.client.clone())
        .list(&ListParams::default())
        .await?;
    let first = cidrs
        .items
        .iter()
        .flat_map(|c| c.spec.iter().flat_map(|s| s.cidrs.iter().flatten()))
        .find_map(|c| c.split_once('/')?.0.parse::<std::net::Ipv4Addr>().ok())
        .ok_or_else(|| anyhow::anyhow!("{} has no IPv4 ServiceCIDR", member.context))?;
    Ok(std::net::Ipv4Addr::from(u32::from(first) + 1))
}

#[tokio::test]
async fn endpoints_pointing_into_an_importer_are_dropped_one_by_one() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-inward", "web").await?;

    // c1's own Service range (its apiserver's VIP is there), loopback, and one fine address.
    let inward = a_service_address(&set.members[0]).await?.to_string();
    publish(
        &member,
        &ns.name,
        "inward",
        &["127.0.0.1", &inward, "10.250.0.9"],
    )
    .await?;
    // c1 refuses its own range; the others (other ranges) take that address.
    for (i, m) in set.members.iter().enumerate() {
        let slices = wait_endpoints(m, &ns.name, "inward", if i == 0 { 1 } else { 2 }).await?;
        let addresses: Vec<String> = slices
            .iter()
            .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
            .collect();
        assert!(!addresses.iter().any(|a| a == "127.0.0.1"), "{addresses:?}");
        assert!(addresses.iter().any(|a| a == "10.250.0.9"), "{addresses:?}");
    }
    wait_rejected(&set, &member.id, "endpoint", "address", |_| 1.0).await?;
    wait_rejected(&set, &member.id, "endpoint", "service-cidr", |i| {
        if i == 0 { 1.0 } else { 0.0 }
    })
    .await?;
    wait_import_event(
        &set.members[0],
        &ns.name,
        "inward",
        "HubEndpointsRejected",
        "Service CIDR",
    )
    .await?;
    for m in &set.members {
        wait_import_event(m, &ns.name, "inward", "HubEndpointsRejected", "loopback").await?;
    }
    unchanged(&set, ns, "web", &before).await
}

/// A Node `name` in `member` whose InternalIP is `address` (no kwok annotation: kwok leaves it
/// alone), deleted when the returned guard drops.
async fn a_node_at(
    set: &ClusterSet,
    member: &Member,
    name: &str,
    address: &str,
) -> anyhow::Result<impl Drop + use<>> {
    use k8s_openapi::api::core::v1::Node;
    let nodes = Api::<Node>::all(member.client.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": { "name": name, "labels": { "atoll.dev/e2e": "hostile" } },
    }))?;
    nodes.create(&PostParams::default(), &node).await?;
    let guard = {
        let (set, context, name) = (set.clone(), member.context.clone(), name.to_owned());
        Undo::new(move || {
            let _ = atoll_testing::membership::kubectl(
                &set,
                &context,
                &[
                    "delete",
                    "node",
                    &name,
                    "--ignore-not-found",
                    "--wait=false",
                ],
            );
        })
    };
    let status = serde_json::json!({
        "status": { "addresses": [
            { "type": "InternalIP", "address": address },
            { "type": "Hostname", "address": name },
        ] },
    });
    nodes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    Ok(guard)
}

#[tokio::test]
async fn an_endpoint_at_an_importers_node_address_is_dropped_there_only() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-node", "web").await?;

    // c2 gets a Node at 10.251.0.7; the hostile member publishes that address and a fine one.
    let node_name = format!("e2e-{}", ns.name);
    let _node = a_node_at(&set, &set.members[1], &node_name, "10.251.0.7").await?;
    publish(&member, &ns.name, "at-node", &["10.251.0.7", "10.250.0.9"]).await?;
    // c2 refuses the address of its own Node; c1 and c3 (no such Node) take it.
    for (i, m) in set.members.iter().enumerate() {
        let want = if i == 1 { 1 } else { 2 };
        let slices = wait_endpoints(m, &ns.name, "at-node", want).await?;
        let addresses: Vec<String> = slices
            .iter()
            .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.clone()))
            .collect();
        assert_eq!(
            addresses.iter().any(|a| a == "10.251.0.7"),
            i != 1,
            "{}: {addresses:?}",
            m.context
        );
        assert!(addresses.iter().any(|a| a == "10.250.0.9"), "{addresses:?}");
    }
    wait_rejected(&set, &member.id, "endpoint", "node-address", |i| {
        if i == 1 { 1.0 } else { 0.0 }
    })
    .await?;
    wait_import_event(
        &set.members[1],
        &ns.name,
        "at-node",
        "HubEndpointsRejected",
        &node_name,
    )
    .await?;
    unchanged(&set, ns, "web", &before).await
}

#[tokio::test]
async fn a_member_over_its_record_limit_loses_only_its_newest_records() -> anyhow::Result<()> {
    const LIMIT: usize = atoll_core::caps::Limits::DEFAULT_RECORDS;
    let set = ClusterSet::from_env().await?;
    let (ns, member, _leave, before) = stage(&set, "hostile-flood", "web").await?;

    // As many records as the limit, for a namespace no member has (no import, no ClusterIP
    // anywhere), sixteen writers at a time.
    let flood = format!("flood-{}", fresh(&ns));
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16 {
        let (records, id, flood) = (member.records(), member.id.clone(), flood.clone());
        writers.spawn(async move {
            for i in (w..LIMIT).step_by(16) {
                let r = record(&id, &flood, &format!("s{i}"), tcp80(), "ClusterSetIP", NOW)?;
                records.create(&PostParams::default(), &r).await?;
            }
            anyhow::Ok(())
        });
    }
    while let Some(done) = writers.join_next().await {
        done??;
    }
    // One more, for a namespace every member has: the newest, so the one left out.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    publish(&member, &ns.name, "capped", &[]).await?;
    wait_rejected(&set, &member.id, "record", "too-many-records", |_| 1.0).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    for m in &set.members {
        assert!(
            import(m, &ns.name, "capped").await?.is_none(),
            "{} imported a record over the limit",
            m.context
        );
        wait_event(m, "default", "a MemberOverLimit Event", |e| {
            e.reason.as_deref() == Some("MemberOverLimit")
                && e.note.as_deref().is_some_and(|n| n.contains(&member.id))
        })
        .await?;
    }
    assert_eq!(
        import_snapshot(&set, &ns.name, "web").await?,
        before,
        "other members' imports are untouched"
    );
    // Room made by an older record lets the newest one in.
    member
        .records()
        .delete(&hub::record_name(&flood, "s0"), &DeleteParams::default())
        .await?;
    wait_rejected(&set, &member.id, "record", "too-many-records", |_| 0.0).await?;
    for m in &set.members {
        wait_import_clusters(m, &ns.name, "capped", 1).await?;
    }
    unchanged(&set, ns, "web", &before).await
}

#[tokio::test]
async fn join_refuses_reserved_ids_and_bad_flags_before_writing_anything() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let hub_client = set.members[0].client.clone();
    let state = || async {
        let namespaces: Vec<(String, String)> =
            Api::<k8s_openapi::api::core::v1::Namespace>::all(hub_client.clone())
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|n| n.name_any().starts_with("atoll-"))
                .map(|n| (n.name_any(), n.resource_version().unwrap_or_default()))
                .collect();
        let profiles: Vec<(String, String)> =
            Api::<ClusterProfile>::namespaced(hub_client.clone(), "atoll-inventory")
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .map(|p| (p.name_any(), p.resource_version().unwrap_or_default()))
                .collect();
        let property =
            Api::<atoll_api::about::v1beta1::ClusterProperty>::all(set.members[2].client.clone())
                .get(atoll_api::labels::CLUSTER_ID_PROPERTY)
                .await?
                .resource_version();
        anyhow::Ok((namespaces, profiles, property))
    };
    let before = state().await?;
    let long = "x".repeat(58);
    let attempts: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--cluster-id", "inventory"], "reserved"),
        (vec!["--cluster-id", "system"], "reserved"),
        (vec!["--cluster-id", "kube-public"], "reserved"),
        (vec!["--cluster-id", "default"], "reserved"),
        (vec!["--cluster-id", &long], "longer than 57"),
        (
            vec!["--clusterset", "not a label"],
            "not a valid ClusterSet name",
        ),
        (
            vec!["--token-seconds", "0"],
            "--token-seconds 0 is out of range",
        ),
    ];
    for (flags, says) in attempts {
        let mut args = flags.clone();
        if !args.contains(&"--clusterset") {
            args.extend(["--clusterset", "local"]);
        }
        let out = membership_command(&set, "join", "c3", &args)?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "join {flags:?} succeeded");
        assert!(stderr.contains(says), "join {flags:?}: {stderr}");
    }
    assert_eq!(state().await?, before, "a refused join wrote something");
    Ok(())
}

#[tokio::test]
async fn a_member_may_write_its_own_profiles_status_only() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let c2 = hub_client_of(&set.members[1]).await?;
    let profiles: Api<ClusterProfile> = Api::namespaced(c2, "atoll-inventory");
    let dry_run = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let relabel =
        serde_json::json!({"metadata": {"labels": {"x-k8s.io/cluster-manager": "someone-else"}}});
    let forbidden = |result: Result<ClusterProfile, kube::Error>, what: &str| match result {
        Err(kube::Error::Api(e)) if e.code == 403 => {}
        other => panic!("{what}: {other:?}"),
    };
    forbidden(
        profiles
            .patch("c2", &dry_run, &Patch::Merge(&relabel))
            .await,
        "a member changed its ClusterProfile itself",
    );
    let status = serde_json::json!({"status": {"properties": []}});
    profiles
        .patch_status("c2", &dry_run, &Patch::Merge(&status))
        .await?;
    forbidden(
        profiles
            .patch_status("c3", &dry_run, &Patch::Merge(&status))
            .await,
        "a member wrote another member's profile status",
    );
    Ok(())
}
