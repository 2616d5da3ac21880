//! The hostile member's tools (issues 22 and 43): a member made on the hub as `atoll join`
//! makes one, writing with its own credentials, and what a test checks of its attacks (what
//! every importer holds of an honest service stays as it was; the rejection gauges).

use std::time::Duration;

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService};
use kube::api::PostParams;

use crate::hub_member::HubMember;
use crate::mcs::{
    deploy_service, import_snapshot, settled_snapshot, wait_endpoints, wait_import_clusters,
};
use crate::{ClusterSet, Member, TestNamespace, Undo, agent_admin_port, metric_labelled, wait_for};

/// A cluster id of its own for a test, from the random part of its namespace's name (a new
/// member every run: an earlier run's hub namespace may still be terminating).
pub fn fresh(ns: &TestNamespace) -> String {
    format!("h{}", ns.name.rsplit('-').next().unwrap_or("0"))
}

/// A record for `ns/name` as `member` would publish it, with `ports` (JSON) and `type`.
pub fn record(
    member: &str,
    ns: &str,
    name: &str,
    ports: serde_json::Value,
    type_: &str,
    created: &str,
) -> anyhow::Result<ExportedService> {
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": member, "namespace": ns, "name": name, "exportCreated": created,
        "type": type_, "ports": ports, "ipFamilies": ["IPv4"],
    }))?;
    let mut record = ExportedService::new(&hub::record_name(ns, name), spec);
    record.metadata.namespace = Some(hub::namespace_for(member));
    Ok(record)
}

pub fn tcp80() -> serde_json::Value {
    serde_json::json!([{"name": "tcp", "protocol": "TCP", "port": 80}])
}

pub const NOW: &str = "2026-12-01T00:00:00Z";

/// A copy of an endpoint slice of `ns/service` as `member` would publish it.
pub fn copy(
    member: &str,
    ns: &str,
    service: &str,
    addresses: &[&str],
) -> anyhow::Result<ExportedEndpointSlice> {
    let endpoints: Vec<serde_json::Value> = addresses
        .iter()
        .map(|a| serde_json::json!({"addresses": [a], "conditions": {"ready": true}}))
        .collect();
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": member, "namespace": ns, "service": service, "addressType": "IPv4",
        "endpoints": endpoints,
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}],
    }))?;
    let mut copy =
        ExportedEndpointSlice::new(&hub::record_name(ns, &format!("{service}-abcde")), spec);
    copy.metadata.namespace = Some(hub::namespace_for(member));
    Ok(copy)
}

/// `member` exports `ns/name` (tcp/80), with one endpoint copy holding `addresses` unless
/// there are none.
pub async fn publish(
    member: &HubMember,
    ns: &str,
    name: &str,
    addresses: &[&str],
) -> anyhow::Result<()> {
    let post = PostParams::default();
    let published = record(&member.id, ns, name, tcp80(), "ClusterSetIP", NOW)?;
    member.records().create(&post, &published).await?;
    if !addresses.is_empty() {
        member
            .copies()
            .create(&post, &copy(&member.id, ns, name, addresses)?)
            .await?;
    }
    Ok(())
}

/// `member` writes `record` on the hub with its own credentials.
pub async fn post(member: &HubMember, record: ExportedService) -> kube::Result<ExportedService> {
    member
        .records()
        .create(&PostParams::default(), &record)
        .await
}

/// Asserts that what every importer holds for `ns/name` (import, derived Service, slices)
/// still has the uids and resourceVersions of `before`, then removes the test namespace.
pub async fn unchanged(
    set: &ClusterSet,
    ns: TestNamespace,
    name: &str,
    before: &Snapshot,
) -> anyhow::Result<()> {
    assert_eq!(
        &import_snapshot(set, &ns.name, name).await?,
        before,
        "{name}'s import, derived Service and slices changed in some member"
    );
    ns.cleanup().await
}

/// The hostile member, its heartbeat running; it leaves when the test ends.
pub async fn hostile(set: &ClusterSet, id: &str) -> anyhow::Result<(HubMember, impl Drop + use<>)> {
    // Without the hub's ResourceQuota: what the importers hold must be bounded by their own
    // caps and budgets, whatever a hub allows (an older join, a quota lifted).
    let member = HubMember::join_with(set, id, false).await?;
    let beat = member.heartbeat();
    let leaving = member.clone();
    let undo = Undo::new(move || {
        beat.abort();
        leaving.leave();
    });
    Ok((member, undo))
}

