//! Liveness from positive evidence on the local ClusterSet (heartbeats every 2 s, a 12 s grace,
//! as `hack/agents.sh` runs the agents): a member's own bookkeeping (the ConfigMap
//! `atoll-agent-liveness` in which its agent keeps its liveness decisions) can never stop its
//! heartbeat, and a lost, unreadable or refused ConfigMap never brings a dead cluster back; an
//! importer that crash-loops still withdraws a dead cluster; a hub write that keeps failing
//! with 500 is bounded like a refusal; a member whose MCS CRDs are not served keeps claiming
//! what the hub holds. Each test names the defect it catches.
//! Disruptive (restarts agents, changes admission policies, RBAC and CRDs): run one test at a
//! time, after the others. Measured times are printed to stderr (`-- --nocapture`).

use std::time::{Duration, Instant};

use atoll_api::hub::{self, BEAT_ANNOTATION, CLAIM_ANNOTATION, KEPT_ANNOTATION, LEASE_NAME};
use atoll_testing::faults::{delete_kept, refuse_kept_writes};
use atoll_testing::mcs::{
    HELLO_PORTS, LOCAL_READY, deploy_and_export, deploy_service, explained, import,
    import_snapshot, settled_snapshot, slice_sources, wait_export_condition, wait_import_clusters,
    wait_local_ready, wait_sources, wait_sources_everywhere,
};
use atoll_testing::membership::kubectl;
use atoll_testing::{ClusterSet, Member, Undo, agent_admin_port, fixtures, http_get, wait_for};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service};
use kube::Api;
use kube::api::{Patch, PatchParams};

/// The grace `hack/agents.sh` gives the agents.
const GRACE: Duration = Duration::from_secs(12);
const KEPT: &str = atoll_core::membership::KEPT_CONFIG_MAP;
const SYSTEM: &str = atoll_core::membership::SYSTEM_NAMESPACE;

/// Member `id`'s heartbeat Lease on the hub: (beat, claim, kept-decisions annotation).
async fn heartbeat(set: &ClusterSet, id: &str) -> anyhow::Result<(u64, String, String)> {
    let lease = Api::<Lease>::namespaced(set.members[0].client.clone(), &hub::namespace_for(id))
        .get(LEASE_NAME)
        .await?;
    let annotations = lease.metadata.annotations.unwrap_or_default();
    let get = |k: &str| annotations.get(k).cloned().unwrap_or_default();
    Ok((
        get(BEAT_ANNOTATION).parse().unwrap_or(0),
        get(CLAIM_ANNOTATION),
        get(KEPT_ANNOTATION),
    ))
}

