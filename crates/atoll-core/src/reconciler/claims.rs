//! What a member claims to publish: the names of its records and copies that are on the hub or
//! on their way there. A name the hub refuses (a 4xx answer: too long, over a quota, invalid)
//! and never held is left out, so one refused write cannot freeze every importer's view of the
//! member (importers take a member's objects only when they match its newest claim). A write
//! that gets no answer or one to retry (a 5xx, a timeout, a conflict, throttling) leaves the
//! name claimed, for it may be a partition or a hub restarting: only once it has kept failing
//! for [`UNANSWERED_BOUND`] while the hub kept taking this member's other writes (a webhook of
//! one kind down, say) is it left out like a refused one. A name the hub held once stays
//! claimed, whatever happens to the hub (a wipe must not read as "the member withdrew
//! everything"); a name whose deletion failed stays claimed while the hub holds it. A write
//! that succeeds brings its name back.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::liveness::digest;
use crate::plan::Published;

/// How long a name whose write keeps getting no answer, or one to retry, is still claimed while
/// the hub takes this member's other writes. Counted in time, not attempts, because attempts come
/// at whatever rate the service's backoff (0.5 s doubling to 30 s) and unrelated passes over it
/// set, while what importers wait through is time. Long enough for a transient (an apiserver or
/// a webhook's pods restarting) to pass with several attempts, and, with the default heartbeat
/// (10 s) added, shorter than the default member grace (60 s), so a member's next claim leaves
/// the name out before importers report it unmatched.
pub const UNANSWERED_BOUND: Duration = Duration::from_secs(30);

/// Per-name memory of a member's own hub writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimBook {
    /// Desired names the hub was seen holding, or accepted a write of.
    confirmed: BTreeSet<String>,
    /// Desired names whose write was refused (4xx), and not written since.
    refused: BTreeSet<String>,
    /// Desired names whose writes got no answer, or one to retry, and none written since.
    unanswered: BTreeMap<String, Spell>,
    /// Names whose last deletion failed.
    failed_deletes: BTreeSet<String>,
    /// When the hub last took a write of this member (one of its objects or its heartbeat).
    took_write: Option<Instant>,
}

/// A run of unanswered writes of one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Spell {
    /// The last of them.
    last: Instant,
    /// The first time the hub took another write of this member during the run: the bound
    /// counts from there, so a partition (no write taken) never shortens the claim, and the
    /// first step after one heals does not either.
    taken_since: Option<Instant>,
}

impl Spell {
    /// Whether the name has failed for the whole bound while the hub took other writes: one
    /// of its writes failed, and the hub took one, at least the bound after the hub first did.
    fn outlasted(&self, took_write: Option<Instant>) -> bool {
        let Some(from) = self.taken_since else {
            return false;
        };
        let lasted = |at: Instant| at.saturating_duration_since(from) >= UNANSWERED_BOUND;
        lasted(self.last) && took_write.is_some_and(lasted)
    }
}

/// How a write was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Answer {
    Done,
    /// Refused for what it is (4xx other than conflict and throttling): it will be refused
    /// again.
    Refused,
    /// No answer, or one to try again (a timeout, 409, 429, 5xx).
    Unanswered,
}

impl Answer {
    /// The answer an HTTP status (0: none came) stands for.
    pub fn of_status(code: u16) -> Self {
        match code {
            200..=299 => Answer::Done,
            409 | 429 => Answer::Unanswered,
            400..=499 => Answer::Refused,
            _ => Answer::Unanswered,
        }
    }
}

/// One write of a member's own hub object, as the writer reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubWriteResult {
    /// The claimed name (`r/<record>` or `s/<copy>`).
    pub name: String,
    /// An apply (else a delete).
    pub apply: bool,
    pub answer: Answer,
}

impl ClaimBook {
    /// Takes in what the member wants published and what its hub namespace holds now.
    pub fn observe(&mut self, desired: &Published, on_hub: &BTreeSet<String>) {
        let desired: BTreeSet<&String> = desired.values().flatten().collect();
        self.confirmed.retain(|n| desired.contains(n));
        self.confirmed.extend(
            desired
                .iter()
                .filter(|n| on_hub.contains(n.as_str()))
                .map(|n| (*n).clone()),
        );
        self.refused.retain(|n| desired.contains(n));
        self.unanswered.retain(|n, _| desired.contains(n));
        self.failed_deletes.retain(|n| on_hub.contains(n));
    }

