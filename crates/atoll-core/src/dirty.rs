//! Which services need a pass, from watch events.
//!
//! Every watch event names the object it is about; [`Concerned`] remembers which services each
//! object concerned when last seen, so an update that moves an object from one service to
//! another (a relabelled EndpointSlice) marks both, and a deletion marks what the object was
//! about. The marks go into a [`DirtyQueue`]: services in the order they first became dirty,
//! each once, taken a bounded batch at a time so a burst over many services cannot hold back
//! the next pass over one service for long.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::keys::{ObjectKey, ServiceKey};

/// Services waiting for a pass.
#[derive(Clone, Debug, Default)]
pub struct DirtyQueue {
    order: VecDeque<ServiceKey>,
    queued: BTreeSet<ServiceKey>,
    namespaces: BTreeSet<String>,
    everything: bool,
}

/// What one pass is to cover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Batch {
    /// Every service (start-up, a relist, a change that concerns every service).
    Everything,
    /// These services, and every service of these namespaces.
    Some {
        services: BTreeSet<ServiceKey>,
        namespaces: BTreeSet<String>,
    },
}

impl DirtyQueue {
    /// `key` needs a pass; a service already waiting keeps its place.
    pub fn mark(&mut self, key: ServiceKey) {
        if !self.everything && self.queued.insert(key.clone()) {
            self.order.push_back(key);
        }
    }

    /// Every service of `namespace` needs a pass (it appeared, went, or changed).
    pub fn mark_namespace(&mut self, namespace: &str) {
        if !self.everything {
            self.namespaces.insert(namespace.to_owned());
        }
    }

    /// Every service needs a pass.
    pub fn mark_everything(&mut self) {
        self.everything = true;
        self.order.clear();
        self.queued.clear();
        self.namespaces.clear();
    }

    /// Takes in every mark of `other` (marks gathered elsewhere, say by watches while a pass
    /// ran), behind those already waiting.
    pub fn absorb(&mut self, other: DirtyQueue) {
        if other.everything {
            self.mark_everything();
            return;
        }
        for key in other.order {
            self.mark(key);
        }
        for namespace in other.namespaces {
            self.mark_namespace(&namespace);
        }
    }

    /// Whether nothing waits.
    pub fn is_empty(&self) -> bool {
        !self.everything && self.order.is_empty() && self.namespaces.is_empty()
    }

    /// Services waiting (`None`: everything).
    pub fn len(&self) -> Option<usize> {
        (!self.everything).then_some(self.order.len())
    }

    /// The next pass's batch: everything when that is due, otherwise the namespaces and at most
    /// `limit` services, longest waiting first. `None` when nothing waits.
    pub fn take(&mut self, limit: usize) -> Option<Batch> {
        if self.everything {
            self.everything = false;
            return Some(Batch::Everything);
        }
        if self.is_empty() {
            return None;
        }
        let count = self.order.len().min(limit.max(1));
        let services: BTreeSet<ServiceKey> = self.order.drain(..count).collect();
        for key in &services {
            self.queued.remove(key);
        }
        Some(Batch::Some {
            services,
            namespaces: std::mem::take(&mut self.namespaces),
        })
    }
}

/// The services each object of one watch concerned when last seen.
///
/// Every member holds this for every hub object and MCS slice, so it is kept small: an object
/// is known by a keyed 64-bit hash of its namespace and name (the key is random per process,
/// so no one can pick names that collide; a collision among a fleet's objects is about as likely
/// as 1 in 10^9 and would at worst mark a service needlessly, or leave a moved object's old
/// service to the safety net), and each service is held once, shared by every object that
/// concerns it.
#[derive(Clone, Debug, Default)]
pub struct Concerned {
    hasher: foldhash::quality::RandomState,
    /// Each service concerned by some known object, once.
    services: HashMap<ServiceKey, Arc<ServiceKey>>,
    last: HashMap<u64, Box<[Arc<ServiceKey>]>>,
    /// While a relist is under way: what it has listed so far.
    relisting: Option<HashMap<u64, Box<[Arc<ServiceKey>]>>>,
}

impl Concerned {
    fn slot(&self, key: &ObjectKey) -> u64 {
        self.hasher.hash_one((&key.namespace, &key.name))
    }

    fn shared(&mut self, services: Vec<ServiceKey>) -> Box<[Arc<ServiceKey>]> {
        services
            .into_iter()
            .map(|s| match self.services.get(&s) {
                Some(shared) => shared.clone(),
                None => {
                    let shared = Arc::new(s.clone());
                    self.services.insert(s, shared.clone());
                    shared
                }
            })
            .collect()
    }

