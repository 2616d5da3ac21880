//! The agent's identity in a member is minimal. The local ClusterSet runs every agent with a
//! token of the ServiceAccount `atoll-system/atoll-agent` bound to the Helm chart's RBAC, so
//! the rest of the e2e suite proves that RBAC is sufficient; these tests prove it is also
//! narrow: RBAC refuses (403) Secrets outside `atoll-system`, Pods, Deployments, changes to
//! Nodes (it may only read their addresses) and RBAC
//! objects, and the admission policy bound to the agent's identity refuses changing Services
//! and EndpointSlices Atoll does not manage, so a compromised agent cannot hijack a user's
//! Service. The agent's effective permissions (`kubectl auth can-i --list` as that identity)
//! are a reviewed, committed list (`charts/atoll/permissions/agent.txt`) compared here, so any
//! widening is a visible diff. `ATOLL_UPDATE_PERMISSIONS=1` rewrites the list.

use std::path::PathBuf;

use atoll_testing::ClusterSet;
use atoll_testing::fixtures;
use atoll_testing::mcs::HELLO_PORTS;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, Config};

fn agent_kubeconfig(set: &ClusterSet, cluster: &str) -> PathBuf {
    set.kubeconfig
        .with_file_name(format!("agent-{cluster}.kubeconfig"))
}

/// A client for c1 with the agent's own credentials (as `hack/agents.sh` runs it).
async fn agent_client(set: &ClusterSet) -> anyhow::Result<Client> {
    let file = kube::config::Kubeconfig::read_from(agent_kubeconfig(set, "c1"))?;
    let config = Config::from_custom_kubeconfig(file, &Default::default()).await?;
    Ok(Client::try_from(config)?)
}

fn status_code<T>(result: Result<T, kube::Error>) -> Option<u16> {
    match result {
        Ok(_) => Some(200),
        Err(kube::Error::Api(e)) => Some(e.code),
        Err(_) => None,
    }
}

#[tokio::test]
async fn rbac_refuses_the_agent_everything_it_does_not_need() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let agent = agent_client(&set).await?;
    let lp = ListParams::default();
    let refused = [
        (
            "list Secrets in kube-system",
            status_code(Api::<Secret>::namespaced(agent.clone(), "kube-system").list(&lp).await),
        ),
        (
            "list Secrets in default",
            status_code(Api::<Secret>::namespaced(agent.clone(), "default").list(&lp).await),
        ),
        (
            "list Secrets everywhere",
            status_code(Api::<Secret>::all(agent.clone()).list(&lp).await),
        ),
        (
            "list Pods",
            status_code(Api::<Pod>::all(agent.clone()).list(&lp).await),
        ),
        (
            "list Deployments",
            status_code(Api::<Deployment>::all(agent.clone()).list(&lp).await),
        ),
        (
            // The agent reads Node addresses (to refuse endpoints at them), never changes Nodes.
            "delete a Node",
            status_code(
                Api::<Node>::all(agent.clone())
                    .delete("atoll-e2e-probe", &DeleteParams::default())
                    .await,
            ),
        ),
        (
            "list ClusterRoles",
            status_code(Api::<ClusterRole>::all(agent.clone()).list(&lp).await),
        ),
        (
            "list ClusterRoleBindings",
            status_code(Api::<ClusterRoleBinding>::all(agent.clone()).list(&lp).await),
        ),
        (
            "list Roles",
            status_code(Api::<Role>::all(agent.clone()).list(&lp).await),
        ),
        (
            "create a RoleBinding in atoll-system",
            status_code(
                Api::<RoleBinding>::namespaced(agent.clone(), "atoll-system")
                    .create(
                        &PostParams::default(),
                        &serde_json::from_value(serde_json::json!({
                            "metadata": {"name": "escalate"},
                            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
                            "subjects": [{"kind": "ServiceAccount", "name": "atoll-agent", "namespace": "atoll-system"}]
                        }))?,
                    )
                    .await,
            ),
        ),
    ];
    let wrong: Vec<_> = refused
        .iter()
        .filter(|(_, code)| *code != Some(403))
        .collect();
    assert!(
        wrong.is_empty(),
        "the agent's identity must get 403 for these: {wrong:?}"
    );
    // What it needs still works: the hub credentials Secret, and no other Secret there.
    let system = Api::<Secret>::namespaced(agent.clone(), "atoll-system");
    assert_eq!(status_code(system.get("atoll-hub").await), Some(200));
    assert_eq!(status_code(system.list(&lp).await), Some(403));
    Ok(())
}

