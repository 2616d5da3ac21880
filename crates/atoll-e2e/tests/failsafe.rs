//! Fail-safe start: an agent whose hub credentials cannot list the hub's records writes and
//! deletes nothing, says which watch it waits for, and converges once it may list. Runs in its
//! own test binary because it replaces c3's agent for a while.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use anyhow::Context;
use atoll_testing::mcs::{
    HELLO_PORTS, deploy_and_export, deploy_service, import_snapshot, settled_snapshot,
    wait_import_clusters,
};
use atoll_testing::{ClusterSet, Undo, fixtures, http_get, metric, wait_for};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use kube::api::PostParams;
use kube::config::{AuthInfo, Kubeconfig, NamedAuthInfo, NamedContext};
use kube::{Api, Client};

/// Admin port of the restricted agent: one the port scheme gives no cluster.
const ADMIN_PORT: u16 = atoll_testing::ports::SPARE_AGENT_ADMIN_PORT;
const ACCOUNT: &str = "atoll-failsafe-test";

/// A ServiceAccount on the hub without any permission, and a kubeconfig that uses its token.
async fn restricted_hub_kubeconfig(set: &ClusterSet, hub: &Client) -> anyhow::Result<PathBuf> {
    let accounts: Api<ServiceAccount> = Api::namespaced(hub.clone(), "default");
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(ACCOUNT.to_owned());
    match accounts.create(&PostParams::default(), &account).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 => {}
        Err(e) => return Err(e).context("creating the test ServiceAccount on the hub"),
    }
    let token = atoll_testing::hub_member::token(&accounts, ACCOUNT).await?;
    let mut file = Kubeconfig::read_from(&set.kubeconfig)?;
    let hub_context = file
        .contexts
        .iter()
        .find(|c| c.name == set.members[0].context)
        .and_then(|c| c.context.clone())
        .context("hub context missing")?;
    file.auth_infos.push(NamedAuthInfo {
        name: ACCOUNT.to_owned(),
        auth_info: Some(AuthInfo {
            token: Some(token.into()),
            ..Default::default()
        }),
        ..Default::default()
    });
    file.contexts.push(NamedContext {
        name: ACCOUNT.to_owned(),
        context: Some(kube::config::Context {
            user: Some(ACCOUNT.to_owned()),
            ..hub_context
        }),
        ..Default::default()
    });
    file.current_context = Some(ACCOUNT.to_owned());
    let path =
        std::env::temp_dir().join(format!("atoll-failsafe-{}.kubeconfig", std::process::id()));
    std::fs::write(&path, serde_json::to_string(&file)?)?;
    Ok(path)
}

/// Starts `atoll agent` for c3 with the given hub kubeconfig.
fn start_agent(set: &ClusterSet, hub_kubeconfig: &PathBuf) -> anyhow::Result<Child> {
    let binary = std::env::var_os("ATOLL")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/debug/atoll")
        });
    let log = std::env::temp_dir().join("atoll-failsafe-agent.log");
    Command::new(&binary)
        // In c3 as c3's agent (hack/env-up.sh wrote its kubeconfig beside the ClusterSet's).
        .args(["agent", "--kubeconfig"])
        .arg(set.kubeconfig.with_file_name("agent-c3.kubeconfig"))
        .arg("--hub-kubeconfig")
        .arg(hub_kubeconfig)
        .args(["--admin-address", &format!("127.0.0.1:{ADMIN_PORT}")])
        .env("NO_COLOR", "1")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log)?)
        .spawn()
        .with_context(|| format!("starting {}", binary.display()))
}

fn binding() -> ClusterRoleBinding {
    let mut binding = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".to_owned(),
            kind: "ClusterRole".to_owned(),
            name: "cluster-admin".to_owned(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".to_owned(),
            name: ACCOUNT.to_owned(),
            namespace: Some("default".to_owned()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(ACCOUNT.to_owned());
    binding
}

#[tokio::test]
async fn an_agent_that_cannot_list_the_hub_writes_nothing_until_it_can() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let hub = set.members[0].client.clone();
    let ns = set.namespace("failsafe").await?;
    // c3 imports a service: a careless agent that saw an empty hub would delete it.
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    for member in &set.members {
        wait_import_clusters(member, &ns.name, "hello", 1).await?;
    }
    let before = settled_snapshot(&set, &ns.name, "hello").await?;

    // A binding left by an interrupted earlier run would grant the permission up front.
    match Api::<ClusterRoleBinding>::all(hub.clone())
        .delete(ACCOUNT, &Default::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => {}
        Err(e) => return Err(e).context("removing a leftover test binding"),
    }
    let kubeconfig = restricted_hub_kubeconfig(&set, &hub).await?;
    fixtures::agents("stop", &["c3"])?;
    let _restore = Undo::new(|| {
        let _ = fixtures::agents("start", &["c3"]);
    });
    anyhow::ensure!(
        std::net::TcpStream::connect(("127.0.0.1", ADMIN_PORT)).is_err(),
        "something already listens on 127.0.0.1:{ADMIN_PORT} (an agent left by an interrupted run?)"
    );
    let mut agent = start_agent(&set, &kubeconfig)?;
    let _stop = Undo::new(move || {
        let _ = agent.kill();
        let _ = agent.wait();
    });

    // 30 s without permission to list: not ready, naming the hub watches; no write at all, and
    // c3's imported objects exactly as they were.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let (code, body) = http_get(ADMIN_PORT, "/readyz").await?;
    assert_eq!(code, 503, "/readyz: {body}");
    assert!(
        body.contains("hub ExportedServices"),
        "/readyz names the waiting watch: {body}"
    );
    assert_eq!(
        metric(ADMIN_PORT, "atoll_agent_api_writes_total").await?,
        0.0
    );
    assert_eq!(
        import_snapshot(&set, &ns.name, "hello").await?,
        before,
        "imports changed while the agent could not list the hub"
    );

    // Allowed to list: it converges, and c3 imports what was exported meanwhile.
    deploy_service(&set.members[0], &ns.name, "hello", 1, HELLO_PORTS, false).await?;
    fixtures::export(&set.members[0].client, &ns.name, "hello", &[]).await?;
    let bindings: Api<ClusterRoleBinding> = Api::all(hub.clone());
    bindings.create(&PostParams::default(), &binding()).await?;
    // Plain kubectl, not the test's client: a Drop cannot drive the test's async runtime.
    let kubeconfig_file = set.kubeconfig.clone();
    let hub_context = set.members[0].context.clone();
    let _unbind = Undo::new(move || {
        for object in [
            format!("clusterrolebinding/{ACCOUNT}"),
            format!("serviceaccount/{ACCOUNT}"),
        ] {
            let _ = Command::new("kubectl")
                .arg("--kubeconfig")
                .arg(&kubeconfig_file)
                .args([
                    "--context",
                    &hub_context,
                    "-n",
                    "default",
                    "delete",
                    "--ignore-not-found",
                    &object,
                ])
                .stdout(Stdio::null())
                .status();
        }
    });
    wait_for(
        "the restricted agent ready",
        Duration::from_secs(60),
        || async {
            let (code, body) = http_get(ADMIN_PORT, "/readyz").await?;
            Ok(if code == 200 { Ok(()) } else { Err(body) })
        },
    )
    .await?;
    wait_import_clusters(&set.members[2], &ns.name, "hello", 2).await?;
    let _ = std::fs::remove_file(&kubeconfig);
    ns.cleanup().await
}