/// c3 exports `name` (one pod, tcp/80) and every member imports it with its endpoint.
pub async fn honest_export(set: &ClusterSet, ns: &str, name: &str) -> anyhow::Result<()> {
    let c3 = &set.members[2];
    deploy_service(c3, ns, name, 1, &[("tcp", "TCP", 80, 80)], false).await?;
    crate::fixtures::export(&c3.client, ns, name, &[]).await?;
    for member in &set.members {
        wait_import_clusters(member, ns, name, 1).await?;
        wait_endpoints(member, ns, name, 1).await?;
    }
    Ok(())
}

/// Waits until every importer's `atoll_agent_hub_rejected{cluster,kind,reason}` is `want`.
pub async fn wait_rejected(
    set: &ClusterSet,
    cluster: &str,
    kind: &str,
    reason: &str,
    want: impl Fn(usize) -> f64,
) -> anyhow::Result<()> {
    let rejected = Rejected {
        cluster,
        kind,
        reason,
    };
    rejected
        .wait(set, Duration::from_secs(30), |i, got| got == want(i))
        .await
}

/// One `atoll_agent_hub_rejected{cluster,kind,reason}` gauge.
#[derive(Clone, Copy, Debug)]
pub struct Rejected<'a> {
    pub cluster: &'a str,
    pub kind: &'a str,
    pub reason: &'a str,
}

impl Rejected<'_> {
    /// Waits up to `timeout` until the gauge of every importer (by index) passes `ok`.
    pub async fn wait(
        &self,
        set: &ClusterSet,
        timeout: Duration,
        ok: impl Fn(usize, f64) -> bool,
    ) -> anyhow::Result<()> {
        let Self {
            cluster,
            kind,
            reason,
        } = *self;
        for i in 0..set.members.len() {
            let port = agent_admin_port(i)?;
            wait_for(
                &format!(
                    "atoll_agent_hub_rejected{{cluster={cluster},kind={kind},reason={reason}}} in c{}",
                    i + 1
                ),
                timeout,
                || async {
                    let labels = [("cluster", cluster), ("kind", kind), ("reason", reason)];
                    let got = metric_labelled(port, "atoll_agent_hub_rejected", &labels).await?;
                    Ok(if ok(i, got) { Ok(()) } else { Err(got) })
                },
            )
            .await?;
        }
        Ok(())
    }
}

/// Waits until `member` holds a Warning Event `reason` on the ServiceImport `ns/name` whose
/// note names `what`.
pub async fn wait_import_event(
    member: &Member,
    ns: &str,
    name: &str,
    reason: &str,
    what: &str,
) -> anyhow::Result<()> {
    let about = format!("a {reason} Event on ServiceImport {ns}/{name} naming {what}");
    crate::events::wait_event(member, ns, &about, |e| {
        let on_import = e.regarding.as_ref().is_some_and(|r| {
            r.kind.as_deref() == Some("ServiceImport") && r.name.as_deref() == Some(name)
        });
        on_import
            && e.reason.as_deref() == Some(reason)
            && e.note.as_deref().is_some_and(|n| n.contains(what))
    })
    .await
}

/// A test's stage: a namespace everywhere, a hostile member (leaving when the test ends), and
/// `honest` exported by c3 and settled in every member, with its snapshot.
pub async fn stage(
    set: &ClusterSet,
    prefix: &str,
    honest: &str,
) -> anyhow::Result<(TestNamespace, HubMember, impl Drop + use<>, Snapshot)> {
    let ns = set.namespace(prefix).await?;
    let (member, leave) = hostile(set, &fresh(&ns)).await?;
    honest_export(set, &ns.name, honest).await?;
    let before = settled_snapshot(set, &ns.name, honest).await?;
    Ok((ns, member, leave, before))
}

/// `(object, uid, resourceVersion)` of what every member holds for a service.
pub type Snapshot = Vec<(String, String, String)>;
