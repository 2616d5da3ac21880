//! The per-member byte budget at the hub stores (see `atoll_core::budget`): each hub watch's
//! events pass a [`Gate`] before the store applies them, so an object that does not fit its
//! member's budget is never held (a version replacing a held one removes it), and the watch
//! lists again once the member has room for what was left out (at most every
//! [`RELIST_EVERY`]: a relist costs every member's objects, and a member must not make an
//! importer relist at will).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use atoll_api::hub::{self, ExportedEndpointSlice, ExportedService};
use atoll_core::budget::{Kind, Ledger, MemberReport, Verdict, Weighed};
use atoll_core::caps::OverLimit;
use atoll_core::validate::{Reason, names};
use atoll_watch::namespace_and_name;
use kube::Resource;
use kube::runtime::watcher::Event;
use tokio::sync::Notify;
use tokio::time::Instant;

/// Least time between two relists of one hub watch for the budget.
pub const RELIST_EVERY: Duration = Duration::from_secs(30);

/// Every member's held and left-out hub objects, shared by the two hub watches and the
/// reconcile loop (which reports them).
#[derive(Clone, Debug)]
pub struct Budget {
    ledger: Arc<Mutex<Ledger>>,
}

impl Budget {
    /// A budget of `bytes` per member; the hub namespace `own` (this member's) is exempt.
    pub fn new(bytes: usize, own: &str) -> Self {
        Self {
            ledger: Arc::new(Mutex::new(Ledger::new(bytes, own))),
        }
    }

    fn with<R>(&self, f: impl FnOnce(&mut Ledger) -> R) -> R {
        // Every change of the ledger is one call: it stays consistent if a holder panicked.
        f(&mut self.ledger.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// What each member holds and has left out, and the budget.
    pub fn report(&self) -> (Vec<MemberReport>, usize) {
        self.with(|l| (l.report(), l.budget()))
    }
}

/// Sets the held-bytes gauge of every member in `report` (`gone`: members set before, now
/// holding nothing, are set to zero); returns the members set.
pub fn publish_held(
    report: &[MemberReport],
    gauge: &prometheus_client::metrics::family::Family<
        crate::metrics::ClusterLabels,
        prometheus_client::metrics::gauge::Gauge,
    >,
    gone: &std::collections::BTreeSet<String>,
) -> std::collections::BTreeSet<String> {
    let now: std::collections::BTreeMap<String, usize> = report
        .iter()
        .map(|m| (cluster_of(&m.namespace), m.held_bytes))
        .collect();
    for cluster in gone.iter().filter(|c| !now.contains_key(*c)) {
        gauge
            .get_or_create(&crate::metrics::ClusterLabels {
                cluster: cluster.clone(),
            })
            .set(0);
    }
    for (cluster, bytes) in &now {
        gauge
            .get_or_create(&crate::metrics::ClusterLabels {
                cluster: cluster.clone(),
            })
            .set(i64::try_from(*bytes).unwrap_or(i64::MAX));
    }
    now.into_keys().collect()
}

/// What members have left out (`report`, against `budget`), as the caps report what they
/// leave out.
pub fn over_limits(report: &[MemberReport], budget: usize) -> Vec<OverLimit> {
    let mut out = Vec::new();
    for member in report {
        let cluster = cluster_of(&member.namespace);
        for ((kind, reason), (objects, bytes)) in &member.left_out {
            out.push(OverLimit {
                cluster: cluster.clone(),
                reason: *reason,
                kind: *kind,
                published: *bytes,
                limit: match reason {
                    Reason::Annotation => names::MAX_EXPORTED_ANNOTATION_BYTES,
                    _ => budget,
                },
                ignored: *objects,
                services: Default::default(),
                service: None,
            });
        }
    }
    out
}

impl Budget {
    /// The gate of the watch of `kind`'s objects, and the notification that makes it list
    /// again.
    pub fn gate<T: Weigh>(&self, kind: Kind) -> (Gate<T>, Arc<Notify>) {
        let relist = Arc::new(Notify::new());
        (
            Gate {
                budget: self.clone(),
                kind,
                relist: relist.clone(),
                last_relist: None,
                relist_pending: false,
                weighed: std::marker::PhantomData,
            },
            relist,
        )
    }
}

/// What a hub object weighs, and the per-object limit it breaks.
pub trait Weigh: Resource + Sized {
    fn weigh(&self) -> (usize, Option<Reason>);
}

impl Weigh for ExportedService {
    fn weigh(&self) -> (usize, Option<Reason>) {
        atoll_core::budget::weigh_record(self)
    }
}

impl Weigh for ExportedEndpointSlice {
    fn weigh(&self) -> (usize, Option<Reason>) {
        atoll_core::budget::weigh_copy(self)
    }
}

/// Passes a hub watch's events to its store within each member's budget.
#[derive(Debug)]
pub struct Gate<T> {
    budget: Budget,
    kind: Kind,
    relist: Arc<Notify>,
    last_relist: Option<Instant>,
    relist_pending: bool,
    weighed: std::marker::PhantomData<fn(&T)>,
}

impl<T: Weigh> Gate<T> {
    /// What the store applies of `event`.
    pub fn pass(&mut self, event: Event<Arc<T>>) -> Option<Event<Arc<T>>> {
        let kind = self.kind;
        match event {
            Event::Init => {
                self.budget.with(|l| l.begin_relist(kind));
                self.last_relist = Some(Instant::now());
                self.relist_pending = false;
                Some(Event::Init)
            }
            Event::InitDone => {
                self.budget.with(|l| l.end_relist(kind));
                Some(Event::InitDone)
            }
            Event::InitApply(o) => {
                let verdict = self.budget.with(|l| l.relist_apply(&self.weighed(&o)));
                (verdict == Verdict::Hold).then_some(Event::InitApply(o))
            }
            Event::Apply(o) => {
                let verdict = self.budget.with(|l| l.apply(&self.weighed(&o)));
                self.relist_if_room(&o);
                Some(match verdict {
                    Verdict::Hold => Event::Apply(o),
                    // The store drops what it held of it.
                    Verdict::LeaveOut(_) => Event::Delete(o),
                })
            }
            Event::Delete(o) => {
                let (namespace, name) = namespace_and_name(o.as_ref());
                self.budget.with(|l| l.delete(kind, namespace, name));
                self.relist_if_room(&o);
                Some(Event::Delete(o))
            }
        }
    }

    fn weighed<'a>(&self, object: &'a T) -> Weighed<'a> {
        let (namespace, name) = namespace_and_name(object);
        let (bytes, oversize) = object.weigh();
        Weighed {
            kind: self.kind,
            namespace,
            name,
            bytes,
            oversize,
        }
    }

