//! Collections that may still be landing. A `deletecollection` the client gave up on (no
//! answer in time) may go on in the apiserver: it listed its slices when the request came and
//! deletes them by name, one after another, until its own request timeout. A source cluster
//! that comes back meanwhile gets its slices written again under the same names, and the
//! still-running collection deletes them: the cluster's endpoints vanish from the importer
//! once more, moments after it was restored (found by the fault simulation once collections
//! could land late: invariant (vii), schedule 5184155232990534534).
//!
//! So a collection that got no answer is remembered, and no slice it names is written again
//! until its named slices are all seen gone and [`SETTLE`] has passed since it was sent (seen
//! gone alone proves nothing: another request, the agent's own retry of the collection among
//! them, may have deleted them while this one still runs with its own list), or until
//! [`LANDS_WITHIN`] has passed; the services held back are planned again then. A cluster that
//! comes back just after an unanswered withdrawal thus gets its endpoints some seconds later,
//! rather than once and then not.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;

use crate::plan::{MemberWrites, SliceCollection};

/// How long an unanswered collection may go on in the apiserver: its default request timeout
/// (`--request-timeout`, 60 s), after which the apiserver gives up on it too.
pub const LANDS_WITHIN: Duration = Duration::from_secs(60);

/// How long after an unanswered collection was sent its slices must be gone for it to count as
/// over: a collection of at most `SLICES_PER_COLLECTION` slices takes a second or two even on
/// a slow etcd (`make bench-deletes`).
pub const SETTLE: Duration = Duration::from_secs(10);

/// One collection that got no answer.
#[derive(Clone, Debug)]
struct Pending {
    collection: SliceCollection,
    sent: Instant,
    /// Services whose slices were held back for it.
    held: BTreeSet<ServiceKey>,
}

/// The collections that may still be landing.
#[derive(Clone, Debug, Default)]
pub struct Landing {
    pending: Vec<Pending>,
}

impl Landing {
    /// `collections` were sent at `now` and got no answer.
    pub fn unanswered(&mut self, collections: Vec<SliceCollection>, now: Instant) {
        for collection in collections {
            self.pending.push(Pending {
                collection,
                sent: now,
                held: BTreeSet::new(),
            });
        }
    }

    /// Takes out of `writes` every slice a pending collection may still delete (`held`: the
    /// MCS slices the member holds now); returns the services held back before whose
    /// collections are over (to plan again).
    pub fn hold(
        &mut self,
        writes: &mut MemberWrites,
        held: &[Arc<McsSlice>],
        now: Instant,
    ) -> BTreeSet<ServiceKey> {
        // Every step comes here; almost none has a collection pending.
        if self.pending.is_empty() {
            return BTreeSet::new();
        }
        let present: BTreeSet<ObjectKey> = held
            .iter()
            .map(|s| ObjectKey::new(&s.namespace, &s.name))
            .collect();
        let mut released = BTreeSet::new();
        self.pending.retain_mut(|p| {
            let age = now.saturating_duration_since(p.sent);
            let over = age >= LANDS_WITHIN
                || (age >= SETTLE && !p.collection.slices.iter().any(|k| present.contains(k)));
            if over {
                released.append(&mut p.held);
            }
            !over
        });
        if self.pending.is_empty() {
            return released;
        }
        let pending = &mut self.pending;
        writes.apply_slices.retain(|slice| {
            let key = ObjectKey::of(&slice.metadata);
            let Some(p) = pending
                .iter_mut()
                .find(|p| p.collection.slices.contains(&key))
            else {
                return true;
            };
            if let Some(service) = slice
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::SERVICE_NAME))
            {
                p.held.insert(ServiceKey::new(&key.namespace, service));
            }
            false
        });
        released
    }

    /// When the oldest pending collection's bound runs out.
    pub fn next(&self, now: Instant) -> Option<Duration> {
        self.pending
            .iter()
            .map(|p| (p.sent + LANDS_WITHIN).saturating_duration_since(now))
            .min()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn slice(name: &str, service: &str) -> EndpointSlice {
        EndpointSlice {
            metadata: ObjectMeta {
                namespace: Some("demo".into()),
                name: Some(name.into()),
                labels: Some(BTreeMap::from([(
                    labels::SERVICE_NAME.to_owned(),
                    service.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            address_type: "IPv4".into(),
            endpoints: Vec::new(),
            ports: None,
        }
    }

    fn held(names: &[&str]) -> Vec<Arc<McsSlice>> {
        names
            .iter()
            .map(|n| Arc::new(McsSlice::from(&slice(n, "x"))))
            .collect()
    }

    fn collection() -> SliceCollection {
        SliceCollection {
            namespace: "demo".into(),
            source_clusters: vec!["c2".into()],
            slices: vec![
                ObjectKey::new("demo", "a.c2.ipv4.0"),
                ObjectKey::new("demo", "b.c2.ipv4.0"),
            ],
        }
    }

    fn writes(names: &[(&str, &str)]) -> MemberWrites {
        MemberWrites {
            apply_slices: names.iter().map(|(n, s)| slice(n, s)).collect(),
            ..MemberWrites::default()
        }
    }

    #[test]
    fn slices_an_unanswered_collection_names_wait_until_they_are_seen_gone() {
        // Mutation: writing them at once let the late collection delete them (the
        // simulation's invariant (vii)).
        let start = Instant::now();
        let mut landing = Landing::default();
        landing.unanswered(vec![collection()], start);
        let mut w = writes(&[("a.c2.ipv4.0", "a"), ("c.c2.ipv4.0", "c")]);
        let released = landing.hold(&mut w, &held(&["a.c2.ipv4.0", "b.c2.ipv4.0"]), start);
        assert!(released.is_empty());
        let names: Vec<_> = w
            .apply_slices
            .iter()
            .map(|s| s.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["c.c2.ipv4.0"], "a name it does not list is safe");
        // One of its slices still there: still held.
        let mut w = writes(&[]);
        assert!(
            landing
                .hold(&mut w, &held(&["b.c2.ipv4.0"]), start)
                .is_empty()
        );
        // Every one gone, but another request may have deleted them: not before it settled.
        assert!(landing.hold(&mut writes(&[]), &held(&[]), start).is_empty());
        // Every one gone and settled: it landed; the held service is planned again.
        let released = landing.hold(&mut writes(&[]), &held(&[]), start + SETTLE);
        assert_eq!(released, BTreeSet::from([ServiceKey::new("demo", "a")]));
        assert_eq!(landing.next(start), None, "nothing pending");
    }

    #[test]
    fn a_collection_that_never_lands_holds_nothing_past_the_bound() {
        let start = Instant::now();
        let mut landing = Landing::default();
        landing.unanswered(vec![collection()], start);
        let present = held(&["a.c2.ipv4.0"]);
        let mut w = writes(&[("a.c2.ipv4.0", "a")]);
        landing.hold(&mut w, &present, start);
        assert!(w.apply_slices.is_empty());
        assert_eq!(landing.next(start), Some(LANDS_WITHIN));
        let later = start + LANDS_WITHIN;
        let mut w = writes(&[("a.c2.ipv4.0", "a")]);
        let released = landing.hold(&mut w, &present, later);
        assert_eq!(w.apply_slices.len(), 1);
        assert_eq!(released, BTreeSet::from([ServiceKey::new("demo", "a")]));
    }
}
