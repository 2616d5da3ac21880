//! The liveness decisions this member's agent keeps (`atoll_core::liveness::Persisted`), in a
//! ConfigMap of the member: read once before the first pass, so a restarted or newly elected
//! agent continues from its predecessor's decisions; written by the leader through the writer.
//!
//! A ConfigMap rather than the imports' status (a withdrawn cluster's imports may be gone, and
//! decisions are per cluster, not per service) or an annotation on the election Lease (which
//! exists only with an election and is renewed every two seconds): one small object per
//! member, written only when a decision changes, that `kubectl get` and `atoll status` can read.

use atoll_api::keys::ObjectKey;
use atoll_core::liveness::Persisted;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client};

/// Name of the ConfigMap, in the agent's namespace.
pub const CONFIG_MAP: &str = atoll_core::membership::KEPT_CONFIG_MAP;
/// Its data key.
pub const DATA_KEY: &str = "liveness.json";

/// What a predecessor kept, if anything readable. A missing ConfigMap means a new member; an
/// unreadable one is logged and ignored (the agent then judges every cluster afresh).
pub async fn read(member: &Client, key: &ObjectKey) -> Result<Option<Persisted>, kube::Error> {
    let api: Api<ConfigMap> = Api::namespaced(member.clone(), &key.namespace);
    let Some(config_map) = api.get_opt(&key.name).await? else {
        return Ok(None);
    };
    let text = config_map
        .data
        .as_ref()
        .and_then(|d| d.get(DATA_KEY))
        .cloned()
        .unwrap_or_default();
    let kept = Persisted::parse(&text);
    if kept.is_none() {
        tracing::warn!(config_map = %key, "the kept liveness decisions are not readable (another format?): judging every source cluster afresh");
    }
    Ok(kept)
}