    /// Forgets `services` of one object, and each service no known object concerns any more.
    fn release(&mut self, services: Box<[Arc<ServiceKey>]>) -> Vec<ServiceKey> {
        let mut out = Vec::with_capacity(services.len());
        for service in services.into_vec() {
            // Held here and by the table: no object concerns it any more.
            if Arc::strong_count(&service) == 2 {
                self.services.remove(service.as_ref());
            }
            out.push(Arc::unwrap_or_clone(service));
        }
        out
    }

    /// The object `key` now concerns `services`: returns every service it concerned before or
    /// concerns now.
    pub fn applied(&mut self, key: ObjectKey, services: Vec<ServiceKey>) -> Vec<ServiceKey> {
        let slot = self.slot(&key);
        let shared = self.shared(services.clone());
        let mut touched = match self.last.insert(slot, shared) {
            Some(before) => self.release(before),
            None => Vec::new(),
        };
        for s in services {
            if !touched.contains(&s) {
                touched.push(s);
            }
        }
        touched
    }

    /// The object `key` is gone: returns the services it concerned.
    pub fn deleted(&mut self, key: &ObjectKey) -> Vec<ServiceKey> {
        let slot = self.slot(key);
        match self.last.remove(&slot) {
            Some(before) => self.release(before),
            None => Vec::new(),
        }
    }

    /// A relist begins: what it lists replaces everything once it is done.
    pub fn relist_started(&mut self) {
        self.relisting = Some(HashMap::new());
    }

    /// One object of the relist.
    pub fn relisted(&mut self, key: ObjectKey, services: Vec<ServiceKey>) {
        let slot = self.slot(&key);
        let shared = self.shared(services);
        let previous = self
            .relisting
            .get_or_insert_with(HashMap::new)
            .insert(slot, shared);
        if let Some(previous) = previous {
            self.release(previous);
        }
    }

    /// The relist is complete: returns every service concerned before or after it (objects
    /// that went while the watch was down give no deletion event).
    pub fn relist_done(&mut self) -> BTreeSet<ServiceKey> {
        let listed = self.relisting.take().unwrap_or_default();
        let old = std::mem::replace(&mut self.last, listed);
        let mut touched: BTreeSet<ServiceKey> = self
            .last
            .values()
            .flat_map(|s| s.iter().map(|k| k.as_ref().clone()))
            .collect();
        for services in old.into_values() {
            touched.extend(self.release(services));
        }
        touched
    }

    /// Objects known.
    pub fn len(&self) -> usize {
        self.last.len()
    }

    /// Whether no object is known.
    pub fn is_empty(&self) -> bool {
        self.last.is_empty()
    }

    /// Services some known object (or one being relisted) concerns.
    pub fn services(&self) -> usize {
        self.services.len()
    }
}

/// When the services of failed passes are tried again: each service on its own schedule,
/// doubling from [`Retries::FIRST`] to [`Retries::LAST`] while its passes keep failing, so one
/// service the API keeps refusing is not retried in a tight loop and does not slow the rest.
#[derive(Clone, Debug, Default)]
pub struct Retries {
    attempts: BTreeMap<ServiceKey, u32>,
    due: BTreeMap<ServiceKey, Instant>,
    /// A failed full pass: attempts and when it is due again.
    everything: Option<(u32, Instant)>,
}

impl Retries {
    pub const FIRST: Duration = Duration::from_millis(500);
    pub const LAST: Duration = Duration::from_secs(30);

    fn delay(attempts: u32) -> Duration {
        Self::FIRST
            .saturating_mul(1 << attempts.saturating_sub(1).min(16))
            .min(Self::LAST)
    }

    /// A pass over `scope` (every service when `None`) failed some write at `now`.
    pub fn failed(&mut self, scope: Option<&BTreeSet<ServiceKey>>, now: Instant) {
        match scope {
            None => {
                let attempts = self.everything.map_or(1, |(a, _)| a + 1);
                self.everything = Some((attempts, now + Self::delay(attempts)));
            }
            Some(keys) => {
                for key in keys {
                    let attempts = self.attempts.entry(key.clone()).or_default();
                    *attempts += 1;
                    self.due.insert(key.clone(), now + Self::delay(*attempts));
                }
            }
        }
    }

    /// A pass over `scope` wrote everything it planned: its services start afresh.
    pub fn succeeded(&mut self, scope: Option<&BTreeSet<ServiceKey>>) {
        match scope {
            None => {
                self.everything = None;
                self.attempts.clear();
                self.due.clear();
            }
            Some(keys) => {
                for key in keys {
                    self.attempts.remove(key);
                    self.due.remove(key);
                }
            }
        }
    }

