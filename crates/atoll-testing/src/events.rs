//! Waiting for the Events the agents record in a member.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

use crate::cluster_set::Member;
use crate::wait::wait_for;

/// Waits (30 s at most) until `member` holds an Event in `namespace` that `matches`; `what`
/// names it in the error.
pub async fn wait_event(
    member: &Member,
    namespace: &str,
    what: &str,
    matches: impl Fn(&Event) -> bool,
) -> anyhow::Result<()> {
    let events: Api<Event> = Api::namespaced(member.client.clone(), namespace);
    let matches = &matches;
    wait_for(
        &format!("{what} in {}", member.context),
        Duration::from_secs(30),
        || async {
            let list = events.list(&ListParams::default()).await?;
            Ok(if list.items.iter().any(matches) {
                Ok(())
            } else {
                Err("no such Event")
            })
        },
    )
    .await
}
