//! ClusterSet membership, pure: the objects `atoll join` creates on the hub and in the member,
//! the least-privilege RBAC of a member's hub credentials, and the checks that decide whether a
//! cluster may join. The commands only read what exists, ask [`check_join`], and apply what
//! these builders return.
//!
//! Trust model: a member's hub credentials may write only its own hub namespace
//! `atoll-<id>`, and read the records of every member (`hub.atoll.dev` objects, which hold
//! nothing but member records) and the ClusterSet's namespace policy; nothing else on the hub,
//! so when the hub is also a member, other members cannot read its workloads.

use std::collections::BTreeMap;

use atoll_api::hub;
use atoll_api::inventory::{self, ClusterManager, ClusterProfile, ClusterProfileSpec};
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ResourceQuotaSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::ClusterId;

/// Name of the agent's ServiceAccount, in the member's hub namespace and in the member.
pub const AGENT_ACCOUNT: &str = "atoll-agent";
/// The member namespace holding Atoll's own objects (the hub credentials Secret).
pub const SYSTEM_NAMESPACE: &str = "atoll-system";
/// The Secret in [`SYSTEM_NAMESPACE`] holding the member's hub kubeconfig.
pub const HUB_SECRET: &str = "atoll-hub";
/// The Lease in [`SYSTEM_NAMESPACE`] the agent replicas of a member elect their writer with.
pub const LEADER_LEASE: &str = "atoll-agent";
/// The ConfigMap in which the agent keeps its liveness decisions (beside its Lease).
pub const KEPT_CONFIG_MAP: &str = "atoll-agent-liveness";
/// Where the agent copies kept decisions it cannot read before it overwrites them.
pub const KEPT_ASIDE_CONFIG_MAP: &str = "atoll-agent-liveness-unreadable";
/// Keys of [`HUB_SECRET`].
pub const SECRET_KUBECONFIG: &str = "kubeconfig";
pub const SECRET_CLUSTER_ID: &str = "cluster-id";
pub const SECRET_CLUSTERSET: &str = "clusterset";
pub const SECRET_INVENTORY_NAMESPACE: &str = "inventory-namespace";
/// The hub namespace holding the ClusterSet's ClusterProfiles.
pub const INVENTORY_NAMESPACE: &str = "atoll-inventory";
/// Label on a member's hub namespace and RBAC: the member's cluster id.
pub const LABEL_MEMBER: &str = hub::LABEL_CLUSTER;
/// The ClusterRole every member's hub credentials are bound to for reading.
pub const READER_ROLE: &str = "atoll-member-reader";
/// The Role in a member's hub namespace that lets it write there.
pub const WRITER_ROLE: &str = "atoll-member-writer";

/// The username the hub sees for a member's credentials.
pub fn agent_username(id: &ClusterId) -> String {
    format!(
        "system:serviceaccount:{}:{AGENT_ACCOUNT}",
        hub::namespace_for(id.as_str())
    )
}

/// The cluster id hub credentials were issued for, from the username the hub reports for them
/// (`None` when they are not a member's credentials, e.g. an administrator's).
pub fn id_of_username(username: &str) -> Option<&str> {
    let rest = username.strip_prefix("system:serviceaccount:")?;
    let (namespace, account) = rest.split_once(':')?;
    (account == AGENT_ACCOUNT)
        .then(|| namespace.strip_prefix(hub::NAMESPACE_PREFIX))
        .flatten()
}

/// A default cluster id derived from the member's `kube-system` namespace uid: `c-` and the
/// first 12 hexadecimal digits, a valid single DNS label that stays the same across re-joins.
pub fn default_id(kube_system_uid: &str) -> Option<ClusterId> {
    let hex: String = kube_system_uid
        .chars()
        .filter(char::is_ascii_hexdigit)
        .map(|c| c.to_ascii_lowercase())
        .take(12)
        .collect();
    (hex.len() == 12)
        .then(|| ClusterId::new(&format!("c-{hex}")).ok())
        .flatten()
}

/// What exists already, as `atoll join` reads it before writing anything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct JoinFacts {
    /// `kube-system` uid of the joining member.
    pub member_uid: String,
    /// The member's `cluster.clusterset.k8s.io` ClusterProperty value, if any.
    pub id_property: Option<String>,
    /// The member's `clusterset.k8s.io` ClusterProperty value, if any.
    pub clusterset_property: Option<String>,
    /// The id asked for with `--cluster-id`, if any.
    pub requested_id: Option<String>,
    /// The ClusterSet the member joins.
    pub clusterset: String,
    /// The member-uid annotation of the hub namespace `atoll-<id>` for the id that will be
    /// used, when that namespace exists (`Some(None)`: it exists without the annotation).
    pub hub_namespace_owner: Option<Option<String>>,
}

