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

    /// What each member holds and has left out.
    pub fn report(&self) -> Vec<MemberReport> {
        self.with(|l| l.report())
    }

    /// Sets the held-bytes gauge of every member (`gone`: members set before, now holding
    /// nothing, are set to zero); returns the members set.
    pub fn publish_held(
        &self,
        gauge: &prometheus_client::metrics::family::Family<
            crate::metrics::ClusterLabels,
            prometheus_client::metrics::gauge::Gauge,
        >,
        gone: &std::collections::BTreeSet<String>,
    ) -> std::collections::BTreeSet<String> {
        let now: std::collections::BTreeMap<String, usize> = self
            .report()
            .into_iter()
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

    /// What members have left out, as the caps report what they leave out.
    pub fn over_limits(&self) -> Vec<OverLimit> {
        let budget = self.with(|l| l.budget());
        let mut out = Vec::new();
        for member in self.report() {
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
                weigh: T::weigh,
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
    weigh: fn(&T) -> (usize, Option<Reason>),
}

impl<T: Resource> Gate<T> {
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
        let (bytes, oversize) = (self.weigh)(object);
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

fn namespace_and_name<T: Resource>(object: &T) -> (&str, &str) {
    let meta = object.meta();
    (
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
    )
}