    /// Lists again (now, or once [`RELIST_EVERY`] has passed since the last list) when
    /// `object`'s member has room for something it left out.
    fn relist_if_room(&mut self, object: &T) {
        let (namespace, _) = namespace_and_name(object);
        if self.relist_pending || !self.budget.with(|l| l.wants_relist(self.kind, namespace)) {
            return;
        }
        self.relist_pending = true;
        let at = self
            .last_relist
            .map_or_else(Instant::now, |last| last + RELIST_EVERY);
        let relist = self.relist.clone();
        tracing::info!(
            namespace,
            kind = self.kind.as_str(),
            "a member has room again for hub objects left out over its byte budget: listing them again"
        );
        tokio::spawn(async move {
            tokio::time::sleep_until(at).await;
            relist.notify_one();
        });
    }
}

/// The member whose hub namespace is `namespace`.
fn cluster_of(namespace: &str) -> String {
    namespace
        .strip_prefix(hub::NAMESPACE_PREFIX)
        .unwrap_or(namespace)
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A record of member `cluster` named `name`, weighing about `bytes` as served.
    fn record(cluster: &str, name: &str, bytes: usize) -> Arc<ExportedService> {
        let mut r: ExportedService = serde_json::from_value(serde_json::json!({
            "apiVersion": "hub.atoll.dev/v1alpha1", "kind": "ExportedService",
            "metadata": {"name": name, "namespace": hub::namespace_for(cluster)},
            "spec": {"cluster": cluster, "namespace": "demo", "name": name,
                     "exportCreated": "2026-01-01T00:00:00Z", "type": "ClusterSetIP", "ports": []}
        }))
        .unwrap_or_else(|e| panic!("decoding the test record: {e}"));
        r.spec.exported_annotations = [("a.example.com/x".to_owned(), "x".repeat(bytes))].into();
        Arc::new(r)
    }

    fn kind<T>(event: &Option<Event<T>>) -> &'static str {
        match event {
            None => "none",
            Some(Event::Apply(_)) => "apply",
            Some(Event::Delete(_)) => "delete",
            Some(Event::Init) => "init",
            Some(Event::InitApply(_)) => "init-apply",
            Some(Event::InitDone) => "init-done",
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_store_never_holds_a_member_past_its_budget_and_lists_again_once_at_most_every_30_s()
     {
        let budget = Budget::new(3000, "atoll-c1");
        let (mut gate, relist) = budget.gate::<ExportedService>(Kind::Record);
        assert_eq!(kind(&gate.pass(Event::Init)), "init");
        let listed = gate.pass(Event::InitApply(record("c2", "a", 1000)));
        assert_eq!(kind(&listed), "init-apply");
        assert_eq!(kind(&gate.pass(Event::InitDone)), "init-done");
        assert_eq!(
            kind(&gate.pass(Event::Apply(record("c2", "b", 1000)))),
            "apply"
        );
        // The third does not fit: the store gets a delete (it may hold an older version).
        assert_eq!(
            kind(&gate.pass(Event::Apply(record("c2", "c", 1000)))),
            "delete"
        );
        // The importer's own objects are never left out; another member has its own budget.
        let own = gate.pass(Event::Apply(record("c1", "big", 10_000)));
        assert_eq!(kind(&own), "apply");
        assert_eq!(
            kind(&gate.pass(Event::Apply(record("c3", "a", 2000)))),
            "apply"
        );
        let (report, bytes) = budget.report();
        assert_eq!(bytes, 3000);
        let left_out: Vec<(String, usize)> = report
            .iter()
            .map(|m| (m.namespace.clone(), m.objects_left_out()))
            .collect();
        assert_eq!(
            left_out,
            [("atoll-c2".to_owned(), 1), ("atoll-c3".to_owned(), 0)]
        );
        // Room made: a relist is asked for, but not sooner than 30 s after the last list.
        let notified = relist.notified();
        tokio::pin!(notified);
        assert_eq!(
            kind(&gate.pass(Event::Delete(record("c2", "a", 1000)))),
            "delete"
        );
        let _ = gate.pass(Event::Delete(record("c2", "b", 1000)));
        tokio::time::sleep(RELIST_EVERY - Duration::from_secs(1)).await;
        assert!(
            futures::FutureExt::now_or_never(notified.as_mut()).is_none(),
            "relisted before 30 s"
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(futures::FutureExt::now_or_never(notified.as_mut()).is_some());
        // The relist holds what fits now.
        assert_eq!(kind(&gate.pass(Event::Init)), "init");
        let back = gate.pass(Event::InitApply(record("c2", "c", 1000)));
        assert_eq!(kind(&back), "init-apply");
        assert_eq!(kind(&gate.pass(Event::InitDone)), "init-done");
        assert_eq!(budget.report().0[0].objects_left_out(), 0);
    }
}
