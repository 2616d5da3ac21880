//! Who this agent is: the member's cluster id from its KEP-2149 ClusterProperty, checked against
//! the identity its hub credentials carry, and watched for as long as the agent runs (the id of
//! a member never changes).

use std::time::Duration;

use atoll_api::about::{v1alpha1, v1beta1};
use atoll_api::labels::CLUSTER_ID_PROPERTY;
use atoll_core::membership::{self, HUB_SECRET, SYSTEM_NAMESPACE};
use atoll_core::{ClusterId, ClusterIdError};
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::SelfSubjectReview;
use k8s_openapi::api::core::v1::Secret;
use kube::runtime::watcher;
use kube::{Api, Client};

/// Why the agent may not run as a member.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "this cluster has no ClusterProperty {CLUSTER_ID_PROPERTY}: join it to a ClusterSet with `atoll join` first"
    )]
    Missing,
    #[error(
        "the ClusterProperty {CLUSTER_ID_PROPERTY} of this cluster is {value:?}, not a valid cluster id ({source}); a cluster id is one lowercase RFC-1123 label of at most 63 characters"
    )]
    Invalid {
        value: String,
        source: ClusterIdError,
    },
    #[error(
        "the hub credentials were issued for cluster {issued}, but this cluster's ClusterProperty {CLUSTER_ID_PROPERTY} says {id}; a member's id never changes: restore the property to {issued}, or run `atoll leave` and `atoll join` again"
    )]
    Credentials { issued: String, id: String },
    #[error(
        "this cluster's ClusterProperty {CLUSTER_ID_PROPERTY} changed from {was} to {now} while it is a member; stopping without writing anything as {now}. Restore it to {was}, or run `atoll leave` and `atoll join` to rejoin under the new id"
    )]
    Changed { was: String, now: String },
    #[error(
        "this cluster's ClusterProperty {CLUSTER_ID_PROPERTY} (value {was}) was deleted while it is a member; stopping. Restore it, or run `atoll leave`"
    )]
    Removed { was: String },
    #[error(
        "the Secret {SYSTEM_NAMESPACE}/{HUB_SECRET} does not exist: run `atoll join` (or pass --hub-kubeconfig)"
    )]
    HubSecretMissing,
    #[error(
        "the Secret {SYSTEM_NAMESPACE}/{HUB_SECRET} {0}: run `atoll join` (or pass --hub-kubeconfig)"
    )]
    HubSecret(String),
    #[error("reading this cluster's identity: {0}")]
    Api(#[from] kube::Error),
}

fn value_of(spec: Option<&atoll_api::about::ClusterPropertySpec>) -> Option<String> {
    spec.map(|s| s.value.clone())
}

impl IdentityError {
    /// Whether this only says that `atoll join` has not run yet (no id property, no hub
    /// Secret): what an agent installed before the join waits out.
    pub fn is_not_joined(&self) -> bool {
        matches!(self, Self::Missing | Self::HubSecretMissing)
    }
}

/// The member's cluster id (v1beta1, or v1alpha1 where only that is served).
pub async fn cluster_id(member: &Client) -> Result<ClusterId, IdentityError> {
    let beta: Api<v1beta1::ClusterProperty> = Api::all(member.clone());
    let value = match beta.get_opt(CLUSTER_ID_PROPERTY).await {
        Ok(p) => p.and_then(|p| value_of(p.spec.as_ref())),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            let alpha: Api<v1alpha1::ClusterProperty> = Api::all(member.clone());
            alpha
                .get_opt(CLUSTER_ID_PROPERTY)
                .await?
                .and_then(|p| value_of(p.spec.as_ref()))
        }
        Err(e) => return Err(e.into()),
    };
    let value = value.ok_or(IdentityError::Missing)?;
    ClusterId::new(&value).map_err(|source| IdentityError::Invalid { value, source })
}

/// Refuses hub credentials issued for another member; credentials that are not a member's
/// (an administrator's) are allowed, with a warning.
pub async fn check_hub_credentials(hub: &Client, id: &ClusterId) -> Result<(), IdentityError> {
    let review = Api::<SelfSubjectReview>::all(hub.clone())
        .create(&Default::default(), &SelfSubjectReview::default())
        .await?;
    let username = review
        .status
        .and_then(|s| s.user_info)
        .and_then(|u| u.username)
        .unwrap_or_default();
    match membership::id_of_username(&username) {
        Some(issued) if issued == id.as_str() => Ok(()),
        Some(issued) => Err(IdentityError::Credentials {
            issued: issued.to_owned(),
            id: id.to_string(),
        }),
        None => {
            tracing::warn!(
                %username,
                "the hub credentials are not a member's (made by `atoll join`): they may write more than this member's own records"
            );
            Ok(())
        }
    }
}

/// The hub kubeconfig `atoll join` stored in the member, and the ClusterProfile namespace.
pub async fn hub_secret(member: &Client) -> Result<(String, Option<String>), IdentityError> {
    let secret = Api::<Secret>::namespaced(member.clone(), SYSTEM_NAMESPACE)
        .get_opt(HUB_SECRET)
        .await?
        .ok_or(IdentityError::HubSecretMissing)?;
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    let kubeconfig = text(membership::SECRET_KUBECONFIG).ok_or_else(|| {
        IdentityError::HubSecret(format!("has no {}", membership::SECRET_KUBECONFIG))
    })?;
    Ok((kubeconfig, text(membership::SECRET_INVENTORY_NAMESPACE)))
}

/// Resolves once the id property no longer says `id`; until then it waits (retrying a failing
/// watch), so the agent can stop before writing anything under another id.
pub async fn id_changed(member: Client, id: ClusterId) -> IdentityError {
    let api: Api<v1beta1::ClusterProperty> = Api::all(member);
    let config = watcher::Config::default().fields(&format!("metadata.name={CLUSTER_ID_PROPERTY}"));
    let mut stream = std::pin::pin!(watcher::watcher(api, config));
    let mut seen = false;
    loop {
        let event = match stream.next().await {
            Some(Ok(event)) => event,
            Some(Err(error)) => {
                tracing::warn!(%error, "watching this cluster's id property; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            None => {
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let objects = match event {
            watcher::Event::Apply(p) | watcher::Event::InitApply(p) => {
                seen = true;
                vec![p]
            }
            watcher::Event::Delete(_) => {
                return IdentityError::Removed {
                    was: id.to_string(),
                };
            }
            watcher::Event::Init => {
                seen = false;
                Vec::new()
            }
            watcher::Event::InitDone => {
                if !seen {
                    return IdentityError::Removed {
                        was: id.to_string(),
                    };
                }
                Vec::new()
            }
        };
        for property in objects {
            let now = value_of(property.spec.as_ref()).unwrap_or_default();
            if now != id.as_str() {
                return IdentityError::Changed {
                    was: id.to_string(),
                    now,
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_missing_id_or_hub_secret_means_not_joined_yet() {
        assert!(IdentityError::Missing.is_not_joined());
        assert!(IdentityError::HubSecretMissing.is_not_joined());
        // A Secret that exists but is malformed, or an id that changed, is an error to stop on.
        assert!(!IdentityError::HubSecret("has no kubeconfig".to_owned()).is_not_joined());
        assert!(
            !IdentityError::Removed {
                was: "c1".to_owned()
            }
            .is_not_joined()
        );
        assert!(
            !IdentityError::Credentials {
                issued: "c1".to_owned(),
                id: "c2".to_owned()
            }
            .is_not_joined()
        );
    }
}
