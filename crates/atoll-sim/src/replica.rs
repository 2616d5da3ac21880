//! One agent replica of a member: its watches (views of the member and the hub), the marks
//! its watch events make, its election state and its reconciler, exactly as the agent drives
//! them; only the I/O is simulated.

use std::sync::Arc;
use std::time::{Duration, Instant};

use atoll_api::endpoint::ServedSlice;
use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::interner::Interner;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_core::dirty::{Concerned, DirtyQueue};
use atoll_core::keys;
use atoll_core::leader::Elector;
use atoll_core::plan::{Member as PlanMember, Observed, scope};
use atoll_core::reconciler::{Config, Reconciler};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::apiserver::{Hub, Member};
use crate::store::{Change, Kind, Obj, Watch};

/// The watches of one replica.
#[derive(Clone, Debug, Default)]
pub struct Watches {
    pub exports: Watch<ServiceExport>,
    pub services: Watch<Service>,
    pub slices: Watch<EndpointSlice>,
    pub namespaces: Watch<Namespace>,
    pub imports: Watch<ServiceImport>,
    pub records: Watch<ExportedService>,
    pub copies: Watch<ExportedEndpointSlice>,
    pub leases: Watch<Lease>,
}

/// Which watch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    Exports,
    Services,
    Slices,
    Namespaces,
    Imports,
    Records,
    Copies,
    Leases,
}

impl Which {
    pub const ALL: [Which; 8] = [
        Which::Exports,
        Which::Services,
        Which::Slices,
        Which::Namespaces,
        Which::Imports,
        Which::Records,
        Which::Copies,
        Which::Leases,
    ];

    pub fn on_hub(self) -> bool {
        matches!(self, Which::Records | Which::Copies | Which::Leases)
    }
}

/// What a change of each kind marks, as the agent's stores do.
#[derive(Clone, Debug, Default)]
struct Marks {
    exports: Concerned,
    services: Concerned,
    slices: Concerned,
    imports: Concerned,
    records: Concerned,
    copies: Concerned,
}

fn concern<K: Obj>(
    concerned: &mut Concerned,
    changes: &[Change<K>],
    services: impl Fn(&K) -> Vec<ServiceKey>,
    queue: &mut DirtyQueue,
) {
    for change in changes {
        let key = ObjectKey::of(change.object().meta());
        let touched = match change {
            Change::Applied(o) => concerned.applied(key, services(o)),
            Change::Deleted(_) => concerned.deleted(&key),
        };
        for service in touched {
            queue.mark(service);
        }
    }
}

fn slice_services(s: &EndpointSlice) -> Vec<ServiceKey> {
    keys::of_service_slice(s)
        .into_iter()
        .chain(keys::labelled_ref(&s.metadata, labels::SERVICE_NAME).map(keys::owned))
        .collect()
}

/// One replica.
#[derive(Debug)]
pub struct Replica {
    pub identity: String,
    pub watches: Watches,
    marks: Marks,
    pub elector: Elector,
    /// `None` while crashed.
    pub reconciler: Option<Reconciler>,
    /// When the replica last ran a step.
    pub last_step: Option<Instant>,
    /// A watch event that marks nothing (a heartbeat) woke the loop, as in the agent.
    pub woken: bool,
    /// A read of the kept decisions is asked for and not answered yet (as the agent's
    /// `kept::Reader`, which retries until a read succeeds).
    pub read_pending: bool,
}

/// A member's timings.
#[derive(Clone, Copy, Debug)]
pub struct Rhythm {
    pub interval: Duration,
    pub grace: Duration,
}