    /// Takes in the results of the member's hub writes, answered by `now`.
    pub fn record(&mut self, results: &[HubWriteResult], now: Instant) {
        for r in results {
            match (r.apply, r.answer) {
                (true, Answer::Done) => {
                    self.confirmed.insert(r.name.clone());
                    self.refused.remove(&r.name);
                    self.unanswered.remove(&r.name);
                }
                (true, Answer::Refused) => {
                    self.refused.insert(r.name.clone());
                }
                (true, Answer::Unanswered) => {
                    // Started at `now` if the hub took a write at `now` already (the caller
                    // may report the heartbeat before these), so the order of the two calls
                    // does not matter.
                    let taken = self.took_write.filter(|at| *at >= now).map(|_| now);
                    self.unanswered
                        .entry(r.name.clone())
                        .and_modify(|s| s.last = s.last.max(now))
                        .or_insert(Spell {
                            last: now,
                            taken_since: taken,
                        });
                }
                (false, Answer::Done) => {
                    self.failed_deletes.remove(&r.name);
                }
                (false, _) => {
                    self.failed_deletes.insert(r.name.clone());
                }
            }
        }
        // Another of this member's writes went through: the hub is there, only some writes fail.
        if results.iter().any(|r| r.answer == Answer::Done) {
            self.hub_took_write(now);
        }
    }

    /// Takes in that the hub took a write of this member at `now` that is not one of its
    /// objects (its heartbeat renewal): evidence that names still failing fail on their own.
    pub fn hub_took_write(&mut self, now: Instant) {
        self.took_write = Some(self.took_write.map_or(now, |at| at.max(now)));
        for spell in self.unanswered.values_mut() {
            spell.taken_since.get_or_insert(now);
        }
    }

    /// Whether `name`'s write fails for good as far as the claim is concerned: refused, or
    /// unanswered for the whole bound.
    fn left_out(&self, name: &str) -> bool {
        self.refused.contains(name)
            || self
                .unanswered
                .get(name)
                .is_some_and(|s| s.outlasted(self.took_write))
    }

    /// The names claimed: desired ones unless their write fails for good (see
    /// [`UNANSWERED_BOUND`]) and the hub never held them, and those the hub still holds because
    /// their deletion failed.
    pub fn claimed<'a>(&'a self, desired: &'a Published) -> impl Iterator<Item = &'a str> {
        desired
            .values()
            .flatten()
            .filter(|n| self.confirmed.contains(*n) || !self.left_out(n))
            .chain(self.failed_deletes.iter())
            .map(String::as_str)
    }

    /// The digest of [`claimed`](Self::claimed).
    pub fn digest(&self, desired: &Published) -> String {
        digest(self.claimed(desired))
    }

    /// Names left out of the claim because their write fails.
    pub fn unpublishable(&self) -> usize {
        let unheld = |n: &String| !self.confirmed.contains(n);
        let refused = self.refused.iter().filter(|n| unheld(n)).count();
        // A refused name may be in a spell too: counted once.
        let outlasted = self
            .unanswered
            .iter()
            .filter(|(n, s)| {
                unheld(n) && !self.refused.contains(*n) && s.outlasted(self.took_write)
            })
            .count();
        refused + outlasted
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use atoll_api::keys::ServiceKey;

    fn desired(names: &[&str]) -> Published {
        Published::from([(
            ServiceKey::new("demo", "hello"),
            names.iter().map(|n| (*n).to_owned()).collect(),
        )])
    }

    fn on_hub(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| (*n).to_owned()).collect()
    }

    fn claimed(book: &ClaimBook, d: &Published) -> Vec<String> {
        let mut v: Vec<String> = book.claimed(d).map(str::to_owned).collect();
        v.sort();
        v
    }

    /// `secs` seconds into a test: one base instant per thread, so every book's times compare.
    fn at(secs: u64) -> Instant {
        at_ms(secs * 1000)
    }

