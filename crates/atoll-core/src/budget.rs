//! How many bytes of each member's hub objects an importer holds: the per-member budget at the
//! store.
//!
//! Every member holds every other member's records and endpoint copies in memory, so what one
//! member writes within the hub CRDs' bounds (2,000 records of ~1 MiB each) would otherwise
//! land in every importer's memory and OOM-kill every agent of the ClusterSet. The caps
//! ([`crate::caps`]) count records and endpoints but run on what the store already holds; the
//! budget runs before: each object is weighed (its bytes as the hub serves it, after what the
//! store never keeps is dropped) as its watch event arrives, and a member's objects are held
//! only while their total stays within [`Ledger::budget`]. What does not fit is left out: the
//! store holds nothing of it (a newer version replacing a held one removes the held one), so
//! the importer treats it as absent — the member's own services degrade, no other member's.
//!
//! Which objects are left out depends on the order they arrive: in a relist, the hub's list
//! order (namespace, then name: the same in every importer); live, the newest changes. Objects
//! left out for the budget come back by a relist once the member has room again
//! ([`Ledger::wants_relist`]; the caller limits how often it relists).
//!
//! An object over a per-object limit is left out whatever the budget: a record whose exported
//! annotations take more than an import may carry ([`crate::validate::names`]), which the
//! importer would refuse anyway.
//!
//! The importer's own hub namespace is exempt: its agent must see every object it wrote.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::Arc;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::validate::{Reason, names};

/// The two kinds of hub objects weighed (they share each member's budget).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Record,
    Copy,
}

impl Kind {
    fn index(self) -> usize {
        match self {
            Self::Record => 0,
            Self::Copy => 1,
        }
    }

    /// For people.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Record => "record",
            Self::Copy => "copy",
        }
    }
}

/// Whether the store holds an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Hold,
    /// Left out for this reason ([`Reason::OverByteBudget`] or the per-object limit's reason).
    LeaveOut(Reason),
}

/// One object, as weighed.
#[derive(Clone, Copy, Debug)]
pub struct Weighed<'a> {
    pub kind: Kind,
    /// The hub namespace holding it (`atoll-<member>`).
    pub namespace: &'a str,
    pub name: &'a str,
    pub bytes: usize,
    /// The per-object limit it breaks, if any.
    pub oversize: Option<Reason>,
}

/// A left-out object: its size and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct LeftOut {
    bytes: usize,
    reason: Reason,
}

/// One member's objects of one kind, by a hash of their names (no copy of the name is kept:
/// a member may write many objects, and the budget must not cost what it saves).
#[derive(Clone, Debug, Default)]
struct Entries {
    held: HashMap<u64, usize>,
    held_bytes: usize,
    left_out: HashMap<u64, LeftOut>,
}

impl Entries {
    fn forget(&mut self, name: u64) {
        if let Some(bytes) = self.held.remove(&name) {
            self.held_bytes = self.held_bytes.saturating_sub(bytes);
        }
        self.left_out.remove(&name);
    }

    fn is_empty(&self) -> bool {
        self.held.is_empty() && self.left_out.is_empty()
    }
}

/// A member's entries of each kind.
#[derive(Clone, Debug, Default)]
struct Member {
    kinds: [Entries; 2],
}

impl Member {
    fn held_bytes(&self) -> usize {
        self.kinds
            .iter()
            .fold(0usize, |sum, e| sum.saturating_add(e.held_bytes))
    }
}

/// What one member has left out, for metrics, Events and `atoll status`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemberReport {
    /// The hub namespace of the member.
    pub namespace: String,
    /// Bytes held.
    pub held_bytes: usize,
    /// Objects and bytes left out, by kind and reason.
    pub left_out: BTreeMap<(Kind, Reason), (usize, usize)>,
}

impl MemberReport {
    /// Objects left out in all.
    pub fn objects_left_out(&self) -> usize {
        self.left_out
            .values()
            .fold(0usize, |sum, (n, _)| sum.saturating_add(*n))
    }
}

/// Every member's held and left-out objects.
#[derive(Clone, Debug)]
pub struct Ledger {
    budget: usize,
    exempt: String,
    hasher: foldhash::fast::FixedState,
    members: HashMap<String, Member>,
    /// Per kind, while its watch relists: the member entries it has listed so far.
    relisting: [Option<HashMap<String, Entries>>; 2],
}