impl Replica {
    /// A replica of member `cluster` started at `now`: it lists every watch (fail-safe start:
    /// nothing is planned before every watch has listed) and reads the kept decisions (if
    /// `kept_readable`; else it asks again each step, as the agent's reader retries).
    pub fn start(
        identity: String,
        cluster: &str,
        rhythm: Rhythm,
        timings: atoll_core::leader::Timings,
        (member, hub): (&Member, &Hub),
        (now, wall): (Instant, &Time),
        kept_readable: bool,
    ) -> Self {
        let mut replica = Self {
            elector: Elector::new(identity.clone(), timings),
            identity,
            watches: Watches::default(),
            marks: Marks::default(),
            reconciler: None,
            last_step: None,
            woken: false,
            read_pending: false,
        };
        for which in Which::ALL {
            replica.relist(which, member, hub);
        }
        let kept = if !kept_readable {
            replica.read_pending = true;
            atoll_core::reconciler::KeptRead::Unreadable
        } else {
            kept_read(member.kept.as_deref())
        };
        let id = atoll_core::ClusterId::new(cluster).ok();
        replica.reconciler = id.map(|id| {
            let config = Config::new(
                PlanMember::new(id),
                atoll_core::liveness::Settings::new(rhythm.interval, rhythm.grace),
            );
            Reconciler::new(config, kept, now, wall)
        });
        replica
    }

    /// A relist of one watch (410 Gone, or the first list): its view becomes the current
    /// state, what each object concerns is learned afresh, and every service is marked, as
    /// the agent does.
    pub fn relist(&mut self, which: Which, member: &Member, hub: &Hub) {
        let (w, m) = (&mut self.watches, &mut self.marks);
        fn relearn<K: Obj>(
            concerned: &mut Concerned,
            kind: &Kind<K>,
            services: impl Fn(&K) -> Vec<ServiceKey>,
        ) {
            concerned.relist_started();
            for object in kind.all() {
                concerned.relisted(ObjectKey::of(object.meta()), services(object));
            }
            concerned.relist_done();
        }
        match which {
            Which::Exports => {
                w.exports.relist(&member.exports);
                relearn(&mut m.exports, &member.exports, |e| {
                    keys::named(&e.metadata).into_iter().collect()
                });
            }
            Which::Services => {
                w.services.relist(&member.services);
                relearn(&mut m.services, &member.services, |s| {
                    scope::of_service(s).into_iter().collect()
                });
            }
            Which::Slices => {
                w.slices.relist(&member.slices);
                relearn(&mut m.slices, &member.slices, slice_services);
            }
            Which::Namespaces => w.namespaces.relist(&member.namespaces),
            Which::Imports => {
                w.imports.relist(&member.imports);
                relearn(&mut m.imports, &member.imports, |i| {
                    keys::named(&i.metadata).into_iter().collect()
                });
            }
            Which::Records => {
                w.records.relist(&hub.records);
                relearn(&mut m.records, &hub.records, |r| vec![keys::of_record(r)]);
            }
            Which::Copies => {
                w.copies.relist(&hub.copies);
                relearn(&mut m.copies, &hub.copies, |c| vec![keys::of_copy(c)]);
            }
            Which::Leases => w.leases.relist(&hub.leases),
        }
        self.mark_everything();
    }

    fn mark_everything(&mut self) {
        if let Some(r) = &mut self.reconciler {
            r.marks().mark_everything();
        }
    }

    /// Changes not yet delivered to `which`.
    pub fn pending(&self, which: Which, member: &Member, hub: &Hub) -> usize {
        let w = &self.watches;
        match which {
            Which::Exports => w.exports.pending(&member.exports),
            Which::Services => w.services.pending(&member.services),
            Which::Slices => w.slices.pending(&member.slices),
            Which::Namespaces => w.namespaces.pending(&member.namespaces),
            Which::Imports => w.imports.pending(&member.imports),
            Which::Records => w.records.pending(&hub.records),
            Which::Copies => w.copies.pending(&hub.copies),
            Which::Leases => w.leases.pending(&hub.leases),
        }
    }