    fn at_ms(ms: u64) -> Instant {
        thread_local!(static BASE: Instant = Instant::now());
        BASE.with(|base| *base + Duration::from_millis(ms))
    }

    /// An apply answered with HTTP status `code` (0: no answer).
    fn failed(name: &str, code: u16) -> HubWriteResult {
        HubWriteResult {
            name: name.to_owned(),
            apply: true,
            answer: Answer::of_status(code),
        }
    }

    /// One leading step's outcome at `secs`: `writes`, then the heartbeat renewal if `renewed`.
    fn step(book: &mut ClaimBook, writes: &[HubWriteResult], renewed: bool, secs: u64) {
        book.record(writes, at(secs));
        if renewed {
            book.hub_took_write(at(secs));
        }
    }

    /// A member with a record and copy on the hub and a new export whose record the hub's
    /// admission webhook for records fails (500) or leaves unanswered.
    const HELD: [&str; 2] = ["r/demo.hello", "s/demo.hello-1"];
    const NEW: &str = "r/demo.new";

    fn webhook_member() -> (ClaimBook, Published) {
        let mut book = ClaimBook::default();
        let d = desired(&[HELD[0], HELD[1], NEW]);
        book.observe(&d, &on_hub(&HELD));
        (book, d)
    }

    fn result(name: &str, apply: bool, ok: bool) -> HubWriteResult {
        HubWriteResult {
            name: name.to_owned(),
            apply,
            answer: if ok { Answer::Done } else { Answer::Refused },
        }
    }

    #[test]
    fn a_name_whose_write_keeps_failing_is_left_out_until_the_hub_holds_it() {
        let mut book = ClaimBook::default();
        let d = desired(&["r/demo.hello", "s/demo.hello-long"]);
        book.observe(&d, &on_hub(&["r/demo.hello"]));
        assert_eq!(
            claimed(&book, &d),
            ["r/demo.hello", "s/demo.hello-long"],
            "on its way"
        );
        book.record(&[result("s/demo.hello-long", true, false)], at(0));
        assert_eq!(claimed(&book, &d), ["r/demo.hello"], "refused: left out");
        assert_eq!(book.unpublishable(), 1);
        book.record(&[result("s/demo.hello-long", true, true)], at(1));
        assert_eq!(claimed(&book, &d), ["r/demo.hello", "s/demo.hello-long"]);
        assert_eq!(book.unpublishable(), 0);
    }

    #[test]
    fn a_wiped_hub_does_not_shrink_the_claim_even_if_rewriting_fails() {
        let mut book = ClaimBook::default();
        let d = desired(&["r/demo.hello", "s/demo.hello-1"]);
        book.observe(&d, &on_hub(&["r/demo.hello", "s/demo.hello-1"]));
        // Wiped, and the hub refuses the rewrite (a quota, say).
        book.observe(&d, &on_hub(&[]));
        book.record(
            &[
                result("r/demo.hello", true, false),
                result("s/demo.hello-1", true, false),
            ],
            at(0),
        );
        assert_eq!(claimed(&book, &d), ["r/demo.hello", "s/demo.hello-1"]);
        let before = book.digest(&d);
        assert_eq!(
            before,
            digest(["r/demo.hello", "s/demo.hello-1"].into_iter())
        );
    }

    #[test]
    fn a_failed_deletion_stays_claimed_while_the_hub_holds_the_object() {
        let mut book = ClaimBook::default();
        let d = desired(&["r/demo.hello"]);
        book.observe(&d, &on_hub(&["r/demo.hello", "s/demo.gone"]));
        book.record(&[result("s/demo.gone", false, false)], at(0));
        assert_eq!(claimed(&book, &d), ["r/demo.hello", "s/demo.gone"]);
        book.observe(&d, &on_hub(&["r/demo.hello"]));
        assert_eq!(claimed(&book, &d), ["r/demo.hello"], "gone at last");
    }

