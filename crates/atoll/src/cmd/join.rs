//! `atoll join` and `atoll leave`: admit a member cluster to the ClusterSet (its hub namespace,
//! least-privilege hub credentials, ClusterProperties, ClusterProfile) or take it out again. What
//! to create and whether joining is allowed is decided in `atoll_core::membership`; this module
//! reads, asks and applies. Every check runs before the first write, so a refused join changes
//! nothing.

use std::fmt::Debug;
use std::path::PathBuf;

use anyhow::{Context, bail};
use atoll_api::about::v1beta1::ClusterProperty;
use atoll_api::hub::{self, NamespacePolicy, NamespacePolicySpec};
use atoll_api::inventory::{ClusterProfile, ClusterProfileStatus, Property};
use atoll_api::labels::{CLUSTER_ID_PROPERTY, CLUSTERSET_PROPERTY};
use atoll_core::ClusterId;
use atoll_core::membership::{
    self, AGENT_ACCOUNT, HUB_SECRET, INVENTORY_NAMESPACE, JoinFacts, SYSTEM_NAMESPACE,
};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::kubeconfig::{ClusterHelp, HubHelp, MemberAndHub, client};

/// Field manager of what `atoll join` writes.
const MANAGER: &str = "atoll-join";

/// Where the member and the hub are, as the flags say.
#[derive(Debug, Clone)]
pub struct Joining;

impl ClusterHelp for Joining {
    const KUBECONFIG: &'static str =
        "Kubeconfig of the member cluster (default: KUBECONFIG or ~/.kube/config)";
    const CONTEXT: &'static str = "Context of the member in --kubeconfig";
}

impl HubHelp for Joining {
    const HUB_KUBECONFIG: &'static str = "Kubeconfig of the hub (default: --kubeconfig)";
}

type Clusters = MemberAndHub<Joining>;

/// Arguments of `atoll join`.
#[derive(Debug, clap::Args)]
pub struct JoinArgs {
    #[command(flatten)]
    pub clusters: Clusters,
    /// Cluster id to use when the member has no `cluster.clusterset.k8s.io` ClusterProperty
    /// yet (default: derived from its kube-system namespace uid).
    #[arg(long)]
    pub cluster_id: Option<String>,
    /// Name of the ClusterSet (a label value: 1 to 63 characters).
    #[arg(long, default_value = "clusterset")]
    pub clusterset: String,
    /// Lifetime of the hub token written for the agent, in seconds, 600 to 2^32 (the hub may
    /// shorten it; re-run `atoll join` to renew).
    #[arg(long, default_value_t = 365 * 24 * 3600)]
    pub token_seconds: i64,
    /// Create the agent's ServiceAccount and RBAC in the member. Say false where the Helm chart
    /// installed them (it does by default), so that the chart's RBAC is the one in force.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub member_rbac: bool,
    /// The hub's API as the member's agent reaches it, https://<host>[:<port>] (default: the
    /// server of the hub context). Give it where that differs from what this kubeconfig says:
    /// a hub reached here through 127.0.0.1 (a tunnel, a port forward, a kind cluster).
    #[arg(long)]
    pub hub_server: Option<String>,
    /// Also apply a ResourceQuota in the member's hub namespace (object counts matching the
    /// importers' caps, so the hub refuses the excess on the member's own write). The hub's
    /// quota controller must count the hub.atoll.dev objects first: until it has, the hub
    /// refuses every record the member writes, so `atoll join` waits up to a minute for the
    /// count and removes the quota again, saying so, if it does not come.
    #[arg(long, default_value_t = false, action = clap::ArgAction::Set)]
    pub hub_quota: bool,
}

/// How long `atoll join --hub-quota` waits for the hub to count the quota's objects.
const QUOTA_COUNTED: std::time::Duration = std::time::Duration::from_secs(60);

