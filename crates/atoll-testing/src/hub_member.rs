//! A member that exists on the hub only: its hub namespace, ServiceAccount and RBAC exactly
//! as `atoll join` makes them (`atoll_core::membership::hub_objects`, applied by the
//! administrator), and a hub client with its own token (a TokenRequest, as join issues it). It
//! stands for a member whose hub token was stolen and whose agent is gone: everything it does
//! goes through its own credentials, never the administrator's. Its id is free to choose, so a
//! test can pick one that is a suffix of another member's (`x-c3`).

use std::time::Duration;

use anyhow::Context;
use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService, LEASE_NAME};
use atoll_api::inventory::ClusterProfile;
use atoll_core::ClusterId;
use atoll_core::membership::{AGENT_ACCOUNT, hub_objects};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, ResourceQuota, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::cluster_set::ClusterSet;
use crate::membership::kubectl;

const MANAGER: &str = "atoll-e2e";

/// A member on the hub only, and its own hub client.
#[derive(Clone)]
pub struct HubMember {
    pub id: String,
    /// Authenticated as the member's agent ServiceAccount on the hub.
    pub client: Client,
    set: ClusterSet,
}

impl std::fmt::Debug for HubMember {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HubMember")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Creates `object` on the hub (the member's objects are new: its id is fresh in every run).
async fn create<K>(api: Api<K>, object: &K) -> anyhow::Result<()>
where
    K: Resource<DynamicType = ()> + Serialize + DeserializeOwned + Clone + std::fmt::Debug,
{
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(()),
        // The shared ClusterRole and the like exist already.
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| {
            format!(
                "creating {} {} on the hub",
                K::kind(&()),
                object.meta().name.as_deref().unwrap_or_default()
            )
        }),
    }
}

/// A token (TokenRequest, an hour) for the ServiceAccount `name` of `accounts`.
pub async fn token(accounts: &Api<ServiceAccount>, name: &str) -> anyhow::Result<String> {
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: Vec::new(),
            expiration_seconds: Some(3600),
            bound_object_ref: None,
        },
        ..Default::default()
    };
    Ok(accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token for the ServiceAccount {name}"))?
        .status
        .context("a token request answered without a token")?
        .token)
}

/// A hub client (the hub is the set's first member) authenticated with `token`.
async fn client_with_token(set: &ClusterSet, token: &str) -> anyhow::Result<Client> {
    let file = Kubeconfig::read_from(&set.kubeconfig)?;
    let options = KubeConfigOptions {
        context: Some(set.members[0].context.clone()),
        ..Default::default()
    };
    let mut config = Config::from_custom_kubeconfig(file, &options).await?;
    config.auth_info = AuthInfo {
        token: Some(token.to_owned().into()),
        ..Default::default()
    };
    Ok(Client::try_from(config)?)
}

impl HubMember {
    /// Makes member `id` on the hub, as `atoll join` would (its ResourceQuota included), and
    /// returns its own client.
    pub async fn join(set: &ClusterSet, id: &str) -> anyhow::Result<Self> {
        Self::join_with(set, id, true).await
    }

    /// As [`join`](Self::join), without the ResourceQuota when `quota` is false: a member
    /// joined before `atoll join` made quotas, or whose quota the administrator lifted (what
    /// the importers' own caps must then contain).
    pub async fn join_with(set: &ClusterSet, id: &str, quota: bool) -> anyhow::Result<Self> {
        let admin = set.members[0].client.clone();
        let objects = hub_objects(&ClusterId::new(id)?, &format!("hub-only-{id}"), "local");
        let ns = hub::namespace_for(id);
        create(Api::<Namespace>::all(admin.clone()), &objects.namespace).await?;
        create(
            Api::<ServiceAccount>::namespaced(admin.clone(), &ns),
            &objects.account,
        )
        .await?;
        create(Api::<Role>::namespaced(admin.clone(), &ns), &objects.writer).await?;
        let bindings = Api::<RoleBinding>::namespaced(admin.clone(), &ns);
        create(bindings, &objects.writer_binding).await?;
        if quota {
            create(
                Api::<ResourceQuota>::namespaced(admin.clone(), &ns),
                &objects.quota,
            )
            .await?;
        }
        // Its ClusterProfile, and the right to write that profile's status only.
        let inventory = atoll_core::membership::INVENTORY_NAMESPACE;
        create(
            Api::<ClusterProfile>::namespaced(admin.clone(), inventory),
            &objects.profile,
        )
        .await?;
        create(
            Api::<Role>::namespaced(admin.clone(), inventory),
            &objects.profile_role,
        )
        .await?;
        create(
            Api::<RoleBinding>::namespaced(admin.clone(), inventory),
            &objects.profile_binding,
        )
        .await?;
        create(
            Api::<ClusterRoleBinding>::all(admin.clone()),
            &objects.reader_binding,
        )
        .await?;
        let token = token(&Api::namespaced(admin, &ns), AGENT_ACCOUNT).await?;
        Ok(Self {
            id: id.to_owned(),
            client: client_with_token(set, &token).await?,
            set: set.clone(),
        })
    }