    #[test]
    fn a_write_that_got_no_answer_leaves_the_name_claimed() {
        // Found by the fault simulation: a member restarted while partitioned from a wiped
        // hub left out every name it could not write (none confirmed in this process), claimed
        // nothing, and importers dropped its services.
        let mut book = ClaimBook::default();
        let d = desired(&["r/demo.hello"]);
        book.observe(&d, &on_hub(&[]));
        book.record(&[failed("r/demo.hello", 0)], at(0));
        assert_eq!(claimed(&book, &d), ["r/demo.hello"]);
        assert_eq!(Answer::of_status(409), Answer::Unanswered);
        assert_eq!(Answer::of_status(503), Answer::Unanswered);
        assert_eq!(Answer::of_status(422), Answer::Refused);
        assert_eq!(Answer::of_status(403), Answer::Refused);
    }

    #[test]
    fn names_no_longer_desired_are_forgotten() {
        let mut book = ClaimBook::default();
        let d = desired(&["r/demo.hello"]);
        book.observe(&d, &on_hub(&["r/demo.hello"]));
        book.record(&[result("r/demo.hello", true, false)], at(0));
        let none = Published::new();
        book.observe(&none, &on_hub(&["r/demo.hello"]));
        assert_eq!(book, ClaimBook::default());
    }

    #[test]
    fn a_write_that_keeps_failing_with_5xx_is_left_out_after_the_bound() {
        let (mut book, d) = webhook_member();
        let all = [HELD[0], NEW, HELD[1]];
        for secs in [0, 10, 20, 29] {
            step(&mut book, &[failed(NEW, 500)], true, secs);
            assert_eq!(claimed(&book, &d), all, "within the bound at {secs} s");
            assert_eq!(book.unpublishable(), 0);
        }
        step(&mut book, &[failed(NEW, 500)], true, 30);
        assert_eq!(claimed(&book, &d), HELD, "failed for the whole bound");
        assert_eq!(book.unpublishable(), 1);
        assert_eq!(book.digest(&d), digest(HELD.into_iter()));
    }

    #[test]
    fn no_answer_is_bounded_by_time_not_by_attempts() {
        // Three hundred attempts within the bound leave the name claimed...
        let (mut book, d) = webhook_member();
        book.hub_took_write(at(0));
        for tenth in 0..300 {
            book.record(&[failed(NEW, 0)], at_ms(tenth * 100));
            if tenth % 100 == 0 {
                book.hub_took_write(at_ms(tenth * 100));
            }
        }
        assert_eq!(claimed(&book, &d).len(), 3, "29.9 s of failures");
        // ...two a bound apart do not.
        let (mut book, d) = webhook_member();
        step(&mut book, &[failed(NEW, 0)], true, 0);
        step(&mut book, &[failed(NEW, 0)], true, 30);
        assert_eq!(claimed(&book, &d), HELD);
        // Conflicts and throttling are retried the same way, and bounded the same way.
        for code in [409, 429, 503, 504] {
            let (mut book, d) = webhook_member();
            step(&mut book, &[failed(NEW, code)], true, 0);
            step(&mut book, &[failed(NEW, code)], true, 30);
            assert_eq!(claimed(&book, &d), HELD, "{code}");
        }
    }

    #[test]
    fn a_success_brings_an_outlasted_name_back() {
        let (mut book, d) = webhook_member();
        step(&mut book, &[failed(NEW, 503)], true, 0);
        step(&mut book, &[failed(NEW, 503)], true, 30);
        assert_eq!(claimed(&book, &d), HELD);
        step(&mut book, &[result(NEW, true, true)], true, 31);
        assert_eq!(
            claimed(&book, &d),
            [HELD[0], NEW, HELD[1]],
            "written at last"
        );
        assert_eq!(book.unpublishable(), 0);
        // Failing again (an update the webhook fails) is a new spell: the hub took the name,
        // so it stays claimed now however long the update fails.
        for secs in [32, 61, 62, 600] {
            step(&mut book, &[failed(NEW, 503)], true, secs);
        }
        assert_eq!(claimed(&book, &d).len(), 3);
        assert_eq!(book.unpublishable(), 0);
    }