/// Applies `quota` in `namespace` on the hub and waits until the hub has counted every object
/// kind it limits; removes it again if that does not happen within [`QUOTA_COUNTED`].
async fn apply_counted_quota(
    hub: &Client,
    namespace: &str,
    quota: &ResourceQuota,
) -> anyhow::Result<()> {
    let api = ns::<ResourceQuota>(hub, namespace);
    apply(&api, quota).await?;
    let hard: Vec<String> = quota
        .spec
        .as_ref()
        .and_then(|s| s.hard.as_ref())
        .map(|h| h.keys().cloned().collect())
        .unwrap_or_default();
    let name = membership::QUOTA;
    let started = std::time::Instant::now();
    while started.elapsed() < QUOTA_COUNTED {
        let counted = api
            .get_opt(name)
            .await?
            .and_then(|q| q.status)
            .and_then(|s| s.used)
            .is_some_and(|used| hard.iter().all(|k| used.contains_key(k)));
        if counted {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    }
    api.delete(name, &Default::default()).await?;
    anyhow::bail!(
        "the hub has not counted the objects of ResourceQuota {namespace}/{name} within {} s (its quota controller must know the hub.atoll.dev CRDs; until it counts them the hub refuses every record of the member): the quota is removed again; re-run `atoll join --hub-quota true` later",
        QUOTA_COUNTED.as_secs()
    )
}

/// Arguments of `atoll leave`.
#[derive(Debug, clap::Args)]
pub struct LeaveArgs {
    #[command(flatten)]
    pub clusters: Clusters,
}

struct Connected {
    member: Client,
    hub: Client,
    hub_kubeconfig: Option<PathBuf>,
}

async fn connect(clusters: &Clusters) -> anyhow::Result<Connected> {
    let member = clusters.member.client("member").await?;
    let hub_kubeconfig = clusters
        .hub_kubeconfig
        .clone()
        .or_else(|| clusters.member.kubeconfig.clone());
    let hub = client(
        hub_kubeconfig.as_ref(),
        clusters.hub_context.as_ref(),
        "hub",
    )
    .await?;
    Ok(Connected {
        member,
        hub,
        hub_kubeconfig,
    })
}

async fn apply<K>(api: &Api<K>, object: &K) -> anyhow::Result<K>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply(MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {} {name}", K::kind(&())))
}

fn ns<K>(client: &Client, namespace: &str) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    K::DynamicType: Default,
{
    Api::namespaced(client.clone(), namespace)
}

async fn property(member: &Client, name: &str) -> anyhow::Result<Option<String>> {
    let api: Api<ClusterProperty> = Api::all(member.clone());
    let found = api.get_opt(name).await.with_context(|| {
        format!(
            "reading the ClusterProperty {name} (are Atoll's CRDs installed? `atoll crds | kubectl apply -f -`)"
        )
    })?;
    Ok(found.and_then(|p| p.spec).map(|s| s.value))
}

async fn kube_system_uid(member: &Client) -> anyhow::Result<String> {
    Api::<Namespace>::all(member.clone())
        .get("kube-system")
        .await
        .context("reading the member's kube-system namespace")?
        .metadata
        .uid
        .context("the member's kube-system namespace has no uid")
}

/// Reads everything the join decision needs; writes nothing.
async fn facts(c: &Connected, args: &JoinArgs) -> anyhow::Result<(JoinFacts, ClusterId)> {
    let mut facts = JoinFacts {
        member_uid: kube_system_uid(&c.member).await?,
        id_property: property(&c.member, CLUSTER_ID_PROPERTY).await?,
        clusterset_property: property(&c.member, CLUSTERSET_PROPERTY).await?,
        requested_id: args.cluster_id.clone(),
        clusterset: args.clusterset.clone(),
        hub_namespace_owner: None,
    };
    let id = membership::choose_id(&facts)?;
    let hub_namespace = Api::<Namespace>::all(c.hub.clone())
        .get_opt(&hub::namespace_for(id.as_str()))
        .await
        .context("reading the hub")?;
    facts.hub_namespace_owner = hub_namespace.map(|n| {
        n.metadata
            .annotations
            .and_then(|a| a.get(hub::ANNOTATION_MEMBER_UID).cloned())
    });
    membership::check_join(&facts, &id)?;
    Ok((facts, id))
}

/// A self-contained kubeconfig for the hub: its server and CA from the admin's kubeconfig, and
/// the member's token.
fn hub_kubeconfig(
    path: Option<&PathBuf>,
    context: Option<&String>,
    server_override: Option<&String>,
    token: &str,
) -> anyhow::Result<String> {
    let file = match path {
        Some(p) => Kubeconfig::read_from(p)?,
        None => Kubeconfig::read()?,
    };
    let context_name = context
        .cloned()
        .or_else(|| file.current_context.clone())
        .context("the hub kubeconfig has no current context; pass --hub-context")?;
    let cluster_name = file
        .contexts
        .iter()
        .find(|c| c.name == context_name)
        .and_then(|c| c.context.as_ref())
        .map(|c| c.cluster.clone())
        .with_context(|| format!("no context {context_name} in the hub kubeconfig"))?;
    let cluster = file
        .clusters
        .iter()
        .find(|c| c.name == cluster_name)
        .and_then(|c| c.cluster.clone())
        .with_context(|| format!("no cluster {cluster_name} in the hub kubeconfig"))?;
    let server = match server_override {
        Some(server) => server.clone(),
        None => cluster
            .server
            .clone()
            .context("the hub cluster has no server")?,
    };
    let ca =
        match (
            &cluster.certificate_authority_data,
            &cluster.certificate_authority,
        ) {
            (Some(data), _) => Some(data.clone()),
            (None, Some(file)) => Some(data_encoding::BASE64.encode(
                &std::fs::read(file).with_context(|| format!("reading the hub CA {file}"))?,
            )),
            (None, None) => None,
        };
    let mut entry = serde_json::json!({ "server": server });
    if let Some(ca) = ca {
        entry["certificate-authority-data"] = ca.into();
    }
    if cluster.insecure_skip_tls_verify == Some(true) {
        entry["insecure-skip-tls-verify"] = true.into();
    }
    let config = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{ "name": "hub", "cluster": entry }],
        "users": [{ "name": "atoll-agent", "user": { "token": token } }],
        "contexts": [{ "name": "hub", "context": { "cluster": "hub", "user": "atoll-agent" } }],
        "current-context": "hub",
    });
    Ok(serde_json::to_string_pretty(&config)?)
}