    /// Every service waiting for a retry is due at `now` (their attempts stay counted: failing
    /// again, they wait as long as they would have).
    pub fn expedite(&mut self, now: Instant) {
        for at in self.due.values_mut() {
            *at = (*at).min(now);
        }
        if let Some((_, at)) = &mut self.everything {
            *at = (*at).min(now);
        }
    }

    /// What is due at `now` (taken off the schedule; its attempts are remembered until a pass
    /// succeeds): the services, and whether a full pass is.
    pub fn take_due(&mut self, now: Instant) -> (Vec<ServiceKey>, bool) {
        let due: Vec<ServiceKey> = self
            .due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &due {
            self.due.remove(key);
        }
        let everything = self.everything.is_some_and(|(_, at)| at <= now);
        if everything && let Some((attempts, _)) = self.everything {
            // Stays scheduled far away until it succeeds or fails again.
            self.everything = Some((attempts, now + Self::LAST * 1000));
        }
        (due, everything)
    }

    /// How long until the next retry is due.
    pub fn next(&self, now: Instant) -> Option<Duration> {
        self.due
            .values()
            .copied()
            .chain(self.everything.map(|(_, at)| at))
            .min()
            .map(|at| at.saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ServiceKey {
        ServiceKey::new("demo", name)
    }

    #[test]
    fn absorbed_marks_queue_behind_those_waiting_and_everything_wins() {
        let mut queue = DirtyQueue::default();
        queue.mark(key("a"));
        let mut inbox = DirtyQueue::default();
        inbox.mark(key("b"));
        inbox.mark(key("a"));
        inbox.mark_namespace("other");
        queue.absorb(inbox);
        assert_eq!(
            queue.take(10),
            Some(Batch::Some {
                services: BTreeSet::from([key("a"), key("b")]),
                namespaces: BTreeSet::from(["other".to_owned()]),
            })
        );
        let mut inbox = DirtyQueue::default();
        inbox.mark_everything();
        queue.mark(key("c"));
        queue.absorb(inbox);
        assert_eq!(queue.take(10), Some(Batch::Everything));
        assert!(queue.is_empty());
    }

    #[test]
    fn services_come_out_once_in_the_order_they_became_dirty_a_batch_at_a_time() {
        let mut queue = DirtyQueue::default();
        for name in ["b", "a", "b", "c", "a", "d"] {
            queue.mark(key(name));
        }
        assert_eq!(queue.len(), Some(4));
        let Some(Batch::Some { services, .. }) = queue.take(3) else {
            panic!("expected a batch of services");
        };
        assert_eq!(services, BTreeSet::from([key("a"), key("b"), key("c")]));
        // "b" was taken: marking it again queues it behind "d".
        queue.mark(key("b"));
        assert_eq!(
            queue.take(1),
            Some(Batch::Some {
                services: BTreeSet::from([key("d")]),
                namespaces: BTreeSet::new()
            })
        );
        assert_eq!(
            queue.take(10),
            Some(Batch::Some {
                services: BTreeSet::from([key("b")]),
                namespaces: BTreeSet::new()
            })
        );
        assert_eq!(queue.take(10), None);
        assert!(queue.is_empty());
    }

    #[test]
    fn a_new_service_waits_at_most_for_the_batches_ahead_of_it() {
        let mut queue = DirtyQueue::default();
        for i in 0..1000 {
            queue.mark(key(&format!("burst-{i}")));
        }
        queue.mark(key("single"));
        let mut passes = 0;
        loop {
            passes += 1;
            let Some(Batch::Some { services, .. }) = queue.take(256) else {
                panic!("the single service never came");
            };
            if services.contains(&key("single")) {
                break;
            }
        }
        assert_eq!(passes, 4, "1001 services in batches of 256");
    }

    #[test]
    fn everything_replaces_what_waits_and_namespaces_go_with_the_next_batch() {
        let mut queue = DirtyQueue::default();
        queue.mark(key("a"));
        queue.mark_namespace("other");
        queue.mark_everything();
        queue.mark(key("b"));
        assert_eq!(queue.len(), None);
        assert_eq!(queue.take(10), Some(Batch::Everything));
        assert!(queue.is_empty());
        queue.mark_namespace("other");
        assert_eq!(
            queue.take(10),
            Some(Batch::Some {
                services: BTreeSet::new(),
                namespaces: BTreeSet::from(["other".to_owned()])
            })
        );
    }

    #[test]
    fn an_object_that_moves_or_goes_marks_what_it_concerned() {
        let mut concerned = Concerned::default();
        let slice = ObjectKey::new("demo", "slice-1");
        assert_eq!(concerned.applied(slice.clone(), vec![key("a")]), [key("a")]);
        assert_eq!(
            concerned.applied(slice.clone(), vec![key("b")]),
            [key("a"), key("b")],
            "relabelled from a to b"
        );
        let other = ObjectKey::new("demo", "slice-2");
        concerned.applied(other.clone(), vec![key("b")]);
        assert_eq!(concerned.services(), 1, "each service held once");
        assert_eq!(concerned.deleted(&slice), [key("b")]);
        assert!(concerned.deleted(&slice).is_empty());
        assert_eq!(concerned.services(), 1, "slice-2 still concerns b");
        assert_eq!(concerned.deleted(&other), [key("b")]);
        assert_eq!(
            concerned.services(),
            0,
            "nothing kept for services no object concerns"
        );
    }

    #[test]
    fn a_relist_marks_what_went_while_the_watch_was_down() {
        let mut concerned = Concerned::default();
        concerned.applied(ObjectKey::new("demo", "gone"), vec![key("a")]);
        concerned.applied(ObjectKey::new("demo", "kept"), vec![key("b")]);
        concerned.relist_started();
        concerned.relisted(ObjectKey::new("demo", "kept"), vec![key("b")]);
        concerned.relisted(ObjectKey::new("demo", "new"), vec![key("c")]);
        assert_eq!(
            concerned.relist_done(),
            BTreeSet::from([key("a"), key("b"), key("c")])
        );
        assert_eq!(concerned.len(), 2);
        assert_eq!(
            concerned.services(),
            2,
            "a is forgotten with the object that went"
        );
        assert_eq!(concerned.deleted(&ObjectKey::new("demo", "gone")), []);
    }

    #[test]
    fn a_failing_service_backs_off_on_its_own_and_starts_afresh_once_it_succeeds() {
        let start = Instant::now();
        let mut retries = Retries::default();
        let (a, b) = (BTreeSet::from([key("a")]), BTreeSet::from([key("b")]));
        retries.failed(Some(&a), start);
        retries.failed(Some(&b), start);
        assert_eq!(retries.next(start), Some(Retries::FIRST));
        assert_eq!(
            retries.take_due(start),
            (vec![], false),
            "nothing before its time"
        );
        let (due, _) = retries.take_due(start + Retries::FIRST);
        assert_eq!(due, [key("a"), key("b")]);
        // a fails again (doubling), b succeeds.
        let t = start + Retries::FIRST;
        retries.failed(Some(&a), t);
        retries.succeeded(Some(&b));
        assert_eq!(retries.next(t), Some(Retries::FIRST * 2));
        for _ in 0..20 {
            retries.failed(Some(&a), t);
        }
        assert_eq!(retries.next(t), Some(Retries::LAST), "capped");
        retries.succeeded(Some(&a));
        assert_eq!(retries.next(t), None);
        retries.failed(Some(&a), t);
        assert_eq!(
            retries.next(t),
            Some(Retries::FIRST),
            "afresh after a success"
        );
    }

    #[test]
    fn a_failed_full_pass_is_retried_whole() {
        let start = Instant::now();
        let mut retries = Retries::default();
        retries.failed(None, start);
        assert_eq!(retries.take_due(start + Retries::FIRST), (vec![], true));
        assert_eq!(
            retries.take_due(start + Retries::FIRST),
            (vec![], false),
            "once"
        );
        retries.failed(None, start);
        assert_eq!(retries.next(start), Some(Retries::FIRST * 2));
        retries.succeeded(None);
        assert_eq!(retries.next(start), None);
    }

    #[test]
    fn expedited_retries_are_due_at_once_and_keep_their_attempts() {
        let start = Instant::now();
        let mut retries = Retries::default();
        let a = BTreeSet::from([key("a")]);
        for _ in 0..20 {
            retries.failed(Some(&a), start);
        }
        retries.failed(None, start);
        assert_eq!(retries.next(start), Some(Retries::FIRST));
        let later = start + Duration::from_secs(1);
        retries.expedite(later);
        assert_eq!(retries.take_due(later), (vec![key("a")], true));
        retries.failed(Some(&a), later);
        assert_eq!(
            retries.next(later),
            Some(Retries::LAST),
            "failing again, it waits as long as before"
        );
    }
}
