//! Reading and waiting on MCS objects in the members of the local ClusterSet.

use std::collections::BTreeMap;
use std::time::Duration;

use atoll_api::labels;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ListParams;
use kube::{Api, ResourceExt};

use crate::cluster_set::{ClusterSet, Member};
use crate::fixtures::{self, Port};
use crate::wait::wait_for;

/// How long imports may take to converge (the conformance suite allows 20 s).
pub const CONVERGE: Duration = Duration::from_secs(20);

/// How long a member of the local ClusterSet may take to make a new Deployment's pods ready
/// and list them in its own EndpointSlices: after a test restarted that cluster, its
/// controller-manager waits for its leader election and its controllers back off (a pod made
/// ready 85 s after its Deployment was created was seen), none of which is Atoll's to time.
pub const LOCAL_READY: Duration = Duration::from_secs(150);

/// The conformance suite's `hello` ports: tcp/42 and udp/42.
pub const HELLO_PORTS: &[Port<'static>] = &[("tcp", "TCP", 42, 42), ("udp", "UDP", 42, 42)];

/// The ServiceImport `ns/name` in `member`, if any.
pub async fn import(
    member: &Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<Option<ServiceImport>> {
    Ok(Api::<ServiceImport>::namespaced(member.client.clone(), ns)
        .get_opt(name)
        .await?)
}

/// The MCS EndpointSlices of `ns/name` in `member` (selected by the service-name label).
pub async fn mcs_slices(
    member: &Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<EndpointSlice>> {
    let selector = format!("{}={name}", labels::SERVICE_NAME);
    Ok(Api::<EndpointSlice>::namespaced(member.client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items)
}

/// Source clusters of `ns/name`'s MCS slices in `member`, sorted, each once.
pub async fn slice_sources(member: &Member, ns: &str, name: &str) -> anyhow::Result<Vec<String>> {
    let mut sources: Vec<String> = mcs_slices(member, ns, name)
        .await?
        .iter()
        .filter_map(|s| s.labels().get(labels::SOURCE_CLUSTER).cloned())
        .collect();
    sources.sort();
    sources.dedup();
    Ok(sources)
}

/// Waits up to `within` until `member` holds slices of `ns/name` from exactly `want`; returns
/// how long it took.
pub async fn wait_sources(
    member: &Member,
    ns: &str,
    name: &str,
    want: &[&str],
    within: Duration,
) -> anyhow::Result<Duration> {
    let started = std::time::Instant::now();
    wait_for(
        &format!("slices of {ns}/{name} from {want:?} in {}", member.context),
        within,
        || async {
            let got = slice_sources(member, ns, name).await?;
            Ok(if got == want { Ok(()) } else { Err(got) })
        },
    )
    .await?;
    Ok(started.elapsed())
}

/// Ready endpoints in `member`'s own EndpointSlices of the Service `ns/name` (those the
/// EndpointSlice controller writes, not Atoll's MCS slices).
pub async fn local_ready_endpoints(member: &Member, ns: &str, name: &str) -> anyhow::Result<usize> {
    let selector = format!(
        "{}={name},{}={}",
        labels::KUBERNETES_SERVICE_NAME,
        labels::ENDPOINTSLICE_MANAGED_BY,
        labels::CORE_ENDPOINTSLICE_MANAGER
    );
    let slices = Api::<EndpointSlice>::namespaced(member.client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?
        .items;
    Ok(slices
        .iter()
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .count())
}

/// Waits up to `within` until `member`'s own EndpointSlices of `ns/name` hold `n` ready
/// endpoints: the environment's part (pods scheduled and made ready by the fake kubelet, slices
/// written by the controller manager), done before a test times what Atoll does with them.
pub async fn wait_local_ready(
    member: &Member,
    ns: &str,
    name: &str,
    n: usize,
    within: Duration,
) -> anyhow::Result<()> {
    wait_for(
        &format!(
            "{n} ready endpoints of Service {ns}/{name} in {}",
            member.context
        ),
        within,
        || async {
            let ready = local_ready_endpoints(member, ns, name).await?;
            Ok(if ready == n { Ok(()) } else { Err(ready) })
        },
    )
    .await
}

/// What each member shows of `ns/name`: ready endpoints of its own Service, its export's
/// conditions and the sources of its MCS slices. A failing wait adds it to its error, to tell
/// a slow environment from an update Atoll missed.
pub async fn describe_service(set: &ClusterSet, ns: &str, name: &str) -> String {
    let mut lines = Vec::new();
    for member in &set.members {
        let ready = local_ready_endpoints(member, ns, name).await;
        let conditions = export_conditions(member, ns, name).await;
        let sources = slice_sources(member, ns, name).await;
        lines.push(format!(
            "{}: local ready endpoints {:?}, export conditions {:?}, MCS slices from {:?}",
            member.context,
            ready.map_err(|e| e.to_string()),
            conditions.map_err(|e| e.to_string()),
            sources.map_err(|e| e.to_string()),
        ));
    }
    lines.join("\n")
}

/// `result`, its error followed by [`describe_service`].
pub async fn explained<T>(
    result: anyhow::Result<T>,
    set: &ClusterSet,
    ns: &str,
    name: &str,
) -> anyhow::Result<T> {
    match result {
        Ok(value) => Ok(value),
        Err(error) => Err(error.context(describe_service(set, ns, name).await)),
    }
}

/// The conditions of the ServiceExport `ns/name` in `member`.
async fn export_status_conditions(
    member: &Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<atoll_api::Condition>> {
    let export = Api::<ServiceExport>::namespaced(member.client.clone(), ns)
        .get(name)
        .await?;
    Ok(export.status.map(|s| s.conditions).unwrap_or_default())
}

/// The condition `type_` of the ServiceExport `ns/name` in `member`.
pub async fn export_condition(
    member: &Member,
    ns: &str,
    name: &str,
    type_: &str,
) -> anyhow::Result<Option<atoll_api::Condition>> {
    Ok(export_status_conditions(member, ns, name)
        .await?
        .into_iter()
        .find(|c| c.type_ == type_))
}

/// `type -> (status, reason)` of a ServiceExport's conditions.
pub async fn export_conditions(
    member: &Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    Ok(export_status_conditions(member, ns, name)
        .await?
        .into_iter()
        .map(|c| (c.type_, (format!("{:?}", c.status), c.reason)))
        .collect())
}

/// Waits until `member`'s ServiceImport satisfies `check` (which says what it saw otherwise).
pub async fn wait_import(
    member: &Member,
    ns: &str,
    name: &str,
    check: impl Fn(&ServiceImport) -> Result<(), String>,
) -> anyhow::Result<ServiceImport> {
    wait_for(
        &format!("ServiceImport {ns}/{name} in {}", member.context),
        CONVERGE,
        || async {
            Ok(match import(member, ns, name).await? {
                Some(i) => check(&i).map(|()| i),
                None => Err("absent".to_owned()),
            })
        },
    )
    .await
}

/// Waits until `member`'s ServiceImport lists `clusters` exporting clusters in its status.
pub async fn wait_import_clusters(
    member: &Member,
    ns: &str,
    name: &str,
    clusters: usize,
) -> anyhow::Result<ServiceImport> {
    wait_import(member, ns, name, |i| {
        let n = i.status.as_ref().map(|s| s.clusters.len()).unwrap_or(0);
        if n == clusters {
            Ok(())
        } else {
            Err(format!("{n} clusters"))
        }
    })
    .await
}

/// Waits until the ServiceExport `ns/name` in `member` has condition `type_=status/reason`.
pub async fn wait_export_condition(
    member: &Member,
    ns: &str,
    name: &str,
    type_: &str,
    status: &str,
    reason: &str,
) -> anyhow::Result<()> {
    wait_for(
        &format!(
            "{type_}={status}/{reason} on ServiceExport {ns}/{name} in {}",
            member.context
        ),
        CONVERGE,
        || async {
            let conditions = export_conditions(member, ns, name).await?;
            Ok(match conditions.get(type_) {
                Some((s, r)) if s == status && r == reason => Ok(()),
                _ => Err(conditions),
            })
        },
    )
    .await
}

/// Waits until no member holds a ServiceImport, derived Service or MCS slice for `ns/name`.
pub async fn wait_gone_everywhere(set: &ClusterSet, ns: &str, name: &str) -> anyhow::Result<()> {
    for member in &set.members {
        wait_for(
            &format!(
                "ServiceImport and MCS slices of {ns}/{name} gone from {}",
                member.context
            ),
            CONVERGE,
            || async {
                let import = import(member, ns, name).await?.map(|i| i.name_any());
                let slices: Vec<String> = mcs_slices(member, ns, name)
                    .await?
                    .iter()
                    .map(|s| s.name_any())
                    .collect();
                let derived = Api::<Service>::namespaced(member.client.clone(), ns)
                    .get_opt(&atoll_core::derived::derived_service_name(ns, name))
                    .await?
                    .map(|s| s.name_any());
                Ok(
                    if import.is_none() && slices.is_empty() && derived.is_none() {
                        Ok(())
                    } else {
                        Err((import, slices, derived))
                    },
                )
            },
        )
        .await?;
    }
    Ok(())
}

/// Deploys `name` in `member`: a Deployment of `replicas` pods and a Service selecting them
/// with the given ports (`clusterIP: None` when `headless`). Exports nothing.
pub async fn deploy_service(
    member: &Member,
    ns: &str,
    name: &str,
    replicas: i32,
    ports: &[Port<'_>],
    headless: bool,
) -> anyhow::Result<()> {
    fixtures::deployment(&member.client, ns, name, replicas).await?;
    fixtures::apply_service(
        &member.client,
        &fixtures::service(ns, name, name, ports, headless),
    )
    .await
}

/// Deploys `hello` (2 pods) with the given ports in `member` and exports it.
pub async fn deploy_and_export(
    member: &Member,
    ns: &str,
    ports: &[Port<'_>],
    headless: bool,
) -> anyhow::Result<()> {
    deploy_service(member, ns, "hello", 2, ports, headless).await?;
    fixtures::export(&member.client, ns, "hello", &[]).await
}

/// Waits until the MCS EndpointSlices of `ns/name` in `member` hold `n` endpoints in all, and
/// returns them.
pub async fn wait_endpoints(
    member: &Member,
    ns: &str,
    name: &str,
    n: usize,
) -> anyhow::Result<Vec<EndpointSlice>> {
    wait_endpoints_within(member, ns, name, n, CONVERGE).await
}

/// [`wait_endpoints`] with another timeout.
pub async fn wait_endpoints_within(
    member: &Member,
    ns: &str,
    name: &str,
    n: usize,
    timeout: Duration,
) -> anyhow::Result<Vec<EndpointSlice>> {
    wait_for(
        &format!(
            "{n} endpoints in the MCS slices of {ns}/{name} in {}",
            member.context
        ),
        timeout,
        || async {
            let slices = mcs_slices(member, ns, name).await?;
            let endpoints: usize = slices.iter().map(|s| s.endpoints.len()).sum();
            Ok(if endpoints == n {
                Ok(slices)
            } else {
                Err(format!("{endpoints} endpoints"))
            })
        },
    )
    .await
}

/// `(kind/namespace/name, uid, resourceVersion)` of every object Atoll keeps for `ns/name` in
/// every member: the ServiceImport, the derived Service and the MCS slices. Equal snapshots
/// mean nothing was deleted, recreated or rewritten in between.
pub async fn import_snapshot(
    set: &ClusterSet,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String, String)>> {
    let mut out = Vec::new();
    let entry = |member: &Member, kind: &str, meta: &kube::api::ObjectMeta| {
        (
            format!(
                "{}:{kind}/{}",
                member.context,
                meta.name.clone().unwrap_or_default()
            ),
            meta.uid.clone().unwrap_or_default(),
            meta.resource_version.clone().unwrap_or_default(),
        )
    };
    for member in &set.members {
        if let Some(i) = import(member, ns, name).await? {
            out.push(entry(member, "ServiceImport", &i.metadata));
        }
        let derived = atoll_core::derived::derived_service_name(ns, name);
        if let Some(s) = Api::<Service>::namespaced(member.client.clone(), ns)
            .get_opt(&derived)
            .await?
        {
            out.push(entry(member, "Service", &s.metadata));
        }
        for slice in mcs_slices(member, ns, name).await? {
            out.push(entry(member, "EndpointSlice", &slice.metadata));
        }
    }
    out.sort();
    Ok(out)
}

/// [`import_snapshot`] once it has stopped changing (the same over two seconds, within 30 s):
/// a test that asserts "nothing changed" must not start from a state still settling (a VIP
/// being allocated, a Ready condition still to be written, pods turning ready).
pub async fn settled_snapshot(
    set: &ClusterSet,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String, String)>> {
    wait_for(
        &format!("{ns}/{name} to settle in every member"),
        Duration::from_secs(30),
        || async {
            let first = import_snapshot(set, ns, name).await?;
            tokio::time::sleep(Duration::from_secs(2)).await;
            let second = import_snapshot(set, ns, name).await?;
            Ok(if first == second {
                Ok(second)
            } else {
                Err(second)
            })
        },
    )
    .await
}

/// A namespace `<prefix>-…` where c2 exports `both` (with c3) and `only`, imported everywhere:
/// the liveness tests' fixture (a dead c2 leaves `only` and half of `both`).
pub async fn two_services(
    set: &ClusterSet,
    prefix: &str,
) -> anyhow::Result<crate::cluster_set::TestNamespace> {
    let ns = set.namespace(prefix).await?;
    for (member, name) in [
        (&set.members[1], "both"),
        (&set.members[2], "both"),
        (&set.members[1], "only"),
    ] {
        deploy_service(member, &ns.name, name, 1, HELLO_PORTS, false).await?;
        fixtures::export(&member.client, &ns.name, name, &[]).await?;
    }
    for (member, name) in [
        (&set.members[1], "both"),
        (&set.members[2], "both"),
        (&set.members[1], "only"),
    ] {
        wait_local_ready(member, &ns.name, name, 1, LOCAL_READY).await?;
    }
    wait_sources_everywhere(
        set,
        &ns.name,
        "both",
        &["c2", "c3"],
        Duration::from_secs(30),
    )
    .await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "only", 1).await?;
    }
    Ok(ns)
}

/// [`wait_sources`] in every member.
pub async fn wait_sources_everywhere(
    set: &ClusterSet,
    ns: &str,
    name: &str,
    clusters: &[&str],
    timeout: Duration,
) -> anyhow::Result<()> {
    for member in &set.members {
        wait_sources(member, ns, name, clusters, timeout).await?;
    }
    Ok(())
}

/// How many MCS slices `member` holds in `ns` from cluster `source`.
pub async fn slices_from(member: &Member, ns: &str, source: &str) -> anyhow::Result<usize> {
    let selector = format!("{}={source}", labels::SOURCE_CLUSTER);
    let slices = Api::<EndpointSlice>::namespaced(member.client.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    Ok(slices.items.len())
}

/// c2's agent stopped until c1 and c3 withdrew its slices in `ns` (the local ClusterSet's
/// 12 s grace, and 30 s more).
pub async fn withdraw_all_of_c2(set: &ClusterSet, ns: &str) -> anyhow::Result<()> {
    fixtures::agents("stop", &["c2"])?;
    for member in [&set.members[0], &set.members[2]] {
        wait_for(
            &format!("c2's slices in {ns} withdrawn in {}", member.context),
            Duration::from_secs(12 + 30),
            || async {
                Ok(match slices_from(member, ns, "c2").await? {
                    0 => Ok(()),
                    n => Err(format!("{n} left")),
                })
            },
        )
        .await?;
    }
    Ok(())
}

/// `(source cluster, active label, has kube-proxy's service-name label, endpoints)` of the MCS
/// slices of `ns/name` in `member`, sorted (KEP-5939 selection as the slices show it).
pub async fn selection_marks(
    member: &Member,
    ns: &str,
    name: &str,
) -> anyhow::Result<Vec<(String, String, bool, usize)>> {
    let mut out: Vec<_> = mcs_slices(member, ns, name)
        .await?
        .iter()
        .filter_map(|s| {
            let l = s.metadata.labels.as_ref()?;
            Some((
                l.get(labels::SOURCE_CLUSTER)?.clone(),
                l.get(labels::ACTIVE).cloned().unwrap_or_default(),
                l.contains_key(labels::KUBERNETES_SERVICE_NAME),
                s.endpoints.len(),
            ))
        })
        .collect();
    out.sort();
    Ok(out)
}