impl Ledger {
    /// A ledger holding at most `budget` bytes of each member, none counted of the hub
    /// namespace `exempt` (the importer's own).
    pub fn new(budget: usize, exempt: &str) -> Self {
        Self {
            budget,
            exempt: exempt.to_owned(),
            hasher: foldhash::fast::FixedState::with_seed(0x41_74_6f_6c_6c),
            members: HashMap::new(),
            relisting: [None, None],
        }
    }

    /// Bytes held of each member at most.
    pub fn budget(&self) -> usize {
        self.budget
    }

    fn name_hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// A watch of `kind` starts listing: what it lists replaces what it held once complete.
    pub fn begin_relist(&mut self, kind: Kind) {
        self.relisting[kind.index()] = Some(HashMap::new());
    }

    /// The relist of `kind` is complete.
    pub fn end_relist(&mut self, kind: Kind) {
        let Some(listed) = self.relisting[kind.index()].take() else {
            return;
        };
        for member in self.members.values_mut() {
            member.kinds[kind.index()] = Entries::default();
        }
        for (namespace, entries) in listed {
            self.members.entry(namespace).or_default().kinds[kind.index()] = entries;
        }
        self.members
            .retain(|_, m| m.kinds.iter().any(|e| !e.is_empty()));
    }

    /// An object listed by a relist.
    pub fn relist_apply(&mut self, object: &Weighed<'_>) -> Verdict {
        if object.namespace == self.exempt {
            return Verdict::Hold;
        }
        let name = self.name_hash(object.name);
        let other_kinds = self.members.get(object.namespace).map_or(0, |m| {
            m.kinds
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != object.kind.index())
                .fold(0usize, |sum, (_, e)| sum.saturating_add(e.held_bytes))
        });
        let budget = self.budget;
        let Some(listed) = &mut self.relisting[object.kind.index()] else {
            // Not relisting: as a live event.
            return self.apply(object);
        };
        let entries = listed.entry(object.namespace.to_owned()).or_default();
        entries.forget(name);
        decide(entries, name, object, other_kinds, budget)
    }

    /// An object added or changed (live): held if it fits with the member's other objects
    /// (its older version no longer counting).
    pub fn apply(&mut self, object: &Weighed<'_>) -> Verdict {
        if object.namespace == self.exempt {
            return Verdict::Hold;
        }
        let name = self.name_hash(object.name);
        let budget = self.budget;
        let member = self.members.entry(object.namespace.to_owned()).or_default();
        member.kinds[object.kind.index()].forget(name);
        let other_kinds = member.held_bytes();
        let entries = &mut member.kinds[object.kind.index()];
        let other_kinds = other_kinds.saturating_sub(entries.held_bytes);
        decide(entries, name, object, other_kinds, budget)
    }

    /// An object deleted.
    pub fn delete(&mut self, kind: Kind, namespace: &str, name: &str) {
        let name = self.name_hash(name);
        if let Some(member) = self.members.get_mut(namespace) {
            member.kinds[kind.index()].forget(name);
            if member.kinds.iter().all(Entries::is_empty) {
                self.members.remove(namespace);
            }
        }
    }

    /// Whether the member whose hub namespace is `namespace` has objects of `kind` left out
    /// for the budget that would now fit (the smallest of them): a relist brings them back.
    pub fn wants_relist(&self, kind: Kind, namespace: &str) -> bool {
        self.members.get(namespace).is_some_and(|m| {
            let room = self.budget.saturating_sub(m.held_bytes());
            m.kinds[kind.index()]
                .left_out
                .values()
                .any(|l| l.reason == Reason::OverByteBudget && l.bytes <= room)
        })
    }

    /// Bytes held of the member whose hub namespace is `namespace`.
    pub fn held_bytes(&self, namespace: &str) -> usize {
        self.members.get(namespace).map_or(0, Member::held_bytes)
    }

    /// Every member holding something, with what it has left out, by namespace.
    pub fn report(&self) -> Vec<MemberReport> {
        let mut out: Vec<MemberReport> = self
            .members
            .iter()
            .map(|(namespace, m)| {
                let mut left_out: BTreeMap<(Kind, Reason), (usize, usize)> = BTreeMap::new();
                for (kind, entries) in [Kind::Record, Kind::Copy].into_iter().zip(&m.kinds) {
                    for l in entries.left_out.values() {
                        let (n, bytes) = left_out.entry((kind, l.reason)).or_default();
                        *n = n.saturating_add(1);
                        *bytes = bytes.saturating_add(l.bytes);
                    }
                }
                MemberReport {
                    namespace: namespace.clone(),
                    held_bytes: m.held_bytes(),
                    left_out,
                }
            })
            .collect();
        out.sort_by(|a, b| a.namespace.cmp(&b.namespace));
        out
    }
}