    #[test]
    fn a_success_of_a_name_the_hub_lost_starts_the_bound_over() {
        // Written once, then gone from the hub (wiped) and from the desired set and back, so
        // not confirmed any more: the bound counts afresh from its next failure.
        let (mut book, d) = webhook_member();
        step(&mut book, &[failed(NEW, 0)], true, 0);
        step(&mut book, &[result(NEW, true, true)], true, 29);
        book.observe(&desired(&HELD), &on_hub(&HELD));
        book.observe(&d, &on_hub(&HELD));
        step(&mut book, &[failed(NEW, 0)], true, 30);
        step(&mut book, &[failed(NEW, 0)], true, 59);
        assert_eq!(claimed(&book, &d).len(), 3, "29 s into the new spell");
        step(&mut book, &[failed(NEW, 0)], true, 60);
        assert_eq!(claimed(&book, &d), HELD);
    }

    #[test]
    fn a_partition_never_shortens_the_claim() {
        // Restarted while partitioned from a wiped hub: no name confirmed, every write and
        // renewal unanswered for five minutes (the hub took one renewal before).
        let mut book = ClaimBook::default();
        let d = desired(&[HELD[0], HELD[1]]);
        book.observe(&d, &on_hub(&[]));
        book.hub_took_write(at(0));
        for secs in (1..=300).step_by(5) {
            let writes = [failed(HELD[0], 0), failed(HELD[1], 0)];
            step(&mut book, &writes, false, secs);
        }
        assert_eq!(claimed(&book, &d), HELD);
        // Healed: the first renewal goes through while a write still times out. The bound
        // counts from there, so the claim does not shrink on the way back.
        step(
            &mut book,
            &[failed(HELD[0], 0), result(HELD[1], true, true)],
            true,
            301,
        );
        step(&mut book, &[failed(HELD[0], 0)], false, 302);
        assert_eq!(claimed(&book, &d), HELD);
        // Still failing a bound later while the hub takes the rest: a write of its own.
        step(&mut book, &[failed(HELD[0], 0)], true, 331);
        assert_eq!(claimed(&book, &d), [HELD[1]]);
    }

    #[test]
    fn a_failure_must_outlast_the_bound_while_the_hub_takes_writes() {
        let (mut book, d) = webhook_member();
        step(&mut book, &[failed(NEW, 500)], true, 0);
        // Partitioned from 5 s on: failures go on, nothing is taken.
        step(&mut book, &[failed(NEW, 0)], false, 100);
        assert_eq!(
            claimed(&book, &d).len(),
            3,
            "no write taken since the bound ran out"
        );
        // The hub takes writes again and this one still fails: left out.
        step(&mut book, &[failed(NEW, 500)], true, 101);
        assert_eq!(claimed(&book, &d), HELD);
    }

    #[test]
    fn other_writes_going_through_show_the_hub_is_there() {
        // No renewal reported: the member's own other writes are the evidence.
        let (mut book, d) = webhook_member();
        let writes = [failed(NEW, 500), result(HELD[1], true, true)];
        step(&mut book, &writes, false, 0);
        step(&mut book, &writes, false, 30);
        assert_eq!(claimed(&book, &d), HELD);
    }

    #[test]
    fn the_order_of_the_renewal_and_the_writes_does_not_matter() {
        let (mut first, d) = webhook_member();
        let mut second = first.clone();
        for secs in [0, 30] {
            first.record(&[failed(NEW, 0)], at(secs));
            first.hub_took_write(at(secs));
            second.hub_took_write(at(secs));
            second.record(&[failed(NEW, 0)], at(secs));
        }
        assert_eq!(first, second);
        assert_eq!(claimed(&second, &d), HELD);
    }

    #[test]
    fn a_name_the_hub_holds_stays_claimed_however_long_its_update_fails() {
        let (mut book, d) = webhook_member();
        for secs in [0, 30, 600] {
            step(&mut book, &[failed(HELD[0], 500)], true, secs);
        }
        assert_eq!(claimed(&book, &d).len(), 3);
        assert_eq!(book.unpublishable(), 0);
    }

    #[test]
    fn a_refused_name_in_a_spell_is_counted_once() {
        let (mut book, d) = webhook_member();
        step(&mut book, &[failed(NEW, 500)], true, 0);
        step(&mut book, &[failed(NEW, 422)], true, 1);
        assert_eq!(claimed(&book, &d), HELD, "refused: left out at once");
        step(&mut book, &[failed(NEW, 500)], true, 30);
        assert_eq!(book.unpublishable(), 1);
    }
}