/// The member's ClusterProperties as ClusterProfile properties (values longer than the
/// ClusterProfile schema allows are left out, with a warning).
pub async fn profile_properties(member: &Client) -> anyhow::Result<Vec<Property>> {
    let list = Api::<ClusterProperty>::all(member.clone())
        .list(&Default::default())
        .await
        .context("listing the member's ClusterProperties")?;
    let now = Time(k8s_openapi::jiff::Timestamp::now());
    Ok(atoll_core::membership::mirrored_properties(
        list.items
            .iter()
            .filter_map(|p| Some((p.metadata.name.as_deref()?, p.spec.as_ref()?.value.as_str()))),
        &now,
    ))
}

/// `atoll join`.
pub async fn join(args: JoinArgs) -> anyhow::Result<()> {
    // The flags first: a bad one must fail before anything is written on the hub.
    membership::check_join_flags(&args.clusterset, args.token_seconds)?;
    if let Some(server) = &args.hub_server {
        membership::check_hub_server(server)?;
    }
    let c = connect(&args.clusters).await?;
    let (facts, id) = facts(&c, &args).await?;
    let rejoin = facts.hub_namespace_owner.is_some();
    let objects = membership::hub_objects(&id, &facts.member_uid, &args.clusterset);
    let hub_ns = hub::namespace_for(id.as_str());
    let h = &c.hub;
    apply(&Api::all(h.clone()), &objects.namespace).await?;
    apply(&ns::<ServiceAccount>(h, &hub_ns), &objects.account).await?;
    apply(&ns::<Role>(h, &hub_ns), &objects.writer).await?;
    apply(&ns::<RoleBinding>(h, &hub_ns), &objects.writer_binding).await?;
    if args.hub_quota {
        apply_counted_quota(h, &hub_ns, &objects.quota).await?;
    }
    apply(&Api::all(h.clone()), &objects.reader).await?;
    apply(&Api::all(h.clone()), &objects.reader_binding).await?;
    apply(&Api::all(h.clone()), &objects.inventory).await?;
    apply(
        &ns::<ClusterProfile>(h, INVENTORY_NAMESPACE),
        &objects.profile,
    )
    .await
    .context("is the ClusterProfile CRD installed on the hub? `atoll crds | kubectl apply -f -`")?;
    apply(&ns::<Role>(h, INVENTORY_NAMESPACE), &objects.profile_role).await?;
    apply(
        &ns::<RoleBinding>(h, INVENTORY_NAMESPACE),
        &objects.profile_binding,
    )
    .await?;
    ensure_namespace_policy(h).await?;

    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(args.token_seconds),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    let token = ns::<ServiceAccount>(h, &hub_ns)
        .create_token_request(AGENT_ACCOUNT, &PostParams::default(), &request)
        .await
        .context("requesting the member's hub token")?
        .status
        .context("the hub answered the token request without a token")?
        .token;
    let kubeconfig = hub_kubeconfig(
        c.hub_kubeconfig.as_ref(),
        args.clusters.hub_context.as_ref(),
        args.hub_server.as_ref(),
        &token,
    )?;

    let member = membership::member_objects(&id, &args.clusterset, &kubeconfig);
    let m = &c.member;
    if facts.id_property.is_none() {
        apply(&Api::all(m.clone()), &member.id_property).await?;
    }
    apply(&Api::all(m.clone()), &member.clusterset_property).await?;
    apply(&Api::all(m.clone()), &member.namespace).await?;
    apply(&ns::<Secret>(m, SYSTEM_NAMESPACE), &member.secret).await?;
    if args.member_rbac {
        apply(&ns::<ServiceAccount>(m, SYSTEM_NAMESPACE), &member.account).await?;
        apply(&Api::all(m.clone()), &member.role).await?;
        apply(&Api::all(m.clone()), &member.binding).await?;
        apply(&ns::<Role>(m, SYSTEM_NAMESPACE), &member.secret_role).await?;
        apply(
            &ns::<RoleBinding>(m, SYSTEM_NAMESPACE),
            &member.secret_binding,
        )
        .await?;
    }

    let status = serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ClusterProfile",
        "status": ClusterProfileStatus { properties: profile_properties(m).await?, ..Default::default() },
    });
    ns::<ClusterProfile>(h, INVENTORY_NAMESPACE)
        .patch_status(
            id.as_str(),
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&status),
        )
        .await
        .context("writing the ClusterProfile status")?;

    println!(
        "{} cluster {id} to ClusterSet {}:",
        if rejoin { "re-joined" } else { "joined" },
        args.clusterset
    );
    println!(
        "  hub:    namespace {hub_ns} (records), ServiceAccount {hub_ns}/{AGENT_ACCOUNT} with write access to {hub_ns} only and read access to members' records,"
    );
    println!("          ClusterProfile {INVENTORY_NAMESPACE}/{id}");
    println!(
        "  member: ClusterProperties {CLUSTER_ID_PROPERTY}={id} and {CLUSTERSET_PROPERTY}={}, Secret {SYSTEM_NAMESPACE}/{HUB_SECRET} (hub kubeconfig),",
        args.clusterset
    );
    println!("          ServiceAccount {SYSTEM_NAMESPACE}/{AGENT_ACCOUNT} for the agent");
    Ok(())
}