#[tokio::test]
async fn the_admission_policy_keeps_the_agent_off_users_services_and_slices() -> anyhow::Result<()>
{
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xconfined").await?;
    let admin = &set.members[0].client;
    // A user's Service and EndpointSlice (not Atoll's).
    fixtures::apply_service(
        admin,
        &fixtures::service(&ns.name, "users", "users", HELLO_PORTS, false),
    )
    .await?;
    let user_slice: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "users-manual", "namespace": ns.name,
                     "labels": {"kubernetes.io/service-name": "users"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["10.9.9.9"]}]
    }))?;
    Api::<EndpointSlice>::namespaced(admin.clone(), &ns.name)
        .create(&PostParams::default(), &user_slice)
        .await?;

    let agent = agent_client(&set).await?;
    let services = Api::<Service>::namespaced(agent.clone(), &ns.name);
    let slices = Api::<EndpointSlice>::namespaced(agent.clone(), &ns.name);
    let pp = PatchParams::default();
    fn denied<T>(result: Result<T, kube::Error>) -> bool {
        match result {
            Err(kube::Error::Api(e)) => {
                e.code == 403 && e.message.contains(atoll_core::admission::AGENT_MESSAGE)
            }
            _ => false,
        }
    }
    let retarget = serde_json::json!({"spec": {"selector": {"app": "attacker"}}});
    assert!(
        denied(services.patch("users", &pp, &Patch::Merge(&retarget)).await),
        "changing a user's Service"
    );
    let take_over = serde_json::json!({"metadata": {"labels": {
        atoll_core::import::MANAGED_BY_LABEL: atoll_core::import::MANAGED_BY_VALUE}}});
    assert!(
        denied(
            services
                .patch("users", &pp, &Patch::Merge(&take_over))
                .await
        ),
        "labelling a user's Service as Atoll's to take it over"
    );
    assert!(
        denied(services.delete("users", &DeleteParams::default()).await),
        "deleting a user's Service"
    );
    let hijack = serde_json::json!({"endpoints": [{"addresses": ["10.6.6.6"]}]});
    assert!(
        denied(
            slices
                .patch("users-manual", &pp, &Patch::Merge(&hijack))
                .await
        ),
        "changing a user's EndpointSlice"
    );
    assert!(
        denied(
            slices
                .delete("users-manual", &DeleteParams::default())
                .await
        ),
        "deleting a user's EndpointSlice"
    );
    let unlabelled = fixtures::service(&ns.name, "sneaky", "users", HELLO_PORTS, false);
    assert!(
        denied(services.create(&PostParams::default(), &unlabelled).await),
        "creating a Service that is not Atoll's"
    );
    // Atoll's own objects stay the agent's to manage.
    let mut own = fixtures::service(&ns.name, "derived-test", "x", HELLO_PORTS, false);
    own.metadata.labels = Some(
        [(
            atoll_core::import::MANAGED_BY_LABEL.to_owned(),
            atoll_core::import::MANAGED_BY_VALUE.to_owned(),
        )]
        .into(),
    );
    services.create(&PostParams::default(), &own).await?;
    services
        .delete("derived-test", &DeleteParams::default())
        .await?;
    // And the user's objects are as the user left them.
    let kept = Api::<Service>::namespaced(admin.clone(), &ns.name)
        .get("users")
        .await?;
    assert_eq!(
        kept.spec
            .and_then(|s| s.selector)
            .and_then(|s| s.get("app").cloned()),
        Some("users".to_owned())
    );
    ns.cleanup().await
}

/// `kubectl auth can-i --list` as the agent, in the namespaces whose rules differ.
fn effective_permissions(set: &ClusterSet) -> anyhow::Result<String> {
    let kubeconfig = agent_kubeconfig(set, "c1");
    let mut out = String::new();
    for namespace in ["atoll-system", "default"] {
        let output = std::process::Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .args(["auth", "can-i", "--list", "--namespace", namespace])
            .output()?;
        anyhow::ensure!(
            output.status.success(),
            "kubectl auth can-i --list failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        out.push_str(&format!("# namespace {namespace}\n"));
        // Columns are padded to the widest entry: normalise whitespace so the list only
        // changes when a permission does.
        let mut lines: Vec<String> = String::from_utf8(output.stdout)?
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let header = lines.remove(0);
        lines.sort();
        out.push_str(&header);
        out.push('\n');
        for line in lines {
            out.push_str(&line);
            out.push('\n');
        }
    }
    Ok(out)
}

#[tokio::test]
async fn the_agents_effective_permissions_are_the_reviewed_list() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let got = effective_permissions(&set)?;
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../charts/atoll/permissions/agent.txt");
    if std::env::var_os("ATOLL_UPDATE_PERMISSIONS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap_or(&path))?;
        std::fs::write(&path, &got)?;
    }
    let want = std::fs::read_to_string(&path)
        .map_err(|e| anyhow::anyhow!("reading {}: {e}", path.display()))?;
    let added: Vec<&str> = got
        .lines()
        .filter(|l| !want.lines().any(|w| w == *l))
        .collect();
    let removed: Vec<&str> = want
        .lines()
        .filter(|l| !got.lines().any(|g| g == *l))
        .collect();
    assert!(
        added.is_empty() && removed.is_empty(),
        "the agent's effective permissions differ from the reviewed list {}:\n  added: {added:#?}\n  removed: {removed:#?}\nreview the change, then rerun with ATOLL_UPDATE_PERMISSIONS=1",
        path.display()
    );
    Ok(())
}
