//! Carries out a [`Step`]: the one executor of the agent and of the fault simulation. It decides
//! the order of the writes, what runs side by side, which writes are skipped for another's
//! failure, the fallback of a refused collection, and what every answer teaches the reconciler
//! (the [`Outcome`]). The calls themselves go through an [`Apiserver`]: the agent's (kube, fenced,
//! logged, counted) or the simulator's in-memory apiservers. So what the simulation proves
//! about the writes is what the agent does, not a copy of it.
//!
//! The order, and why:
//! 1. the kept liveness decisions first: a withdrawal is kept before its deletions, so a crash
//!    between the two cannot give a dead cluster a fresh grace (a refused keep stops nothing);
//! 2. then side by side: the hub writes, and the heartbeat renewal as soon as they are done (it
//!    claims them; never behind the member's writes: a withdrawal of thousands of slices took
//!    20 s, and the member, its beat held back, looked dead to everyone and blind to itself);
//!    the member's writes (what traffic follows first: derived Services, ServiceImports, MCS
//!    slices and their deletions; the imports' statuses only after them, and not for an import
//!    whose apply failed: it may not exist); the exports' statuses; the ClusterProfile's;
//! 3. the Events on rejected hub records.

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::announce::Announcement;
use crate::events::{About, Event};
use crate::keys::{of_copy, of_record};
use crate::liveness::{Persisted, copy_claim_name, record_claim_name};
use crate::plan::{
    ExportStatus, ImportApply, ImportStatus, Plan, ProfileStatus, Refusal, SliceCollection,
};
use crate::reconciler::{Answer, HubWriteResult, Keeping, Outcome, Renewal, Step};

#[cfg(test)]
mod tests;

