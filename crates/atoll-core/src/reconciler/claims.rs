//! What a member claims to publish: the names of its records and copies that are on the hub or
//! on their way there. A name the hub refuses (a 4xx answer: too long, over a quota, invalid)
//! and never held is left out, so one refused write cannot freeze every importer's view of the
//! member; a write that merely got no answer (a partition, a timeout, a conflict to retry)
//! leaves the name claimed, as does a name the hub held once, whatever happens to the hub (a
//! wipe must not read as "the member withdrew everything"); a name whose deletion failed stays
//! claimed while the hub holds it.

use std::collections::BTreeSet;

use crate::liveness::digest;
use crate::plan::Published;

/// Per-name memory of a member's own hub writes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClaimBook {
    /// Desired names the hub was seen holding, or accepted a write of.
    confirmed: BTreeSet<String>,
    /// Desired names whose last write failed.
    failed_writes: BTreeSet<String>,
    /// Names whose last deletion failed.
    failed_deletes: BTreeSet<String>,
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
        self.failed_writes.retain(|n| desired.contains(n));
        self.failed_deletes.retain(|n| on_hub.contains(n));
    }

    /// Takes in the results of the member's hub writes.
    pub fn record(&mut self, results: &[HubWriteResult]) {
        for r in results {
            match (r.apply, r.answer) {
                (true, Answer::Done) => {
                    self.confirmed.insert(r.name.clone());
                    self.failed_writes.remove(&r.name);
                }
                (true, Answer::Refused) => {
                    self.failed_writes.insert(r.name.clone());
                }
                (false, Answer::Done) => {
                    self.failed_deletes.remove(&r.name);
                }
                (false, _) => {
                    self.failed_deletes.insert(r.name.clone());
                }
                // Unanswered: still on its way.
                (true, Answer::Unanswered) => {}
            }
        }
    }

    /// The names claimed: desired ones unless their write failed before the hub ever held
    /// them, and those the hub still holds because their deletion failed.
    pub fn claimed<'a>(&'a self, desired: &'a Published) -> impl Iterator<Item = &'a str> {
        desired
            .values()
            .flatten()
            .filter(|n| self.confirmed.contains(*n) || !self.failed_writes.contains(*n))
            .chain(self.failed_deletes.iter())
            .map(String::as_str)
    }

    /// The digest of [`claimed`](Self::claimed).
    pub fn digest(&self, desired: &Published) -> String {
        digest(self.claimed(desired))
    }

    /// Names left out of the claim because their write fails.
    pub fn unpublishable(&self) -> usize {
        self.failed_writes
            .iter()
            .filter(|n| !self.confirmed.contains(*n))
            .count()
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
        book.record(&[result("s/demo.hello-long", true, false)]);
        assert_eq!(claimed(&book, &d), ["r/demo.hello"], "refused: left out");
        assert_eq!(book.unpublishable(), 1);
        book.record(&[result("s/demo.hello-long", true, true)]);
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
        book.record(&[
            result("r/demo.hello", true, false),
            result("s/demo.hello-1", true, false),
        ]);
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
        book.record(&[result("s/demo.gone", false, false)]);
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
        book.record(&[HubWriteResult {
            name: "r/demo.hello".into(),
            apply: true,
            answer: Answer::of_status(0),
        }]);
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
        book.record(&[result("r/demo.hello", true, false)]);
        let none = Published::new();
        book.observe(&none, &on_hub(&["r/demo.hello"]));
        assert_eq!(book, ClaimBook::default());
    }
}