/// Creates the ClusterSet's namespace policy with the default exclusions unless it exists (an
/// existing policy is the administrator's and is never changed).
async fn ensure_namespace_policy(hub: &Client) -> anyhow::Result<()> {
    let api: Api<NamespacePolicy> = Api::all(hub.clone());
    let policy = NamespacePolicy::new(hub::NAMESPACE_POLICY, NamespacePolicySpec::default());
    match api.create(&PostParams::default(), &policy).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).context("creating the ClusterSet's namespace policy"),
    }
}

async fn delete<K>(api: &Api<K>, name: &str) -> anyhow::Result<bool>
where
    K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug,
{
    match api.delete(name, &DeleteParams::background()).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(false),
        Err(e) => Err(e).with_context(|| format!("deleting {} {name}", K::kind(&()))),
    }
}

/// Claims, on the member's heartbeat Lease, that it publishes nothing: importers then drop its
/// records as soon as they are deleted, instead of holding them for the grace (which protects
/// against a hub that loses them).
async fn claim_nothing(hub: &Client, namespace: &str) -> anyhow::Result<()> {
    use atoll_api::hub::{CLAIM_ANNOTATION, LEASE_NAME};
    use atoll_core::liveness::{Claim, digest, next_epoch};
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(hub.clone(), namespace);
    let Some(lease) = leases.get_opt(LEASE_NAME).await? else {
        return Ok(());
    };
    let last = lease
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(CLAIM_ANNOTATION))
        .and_then(|v| Claim::parse(v))
        .map_or(0, |c| c.epoch);
    let now = u64::try_from(k8s_openapi::jiff::Timestamp::now().as_millisecond()).unwrap_or(0);
    let claim = Claim {
        epoch: next_epoch(last, now),
        digest: digest(std::iter::empty()),
    };
    let patch =
        serde_json::json!({ "metadata": { "annotations": { CLAIM_ANNOTATION: claim.encode() } } });
    leases
        .patch(LEASE_NAME, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .context("claiming an empty publication on the member's heartbeat Lease")?;
    Ok(())
}