/// Watches member `id`'s heartbeat for `how_long`: every beat seen (every 2 s).
async fn beats_over(set: &ClusterSet, id: &str, how_long: Duration) -> anyhow::Result<Vec<u64>> {
    let started = Instant::now();
    let mut beats = Vec::new();
    while started.elapsed() < how_long {
        let (beat, _, _) = heartbeat(set, id).await?;
        if beats.last() != Some(&beat) {
            beats.push(beat);
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    Ok(beats)
}

/// Whether some member still deletes a namespace (an earlier test's, whose services leaving
/// change what their exporter claims).
async fn namespaces_leaving(set: &ClusterSet) -> anyhow::Result<bool> {
    for member in &set.members {
        let namespaces = Api::<Namespace>::all(member.client.clone())
            .list(&Default::default())
            .await?;
        if namespaces
            .items
            .iter()
            .any(|n| n.metadata.deletion_timestamp.is_some())
        {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Member `id`'s claim once no namespace is leaving and it has stayed the same for 6 s.
async fn settled_claim(set: &ClusterSet, id: &str) -> anyhow::Result<String> {
    let started = Instant::now();
    let (_, mut claim, _) = heartbeat(set, id).await?;
    let mut since = Instant::now();
    while since.elapsed() < Duration::from_secs(6) {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(180),
            "{id}'s claim did not settle in 180 s"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (_, now, _) = heartbeat(set, id).await?;
        if now != claim || namespaces_leaving(set).await? {
            claim = now;
            since = Instant::now();
        }
    }
    Ok(claim)
}

/// `(object, uid)` of what every member holds for `ns/name` (resourceVersions left out: a
/// status rewritten is not a withdrawal).
async fn uids(set: &ClusterSet, ns: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    Ok(import_snapshot(set, ns, name)
        .await?
        .into_iter()
        .map(|(k, u, _)| (k, u))
        .collect())
}

/// `(object, uid)` of the derived Service and MCS slices `member` holds for `ns/name`.
async fn core_uids(member: &Member, ns: &str, name: &str) -> anyhow::Result<Vec<(String, String)>> {
    let derived = atoll_core::derived::derived_service_name(ns, name);
    let mut held: Vec<(String, String)> = Api::<Service>::namespaced(member.client.clone(), ns)
        .get_opt(&derived)
        .await?
        .into_iter()
        .map(|s| {
            (
                format!("Service/{derived}"),
                s.metadata.uid.unwrap_or_default(),
            )
        })
        .collect();
    for slice in atoll_testing::mcs::mcs_slices(member, ns, name).await? {
        held.push((
            format!("EndpointSlice/{}", slice.metadata.name.unwrap_or_default()),
            slice.metadata.uid.unwrap_or_default(),
        ));
    }
    held.sort();
    Ok(held)
}

/// The kept ConfigMap of `member`'s agent.
fn kept_maps(member: &Member) -> Api<ConfigMap> {
    Api::namespaced(member.client.clone(), SYSTEM)
}

/// Removes `verb` from the agent Role's rule for the kept ConfigMap in `member` (the Role
/// `atoll join` made in the agent's namespace); the guard adds it back.
async fn revoke_kept_verb(
    set: &ClusterSet,
    member: &Member,
    verb: &str,
) -> anyhow::Result<Undo<impl FnMut() + use<>>> {
    let roles = Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(member.client.clone(), SYSTEM);
    let role = roles.get(atoll_core::membership::AGENT_ACCOUNT).await?;
    let rules = role.rules.unwrap_or_default();
    let index = rules
        .iter()
        .position(|r| {
            r.resource_names
                .as_ref()
                .is_some_and(|n| n.iter().any(|n| n == KEPT))
        })
        .ok_or_else(|| anyhow::anyhow!("no rule for {KEPT} in the agent's Role"))?;
    let at = rules[index]
        .verbs
        .iter()
        .position(|v| v == verb)
        .ok_or_else(|| anyhow::anyhow!("the rule for {KEPT} has no {verb}"))?;
    let patch = |p: &str| -> Vec<String> {
        [
            "-n",
            SYSTEM,
            "patch",
            "role",
            atoll_core::membership::AGENT_ACCOUNT,
            "--type=json",
            "-p",
            p,
        ]
        .map(str::to_owned)
        .to_vec()
    };
    let remove = format!(
        r#"[{{"op":"test","path":"/rules/{index}/verbs/{at}","value":"{verb}"}},{{"op":"remove","path":"/rules/{index}/verbs/{at}"}}]"#
    );
    let args = patch(&remove);
    kubectl(
        set,
        &member.context,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    )?;
    let add = patch(&format!(
        r#"[{{"op":"add","path":"/rules/{index}/verbs/-","value":"{verb}"}}]"#
    ));
    let (set, context) = (set.clone(), member.context.clone());
    Ok(Undo::new(move || {
        let args: Vec<&str> = add.iter().map(String::as_str).collect();
        let _ = kubectl(&set, &context, &args);
    }))
}

/// Over a grace and a half after c3's agent (re)started: c3 imports nothing of c2 in `ns`
/// (`only` is exported by c2 alone), and its heartbeat moves.
async fn c2_stays_out_of_c3(set: &ClusterSet, ns: &str, what: &str) -> anyhow::Result<()> {
    let c3 = &set.members[2];
    let started = Instant::now();
    while started.elapsed() < GRACE * 3 / 2 {
        assert_eq!(
            atoll_testing::mcs::slices_from(c3, ns, "c2").await?,
            0,
            "{what}: c2's endpoints came back in c3 after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        assert!(
            import(c3, ns, "only").await?.is_none(),
            "{what}: c2's `only` came back in c3"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

#[tokio::test]
async fn a_refused_keep_write_stops_no_heartbeat_and_withdraws_nothing() -> anyhow::Result<()> {
    // An admission policy in c3 refuses the agent's kept ConfigMap; the ConfigMap is gone and
    // c3's agent restarts, so its first keep write is refused. Its heartbeat must keep moving
    // for three graces and c3's export stay imported everywhere, untouched. A renewal that
    // waits for the keep write (the defect: a new term reserved its beats in the ConfigMap
    // first) stops the beat and c1 and c2 withdraw c3 within the grace.
    let set = ClusterSet::from_env().await?;
    let c3 = &set.members[2];
    let ns = set.namespace("refusedkeep").await?;
    deploy_and_export(c3, &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    settled_snapshot(&set, &ns.name, "hello").await?;
    let before = uids(&set, &ns.name, "hello").await?;
    let policy = refuse_kept_writes(&set, c3).await?;
    let _restart = Undo::new(|| {
        let _ = fixtures::agents("start", &["c3"]);
    });
    delete_kept(&set, c3)?;
    fixtures::agents("restart", &["c3"])?;
    let beats = beats_over(&set, "c3", GRACE * 3).await?;
    eprintln!(
        "refused keep writes: c3 beat {} times in {} s",
        beats.len(),
        (GRACE * 3).as_secs()
    );
    assert!(
        beats.len() >= 12 && beats.windows(2).all(|w| w[1] > w[0]),
        "c3's heartbeat stopped or went back: {beats:?}"
    );
    assert_eq!(
        uids(&set, &ns.name, "hello").await?,
        before,
        "c3's export was withdrawn or rewritten somewhere"
    );
    let (_, _, kept) = heartbeat(&set, "c3").await?;
    assert!(kept.starts_with("failing"), "the Lease says {kept:?}");
    let port = agent_admin_port(2)?;
    assert_eq!(
        atoll_testing::metric(port, "atoll_agent_kept_unsaved").await?,
        1.0
    );
    assert!(atoll_testing::metric(port, "atoll_agent_kept_write_failures_total").await? >= 2.0);
    drop(policy);
    wait_for(
        "c3's decisions kept once the policy is gone",
        Duration::from_secs(45),
        || async {
            let (_, _, kept) = heartbeat(&set, "c3").await?;
            Ok(if kept == "kept" { Ok(()) } else { Err(kept) })
        },
    )
    .await?;
    assert!(kept_maps(c3).get_opt(KEPT).await?.is_some());
    ns.cleanup().await
}

#[tokio::test]
async fn a_lost_garbled_or_unreadable_kept_record_brings_no_dead_cluster_back() -> anyhow::Result<()>
{
    // c2 is dead (its agent stopped) and withdrawn everywhere. In c3, the kept decisions are
    // then deleted, replaced by garbage, and made unreadable (RBAC `get` revoked), each time
    // before c3's agent restarts: c2 must not come back in c3 (before: it did within one
    // step, as a new member took every cluster as live at first sight). When c2 beats again
    // it comes back.
    let set = ClusterSet::from_env().await?;
    let c3 = &set.members[2];
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2", "c3"]);
    });
    let ns = atoll_testing::mcs::two_services(&set, "lostkept").await?;
    atoll_testing::mcs::withdraw_all_of_c2(&set, &ns.name).await?;

    // Deleted.
    delete_kept(&set, c3)?;
    fixtures::agents("restart", &["c3"])?;
    c2_stays_out_of_c3(&set, &ns.name, "ConfigMap deleted").await?;

    // Garbage: copied aside, never silently overwritten.
    let garbage = "this is not what an agent kept";
    let patch = serde_json::json!({ "data": { "liveness.json": garbage } });
    kept_maps(c3)
        .patch(KEPT, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    fixtures::agents("restart", &["c3"])?;
    c2_stays_out_of_c3(&set, &ns.name, "ConfigMap garbled").await?;
    let aside = kept_maps(c3)
        .get(atoll_core::membership::KEPT_ASIDE_CONFIG_MAP)
        .await?;
    assert_eq!(
        aside
            .data
            .unwrap_or_default()
            .get("liveness.json")
            .map(String::as_str),
        Some(garbage),
        "the unreadable text is kept aside"
    );

    // Unreadable: `get` revoked. The agent keeps nothing (no write before a read), says so
    // on its Lease, is not ready, and its heartbeat moves.
    let rbac = revoke_kept_verb(&set, c3, "get").await?;
    let before = kept_maps(c3).get(KEPT).await?.metadata.resource_version;
    fixtures::agents_unready("restart", &["c3"])?;
    let beats_before = heartbeat(&set, "c3").await?.0;
    c2_stays_out_of_c3(&set, &ns.name, "ConfigMap unreadable").await?;
    let (beat, _, kept) = heartbeat(&set, "c3").await?;
    assert!(beat > beats_before, "c3's heartbeat moves");
    assert_eq!(kept, "unread");
    assert_eq!(
        kept_maps(c3).get(KEPT).await?.metadata.resource_version,
        before,
        "nothing written before a read"
    );
    let (status, _) = http_get(agent_admin_port(2)?, "/readyz").await?;
    assert_ne!(status, 200, "not ready while the kept decisions are unread");
    drop(rbac);
    wait_for(
        "c3 ready once it can read",
        Duration::from_secs(60),
        || async {
            let (status, body) = http_get(agent_admin_port(2)?, "/readyz").await?;
            Ok(if status == 200 { Ok(()) } else { Err(body) })
        },
    )
    .await?;

    // c2 beats again: back in c3.
    let started = Instant::now();
    fixtures::agents("start", &["c2"])?;
    wait_sources(c3, &ns.name, "both", &["c2", "c3"], Duration::from_secs(60)).await?;
    wait_import_clusters(c3, &ns.name, "only", 1).await?;
    eprintln!(
        "kept record lost: c2 back in c3 {:.1} s after it started",
        started.elapsed().as_secs_f64()
    );
    ns.cleanup().await
}

#[tokio::test]
async fn a_member_joining_during_an_outage_imports_nothing_of_the_dead_cluster()
-> anyhow::Result<()> {
    // `late` is exported by c1 and c2 in a namespace c3 does not have. c2 dies and is
    // withdrawn. Then c3's agent starts as a new member meets it: no kept decisions and
    // nothing of `late` here (its namespace is created while the agent is down). It imports
    // c1's part at once and nothing of c2 (before: c2's stale record and endpoints for a
    // grace).
    let set = ClusterSet::from_env().await?;
    let (c1, c2, c3) = (&set.members[0], &set.members[1], &set.members[2]);
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2", "c3"]);
    });
    let ns = set.namespace_in("joining", &set.members[..2]).await?;
    for member in [c1, c2] {
        deploy_service(member, &ns.name, "late", 1, HELLO_PORTS, false).await?;
        fixtures::export(&member.client, &ns.name, "late", &[]).await?;
    }
    for member in [c1, c2] {
        wait_local_ready(member, &ns.name, "late", 1, LOCAL_READY).await?;
    }
    explained(
        wait_sources(c1, &ns.name, "late", &["c1", "c2"], Duration::from_secs(30)).await,
        &set,
        &ns.name,
        "late",
    )
    .await?;
    fixtures::agents("stop", &["c2"])?;
    wait_sources(
        c1,
        &ns.name,
        "late",
        &["c1"],
        GRACE + Duration::from_secs(30),
    )
    .await?;

    fixtures::agents("stop", &["c3"])?;
    delete_kept(&set, c3)?;
    kubectl(&set, &c3.context, &["create", "namespace", &ns.name])?;
    let started = Instant::now();
    fixtures::agents("start", &["c3"])?;
    wait_sources(c3, &ns.name, "late", &["c1"], Duration::from_secs(30)).await?;
    eprintln!(
        "joining during an outage: c3 imported c1's part {:.1} s after its agent started",
        started.elapsed().as_secs_f64()
    );
    while started.elapsed() < GRACE * 3 / 2 {
        let sources = slice_sources(c3, &ns.name, "late").await?;
        assert!(
            !sources.iter().any(|s| s == "c2"),
            "c3 imported the dead c2's endpoints after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let listed: Vec<String> = import(c3, &ns.name, "late")
            .await?
            .and_then(|i| i.status)
            .map(|s| s.clusters.into_iter().map(|c| c.cluster).collect())
            .unwrap_or_default();
        assert!(!listed.iter().any(|c| c == "c2"), "c2 listed: {listed:?}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    kubectl(
        &set,
        &c3.context,
        &["delete", "namespace", &ns.name, "--wait=false"],
    )?;
    fixtures::agents("start", &["c2"])?;
    ns.cleanup().await
}

/// Kills c3's agent (SIGKILL, as a crash) and starts it again as the same pod would (the same
/// leader-election identity, so it leads at once).
fn crash_and_restart_c3(set: &ClusterSet) -> anyhow::Result<()> {
    let env = set
        .kubeconfig
        .parent()
        .ok_or_else(|| anyhow::anyhow!("the kubeconfig has no directory"))?;
    let pid_file = env.join("procs/agent-c3.pid");
    if let Ok(pid) = std::fs::read_to_string(&pid_file) {
        let _ = std::process::Command::new("kill")
            .args(["-9", pid.trim()])
            .status();
        // Gone for good (its admin port free) before the next one starts.
        let proc_dir = std::path::Path::new("/proc").join(pid.trim());
        let killed = Instant::now();
        while proc_dir.exists() && killed.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    fixtures::agents_with_env(
        "start",
        &["c3"],
        &[("ATOLL_AGENT_ARGS", "--leader-election-identity e2e-c3-pod")],
    )
}

#[tokio::test]
async fn an_importer_crash_looping_every_3_s_still_withdraws_a_dead_cluster() -> anyhow::Result<()>
{
    // c2 dies while c3's agent crashes every 3 s. Each process keeps when it first saw c2 quiet
    // and the next carries that silence on while c2's Lease shows the same beat, so c3
    // withdraws c2 within the grace plus a bound (stated in the README: one restart period,
    // one interval, a step). A process that started c2's clock afresh (the defect) never
    // withdraws it here.
    const PERIOD: Duration = Duration::from_secs(3);
    const BOUND: Duration = Duration::from_secs(9);
    let set = ClusterSet::from_env().await?;
    let c3 = &set.members[2];
    let _agents = Undo::new(|| {
        let _ = fixtures::agents("stop", &["c3"]);
        let _ = fixtures::agents("start", &["c2", "c3"]);
    });
    let ns = atoll_testing::mcs::two_services(&set, "crashloop").await?;
    // A clean hand-over to the crash-looping identity.
    fixtures::agents("stop", &["c3"])?;
    crash_and_restart_c3(&set)?;
    tokio::time::sleep(PERIOD).await;
    fixtures::agents("stop", &["c2"])?;
    let died = Instant::now();
    let mut withdrawn = None;
    while died.elapsed() < GRACE + BOUND + Duration::from_secs(10) {
        crash_and_restart_c3(&set)?;
        let cycle = Instant::now();
        while cycle.elapsed() < PERIOD {
            if withdrawn.is_none()
                && atoll_testing::mcs::slices_from(c3, &ns.name, "c2").await? == 0
            {
                withdrawn = Some(died.elapsed());
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if withdrawn.is_some() {
            break;
        }
    }
    let at =
        withdrawn.ok_or_else(|| anyhow::anyhow!("c3 never withdrew c2 while crash-looping"))?;
    eprintln!(
        "crash loop every {} s: c3 withdrew c2 {:.1} s after it died (grace {} s)",
        PERIOD.as_secs(),
        at.as_secs_f64(),
        GRACE.as_secs()
    );
    assert!(
        at <= GRACE + BOUND,
        "withdrawn {:.1} s after c2 died",
        at.as_secs_f64()
    );
    assert!(
        at >= GRACE - Duration::from_secs(1),
        "withdrawn before the grace"
    );
    fixtures::agents("stop", &["c3"])?;
    fixtures::agents("start", &["c2", "c3"])?;
    wait_sources_everywhere(
        &set,
        &ns.name,
        "both",
        &["c2", "c3"],
        Duration::from_secs(60),
    )
    .await?;
    ns.cleanup().await
}

/// A webhook on the hub that nobody answers (a webhook Deployment down), failing closed, for
/// c3's endpoint copies of service `service`: every write of them gets a 500.
async fn dead_webhook_on_copies(
    set: &ClusterSet,
    service: &str,
) -> anyhow::Result<Undo<impl FnMut() + use<>>> {
    use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
    const NAME: &str = "e2e-dead-webhook";
    let webhook: ValidatingWebhookConfiguration = serde_json::from_value(serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": { "name": NAME },
        "webhooks": [{
            "name": "copies.e2e.atoll.dev",
            // Port 1 on loopback: nothing listens, the apiserver's call is refused at once.
            "clientConfig": { "url": "https://127.0.0.1:1/validate" },
            "rules": [{
                "apiGroups": [hub::GROUP], "apiVersions": ["*"],
                "resources": ["exportedendpointslices"], "operations": ["CREATE", "UPDATE"],
            }],
            "namespaceSelector": { "matchLabels": { "kubernetes.io/metadata.name": hub::namespace_for("c3") } },
            "matchConditions": [{
                "name": "one-service",
                "expression": format!("object.spec.service == '{service}'"),
            }],
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 2,
        }],
    }))?;
    Api::<ValidatingWebhookConfiguration>::all(set.members[0].client.clone())
        .patch(
            NAME,
            &PatchParams::apply("atoll-e2e"),
            &Patch::Apply(&webhook),
        )
        .await?;
    let set = set.clone();
    Ok(Undo::new(move || {
        let _ = kubectl(
            &set,
            &set.members[0].context,
            &[
                "delete",
                "validatingwebhookconfiguration",
                NAME,
                "--ignore-not-found",
            ],
        );
    }))
}

#[tokio::test]
async fn a_hub_write_answered_500_is_bounded_like_a_refusal() -> anyhow::Result<()> {
    // A hub webhook is down for c3's copy of `blocked`: its creation gets a 500, again and
    // again. After the bound (30 s of failures while the hub takes c3's other writes) the
    // copy leaves c3's claim, so importers take c3's other changes (`free`, exported after
    // it) instead of waiting for a claim that never matches; `blocked` reports the error.
    // Without the bound (the defect: a 5xx was "still on its way" forever) `free` never
    // reaches c1.
    let set = ClusterSet::from_env().await?;
    let (c1, c3) = (&set.members[0], &set.members[2]);
    let ns = set.namespace("deadhook").await?;
    let webhook = dead_webhook_on_copies(&set, "blocked").await?;
    deploy_service(c3, &ns.name, "blocked", 1, HELLO_PORTS, false).await?;
    deploy_service(c3, &ns.name, "free", 1, HELLO_PORTS, false).await?;
    fixtures::export(&c3.client, &ns.name, "blocked", &[]).await?;
    wait_for(
        "`blocked` to report its copy's failure",
        Duration::from_secs(60),
        || async {
            let message = atoll_testing::mcs::export_condition(c3, &ns.name, "blocked", "Ready")
                .await?
                .map(|c| c.message)
                .unwrap_or_default();
            Ok(if message.contains("failed") {
                Ok(())
            } else {
                Err(message)
            })
        },
    )
    .await?;
    let exported = Instant::now();
    fixtures::export(&c3.client, &ns.name, "free", &[]).await?;
    wait_for(
        "`free` imported in c1 despite the stuck copy",
        Duration::from_secs(90),
        || async {
            Ok(match import(c1, &ns.name, "free").await? {
                Some(_) => Ok(()),
                None => Err("absent"),
            })
        },
    )
    .await?;
    eprintln!(
        "hub write answered 500: c3's next export reached c1 {:.1} s later",
        exported.elapsed().as_secs_f64()
    );
    let message = atoll_testing::mcs::export_condition(c3, &ns.name, "blocked", "Ready")
        .await?
        .map(|c| c.message)
        .unwrap_or_default();
    assert!(
        message.contains("500") || message.to_lowercase().contains("webhook"),
        "`blocked` says why: {message:?}"
    );
    drop(webhook);
    // The copy's next retry (its backoff is at most 30 s) goes through.
    wait_sources(c1, &ns.name, "blocked", &["c3"], Duration::from_secs(60)).await?;
    wait_export_condition(c3, &ns.name, "blocked", "Ready", "True", "Exported").await?;
    ns.cleanup().await
}

/// Sets `served` on every version of the MCS CRDs in `member` (false: as if they were missing).
fn serve_mcs_crds(set: &ClusterSet, member: &Member, served: bool) -> anyhow::Result<()> {
    for crd in [
        "serviceexports.multicluster.x-k8s.io",
        "serviceimports.multicluster.x-k8s.io",
    ] {
        let patch = format!(
            r#"[{{"op":"replace","path":"/spec/versions/0/served","value":{served}}},{{"op":"replace","path":"/spec/versions/1/served","value":{served}}}]"#
        );
        kubectl(
            set,
            &member.context,
            &["patch", "crd", crd, "--type=json", "-p", &patch],
        )?;
    }
    Ok(())
}

#[tokio::test]
async fn a_member_whose_mcs_crds_are_not_served_keeps_claiming_what_the_hub_holds()
-> anyhow::Result<()> {
    // c3's ServiceExport and ServiceImport CRDs stop being served (an upgrade gone wrong,
    // version skew): first while its agent runs, then across a restart (an agent starting
    // against a member without the CRDs). Its heartbeat and claim go on, its records stay on
    // the hub, and its export stays imported everywhere, untouched. Planning from the empty
    // stores (the defect of a peer: an export watch that silently disabled itself published
    // an empty set) deletes the records and every importer drops the export; not starting
    // at all stops the heartbeat, and every importer withdraws c3.
    let set = ClusterSet::from_env().await?;
    let c3 = &set.members[2];
    let ns = set.namespace("nocrd").await?;
    deploy_and_export(c3, &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    settled_snapshot(&set, &ns.name, "hello").await?;
    let claim = settled_claim(&set, "c3").await?;
    // c3's own ServiceImport cannot be read while its CRD is not served: in c3 the derived
    // Service and the MCS slices stand for it.
    let others = {
        let mut others = set.clone();
        others.members.truncate(2);
        others
    };
    let held = || async {
        let mut held = uids(&others, &ns.name, "hello").await?;
        held.extend(core_uids(c3, &ns.name, "hello").await?);
        anyhow::Ok(held)
    };
    let before = held().await?;
    let served_again = {
        let set = set.clone();
        Undo::new(move || {
            let _ = serve_mcs_crds(&set, &set.members[2], true);
        })
    };
    let _agent = Undo::new(|| {
        let _ = fixtures::agents("start", &["c3"]);
    });
    serve_mcs_crds(&set, c3, false)?;
    for phase in ["running", "restarted"] {
        if phase == "restarted" {
            // Not ready while its MCS watches cannot list: the Pod says something is wrong.
            fixtures::agents_unready("restart", &["c3"])?;
        }
        let beats = beats_over(&set, "c3", GRACE + Duration::from_secs(6)).await?;
        assert!(
            beats.len() >= 6 && beats.windows(2).all(|w| w[1] > w[0]),
            "{phase}: c3's heartbeat stopped: {beats:?}"
        );
        let (_, now_claimed, _) = heartbeat(&set, "c3").await?;
        assert_eq!(
            now_claimed.split_once(':').map(|c| c.1),
            claim.split_once(':').map(|c| c.1),
            "{phase}: c3 claims something else"
        );
        assert_eq!(
            held().await?,
            before,
            "{phase}: c3's export was withdrawn or rewritten somewhere"
        );
    }
    drop(served_again);
    // Served again: the agent lists and carries on, nothing changes anywhere.
    tokio::time::sleep(GRACE).await;
    assert_eq!(held().await?, before);
    ns.cleanup().await
}