    /// Delivers up to `count` changes to `which` (and, with `duplicate`, the last one again).
    pub fn deliver(
        &mut self,
        which: Which,
        count: usize,
        duplicate: bool,
        member: &Member,
        hub: &Hub,
    ) {
        let mut inbox = DirtyQueue::default();
        let (w, m) = (&mut self.watches, &mut self.marks);
        fn go<K: Obj>(
            watch: &mut Watch<K>,
            kind: &Kind<K>,
            count: usize,
            duplicate: bool,
        ) -> Vec<Change<K>> {
            let mut changes = watch.deliver(kind, count);
            if duplicate && let Some(again) = watch.duplicate() {
                changes.push(again);
            }
            changes
        }
        match which {
            Which::Exports => {
                let c = go(&mut w.exports, &member.exports, count, duplicate);
                concern(
                    &mut m.exports,
                    &c,
                    |e| keys::named(&e.metadata).into_iter().collect(),
                    &mut inbox,
                );
            }
            Which::Services => {
                let c = go(&mut w.services, &member.services, count, duplicate);
                concern(
                    &mut m.services,
                    &c,
                    |s| scope::of_service(s).into_iter().collect(),
                    &mut inbox,
                );
            }
            Which::Slices => {
                let c = go(&mut w.slices, &member.slices, count, duplicate);
                concern(&mut m.slices, &c, slice_services, &mut inbox);
            }
            Which::Namespaces => {
                let c = go(&mut w.namespaces, &member.namespaces, count, duplicate);
                for change in &c {
                    inbox.mark_namespace(
                        change.object().metadata.name.as_deref().unwrap_or_default(),
                    );
                }
            }
            Which::Imports => {
                let c = go(&mut w.imports, &member.imports, count, duplicate);
                concern(
                    &mut m.imports,
                    &c,
                    |i| keys::named(&i.metadata).into_iter().collect(),
                    &mut inbox,
                );
            }
            Which::Records => {
                let c = go(&mut w.records, &hub.records, count, duplicate);
                concern(&mut m.records, &c, |r| vec![keys::of_record(r)], &mut inbox);
            }
            Which::Copies => {
                let c = go(&mut w.copies, &hub.copies, count, duplicate);
                concern(&mut m.copies, &c, |c| vec![keys::of_copy(c)], &mut inbox);
            }
            // Heartbeats only wake the loop: the liveness view names what changed.
            Which::Leases => {
                if !go(&mut w.leases, &hub.leases, count, duplicate).is_empty() {
                    self.woken = true;
                }
            }
        }
        if let Some(r) = &mut self.reconciler {
            r.marks().absorb(inbox);
        }
    }

    /// What the agent's stores would hand the reconciler now.
    pub fn observed(&self) -> (Observed, Vec<Arc<Lease>>) {
        let w = &self.watches;
        let (mcs, local): (Vec<_>, Vec<_>) = w.slices.objects().into_iter().partition(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::ENDPOINTSLICE_MANAGED_BY))
                .map(String::as_str)
                == Some(labels::ATOLL_ENDPOINTSLICE_MANAGER)
        });
        let local = local
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .is_some_and(|l| l.contains_key(labels::KUBERNETES_SERVICE_NAME))
            })
            .collect();
        // Kept as the agent keeps them: values shared, endpoints as their digest.
        let mut interner = Interner::default();
        let observed = Observed {
            exports: w.exports.objects(),
            services: w.services.objects(),
            service_slices: local,
            mcs_slices: mcs
                .iter()
                .map(|s| Arc::new(McsSlice::kept(ServedSlice::from(s.as_ref()), &mut interner)))
                .collect(),
            namespaces: w.namespaces.objects(),
            imports: w.imports.objects(),
            records: w.records.objects(),
            hub_slices: w.copies.objects(),
            ..Observed::default()
        };
        (observed, w.leases.objects())
    }
}

/// What an agent reading the kept text `text` takes: unreadable text is copied aside and counts
/// as absent, as `atoll_agent::kept::read` does.
pub fn kept_read(text: Option<&str>) -> atoll_core::reconciler::KeptRead {
    use atoll_core::reconciler::KeptRead;
    match text.map(atoll_core::liveness::Persisted::parse) {
        Some(Some(kept)) => KeptRead::Found(kept),
        Some(None) | None => KeptRead::Absent,
    }
}