/// One API write the executor asks for.
#[derive(Clone, Copy, Debug)]
pub enum Write<'a> {
    /// The kept liveness decisions (a ConfigMap in the member).
    Keep(&'a Persisted),
    /// This member's heartbeat Lease on the hub, with how keeping stands and the last error
    /// it shows.
    Renew(&'a Renewal, &'a Keeping, &'a str),
    Record(&'a ExportedService),
    Copy(&'a ExportedEndpointSlice),
    DeleteRecord(&'a ObjectKey),
    DeleteCopy(&'a ObjectKey),
    Profile(&'a ProfileStatus),
    Derived(&'a Service),
    Import(&'a ImportApply),
    Slice(&'a EndpointSlice),
    DeleteImport(&'a ObjectKey),
    DeleteDerived(&'a ObjectKey),
    DeleteSlice(&'a ObjectKey),
    /// One `deletecollection` request (its fallback is the executor's).
    DeleteSlices(&'a SliceCollection),
    ImportStatus(&'a ImportStatus),
    ExportStatus(&'a ExportStatus),
}

impl Write<'_> {
    /// The kind of write, as the variant is named (for counts and logs).
    pub fn kind(self) -> &'static str {
        match self {
            Write::Keep(_) => "Keep",
            Write::Renew(..) => "Renew",
            Write::Record(_) => "Record",
            Write::Copy(_) => "Copy",
            Write::DeleteRecord(_) => "DeleteRecord",
            Write::DeleteCopy(_) => "DeleteCopy",
            Write::Profile(_) => "Profile",
            Write::Derived(_) => "Derived",
            Write::Import(_) => "Import",
            Write::Slice(_) => "Slice",
            Write::DeleteImport(_) => "DeleteImport",
            Write::DeleteDerived(_) => "DeleteDerived",
            Write::DeleteSlice(_) => "DeleteSlice",
            Write::DeleteSlices(_) => "DeleteSlices",
            Write::ImportStatus(_) => "ImportStatus",
            Write::ExportStatus(_) => "ExportStatus",
        }
    }
}

/// What the executor tells besides writes.
#[derive(Clone, Copy, Debug)]
pub enum Notice<'a> {
    /// An Event, published when the executor says (on an import about to be deleted because
    /// every source of it is withdrawn; on an export before its status is written; on an
    /// import after its status was; on a rejected record last; one refused before, again),
    /// never decided by whoever publishes it.
    Event(&'a Event),
    /// The apiserver refused a collection as such: its slices are deleted one by one (the
    /// agent logs it, so the named deletes that follow are explained).
    CollectionRefused(&'a SliceCollection),
}

/// The API calls the executor makes. A write that did not happen answers the refusal: its
/// HTTP status (0: no answer came, or it was not sent) and message. A notice answers whether
/// it was published (a log line always is).
pub trait Apiserver {
    fn write(&self, write: Write<'_>) -> impl Future<Output = Result<(), Refusal>>;
    fn notice(&self, notice: Notice<'_>) -> impl Future<Output = bool>;
}

/// Writes in flight at once, per kind of write.
pub const IN_FLIGHT: usize = 16;
/// Collections deleted at once: each deletes up to `crate::plan::SLICES_PER_COLLECTION` objects
/// one after another, so the member's apiserver deletes as fast as this many requests in
/// flight together (see there).
pub const COLLECTIONS_IN_FLIGHT: usize = 32;
/// MCS slice deletions by name at once. A withdrawal deletes thousands (a region of a 100×200
/// fleet: 6,600), and the member's apiserver deletes faster the more requests share its etcd
/// commits: `make bench-deletes` measured 800/s at 16, 920/s at 32 and 1,050/s at 64 in flight
/// on the local ClusterSet, where it is CPU bound.
pub const SLICE_DELETES_IN_FLIGHT: usize = 64;

/// An [`Apiserver`] that counts the plan's writes and those that went unanswered, and keeps
/// the Events that were not published.
struct Counted<'a, A> {
    api: &'a A,
    writes: Cell<usize>,
    unanswered: Cell<usize>,
    events: Cell<usize>,
    unpublished: RefCell<Vec<Event>>,
    last_error: RefCell<Option<String>>,
    unanswered_collections: RefCell<Vec<SliceCollection>>,
}

impl<A: Apiserver> Apiserver for Counted<'_, A> {
    async fn write(&self, write: Write<'_>) -> Result<(), Refusal> {
        let answer = self.api.write(write).await;
        if let Err(refusal) = &answer {
            *self.last_error.borrow_mut() = Some(format!("{}: {}", write.kind(), refusal.message));
            if let Write::DeleteSlices(collection) = write
                && Answer::of_status(refusal.code) == Answer::Unanswered
            {
                self.unanswered_collections
                    .borrow_mut()
                    .push(collection.clone());
            }
        }
        if !matches!(write, Write::Renew(..) | Write::Keep(_)) {
            self.writes.set(self.writes.get() + 1);
            if let Err(refusal) = &answer
                && Answer::of_status(refusal.code) == Answer::Unanswered
            {
                self.unanswered.set(self.unanswered.get() + 1);
            }
        }
        answer
    }

    async fn notice(&self, notice: Notice<'_>) -> bool {
        let published = self.api.notice(notice).await;
        if let Notice::Event(event) = notice {
            self.events.set(self.events.get() + 1);
            if !published {
                self.unpublished.borrow_mut().push(event.clone());
            }
        }
        published
    }
}

/// Publishes `announcement` about `about`.
async fn publish(api: &impl Apiserver, about: About, announcement: &Announcement) {
    let event = Event {
        about,
        announcement: announcement.clone(),
    };
    api.notice(Notice::Event(&event)).await;
}

/// Carries out `step` through `api`; returns what its answers teach the reconciler.
pub async fn execute(api: &impl Apiserver, step: &Step) -> Outcome {
    let counted = Counted {
        api,
        writes: Cell::new(0),
        unanswered: Cell::new(0),
        events: Cell::new(0),
        unpublished: RefCell::new(Vec::new()),
        last_error: RefCell::new(None),
        unanswered_collections: RefCell::new(Vec::new()),
    };
    let mut outcome = execute_counted(&counted, step).await;
    outcome.writes = counted.writes.get();
    outcome.unanswered = counted.unanswered.get();
    outcome.events_published = counted.events.get() > 0;
    outcome.events_retried = !step.events_again.is_empty();
    outcome.unpublished = counted.unpublished.into_inner();
    outcome.last_error = counted.last_error.into_inner();
    outcome.unanswered_collections = counted.unanswered_collections.into_inner();
    outcome
}

async fn execute_counted(api: &impl Apiserver, step: &Step) -> Outcome {
    let plan = &step.plan;
    let mut outcome = Outcome::default();
    if let Some(kept) = &step.keep {
        outcome.kept = Some(api.write(Write::Keep(kept)).await.map_err(|r| r.message));
    }
    let hub_then_renewal = async {
        let hub = hub_writes(api, plan).await;
        let renewal = match &step.renewal {
            Some(renewal) => Some(
                api.write(Write::Renew(renewal, &step.keeping, &step.last_error))
                    .await
                    .is_ok(),
            ),
            None => None,
        };
        (hub, renewal)
    };
    let ((hub, renewal), member, export_errors, profile_errors) = futures::join!(
        hub_then_renewal,
        member_writes(api, plan),
        export_statuses(api, &plan.export_statuses),
        async {
            match &plan.profile {
                Some(profile) => usize::from(api.write(Write::Profile(profile)).await.is_err()),
                None => 0,
            }
        },
    );
    outcome.renewal = renewal;
    outcome.hub = hub.results;
    outcome.feedback.publish_failures = hub.feedback.publish_failures;
    outcome.feedback.copy_failures = hub.feedback.copy_failures;
    outcome.feedback.derived_failures = member.derived_failures;
    outcome.errors = hub.errors + member.errors + export_errors + profile_errors;
    for rejected in &step.announce {
        let event = crate::events::record_rejected(rejected);
        api.notice(Notice::Event(&event)).await;
    }
    for event in &step.events_again {
        api.notice(Notice::Event(event)).await;
    }
    outcome
}

/// Runs every write, `in_flight` at a time; returns each answer with its item, in the items'
/// order.
async fn each<'a, T, A: Apiserver>(
    api: &A,
    in_flight: usize,
    items: impl IntoIterator<Item = &'a T>,
    write: impl Fn(&'a T) -> Write<'a>,
) -> Vec<(&'a T, Result<(), Refusal>)>
where
    T: 'a,
{
    let mut answers: Vec<(usize, &'a T, Result<(), Refusal>)> =
        futures::stream::iter(items.into_iter().enumerate())
            .map(|(i, item)| {
                let call = api.write(write(item));
                async move { (i, item, call.await) }
            })
            .buffer_unordered(in_flight)
            .collect()
            .await;
    answers.sort_by_key(|(i, _, _)| *i);
    answers
        .into_iter()
        .map(|(_, item, answer)| (item, answer))
        .collect()
}

fn failures<T>(answers: &[(&T, Result<(), Refusal>)]) -> usize {
    answers.iter().filter(|(_, a)| a.is_err()).count()
}

/// The hub writes' results: per claimed name, and the refusals the next plan needs.
#[derive(Default)]
struct HubAnswers {
    results: Vec<HubWriteResult>,
    feedback: crate::plan::Feedback,
    errors: usize,
}

fn hub_result(name: String, apply: bool, answer: &Result<(), Refusal>) -> HubWriteResult {
    HubWriteResult {
        name,
        apply,
        answer: match answer {
            Ok(()) => Answer::Done,
            Err(refusal) => Answer::of_status(refusal.code),
        },
    }
}

async fn hub_writes(api: &impl Apiserver, plan: &Plan) -> HubAnswers {
    let writes = &plan.hub;
    let (records, copies, stale_records, stale_copies) = futures::join!(
        each(api, IN_FLIGHT, &writes.apply_records, Write::Record),
        each(api, IN_FLIGHT, &writes.apply_slices, Write::Copy),
        each(api, IN_FLIGHT, &writes.delete_records, Write::DeleteRecord),
        each(api, IN_FLIGHT, &writes.delete_slices, Write::DeleteCopy),
    );
    let name = |meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta| {
        meta.name.clone().unwrap_or_default()
    };
    let mut hub = HubAnswers {
        errors: failures(&records)
            + failures(&copies)
            + failures(&stale_records)
            + failures(&stale_copies),
        ..HubAnswers::default()
    };
    for (record, answer) in &records {
        hub.results.push(hub_result(
            record_claim_name(&name(&record.metadata)),
            true,
            answer,
        ));
        if let Err(refusal) = answer {
            hub.feedback
                .publish_failures
                .insert(of_record(record), refusal.clone());
        }
    }
    for (copy, answer) in &copies {
        let copy_name = name(&copy.metadata);
        hub.results
            .push(hub_result(copy_claim_name(&copy_name), true, answer));
        if let Err(refusal) = answer {
            hub.feedback
                .copy_failures
                .insert(of_copy(copy), (copy_name, refusal.clone()));
        }
    }
    for (key, answer) in &stale_records {
        hub.results
            .push(hub_result(record_claim_name(&key.name), false, answer));
    }
    for (key, answer) in &stale_copies {
        hub.results
            .push(hub_result(copy_claim_name(&key.name), false, answer));
    }
    hub
}

struct MemberAnswers {
    derived_failures: std::collections::BTreeMap<ServiceKey, Refusal>,
    errors: usize,
}

async fn member_writes(api: &impl Apiserver, plan: &Plan) -> MemberAnswers {
    let writes = &plan.member;
    for (key, announcement) in &writes.withdrawn_imports {
        publish(api, About::Import(key.clone()), announcement).await;
    }
    let (derived, imports, slices, stale_imports, stale_derived, stale_slices, collections) = futures::join!(
        each(api, IN_FLIGHT, &writes.apply_derived, Write::Derived),
        each(api, IN_FLIGHT, &writes.apply_imports, Write::Import),
        each(api, IN_FLIGHT, &writes.apply_slices, Write::Slice),
        each(api, IN_FLIGHT, &writes.delete_imports, Write::DeleteImport),
        each(api, IN_FLIGHT, &writes.delete_derived, Write::DeleteDerived),
        each(
            api,
            SLICE_DELETES_IN_FLIGHT,
            &writes.delete_slices,
            Write::DeleteSlice
        ),
        delete_collections(api, &writes.delete_slice_collections),
    );
    let failed_imports: BTreeSet<ObjectKey> = imports
        .iter()
        .filter(|(_, a)| a.is_err())
        .map(|(i, _)| ObjectKey::of(&i.object.metadata))
        .collect();
    let statuses = writes
        .import_statuses
        .iter()
        .filter(|s| !failed_imports.contains(&s.key));
    let statuses: Vec<_> = futures::stream::iter(statuses)
        .map(|status| async move {
            let answer = api.write(Write::ImportStatus(status)).await;
            if answer.is_ok() {
                for announcement in &status.announcements {
                    publish(api, About::Import(status.key.clone()), announcement).await;
                }
            }
            answer
        })
        .buffer_unordered(IN_FLIGHT)
        .collect()
        .await;
    let derived_failures = derived
        .iter()
        .filter_map(|(service, answer)| {
            let refusal = answer.as_ref().err()?;
            let imported = service
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::SERVICE_NAME))
                .cloned()
                .unwrap_or_default();
            let namespace = service.metadata.namespace.clone().unwrap_or_default();
            Some((ServiceKey::new(&namespace, &imported), refusal.clone()))
        })
        .collect();
    MemberAnswers {
        derived_failures,
        errors: failures(&derived)
            + failures(&imports)
            + failures(&slices)
            + failures(&stale_imports)
            + failures(&stale_derived)
            + failures(&stale_slices)
            + collections
            + statuses.iter().filter(|a| a.is_err()).count(),
    }
}

/// Deletes every collection, [`COLLECTIONS_IN_FLIGHT`] at a time; returns how many writes
/// failed. A collection the apiserver refuses as such (403 or 405: an agent whose RBAC
/// predates it, say) is deleted slice by slice instead, so a withdrawal never waits on a
/// permission; the collection's own refusal then does not count as a failure. Any other
/// failure (not leading, a timeout, an overloaded apiserver) counts, and the next pass plans
/// the deletions again.
async fn delete_collections(api: &impl Apiserver, collections: &[SliceCollection]) -> usize {
    futures::stream::iter(collections)
        .map(|collection| async move {
            match api.write(Write::DeleteSlices(collection)).await {
                Ok(()) => 0,
                Err(refusal) if !collection_refused(&refusal) => 1,
                Err(_) => {
                    api.notice(Notice::CollectionRefused(collection)).await;
                    failures(
                        &each(
                            api,
                            SLICE_DELETES_IN_FLIGHT,
                            &collection.slices,
                            Write::DeleteSlice,
                        )
                        .await,
                    )
                }
            }
        })
        .buffer_unordered(COLLECTIONS_IN_FLIGHT)
        .fold(0, |total, failed| async move { total + failed })
        .await
}

/// Whether the apiserver refused a collection as such (forbidden, or the verb not allowed),
/// rather than failing to answer it.
pub fn collection_refused(refusal: &Refusal) -> bool {
    refusal.code == 403 || refusal.code == 405
}

/// Export conditions, each preceded by the Events announcing its changes; returns how many
/// writes failed.
async fn export_statuses(api: &impl Apiserver, statuses: &[ExportStatus]) -> usize {
    futures::stream::iter(statuses)
        .map(|status| async move {
            for announcement in &status.announcements {
                publish(
                    api,
                    About::Export {
                        key: status.key.clone(),
                        uid: status.uid.clone(),
                    },
                    announcement,
                )
                .await;
            }
            api.write(Write::ExportStatus(status)).await
        })
        .buffer_unordered(IN_FLIGHT)
        .filter(|answer| std::future::ready(answer.is_err()))
        .count()
        .await
}
