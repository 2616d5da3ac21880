//! `atoll status` and `atoll explain`: read-only looks at the ClusterSet from one member (and
//! its hub). Decisions about what is broken are made in `atoll_core::explain`; this module
//! reads and prints.

use std::collections::BTreeMap;

use anyhow::Context;
use atoll_agent::identity;
use atoll_api::hub::{
    self, ExportedService, LAST_ERROR_ANNOTATION, LEASE_NAME, NAMESPACE_POLICY, NamespacePolicy,
};
use atoll_api::labels;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::explain::{Facts, MemberView, explain};
use atoll_core::liveness::Verdict;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use serde::Serialize;

use super::kubeconfig::{ClusterHelp, HubHelp, MemberAndHub, client};

/// The member to look from and its hub, as the flags say.
#[derive(Debug, Clone)]
pub struct LookingFrom;

impl ClusterHelp for LookingFrom {
    const KUBECONFIG: &'static str = "Kubeconfig of the member to look from";
    const CONTEXT: &'static str = "Context of the member in --kubeconfig";
}

impl HubHelp for LookingFrom {
    const HUB_KUBECONFIG: &'static str =
        "Kubeconfig of the hub (default: the credentials `atoll join` stored in the member)";
}

/// Where to look.
#[derive(Debug, clap::Args)]
pub struct Target {
    #[command(flatten)]
    pub clusters: MemberAndHub<LookingFrom>,
    /// Namespace of the member's Atoll agent, where it keeps its liveness decisions.
    #[arg(long, default_value = "atoll-system")]
    pub agent_namespace: String,
    /// Accepted for compatibility and ignored: the verdicts shown are the agent's own, never
    /// recomputed from heartbeat ages.
    #[arg(long, hide = true)]
    pub heartbeat_seconds: Option<u64>,
    #[arg(long, hide = true)]
    pub member_grace_seconds: Option<u64>,
}

/// Output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// Arguments of `atoll status`.
#[derive(Debug, clap::Args)]
pub struct StatusArgs {
    #[command(flatten)]
    pub target: Target,
    #[arg(long, short, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    /// The agents' per-member caps, to show what they leave out.
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_RECORDS)]
    pub max_records_per_member: usize,
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_ENDPOINTS)]
    pub max_endpoints_per_member: usize,
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_PORTS)]
    pub max_ports_per_member: usize,
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_ENDPOINT_PORTS)]
    pub max_endpoint_ports_per_service: usize,
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_MEMBER_ENDPOINT_PORTS)]
    pub max_endpoint_ports_per_member: usize,
    #[arg(long, default_value_t = atoll_core::caps::Limits::DEFAULT_HUB_BYTES)]
    pub max_hub_bytes_per_member: usize,
}

/// Arguments of `atoll explain`.
#[derive(Debug, clap::Args)]
pub struct ExplainArgs {
    /// The service, as namespace/name.
    pub service: String,
    #[command(flatten)]
    pub target: Target,
    /// Other members to inspect (contexts of --kubeconfig), for their Services and exports.
    #[arg(long, value_delimiter = ',')]
    pub inspect_contexts: Vec<String>,
}

struct Clients {
    member: Client,
    id: String,
    hub: Client,
}

async fn connect(target: &Target) -> anyhow::Result<Clients> {
    let member = target.clusters.member.client("member").await?;
    let id = identity::cluster_id(&member).await?.to_string();
    let (hub, _) = super::agent::hub(&target.clusters, &member).await?;
    Ok(Clients { member, id, hub })
}