/// Why a cluster may not join (each message says what to do).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JoinRefused {
    #[error("{0}")]
    InvalidId(String),
    #[error(
        "this cluster's ClusterProperty cluster.clusterset.k8s.io says {property}, but --cluster-id {requested} was given; a member's id never changes: drop --cluster-id, or run `atoll leave` first and delete the property"
    )]
    IdMismatch { property: String, requested: String },
    #[error(
        "this cluster is a member of ClusterSet {current} (ClusterProperty clusterset.k8s.io); run `atoll leave` against that ClusterSet's hub first"
    )]
    OtherClusterSet { current: String },
    #[error(
        "cluster id {id} is already used by another member of the ClusterSet (hub namespace atoll-{id} belongs to the cluster whose kube-system uid is {owner}); choose another id with --cluster-id"
    )]
    DuplicateId { id: String, owner: String },
    #[error(
        "the hub namespace atoll-{id} exists but was not made by `atoll join`; remove it or choose another id with --cluster-id"
    )]
    ForeignNamespace { id: String },
    #[error(
        "--clusterset {0:?} is not a valid ClusterSet name: it labels the inventory namespace, so it must be a label value of 1 to 63 characters (A-Z, a-z, 0-9, '-', '_', '.', alphanumeric at both ends)"
    )]
    InvalidClusterSet(String),
    #[error(
        "--token-seconds {0} is out of range: the hub issues tokens for {MIN_TOKEN_SECONDS} seconds (10 minutes) to {MAX_TOKEN_SECONDS} seconds (2^32)"
    )]
    InvalidTokenSeconds(i64),
    #[error(
        "--hub-server {0:?} is not an address the agent can use: give https://<host>[:<port>] (an IP address or a DNS name, no path), as the member's pods reach the hub's API"
    )]
    InvalidHubServer(String),
}

/// `--hub-server`: where the member's agent reaches the hub's API when that differs from what
/// the administrator's kubeconfig says (the hub at 127.0.0.1 through a tunnel or a port
/// forward, a kind cluster seen from the host). An https URL of a host and an optional port,
/// nothing else: a typo must fail before anything is written, not in the agent later.
pub fn check_hub_server(server: &str) -> Result<(), JoinRefused> {
    let refused = || JoinRefused::InvalidHubServer(server.to_owned());
    let authority = server.strip_prefix("https://").ok_or_else(refused)?;
    let authority = authority.strip_suffix('/').unwrap_or(authority);
    let (host, port) = match authority.rsplit_once(':') {
        // An IPv6 literal in brackets, with or without a port.
        _ if authority.starts_with('[') => match authority.split_once(']') {
            Some((host, "")) => (&host[1..], None),
            Some((host, rest)) => (
                &host[1..],
                Some(rest.strip_prefix(':').ok_or_else(refused)?),
            ),
            None => return Err(refused()),
        },
        Some((host, port)) => (host, Some(port)),
        None => (authority, None),
    };
    let host_ok = !host.is_empty()
        && host.len() <= 253
        && (host.parse::<std::net::IpAddr>().is_ok()
            || host.split('.').all(|label| {
                !label.is_empty()
                    && label.len() <= 63
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
                    && !label.starts_with('-')
                    && !label.ends_with('-')
            }));
    let port_ok = port.is_none_or(|p| p.parse::<u16>().is_ok_and(|p| p > 0));
    if host_ok && port_ok {
        Ok(())
    } else {
        Err(refused())
    }
}

/// Shortest lifetime of a hub token (the TokenRequest API's minimum).
pub const MIN_TOKEN_SECONDS: i64 = 600;
/// Longest lifetime of a hub token (the TokenRequest API's maximum).
pub const MAX_TOKEN_SECONDS: i64 = 1 << 32;

/// What `atoll join` is asked to do that it can check before reading anything: the ClusterSet
/// name (a label value on the hub) and the token lifetime (what the TokenRequest API accepts),
/// so a bad flag fails before the first write rather than half-way through.
pub fn check_join_flags(clusterset: &str, token_seconds: i64) -> Result<(), JoinRefused> {
    if clusterset.is_empty() || !crate::validate::names::is_label_value(clusterset) {
        return Err(JoinRefused::InvalidClusterSet(clusterset.to_owned()));
    }
    if !(MIN_TOKEN_SECONDS..=MAX_TOKEN_SECONDS).contains(&token_seconds) {
        return Err(JoinRefused::InvalidTokenSeconds(token_seconds));
    }
    Ok(())
}

