//! The simulated apiservers as the agent's executor sees them: `atoll_core::executor` carries
//! out a replica's step exactly as in the agent (order, skips, fallbacks, what each answer
//! teaches), and every call it makes lands here: fenced, maybe failed by a fault, taking the
//! member's write latency, then applied to the in-memory hub or member and told to the
//! invariant checks.

use std::cell::RefCell;

use atoll_api::keys::ObjectKey;
use atoll_core::executor::{Apiserver, Notice, Write};
use atoll_core::plan::Refusal;
use atoll_core::reconciler::{Outcome, Step};

use crate::invariants::WriteKind;
use crate::ordering::Answered;
use crate::world::{World, tracing};

/// Carries out `step` of replica `r` of member `m` with the agent's own executor.
pub fn execute(world: &mut World, m: usize, r: usize, step: &Step) -> Outcome {
    let api = SimApi {
        world: RefCell::new(world),
        m,
        r,
        step,
        answered: RefCell::new(Answered::default()),
    };
    // Every simulated call answers at once: the executor's future completes in one poll, its
    // calls in one deterministic order.
    futures::executor::block_on(atoll_core::executor::execute(&api, step))
}

/// Replica `r` of member `m` writing through the simulated apiservers.
struct SimApi<'w> {
    world: RefCell<&'w mut World>,
    m: usize,
    r: usize,
    step: &'w Step,
    answered: RefCell<Answered>,
}

fn refusal(code: u16) -> Refusal {
    Refusal {
        code,
        message: format!("simulated refusal {code}"),
    }
}

impl Apiserver for SimApi<'_> {
    async fn write(&self, write: Write<'_>) -> Result<(), Refusal> {
        // Each call runs to its end before the next starts: nothing awaits while borrowed.
        let mut world = self.world.borrow_mut();
        if let Write::ImportStatus(status) = write
            && let Some(wrong) = self.answered.borrow().status_too_early(self.step, status)
        {
            let now = world.now();
            world.checks.violate_at(8, wrong, now);
        }
        let mut answer = world.call(self.m, self.r, write);
        let kind = write.kind();
        // Landed, but the client timed out before the answer came.
        let unanswered = &mut world.members[self.m].unanswered_writes;
        if answer.is_ok() && *unanswered > 0 {
            *unanswered -= 1;
            answer = Err(0);
            world.exercise(&format!("unanswered {kind}"), 1);
        }
        if tracing() && !matches!(write, Write::Renew(..) | Write::Keep(_)) {
            let what = match write {
                Write::DeleteImport(k) | Write::DeleteDerived(k) | Write::DeleteSlice(k) => {
                    k.to_string()
                }
                Write::Slice(s) => ObjectKey::of(&s.metadata).to_string(),
                Write::Import(i) => ObjectKey::of(&i.object.metadata).to_string(),
                _ => String::new(),
            };
            eprintln!(
                "{:>6.2} s  {} {kind} {what} {:?}",
                world.elapsed.as_secs_f64(),
                world.members[self.m].name,
                answer
            );
        }
        self.answered.borrow_mut().answer(write, answer.is_ok());
        if let (Write::Import(apply), Ok(())) = (write, &answer)
            && let Some(spec) = &apply.object.spec
        {
            let ports = spec.ports.len();
            world.exercise(&format!("import {:?} with {ports} ports", spec.type_), 1);
        }
        world.exercise(
            &format!(
                "{} {kind}",
                if answer.is_ok() { "write" } else { "refused" }
            ),
            1,
        );
        answer.map_err(refusal)
    }

    /// Events go to the member's apiserver, which may refuse them (a fault); invariant (ix)
    /// follows each refused one until it is published. A refused collection's fallback is
    /// counted.
    async fn notice(&self, notice: Notice<'_>) -> bool {
        let mut world = self.world.borrow_mut();
        match notice {
            Notice::Event(event) => {
                let member = world.members[self.m].name.clone();
                let replica = world.members[self.m].replicas[self.r].identity.clone();
                let published = !world.members[self.m].refuse_events;
                world.checks.event(&member, &replica, event, published);
                if tracing() {
                    eprintln!(
                        "{:>6.2} s  {replica} event {} on {:?} published={published}",
                        world.elapsed.as_secs_f64(),
                        event.announcement.reason,
                        event.about
                    );
                }
                world.exercise(
                    if published {
                        "event published"
                    } else {
                        "event refused"
                    },
                    1,
                );
                published
            }
            Notice::CollectionRefused(_) => {
                world.exercise("collection fallback", 1);
                true
            }
        }
    }
}