/// `atoll leave`.
pub async fn leave(args: LeaveArgs) -> anyhow::Result<()> {
    let c = connect(&args.clusters).await?;
    let Some(id) = property(&c.member, CLUSTER_ID_PROPERTY).await? else {
        bail!("this cluster has no ClusterProperty {CLUSTER_ID_PROPERTY}: it is not a member");
    };
    // A reserved id (`inventory` would name the namespace of every ClusterProfile) is never
    // acted on: leaving would delete what belongs to the whole ClusterSet.
    let id = ClusterId::new(&id).with_context(|| {
        format!(
            "the member's cluster id {:?}; refusing to remove anything on the hub",
            atoll_core::text::printable(&id)
        )
    })?;
    let uid = kube_system_uid(&c.member).await?;
    let hub_ns = hub::namespace_for(id.as_str());
    let owner = Api::<Namespace>::all(c.hub.clone())
        .get_opt(&hub_ns)
        .await?
        .map(|n| {
            n.metadata
                .annotations
                .unwrap_or_default()
                .get(hub::ANNOTATION_MEMBER_UID)
                .cloned()
        });
    if let Some(owner) = &owner
        && owner.as_deref() != Some(uid.as_str())
    {
        bail!(
            "the hub namespace {hub_ns} belongs to another cluster (kube-system uid {}); refusing to remove it",
            owner.as_deref().unwrap_or("unknown")
        );
    }
    let h = &c.hub;
    let objects = membership::hub_objects(&id, &uid, "");
    claim_nothing(h, &hub_ns).await?;
    // The hub namespace holds the member's records, endpoint copies and credentials: deleting
    // it withdraws its services from every importer.
    delete(&Api::<Namespace>::all(h.clone()), &hub_ns).await?;
    let binding = objects.reader_binding.metadata.name.unwrap_or_default();
    delete(&Api::<ClusterRoleBinding>::all(h.clone()), &binding).await?;
    delete(&ns::<ClusterProfile>(h, INVENTORY_NAMESPACE), id.as_str()).await?;
    let role = objects.profile_role.metadata.name.unwrap_or_default();
    delete(&ns::<RoleBinding>(h, INVENTORY_NAMESPACE), &role).await?;
    delete(&ns::<Role>(h, INVENTORY_NAMESPACE), &role).await?;
    let m = &c.member;
    delete(&ns::<Secret>(m, SYSTEM_NAMESPACE), HUB_SECRET).await?;
    delete(&Api::<ClusterProperty>::all(m.clone()), CLUSTERSET_PROPERTY).await?;
    println!(
        "cluster {id} left the ClusterSet: removed hub namespace {hub_ns}, its credentials and ClusterProfile {INVENTORY_NAMESPACE}/{id}, the Secret {SYSTEM_NAMESPACE}/{HUB_SECRET} and the ClusterProperty {CLUSTERSET_PROPERTY}; its id property stays"
    );
    Ok(())
}
