//! Kubernetes Events on ServiceExports. What to announce is decided by the plan
//! (`atoll_core::announce`); this publishes it, as every other write, only while this replica
//! leads and within what is left of its leadership (the [`Fence`]).

use atoll_api::keys::ObjectKey;
use atoll_core::announce::Announcement;
use atoll_core::events::About;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

use crate::fence::Fence;

/// Publishes Events for the leader.
#[derive(Clone)]
pub struct Announcer {
    pub recorder: Recorder,
    pub fence: Fence,
}

impl std::fmt::Debug for Announcer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Announcer").finish_non_exhaustive()
    }
}

impl Announcer {
    /// Publishes `event` about `reference` if this replica may write now, within its budget.
    async fn publish(&self, event: &Event, reference: &ObjectReference) -> Result<(), String> {
        let Some(budget) = self.fence.budget(std::time::Instant::now()) else {
            return Err("not leading: Event not sent".to_owned());
        };
        match tokio::time::timeout(budget, self.recorder.publish(event, reference)).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!("timed out after {budget:?}")),
        }
    }
}

fn event(announcement: &Announcement) -> Event {
    Event {
        type_: if announcement.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: announcement.reason.clone(),
        note: Some(announcement.note.clone()),
        action: announcement.action.to_owned(),
        secondary: None,
    }
}

/// Publishes `event` as the executor asks; whether it was published (the reconciler has it
/// published again if not). A failure is logged.
pub async fn publish(to: &Announcer, event: &atoll_core::events::Event) -> bool {
    let announcement = &event.announcement;
    match &event.about {
        About::Export { key, uid } => {
            let reference = ObjectReference {
                api_version: Some("multicluster.x-k8s.io/v1beta1".to_owned()),
                kind: Some("ServiceExport".to_owned()),
                namespace: Some(key.namespace.clone()),
                name: Some(key.name.clone()),
                uid: uid.clone(),
                ..Default::default()
            };
            match to.publish(&self::event(announcement), &reference).await {
                Ok(()) => true,
                Err(error) => {
                    tracing::warn!(%error, export = %key, reason = %announcement.reason, "publishing an Event failed: published again later");
                    false
                }
            }
        }
        About::Import(key) => announce_about(to, "ServiceImport", key, announcement, None).await,
        About::Member(related) => {
            let related = related.as_ref().map(|(kind, key)| hub_object(kind, key));
            announce_on_member(to, announcement, related).await
        }
    }
}

/// An Event on the MCS object `kind` `key`, about `related` (a hub object): Events on one
/// object with one reason are one series unless their related objects differ. Whether it was published (a replica that
/// does not lead, or a failed write, publishes nothing).
pub async fn announce_about(
    to: &Announcer,
    kind: &str,
    key: &ObjectKey,
    announcement: &Announcement,
    related: Option<ObjectReference>,
) -> bool {
    let reference = ObjectReference {
        api_version: Some("multicluster.x-k8s.io/v1beta1".to_owned()),
        kind: Some(kind.to_owned()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        ..Default::default()
    };
    let event = Event {
        secondary: related,
        ..event(announcement)
    };
    match to.publish(&event, &reference).await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, object = %key, reason = %announcement.reason, "publishing an Event failed");
            false
        }
    }
}

/// A reference to the hub object `key` of `kind` (`ExportedService`, `ExportedEndpointSlice`).
pub fn hub_object(kind: &str, key: &ObjectKey) -> ObjectReference {
    ObjectReference {
        api_version: Some(format!("{}/v1alpha1", atoll_api::hub::GROUP)),
        kind: Some(kind.to_owned()),
        namespace: Some(key.namespace.clone()),
        name: Some(key.name.clone()),
        ..Default::default()
    }
}

/// A Warning Event on this member's own id ClusterProperty (members cannot write Events on
/// the hub), about `related` (a hub object) when there is one.
pub async fn announce_on_member(
    to: &Announcer,
    announcement: &Announcement,
    related: Option<ObjectReference>,
) -> bool {
    let reference = ObjectReference {
        api_version: Some("about.k8s.io/v1beta1".to_owned()),
        kind: Some("ClusterProperty".to_owned()),
        name: Some(atoll_api::labels::CLUSTER_ID_PROPERTY.to_owned()),
        ..Default::default()
    };
    let event = Event {
        secondary: related,
        ..event(announcement)
    };
    match to.publish(&event, &reference).await {
        Ok(()) => true,
        Err(error) => {
            tracing::warn!(%error, reason = %announcement.reason, "publishing an Event failed");
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warnings_become_warning_events() {
        let e = event(&Announcement {
            warning: true,
            reason: "NoService".into(),
            note: "no Service".into(),
            action: "Validate",
        });
        assert!(matches!(e.type_, EventType::Warning));
        assert_eq!(
            (e.reason.as_str(), e.action.as_str()),
            ("NoService", "Validate")
        );
        assert_eq!(e.note.as_deref(), Some("no Service"));
    }
}