impl World {
    /// One call of replica `r` of member `m`; `Err` with an HTTP status (0: no answer).
    fn call(&mut self, m: usize, r: usize, write: Write<'_>) -> Result<(), u16> {
        let name = self.members[m].name.clone();
        match write {
            Write::Keep(kept) => {
                let written = self.write(m, r, false);
                let ok = written.is_ok() && !self.members[m].refuse_kept;
                if tracing() {
                    eprintln!(
                        "{:>6.2} s  {} keeps ok={ok} {}",
                        self.elapsed.as_secs_f64(),
                        name,
                        kept.encode()
                    );
                }
                if !ok {
                    return Err(written.err().unwrap_or(403));
                }
                // The body the agent applies, its text where the agent's reader finds it.
                let body = kept.config_map("atoll-system", "atoll-kept");
                if let Some(member) = self.apis.members.get_mut(&name) {
                    member.kept = body["data"][atoll_core::liveness::KEPT_DATA_KEY]
                        .as_str()
                        .map(str::to_owned);
                }
                self.checks.wrote(&name, WriteKind::Kept, self.now());
                Ok(())
            }
            Write::Renew(renewal, keeping, last_error) => {
                self.write(m, r, true)?;
                let wall = self.wall(m);
                let rhythm = self.members[m].rhythm;
                let lease = atoll_core::reconciler::heartbeat_lease(
                    &name,
                    renewal,
                    rhythm.interval,
                    rhythm.grace,
                    &wall,
                    last_error,
                    &atoll_core::reconciler::keeping_text(keeping, self.now()),
                );
                let lease = serde_json::from_value(lease).map_err(|_| 422_u16)?;
                let hub = &mut self.apis.hub;
                hub.leases.put(lease, &mut hub.counters, &wall, |_, _| {});
                self.members[m].last_beat = Some(self.now());
                self.checks.beat(&name, self.now());
                let clock_back =
                    !self.members[m].skew_ahead && self.members[m].skew > std::time::Duration::ZERO;
                self.checks
                    .numbered(&name, renewal.beat, clock_back, self.now());
                if tracing() {
                    eprintln!(
                        "{:>6.2} s  {name} beats {} epoch {}",
                        self.elapsed.as_secs_f64(),
                        renewal.beat,
                        renewal.claim.epoch
                    );
                }
                Ok(())
            }
            Write::Record(record) => {
                self.write(m, r, true)?;
                let now = self.wall(m);
                let hub = &mut self.apis.hub;
                hub.records
                    .put(record.clone(), &mut hub.counters, &now, |_, _| {});
                self.checks.wrote(&name, WriteKind::Hub, self.now());
                Ok(())
            }
            Write::Copy(copy) => {
                self.write(m, r, true)?;
                // A copy the hub refuses for good is answered 422 (its name too long, say).
                let poisoned = self
                    .scenario
                    .refused
                    .contains(&(name.clone(), copy.spec.service.clone()));
                if poisoned {
                    return Err(422);
                }
                let now = self.wall(m);
                let hub = &mut self.apis.hub;
                hub.copies
                    .put(copy.clone(), &mut hub.counters, &now, |_, _| {});
                self.checks.wrote(&name, WriteKind::Hub, self.now());
                Ok(())
            }
            Write::DeleteRecord(key) => {
                self.write(m, r, true)?;
                let hub = &mut self.apis.hub;
                hub.records.delete(key, &mut hub.counters);
                Ok(())
            }
            Write::DeleteCopy(key) => {
                self.write(m, r, true)?;
                let hub = &mut self.apis.hub;
                hub.copies.delete(key, &mut hub.counters);
                Ok(())
            }
            // The simulated hub keeps no ClusterProfiles.
            Write::Profile(_) => self.write(m, r, true),
            Write::Derived(service) => {
                self.write(m, r, false)?;
                let now = self.wall(m);
                if let Some(member) = self.apis.members.get_mut(&name) {
                    member.apply_service(service.clone(), &now);
                }
                self.checks.wrote(&name, WriteKind::Member, self.now());
                Ok(())
            }
            Write::Import(apply) => {
                self.write(m, r, false)?;
                let now = self.wall(m);
                if let Some(member) = self.apis.members.get_mut(&name) {
                    let key = ObjectKey::of(&apply.object.metadata);
                    let existed = member.imports.get(&key).is_some();
                    member.apply_import(apply.object.clone(), &now);
                    if !existed {
                        self.checks
                            .created(&name, "ServiceImport", &key.name, self.now());
                    }
                }
                self.checks.wrote(&name, WriteKind::Member, self.now());
                Ok(())
            }
            Write::ImportStatus(status) => {
                self.write(m, r, false)?;
                let now = self.wall(m);
                if let Some(member) = self.apis.members.get_mut(&name) {
                    member.import_status(&status.key, status.status.clone(), &now);
                }
                self.checks.wrote(&name, WriteKind::Member, self.now());
                Ok(())
            }
            Write::Slice(slice) => {
                self.write(m, r, false)?;
                let now = self.wall(m);
                let source = slice
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(atoll_api::labels::SOURCE_CLUSTER))
                    .cloned()
                    .unwrap_or_default();
                self.checks.slice_written(&name, &source, self.now());
                if let Some(member) = self.apis.members.get_mut(&name) {
                    member
                        .slices
                        .put(slice.clone(), &mut member.counters, &now, |_, _| {});
                }
                self.checks.wrote(&name, WriteKind::Member, self.now());
                Ok(())
            }
            Write::DeleteImport(key) => self.member_delete(m, r, "ServiceImport", key),
            Write::DeleteDerived(key) => self.member_delete(m, r, "Service", key),
            Write::DeleteSlice(key) => self.member_delete(m, r, "EndpointSlice", key),
            Write::DeleteSlices(collection) => {
                self.write(m, r, false)?;
                self.delete_collection(m, collection)
            }
            Write::ExportStatus(status) => {
                self.write(m, r, false)?;
                let now = self.wall(m);
                if let Some(member) = self.apis.members.get_mut(&name) {
                    member.export_conditions(&status.key, status.conditions.clone(), &now);
                }
                self.checks.wrote(&name, WriteKind::Member, self.now());
                Ok(())
            }
        }
    }

    fn member_delete(
        &mut self,
        m: usize,
        r: usize,
        kind: &str,
        key: &ObjectKey,
    ) -> Result<(), u16> {
        self.write(m, r, false)?;
        let name = self.members[m].name.clone();
        self.delete_checked(&name, kind, key);
        self.checks.wrote(&name, WriteKind::Member, self.now());
        Ok(())
    }
}