    /// Its hub namespace.
    pub fn namespace(&self) -> String {
        hub::namespace_for(&self.id)
    }

    /// Its records, with its own credentials.
    pub fn records(&self) -> Api<ExportedService> {
        Api::namespaced(self.client.clone(), &self.namespace())
    }

    /// Its endpoint copies, with its own credentials.
    pub fn copies(&self) -> Api<ExportedEndpointSlice> {
        Api::namespaced(self.client.clone(), &self.namespace())
    }

    /// Renews its heartbeat Lease every second (without a claim, so importers take its objects
    /// as they are) until the returned task is aborted.
    pub fn heartbeat(&self) -> tokio::task::JoinHandle<()> {
        let leases: Api<Lease> = Api::namespaced(self.client.clone(), &self.namespace());
        let namespace = self.namespace();
        tokio::spawn(async move {
            loop {
                // A MicroTime: the apiserver takes exactly six fractional digits.
                let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
                let lease = serde_json::json!({
                    "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": { "name": LEASE_NAME, "namespace": namespace },
                    "spec": { "renewTime": now },
                });
                let params = PatchParams::apply(MANAGER).force();
                if let Err(error) = leases
                    .patch(LEASE_NAME, &params, &Patch::Apply(&lease))
                    .await
                {
                    eprintln!("renewing the heartbeat of {namespace} failed: {error}");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    }

    /// Takes it out again (its hub namespace and reader binding), with the administrator's
    /// kubectl: for `Drop`, where no async client runs.
    pub fn leave(&self) {
        let _ = kubectl(
            &self.set,
            &self.set.members[0].context,
            &[
                "delete",
                "namespace",
                &self.namespace(),
                "--ignore-not-found",
                "--wait=false",
            ],
        );
        let binding = format!("{}-{}", atoll_core::membership::READER_ROLE, self.id);
        let _ = kubectl(
            &self.set,
            &self.set.members[0].context,
            &[
                "delete",
                "clusterrolebinding",
                &binding,
                "--ignore-not-found",
            ],
        );
        let inventory = atoll_core::membership::INVENTORY_NAMESPACE;
        let role = format!("atoll-profile-{}", self.id);
        for (kind, name) in [
            ("clusterprofile", self.id.as_str()),
            ("role", role.as_str()),
            ("rolebinding", role.as_str()),
        ] {
            let _ = kubectl(
                &self.set,
                &self.set.members[0].context,
                &["delete", kind, name, "-n", inventory, "--ignore-not-found"],
            );
        }
    }

    /// Its ClusterProfile's status, written with its own credentials: `properties` as
    /// `(name, value)`.
    pub async fn claim_properties(&self, properties: &[(&str, &str)]) -> anyhow::Result<()> {
        let profiles: Api<ClusterProfile> = Api::namespaced(
            self.client.clone(),
            atoll_core::membership::INVENTORY_NAMESPACE,
        );
        let properties: Vec<serde_json::Value> = properties
            .iter()
            .map(|(name, value)| serde_json::json!({"name": name, "value": value}))
            .collect();
        let status = serde_json::json!({"status": {"properties": properties}});
        profiles
            .patch_status(&self.id, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .context("writing its own ClusterProfile's status")?;
        Ok(())
    }
}