/// Every name `atoll join` derives from a member's id, with the limit it must fit: the hub
/// namespace is a DNS label, the rest are object names (DNS subdomains). [`ClusterId`] only
/// accepts ids for which all of them fit.
pub fn derived_names(id: &ClusterId) -> Vec<(String, usize)> {
    let objects = hub_objects(id, "", "");
    let name = |meta: &ObjectMeta| meta.name.clone().unwrap_or_default();
    vec![
        (name(&objects.namespace.metadata), 63),
        (name(&objects.reader_binding.metadata), 253),
        (name(&objects.profile.metadata), 253),
        (name(&objects.profile_role.metadata), 253),
    ]
}

/// The id the member joins with, before the hub is consulted: its ClusterProperty, else
/// `--cluster-id`, else one derived from its `kube-system` uid.
pub fn choose_id(facts: &JoinFacts) -> Result<ClusterId, JoinRefused> {
    let invalid = |id: &str, e: crate::ClusterIdError| {
        JoinRefused::InvalidId(format!(
            "cluster id {id:?} is not valid ({e}); a cluster id is one lowercase RFC-1123 label of at most {} characters, and not one Atoll or Kubernetes reserves",
            ClusterId::MAX_LEN
        ))
    };
    // A bad --cluster-id is refused as such, whatever else is wrong.
    if let Some(requested) = &facts.requested_id {
        ClusterId::new(requested).map_err(|e| invalid(requested, e))?;
    }
    match (&facts.id_property, &facts.requested_id) {
        (Some(property), Some(requested)) if property != requested => {
            Err(JoinRefused::IdMismatch {
                property: property.clone(),
                requested: requested.clone(),
            })
        }
        (Some(id), _) | (None, Some(id)) => ClusterId::new(id).map_err(|e| invalid(id, e)),
        (None, None) => default_id(&facts.member_uid).ok_or_else(|| {
            JoinRefused::InvalidId(format!(
                "cannot derive a cluster id from the kube-system uid {:?}; give one with --cluster-id",
                facts.member_uid
            ))
        }),
    }
}

/// Whether the member may join as `id`, given everything read beforehand.
pub fn check_join(facts: &JoinFacts, id: &ClusterId) -> Result<(), JoinRefused> {
    if let Some(current) = &facts.clusterset_property
        && current != &facts.clusterset
    {
        return Err(JoinRefused::OtherClusterSet {
            current: current.clone(),
        });
    }
    match &facts.hub_namespace_owner {
        None => Ok(()),
        Some(Some(owner)) if owner == &facts.member_uid => Ok(()),
        Some(Some(owner)) => Err(JoinRefused::DuplicateId {
            id: id.to_string(),
            owner: owner.clone(),
        }),
        Some(None) => Err(JoinRefused::ForeignNamespace { id: id.to_string() }),
    }
}

fn meta(namespace: Option<&str>, name: &str, id: &ClusterId, uid: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(LABEL_MEMBER.to_owned(), id.to_string())])),
        annotations: Some(BTreeMap::from([(
            hub::ANNOTATION_MEMBER_UID.to_owned(),
            uid.to_owned(),
        )])),
        ..Default::default()
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect();
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..Default::default()
    }
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &[
    "get", "list", "watch", "create", "update", "patch", "delete",
];
const SLICES: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// Everything `atoll join` makes on the hub for member `id`.
#[derive(Clone, Debug)]
pub struct HubObjects {
    pub namespace: Namespace,
    pub account: ServiceAccount,
    pub writer: Role,
    pub writer_binding: RoleBinding,
    /// Object counts the hub allows in the member's namespace: the importers' caps, so the hub
    /// refuses the excess before any importer sees it (`atoll join --hub-quota true`).
    pub quota: ResourceQuota,
    pub reader: ClusterRole,
    pub reader_binding: ClusterRoleBinding,
    pub inventory: Namespace,
    pub profile: ClusterProfile,
    /// Lets the member keep its own ClusterProfile's status current, and nothing else there.
    pub profile_role: Role,
    pub profile_binding: RoleBinding,
}