/// Each member with a heartbeat Lease on the hub, its last error annotation and how keeping its
/// liveness decisions stands (the Lease's renewTime is never compared with this machine's
/// clock: the verdicts are the agent's).
async fn heartbeats(hub: &Client) -> anyhow::Result<BTreeMap<String, (String, String)>> {
    let leases = Api::<Lease>::all(hub.clone())
        .list(&ListParams::default().fields(&format!("metadata.name={LEASE_NAME}")))
        .await
        .context("listing the members' heartbeat Leases on the hub")?;
    Ok(leases
        .items
        .into_iter()
        .filter_map(|l| {
            let cluster = l
                .namespace()?
                .strip_prefix(hub::NAMESPACE_PREFIX)?
                .to_owned();
            let error = l
                .annotations()
                .get(LAST_ERROR_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let kept = l
                .annotations()
                .get(hub::KEPT_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            Some((cluster, (error, kept)))
        })
        .collect())
}

/// The liveness decisions the member's agent keeps, if any can be read (a member whose agent
/// never judged a cluster stale or withdrawn keeps none).
async fn kept(member: &Client, namespace: &str) -> Option<atoll_core::liveness::Persisted> {
    let key = atoll_api::keys::ObjectKey::new(namespace, atoll_agent::kept::CONFIG_MAP);
    match atoll_agent::kept::look(member, &key).await {
        Ok(atoll_agent::kept::Stored::Found(kept, _)) => Some(kept),
        _ => None,
    }
}

/// A verdict as `atoll status` shows it.
fn verdict_text(verdict: &Verdict) -> String {
    let since = |t: &Option<Time>| {
        t.as_ref()
            .map_or(String::new(), |t| format!(" since {}", t.0))
    };
    match verdict {
        Verdict::Live => "live".to_owned(),
        Verdict::Stale(t) => format!("stale{}", since(t)),
        Verdict::Withdrawn(t) => format!("withdrawn{}", since(t)),
        Verdict::Unmatched(t) => format!("claim unmatched since {}", t.0),
    }
}

#[derive(Debug, Serialize)]
struct MemberRow {
    id: String,
    /// The verdict of the agent of the member looked from.
    state: String,
    heartbeat_lease: bool,
    exports: usize,
    last_error: String,
    /// How keeping its agent's liveness decisions stands (`kept`, `unread`, `failing ...`).
    kept_decisions: String,
    /// What of its publication this member's agent leaves out (`object (reason): why`).
    ignored: Vec<String>,
}

#[derive(Debug, Serialize)]
struct ImportRow {
    service: String,
    r#type: String,
    ips: Vec<String>,
    sources: Vec<String>,
    sources_condition: String,
}

#[derive(Debug, Serialize)]
struct Status {
    member: String,
    members: Vec<MemberRow>,
    imports: Vec<ImportRow>,
    /// Whether the member's CoreDNS forwards clusterset.local to Atoll, with what to do if not.
    cluster_dns: String,
}

/// What the member's CoreDNS Corefile (ConfigMap kube-system/coredns) says of clusterset.local.
/// Reading it needs more than the agent's permissions: an identity that cannot is told so.
async fn cluster_dns(member: &kube::Client) -> String {
    use k8s_openapi::api::core::v1::ConfigMap;
    let fix = "run `atoll coredns wire` (or install the chart with coredns.wire=true), or on managed clusters add the block `atoll coredns print` shows";
    match Api::<ConfigMap>::namespaced(member.clone(), "kube-system")
        .get_opt("coredns")
        .await
    {
        Ok(None) => "unknown: no ConfigMap kube-system/coredns (not CoreDNS, or managed DNS); check that clusterset.local names resolve in a pod".to_owned(),
        Ok(Some(map)) => {
            let text = map.data.and_then(|d| d.get("Corefile").cloned()).unwrap_or_default();
            match atoll_core::corefile::wired(&text) {
                Ok(Some(targets)) => format!("wired: CoreDNS forwards clusterset.local to {}", targets.join(" ")),
                Ok(None) => format!("NOT WIRED: CoreDNS does not forward clusterset.local to Atoll, so pods cannot resolve <svc>.<ns>.svc.clusterset.local; {fix}"),
                Err(e) => format!("broken: {e}"),
            }
        }
        Err(kube::Error::Api(e)) if e.code == 403 => {
            "unknown: this identity may not read kube-system/coredns".to_owned()
        }
        Err(e) => format!("unknown: reading kube-system/coredns failed: {e}"),
    }
}

/// `atoll status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let t = &args.target;
    let c = connect(t).await?;
    // Members are what the hub shows of them (member credentials may not list namespaces):
    // their heartbeats and their records.
    let records = Api::<ExportedService>::all(c.hub.clone())
        .list(&ListParams::default())
        .await?;
    let beats = heartbeats(&c.hub).await?;
    let kept = kept(&c.member, &t.agent_namespace).await;
    let mut exports: BTreeMap<String, usize> = beats.keys().map(|k| (k.clone(), 0)).collect();
    if let Some(k) = &kept {
        for cluster in k.sources.keys() {
            exports.entry(cluster.clone()).or_default();
        }
    }
    for r in &records.items {
        if let Some(id) = r
            .namespace()
            .and_then(|n| n.strip_prefix(hub::NAMESPACE_PREFIX).map(str::to_owned))
        {
            *exports.entry(id).or_default() += 1;
        }
    }
    let mut ignored = ignored_by_member(&c, &args, &records.items).await?;
    let members = exports
        .into_iter()
        .map(|(id, exports)| {
            let verdict = kept.as_ref().map_or(Verdict::Live, |k| k.verdict(&id));
            MemberRow {
                ignored: ignored.remove(&id).unwrap_or_default(),
                exports,
                state: verdict_text(&verdict),
                heartbeat_lease: beats.contains_key(&id),
                last_error: beats.get(&id).map(|b| b.0.clone()).unwrap_or_default(),
                kept_decisions: beats.get(&id).map(|b| b.1.clone()).unwrap_or_default(),
                id,
            }
        })
        .collect();
    let imports = Api::<ServiceImport>::all(c.member.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .map(|i| {
            let status = i.status.clone().unwrap_or_default();
            let spec = i.spec.clone();
            ImportRow {
                service: format!("{}/{}", i.namespace().unwrap_or_default(), i.name_any()),
                r#type: spec
                    .as_ref()
                    .map(|s| format!("{:?}", s.type_))
                    .unwrap_or_default(),
                ips: spec.map(|s| s.ips).unwrap_or_default(),
                sources: status.clusters.iter().map(|c| c.cluster.clone()).collect(),
                sources_condition: status
                    .conditions
                    .iter()
                    .find(|c| c.type_ == atoll_core::conditions::SOURCE_CLUSTERS)
                    .map(|c| {
                        if c.message.is_empty() {
                            c.reason.clone()
                        } else {
                            format!("{}: {}", c.reason, c.message)
                        }
                    })
                    .unwrap_or_default(),
            }
        })
        .collect();
    let status = Status {
        cluster_dns: cluster_dns(&c.member).await,
        member: c.id,
        members,
        imports,
    };
    match args.output {
        Format::Json => println!("{}", serde_json::to_string_pretty(&status)?),
        Format::Table => print_status(&status),
    }
    Ok(())
}

/// What of each member's publication this member's agent leaves out, judged as it judges
/// (`atoll_core::audit`): its own Service CIDRs when this identity may read them.
async fn ignored_by_member(
    c: &Clients,
    args: &StatusArgs,
    records: &[ExportedService],
) -> anyhow::Result<BTreeMap<String, Vec<String>>> {
    use atoll_api::hub::ExportedEndpointSlice;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::api::networking::v1::ServiceCIDR;
    let copies = Api::<ExportedEndpointSlice>::all(c.hub.clone())
        .list(&ListParams::default())
        .await
        .context("listing the members' endpoint copies on the hub")?;
    let service_cidrs = Api::<ServiceCIDR>::all(c.member.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let nodes = Api::<Node>::all(c.member.clone())
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let policy = atoll_core::validate::AddressPolicy {
        service_cidrs: service_cidrs
            .iter()
            .flat_map(|c| c.spec.iter().flat_map(|s| s.cidrs.iter().flatten()))
            .filter_map(|c| c.parse().ok())
            .collect(),
        denied: Vec::new(),
        nodes: atoll_core::validate::node_addresses(&nodes),
    };
    let limits = atoll_core::caps::Limits {
        records: args.max_records_per_member,
        endpoints: args.max_endpoints_per_member,
        ports: args.max_ports_per_member,
        endpoint_ports: args.max_endpoint_ports_per_service,
        member_endpoint_ports: args.max_endpoint_ports_per_member,
        hub_bytes: args.max_hub_bytes_per_member,
    };
    fn arcs<T: Clone>(items: &[T]) -> Vec<std::sync::Arc<T>> {
        items.iter().cloned().map(std::sync::Arc::new).collect()
    }
    let found = atoll_core::audit::audit(
        &c.id,
        &arcs(records),
        &arcs(&copies.items),
        &policy,
        &limits,
    );
    Ok(found
        .into_iter()
        .map(|(member, findings)| {
            let lines = findings
                .into_iter()
                .map(|f| format!("{} ({}): {}", f.object, f.reason, f.message))
                .collect();
            (member, lines)
        })
        .collect())
}

/// How many of a member's ignored objects the table lists (`-o json` has them all).
const IGNORED_SHOWN: usize = 5;

fn print_status(s: &Status) {
    use atoll_core::text::printable;
    println!(
        "ClusterSet members (from the hub; STATE is the verdict of {}'s agent):",
        s.member
    );
    println!(
        "  {:<20} {:<5} {:<44} {:>7}  LAST ERROR",
        "ID", "LEASE", "STATE", "EXPORTS"
    );
    for m in &s.members {
        println!(
            "  {:<20} {:<5} {:<44} {:>7}  {}",
            printable(&m.id),
            if m.heartbeat_lease { "yes" } else { "no" },
            m.state,
            m.exports,
            if m.last_error.is_empty() {
                "-".to_owned()
            } else {
                printable(&m.last_error)
            }
        );
        if !m.kept_decisions.is_empty() && m.kept_decisions != "kept" {
            println!(
                "      liveness decisions not kept: {} (heartbeats and imports go on)",
                printable(&m.kept_decisions)
            );
        }
        for line in m.ignored.iter().take(IGNORED_SHOWN) {
            println!("      ignored: {}", printable(line));
        }
        if m.ignored.len() > IGNORED_SHOWN {
            println!(
                "      ... and {} more ignored (-o json lists them)",
                m.ignored.len() - IGNORED_SHOWN
            );
        }
    }
    println!("Imports in {}:", s.member);
    println!(
        "  {:<40} {:<13} {:<18} {:<16} SOURCE CLUSTERS",
        "SERVICE", "TYPE", "IPS", "FROM"
    );
    for i in &s.imports {
        println!(
            "  {:<40} {:<13} {:<18} {:<16} {}",
            printable(&i.service),
            i.r#type,
            printable(&i.ips.join(",")),
            printable(&i.sources.join(",")),
            printable(&i.sources_condition)
        );
    }
    println!("Cluster DNS of {}: {}", s.member, printable(&s.cluster_dns));
}

/// What one member holds for `ns/name`.
async fn member_view(
    client: &Client,
    cluster: String,
    ns: &str,
    name: &str,
) -> anyhow::Result<MemberView> {
    Ok(MemberView {
        cluster,
        service: Api::<Service>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await?,
        export: Api::<ServiceExport>::namespaced(client.clone(), ns)
            .get_opt(name)
            .await?,
    })
}

/// `atoll explain`; returns whether the service is healthy.
pub async fn explain_service(args: ExplainArgs) -> anyhow::Result<bool> {
    let (ns, name) = args
        .service
        .split_once('/')
        .with_context(|| format!("{:?} is not namespace/name", args.service))?;
    let t = &args.target;
    let c = connect(t).await?;
    let mut members = vec![member_view(&c.member, c.id.clone(), ns, name).await?];
    let looking_from = &t.clusters.member;
    for context in &args.inspect_contexts {
        if Some(context) == looking_from.context.as_ref() {
            continue;
        }
        let other = client(looking_from.kubeconfig.as_ref(), Some(context), "member").await?;
        let id = identity::cluster_id(&other).await?.to_string();
        members.push(member_view(&other, id, ns, name).await?);
    }
    let records = Api::<ExportedService>::all(c.hub.clone())
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|r| r.spec.namespace == ns && r.spec.name == name)
        .collect();
    let policy = Api::<NamespacePolicy>::all(c.hub.clone())
        .get_opt(NAMESPACE_POLICY)
        .await?
        .map(|p| p.spec)
        .unwrap_or_default();
    let namespace_exists = Api::<Namespace>::all(c.member.clone())
        .get_opt(ns)
        .await?
        .is_some();
    let import = if namespace_exists {
        Api::<ServiceImport>::namespaced(c.member.clone(), ns)
            .get_opt(name)
            .await?
    } else {
        None
    };
    let slices = if namespace_exists {
        Api::<EndpointSlice>::namespaced(c.member.clone(), ns)
            .list(&ListParams::default().labels(&format!("{}={name}", labels::SERVICE_NAME)))
            .await?
            .items
    } else {
        Vec::new()
    };
    let dns = import.as_ref().and_then(|i| {
        // As `atoll dns` with its default trust answers: from Atoll's MCS slices only.
        let trust = atoll_dns::zone::SliceTrust::default();
        let trusted: Vec<&EndpointSlice> =
            slices.iter().filter(|s| trust.check(s).is_ok()).collect();
        let zone =
            atoll_dns::zone::Zone::build(&atoll_dns::zone::ZoneConfig::default(), &[i], &trusted);
        let v6_only = i.spec.as_ref().is_some_and(|s| s.ip_families == ["IPv6"]);
        atoll_dns::resolve::resolve(
            &zone,
            &format!("{name}.{ns}.svc.clusterset.local"),
            if v6_only { 28 } else { 1 },
        )
        .map(|(code, addresses)| (code.to_owned(), addresses))
    });
    let properties = cluster_properties(&c.member, &c.hub, &c.id).await;
    let facts = Facts {
        properties,
        namespace: ns.to_owned(),
        name: name.to_owned(),
        member: c.id.clone(),
        members,
        records,
        leases: heartbeats(&c.hub).await?.into_keys().collect(),
        kept: kept(&c.member, &t.agent_namespace).await,
        policy,
        namespace_exists,
        import,
        slices,
        dns,
    };
    let hops = explain(&facts);
    println!("{ns}/{name}, seen from {}:", c.id);
    for hop in &hops {
        // Details quote what members wrote (records, names): escaped.
        println!(
            "  {} {:<28} {}",
            if hop.ok { "ok  " } else { "FAIL" },
            hop.name,
            atoll_core::text::printable(&hop.detail)
        );
        if let Some(fix) = &hop.fix {
            println!("       fix: {}", atoll_core::text::printable(fix));
        }
    }
    match hops.iter().find(|h| !h.ok) {
        Some(first) => {
            println!("first broken hop: {}", first.name);
            Ok(false)
        }
        None => {
            println!("healthy");
            Ok(true)
        }
    }
}

/// Cluster properties by cluster id, for KEP-5939 selectors: this member's from its
/// ClusterProperties, the others' from their ClusterProfiles on the hub. What cannot be read
/// is left out (the selection hop then shows the properties it had).
async fn cluster_properties(
    member: &Client,
    hub: &Client,
    own: &str,
) -> BTreeMap<String, BTreeMap<String, String>> {
    use atoll_api::about::v1beta1::ClusterProperty;
    use atoll_api::inventory::ClusterProfile;
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let own_values: Option<BTreeMap<String, String>> = Api::<ClusterProperty>::all(member.clone())
        .list(&ListParams::default())
        .await
        .ok()
        .map(|own_properties| {
            own_properties
                .items
                .into_iter()
                .filter_map(|p| Some((p.metadata.name?, p.spec?.value)))
                .collect()
        });
    let clusterset = own_values
        .as_ref()
        .and_then(|v| v.get(atoll_api::labels::CLUSTERSET_PROPERTY))
        .map(String::as_str);
    if let Ok(profiles) =
        Api::<ClusterProfile>::namespaced(hub.clone(), atoll_core::membership::INVENTORY_NAMESPACE)
            .list(&ListParams::default())
            .await
    {
        for p in profiles.items {
            let properties = atoll_core::selection::profile_properties(&p, clusterset);
            out.insert(p.name_any(), properties);
        }
    }
    if let Some(values) = own_values {
        out.insert(own.to_owned(), values);
    }
    out
}
