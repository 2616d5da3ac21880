//! `deletecollection` of MCS slices as a member's apiserver carries it out: it lists what the
//! label selector matches when the request comes, then deletes those names one after another.
//! A client that times out does not stop it: the deletions may land seconds later, after the
//! importer planned again (a cluster back, its slices re-created under the same names). And
//! invariant (vii): a collection deletes nothing its plan did not name.

use std::time::Duration;

use atoll_api::keys::ObjectKey;
use atoll_core::plan::SliceCollection;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::invariants::WriteKind;
use crate::world::{LateCollection, World};

/// Whether the collection's label selector matches an object with `meta`.
pub fn in_collection(collection: &SliceCollection, meta: &ObjectMeta) -> bool {
    let label = |key: &str| {
        meta.labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
    };
    meta.namespace.as_deref() == Some(collection.namespace.as_str())
        && label(atoll_api::labels::ENDPOINTSLICE_MANAGED_BY)
            == Some(atoll_api::labels::ATOLL_ENDPOINTSLICE_MANAGER)
        && label(atoll_api::labels::SOURCE_CLUSTER).is_some_and(|c| collection.selects(c))
}

impl World {
    /// Member `m`'s apiserver receives `collection` (the call was let through): it lists what
    /// the selector matches now and deletes it, now or, while its collections are late, later
    /// with no answer to the client (`Err(0)`).
    pub(crate) fn delete_collection(
        &mut self,
        m: usize,
        collection: &SliceCollection,
    ) -> Result<(), u16> {
        let name = self.members[m].name.clone();
        if let Some(code) = self.members[m].refuse_collections {
            return Err(code);
        }
        let listed: Vec<(ObjectKey, Option<String>)> =
            self.apis
                .members
                .get(&name)
                .map_or_else(Vec::new, |member| {
                    member
                        .slices
                        .all()
                        .filter(|s| in_collection(collection, &s.metadata))
                        .map(|s| (ObjectKey::of(&s.metadata), s.metadata.uid.clone()))
                        .collect()
                });
        if self.members[m].late_collections {
            let lands = self.elapsed + Duration::from_millis(500 + (self.quanta % 6) * 500);
            let sent = self.now();
            self.late.push(LateCollection {
                lands,
                sent,
                member: name,
                listed,
                collection: collection.clone(),
            });
            self.exercise("collection landing late", 1);
            return Err(0);
        }
        self.collect(&name, &listed, collection, self.now());
        Ok(())
    }

    /// Lands every late collection that is due.
    pub(crate) fn land_late(&mut self) {
        let now = self.elapsed;
        let (due, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.late)
            .into_iter()
            .partition(|l| l.lands <= now);
        self.late = later;
        for late in due {
            self.collect(&late.member, &late.listed, &late.collection, late.sent);
        }
    }

    /// Deletes `listed` by name in `member`'s apiserver, checking (vii) for each; (i) judges
    /// each deletion as of `sent`.
    fn collect(
        &mut self,
        member: &str,
        listed: &[(ObjectKey, Option<String>)],
        collection: &SliceCollection,
        sent: std::time::Instant,
    ) {
        for (key, uid) in listed {
            // By name, as the apiserver deletes: a slice re-created under that name since the
            // request came goes too, which no plan asked for.
            let now_uid = self
                .apis
                .members
                .get(member)
                .and_then(|m| m.slices.get(key))
                .map(|s| s.metadata.uid.clone());
            if let Some(now_uid) = now_uid
                && &now_uid != uid
                && !self.checks.quiet
            {
                self.checks.violate_at(
                    7,
                    format!(
                        "{member} deleted {key}, re-created after the collection for it was sent"
                    ),
                    self.now(),
                );
            }
            if !collection.slices.contains(key) && !self.checks.quiet {
                self.checks.violate_at(
                    7,
                    format!(
                        "{member} deleted {key} with a collection for {:?} that did not name it",
                        collection.source_clusters
                    ),
                    self.now(),
                );
            }
            self.delete_decided(member, "EndpointSlice", key, sent);
        }
        self.checks.wrote(member, WriteKind::Member, self.now());
    }
}