/// Holds `object` in `entries` if it is within its per-object limits and fits beside
/// `other_bytes` (the member's objects of the other kind) in `budget`.
fn decide(
    entries: &mut Entries,
    name: u64,
    object: &Weighed<'_>,
    other_bytes: usize,
    budget: usize,
) -> Verdict {
    let reason = match object.oversize {
        Some(reason) => Some(reason),
        None => {
            let total = other_bytes
                .saturating_add(entries.held_bytes)
                .saturating_add(object.bytes);
            (total > budget).then_some(Reason::OverByteBudget)
        }
    };
    match reason {
        Some(reason) => {
            entries.left_out.insert(
                name,
                LeftOut {
                    bytes: object.bytes,
                    reason,
                },
            );
            Verdict::LeaveOut(reason)
        }
        None => {
            entries.held.insert(name, object.bytes);
            entries.held_bytes = entries.held_bytes.saturating_add(object.bytes);
            Verdict::Hold
        }
    }
}

/// What a record weighs, and the per-object limit it breaks: exported annotations over what
/// an import may carry beside Atoll's own keys.
pub fn weigh_record(record: &ExportedService) -> (usize, Option<Reason>) {
    let annotations = names::annotation_bytes(&record.spec.exported_annotations);
    (
        served_bytes(record),
        (annotations > names::MAX_EXPORTED_ANNOTATION_BYTES).then_some(Reason::Annotation),
    )
}

/// What an endpoint copy weighs (the CRD bounds every field; the budget bounds the rest).
pub fn weigh_copy(copy: &ExportedEndpointSlice) -> (usize, Option<Reason>) {
    (served_bytes(copy), None)
}

/// Of `records` and `copies` in the hub's list order, what a relisting importer (`importer`)
/// holds within `budget` per member, and the ledger saying what it left out.
pub fn held_after_relist(
    importer: &str,
    budget: usize,
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
) -> (
    Vec<Arc<ExportedService>>,
    Vec<Arc<ExportedEndpointSlice>>,
    Ledger,
) {
    let mut ledger = Ledger::new(budget, &atoll_api::hub::namespace_for(importer));
    fn listed<T>(
        ledger: &mut Ledger,
        kind: Kind,
        objects: &[Arc<T>],
        metadata: fn(&T) -> &ObjectMeta,
        weigh: fn(&T) -> (usize, Option<Reason>),
    ) -> Vec<Arc<T>> {
        let mut sorted: Vec<&Arc<T>> = objects.iter().collect();
        sorted.sort_by(|a, b| {
            let (a, b) = (metadata(a), metadata(b));
            (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name))
        });
        ledger.begin_relist(kind);
        let held = sorted
            .into_iter()
            .filter(|o| {
                let meta = metadata(o);
                let (bytes, oversize) = weigh(o);
                let weighed = Weighed {
                    kind,
                    namespace: meta.namespace.as_deref().unwrap_or_default(),
                    name: meta.name.as_deref().unwrap_or_default(),
                    bytes,
                    oversize,
                };
                ledger.relist_apply(&weighed) == Verdict::Hold
            })
            .cloned()
            .collect();
        ledger.end_relist(kind);
        held
    }
    let records = listed(
        &mut ledger,
        Kind::Record,
        records,
        |r| &r.metadata,
        weigh_record,
    );
    let copies = listed(&mut ledger, Kind::Copy, copies, |c| &c.metadata, weigh_copy);
    (records, copies, ledger)
}

/// Bytes of `value` as JSON (as the hub serves it), counted without building the text.
pub fn served_bytes<T: serde::Serialize>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Serializing a Kubernetes object to JSON cannot fail (no non-string map keys); were it to,
    // the object would weigh as much as any budget allows: it is then left out, not held free.
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