/// Name of the ResourceQuota in each member's hub namespace.
pub const QUOTA: &str = "atoll-member";

/// What the quota allows: as many records as an importer takes from one member; copies for
/// every record twice (dual-stack) and room for services of thousands of endpoints (split into
/// slices of 100); one heartbeat Lease and a spare.
pub fn quota_hard() -> BTreeMap<String, Quantity> {
    let records = crate::caps::Limits::DEFAULT_RECORDS;
    BTreeMap::from([
        (
            format!("count/exportedservices.{}", hub::GROUP),
            Quantity(records.to_string()),
        ),
        (
            format!("count/exportedendpointslices.{}", hub::GROUP),
            Quantity((2 * records + 1000).to_string()),
        ),
        (
            "count/leases.coordination.k8s.io".to_owned(),
            Quantity("2".to_owned()),
        ),
    ])
}

fn subject(id: &ClusterId) -> Subject {
    Subject {
        kind: "ServiceAccount".to_owned(),
        name: AGENT_ACCOUNT.to_owned(),
        namespace: Some(hub::namespace_for(id.as_str())),
        ..Default::default()
    }
}

fn role_ref(kind: &str, name: &str) -> RoleRef {
    RoleRef {
        api_group: "rbac.authorization.k8s.io".to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

/// The hub objects of member `id` (whose `kube-system` uid is `uid`) in ClusterSet `clusterset`.
pub fn hub_objects(id: &ClusterId, uid: &str, clusterset: &str) -> HubObjects {
    let ns = hub::namespace_for(id.as_str());
    let profile_role_name = format!("atoll-profile-{id}");
    let inventory = Namespace {
        metadata: ObjectMeta {
            name: Some(INVENTORY_NAMESPACE.to_owned()),
            labels: Some(BTreeMap::from([(
                inventory::LABEL_CLUSTERSET.to_owned(),
                clusterset.to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    };
    let mut profile = ClusterProfile::new(
        id.as_str(),
        ClusterProfileSpec {
            display_name: Some(id.to_string()),
            cluster_manager: ClusterManager {
                name: inventory::CLUSTER_MANAGER.to_owned(),
            },
        },
    );
    profile.metadata.namespace = Some(INVENTORY_NAMESPACE.to_owned());
    let mut labels = inventory::profile_labels();
    labels.insert(LABEL_MEMBER.to_owned(), id.to_string());
    profile.metadata.labels = Some(labels);
    profile.metadata.annotations = Some(BTreeMap::from([(
        hub::ANNOTATION_MEMBER_UID.to_owned(),
        uid.to_owned(),
    )]));
    HubObjects {
        namespace: Namespace {
            metadata: meta(None, &ns, id, uid),
            ..Default::default()
        },
        account: ServiceAccount {
            metadata: meta(Some(&ns), AGENT_ACCOUNT, id, uid),
            ..Default::default()
        },
        writer: Role {
            metadata: meta(Some(&ns), WRITER_ROLE, id, uid),
            rules: Some(vec![
                rule(
                    &[hub::GROUP],
                    &["exportedservices", "exportedendpointslices"],
                    WRITE,
                ),
                rule(&["coordination.k8s.io"], &["leases"], WRITE),
            ]),
        },
        writer_binding: RoleBinding {
            metadata: meta(Some(&ns), WRITER_ROLE, id, uid),
            role_ref: role_ref("Role", WRITER_ROLE),
            subjects: Some(vec![subject(id)]),
        },
        quota: ResourceQuota {
            metadata: meta(Some(&ns), QUOTA, id, uid),
            spec: Some(ResourceQuotaSpec {
                hard: Some(quota_hard()),
                ..Default::default()
            }),
            ..Default::default()
        },
        reader: ClusterRole {
            metadata: ObjectMeta {
                name: Some(READER_ROLE.to_owned()),
                ..Default::default()
            },
            rules: Some(vec![
                rule(
                    &[hub::GROUP],
                    &[
                        "exportedservices",
                        "exportedendpointslices",
                        "namespacepolicies",
                    ],
                    READ,
                ),
                // Every member's heartbeat, and no other Lease on the hub.
                PolicyRule {
                    resource_names: Some(vec![hub::LEASE_NAME.to_owned()]),
                    ..rule(&["coordination.k8s.io"], &["leases"], READ)
                },
            ]),
            aggregation_rule: None,
        },
        reader_binding: ClusterRoleBinding {
            metadata: meta(None, &format!("{READER_ROLE}-{id}"), id, uid),
            role_ref: role_ref("ClusterRole", READER_ROLE),
            subjects: Some(vec![subject(id)]),
        },
        inventory,
        profile,
        // Every ClusterProfile: read them (KEP-5939's cluster selectors are matched against
        // the other members' properties, which their profiles mirror); its own: write its
        // status only (the agent mirrors the member's ClusterProperties there); the spec and
        // labels are the hub's.
        profile_role: Role {
            metadata: meta(Some(INVENTORY_NAMESPACE), &profile_role_name, id, uid),
            rules: Some(vec![
                rule(
                    &[atoll_api::multicluster::GROUP],
                    &["clusterprofiles"],
                    READ,
                ),
                PolicyRule {
                    resource_names: Some(vec![id.to_string()]),
                    ..rule(
                        &[atoll_api::multicluster::GROUP],
                        &["clusterprofiles/status"],
                        &["get", "patch", "update"],
                    )
                },
            ]),
        },
        profile_binding: RoleBinding {
            metadata: meta(Some(INVENTORY_NAMESPACE), &profile_role_name, id, uid),
            role_ref: role_ref("Role", &profile_role_name),
            subjects: Some(vec![subject(id)]),
        },
    }
}

/// The member-side objects of a member: its ClusterProperties, the namespace and Secret holding
/// its hub credentials, and the agent's identity and permissions in the member.
#[derive(Clone, Debug)]
pub struct MemberObjects {
    pub id_property: atoll_api::about::v1beta1::ClusterProperty,
    pub clusterset_property: atoll_api::about::v1beta1::ClusterProperty,
    pub namespace: Namespace,
    pub secret: k8s_openapi::api::core::v1::Secret,
    pub account: ServiceAccount,
    pub role: ClusterRole,
    pub binding: ClusterRoleBinding,
    /// Reading the hub credentials Secret and holding the leader election Lease, and nothing
    /// else in [`SYSTEM_NAMESPACE`].
    pub secret_role: Role,
    pub secret_binding: RoleBinding,
}

fn property(name: &str, value: &str) -> atoll_api::about::v1beta1::ClusterProperty {
    atoll_api::about::v1beta1::ClusterProperty::new(
        name,
        Some(atoll_api::about::ClusterPropertySpec {
            value: value.to_owned(),
        }),
    )
}

/// The username the member sees for its agent (a ServiceAccount in [`SYSTEM_NAMESPACE`]).
pub fn member_agent_username() -> String {
    format!("system:serviceaccount:{SYSTEM_NAMESPACE}:{AGENT_ACCOUNT}")
}

/// The member-side objects of member `id` in `clusterset`; `kubeconfig` is its hub kubeconfig.
pub fn member_objects(id: &ClusterId, clusterset: &str, kubeconfig: &str) -> MemberObjects {
    let plain = |namespace: Option<&str>, name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            crate::import::MANAGED_BY_LABEL.to_owned(),
            crate::import::MANAGED_BY_VALUE.to_owned(),
        )])),
        ..Default::default()
    };
    let agent = Subject {
        kind: "ServiceAccount".to_owned(),
        name: AGENT_ACCOUNT.to_owned(),
        namespace: Some(SYSTEM_NAMESPACE.to_owned()),
        ..Default::default()
    };
    let mcs = atoll_api::multicluster::GROUP;
    MemberObjects {
        id_property: property(atoll_api::labels::CLUSTER_ID_PROPERTY, id.as_str()),
        clusterset_property: property(atoll_api::labels::CLUSTERSET_PROPERTY, clusterset),
        namespace: Namespace {
            metadata: plain(None, SYSTEM_NAMESPACE),
            ..Default::default()
        },
        secret: k8s_openapi::api::core::v1::Secret {
            metadata: plain(Some(SYSTEM_NAMESPACE), HUB_SECRET),
            type_: Some("Opaque".to_owned()),
            string_data: Some(BTreeMap::from([
                (SECRET_KUBECONFIG.to_owned(), kubeconfig.to_owned()),
                (SECRET_CLUSTER_ID.to_owned(), id.to_string()),
                (SECRET_CLUSTERSET.to_owned(), clusterset.to_owned()),
                (
                    SECRET_INVENTORY_NAMESPACE.to_owned(),
                    INVENTORY_NAMESPACE.to_owned(),
                ),
            ])),
            ..Default::default()
        },
        account: ServiceAccount {
            metadata: plain(Some(SYSTEM_NAMESPACE), AGENT_ACCOUNT),
            ..Default::default()
        },
        role: ClusterRole {
            metadata: plain(None, AGENT_ACCOUNT),
            rules: Some(vec![
                rule(&[mcs], &["serviceexports"], READ),
                rule(&[mcs], &["serviceexports/status"], &["patch", "update"]),
                rule(&[mcs], &["serviceimports"], WRITE),
                rule(&[mcs], &["serviceimports/status"], &["patch", "update"]),
                rule(&[""], &["services"], WRITE),
                // `deletecollection`: a withdrawn cluster's slices go in one request per
                // namespace (`crate::plan::collect_slice_deletions`).
                rule(&["discovery.k8s.io"], &["endpointslices"], SLICES),
                rule(&[""], &["namespaces"], READ),
                rule(&[atoll_api::about::GROUP], &["clusterproperties"], READ),
                // Its Service CIDRs: other members' endpoints there are refused.
                rule(&["networking.k8s.io"], &["servicecidrs"], READ),
                // Its Nodes' addresses: other members' endpoints there are refused.
                rule(&[""], &["nodes"], READ),
                rule(
                    &["", "events.k8s.io"],
                    &["events"],
                    &["create", "patch", "update"],
                ),
            ]),
            aggregation_rule: None,
        },
        binding: ClusterRoleBinding {
            metadata: plain(None, AGENT_ACCOUNT),
            role_ref: role_ref("ClusterRole", AGENT_ACCOUNT),
            subjects: Some(vec![agent.clone()]),
        },
        secret_role: Role {
            metadata: plain(Some(SYSTEM_NAMESPACE), AGENT_ACCOUNT),
            rules: Some(vec![
                PolicyRule {
                    resource_names: Some(vec![HUB_SECRET.to_owned()]),
                    ..rule(&[""], &["secrets"], &["get", "watch", "list"])
                },
                // The agent replicas' leader election Lease (create cannot be limited by name).
                PolicyRule {
                    resource_names: Some(vec![LEADER_LEASE.to_owned()]),
                    ..rule(&["coordination.k8s.io"], &["leases"], &["get", "update"])
                },
                rule(&["coordination.k8s.io"], &["leases"], &["create"]),
                // Where it keeps its liveness decisions for a successor (create, which
                // server-side apply needs the first time, cannot be limited by name).
                PolicyRule {
                    resource_names: Some(vec![
                        KEPT_CONFIG_MAP.to_owned(),
                        KEPT_ASIDE_CONFIG_MAP.to_owned(),
                    ]),
                    ..rule(&[""], &["configmaps"], &["get", "patch", "update"])
                },
                rule(&[""], &["configmaps"], &["create"]),
            ]),
        },
        secret_binding: RoleBinding {
            metadata: plain(Some(SYSTEM_NAMESPACE), AGENT_ACCOUNT),
            role_ref: role_ref("Role", AGENT_ACCOUNT),
            subjects: Some(vec![agent]),
        },
    }
}

/// Name of the DNS server's ServiceAccount (and ClusterRole) in the member.
pub const DNS_ACCOUNT: &str = "atoll-dns";

/// The member-side identity and permissions of `atoll dns`: it reads ServiceImports and
/// EndpointSlices, and nothing else.
#[derive(Clone, Debug)]
pub struct DnsObjects {
    pub account: ServiceAccount,
    pub role: ClusterRole,
    pub binding: ClusterRoleBinding,
}

/// The DNS server's ServiceAccount, ClusterRole and binding.
pub fn dns_objects() -> DnsObjects {
    let meta = |namespace: Option<&str>| ObjectMeta {
        name: Some(DNS_ACCOUNT.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..Default::default()
    };
    DnsObjects {
        account: ServiceAccount {
            metadata: meta(Some(SYSTEM_NAMESPACE)),
            ..Default::default()
        },
        role: ClusterRole {
            metadata: meta(None),
            rules: Some(vec![
                rule(&[atoll_api::multicluster::GROUP], &["serviceimports"], READ),
                rule(&["discovery.k8s.io"], &["endpointslices"], READ),
            ]),
            aggregation_rule: None,
        },
        binding: ClusterRoleBinding {
            metadata: meta(None),
            role_ref: role_ref("ClusterRole", DNS_ACCOUNT),
            subjects: Some(vec![Subject {
                kind: "ServiceAccount".to_owned(),
                name: DNS_ACCOUNT.to_owned(),
                namespace: Some(SYSTEM_NAMESPACE.to_owned()),
                ..Default::default()
            }]),
        },
    }
}

/// The member's ClusterProperties as ClusterProfile properties, by name. Values the
/// ClusterProfile schema cannot hold (empty, or over 1024 characters) are left out.
pub fn mirrored_properties<'a>(
    properties: impl Iterator<Item = (&'a str, &'a str)>,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<atoll_api::inventory::Property> {
    let mut out: Vec<atoll_api::inventory::Property> = properties
        .filter(|(name, value)| {
            !name.is_empty()
                && name.len() <= 253
                && !value.is_empty()
                && value.chars().count() <= 1024
        })
        .map(|(name, value)| atoll_api::inventory::Property {
            name: name.to_owned(),
            value: value.to_owned(),
            last_observed_time: Some(now.clone()),
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> JoinFacts {
        JoinFacts {
            member_uid: "5f0c1a2b-3c4d-4e5f-8a9b-0c1d2e3f4a5b".into(),
            clusterset: "prod".into(),
            ..Default::default()
        }
    }

    fn id(s: &str) -> ClusterId {
        ClusterId::new(s).unwrap()
    }

    #[test]
    fn the_id_comes_from_the_property_then_the_flag_then_the_uid() {
        let mut f = facts();
        assert_eq!(choose_id(&f).unwrap(), id("c-5f0c1a2b3c4d"));
        f.requested_id = Some("east".into());
        assert_eq!(choose_id(&f).unwrap(), id("east"));
        f.id_property = Some("east".into());
        assert_eq!(choose_id(&f).unwrap(), id("east"));
        f.requested_id = Some("west".into());
        assert!(matches!(choose_id(&f), Err(JoinRefused::IdMismatch { .. })));
        f.requested_id = None;
        f.id_property = Some("Not_A_Label".into());
        assert!(matches!(choose_id(&f), Err(JoinRefused::InvalidId(_))));
    }

    #[test]
    fn ids_that_name_atolls_or_kubernetes_namespaces_are_refused_first() {
        for reserved in [
            "system",
            "inventory",
            "default",
            "kube-system",
            &"x".repeat(58),
        ] {
            let f = JoinFacts {
                id_property: Some("east".into()),
                requested_id: Some(reserved.to_owned()),
                ..facts()
            };
            let refused = choose_id(&f).unwrap_err();
            assert!(
                matches!(refused, JoinRefused::InvalidId(_)),
                "{reserved}: {refused}"
            );
        }
        let f = JoinFacts {
            requested_id: Some("inventory".into()),
            ..facts()
        };
        assert!(choose_id(&f).unwrap_err().to_string().contains("reserved"));
    }

    #[test]
    fn every_name_derived_from_the_longest_id_fits() {
        let longest = id(&"x".repeat(ClusterId::MAX_LEN));
        for (name, limit) in derived_names(&longest) {
            assert!(name.len() <= limit, "{name} is longer than {limit}");
        }
        // One character more and the hub namespace would not be a label.
        assert_eq!(
            hub::namespace_for(&"x".repeat(ClusterId::MAX_LEN + 1)).len(),
            64
        );
        assert_eq!(hub::namespace_for("system"), SYSTEM_NAMESPACE);
        assert_eq!(hub::namespace_for("inventory"), INVENTORY_NAMESPACE);
    }

    #[test]
    fn join_flags_are_checked_before_anything_is_read() {
        assert_eq!(check_join_flags("prod", 365 * 24 * 3600), Ok(()));
        assert_eq!(check_join_flags("Prod_1.eu", MIN_TOKEN_SECONDS), Ok(()));
        for bad in ["", "a b", "-prod", &"p".repeat(64), "a/b"] {
            assert!(matches!(
                check_join_flags(bad, 3600),
                Err(JoinRefused::InvalidClusterSet(_))
            ));
        }
        for bad in [0, -1, 599, MAX_TOKEN_SECONDS + 1, i64::MAX] {
            assert!(matches!(
                check_join_flags("prod", bad),
                Err(JoinRefused::InvalidTokenSeconds(_))
            ));
        }
    }

    #[test]
    fn hub_server_is_an_https_host_and_port_only() {
        for good in [
            "https://10.255.0.254:6443",
            "https://hub.example.com",
            "https://hub.example.com:443/",
            "https://[fd00::1]:6443",
            "https://[::1]",
            "https://127.0.0.1:32758",
        ] {
            assert_eq!(check_hub_server(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "10.255.0.254:6443",
            "http://hub:6443",
            "https://",
            "https://:6443",
            "https://hub:0",
            "https://hub:65536",
            "https://hub:port",
            "https://hub/api",
            "https://hub:6443/api",
            "https://-hub",
            "https://hub..example",
            "https://user@hub",
            "https://[fd00::1",
            "https://[fd00::1]6443",
            "https://hub name",
        ] {
            assert_eq!(
                check_hub_server(bad),
                Err(JoinRefused::InvalidHubServer(bad.to_owned())),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_taken_id_or_another_clusterset_refuses_and_a_rejoin_does_not() {
        let mut f = facts();
        let east = id("east");
        assert_eq!(check_join(&f, &east), Ok(()));
        f.hub_namespace_owner = Some(Some(f.member_uid.clone()));
        assert_eq!(check_join(&f, &east), Ok(()), "re-joining the same cluster");
        f.hub_namespace_owner = Some(Some("another-uid".into()));
        let refused = check_join(&f, &east).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("already used by another member")
        );
        f.hub_namespace_owner = Some(None);
        assert!(matches!(
            check_join(&f, &east),
            Err(JoinRefused::ForeignNamespace { .. })
        ));
        f.hub_namespace_owner = None;
        f.clusterset_property = Some("staging".into());
        assert!(matches!(
            check_join(&f, &east),
            Err(JoinRefused::OtherClusterSet { .. })
        ));
        f.clusterset_property = Some("prod".into());
        assert_eq!(check_join(&f, &east), Ok(()));
    }

    #[test]
    fn usernames_name_the_member_they_were_issued_for() {
        let east = id("east");
        assert_eq!(id_of_username(&agent_username(&east)), Some("east"));
        assert_eq!(id_of_username("kubernetes-admin"), None);
        assert_eq!(
            id_of_username("system:serviceaccount:atoll-east:someone-else"),
            None
        );
        assert_eq!(
            id_of_username("system:serviceaccount:default:atoll-agent"),
            None
        );
    }

    #[test]
    fn member_credentials_write_only_their_own_namespace_and_read_only_records() {
        let objects = hub_objects(&id("east"), "uid-1", "prod");
        assert_eq!(
            objects.writer.metadata.namespace.as_deref(),
            Some("atoll-east")
        );
        let reader = objects.reader.rules.unwrap();
        assert_eq!(reader.len(), 2);
        assert_eq!(
            reader[1].resource_names.as_deref(),
            Some(&["atoll-heartbeat".to_owned()][..])
        );
        assert_eq!(
            reader[0].api_groups.as_deref(),
            Some(&["hub.atoll.dev".to_owned()][..])
        );
        assert_eq!(reader[0].verbs, ["get", "list", "watch"]);
        let profile = objects.profile_role.rules.unwrap();
        for rule in &profile {
            let writes = rule
                .verbs
                .iter()
                .any(|v| v != "get" && v != "list" && v != "watch");
            assert_eq!(
                rule.resource_names.as_deref(),
                writes.then_some(&["east".to_owned()][..]),
                "every profile is read, only its own is written: {rule:?}"
            );
        }
        // Writes reach the status only: the profile's spec and labels stay the hub's.
        let writes: Vec<&str> = profile
            .iter()
            .filter(|r| r.verbs.iter().any(|v| v == "update" || v == "patch"))
            .flat_map(|r| r.resources.iter().flatten().map(String::as_str))
            .collect();
        assert_eq!(writes, ["clusterprofiles/status"]);
        assert_eq!(
            objects.profile.metadata.namespace.as_deref(),
            Some(INVENTORY_NAMESPACE)
        );
        assert_eq!(
            objects.namespace.metadata.annotations.unwrap()[hub::ANNOTATION_MEMBER_UID],
            "uid-1"
        );
    }

    #[test]
    fn the_quota_matches_the_importers_caps() {
        let hard = quota_hard();
        let records = format!("count/exportedservices.{}", hub::GROUP);
        assert_eq!(
            hard.get(&records).map(|q| q.0.clone()),
            Some(crate::caps::Limits::DEFAULT_RECORDS.to_string())
        );
        let objects = hub_objects(&ClusterId::new("c2").unwrap(), "u", "local");
        assert_eq!(objects.quota.spec.and_then(|s| s.hard), Some(hard));
        assert_eq!(
            objects.quota.metadata.namespace.as_deref(),
            Some("atoll-c2")
        );
    }
}
