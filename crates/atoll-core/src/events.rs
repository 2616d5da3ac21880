//! Kubernetes Events as the executor publishes them: each one identified by what it is about
//! and what it says, decided here (never by whoever publishes it), and published again until
//! it is: an Event the API refused (throttled, a webhook, the member's apiserver restarting)
//! is carried by the next leading steps, with a delay that doubles, so what an operator reads
//! in `kubectl describe` does not depend on one write's luck.

use std::time::{Duration, Instant};

use atoll_api::keys::ObjectKey;

use crate::announce::Announcement;
use crate::plan::Rejected;
use crate::text::printable;

/// What an Event is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum About {
    /// A ServiceExport (its uid when known, so the Event follows that object).
    Export { key: ObjectKey, uid: Option<String> },
    /// A ServiceImport.
    Import(ObjectKey),
    /// The member's own id ClusterProperty (members cannot write Events on the hub), about a
    /// hub object (its kind and key) when there is one: Events on one object with one reason
    /// are one series unless their related objects differ.
    Member(Option<(&'static str, ObjectKey)>),
}

/// One Event to publish.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub about: About,
    pub announcement: Announcement,
}

/// The Event about a hub record this member will not use.
pub fn record_rejected(rejected: &Rejected) -> Event {
    Event {
        about: About::Member(Some(("ExportedService", rejected.record.clone()))),
        announcement: Announcement {
            warning: true,
            reason: "HubRecordRejected".to_owned(),
            note: format!(
                "ignoring member {}'s record {}: {}",
                printable(&rejected.cluster),
                printable(&rejected.record.to_string()),
                printable(&rejected.problem)
            ),
            action: "Import",
        },
    }
}

/// Events not published yet, oldest first, each once.
#[derive(Clone, Debug, Default)]
pub struct Unpublished {
    events: Vec<Event>,
    /// Failed attempts in a row, and when the next is due.
    failures: u32,
    due: Option<Instant>,
}

impl Unpublished {
    /// Events kept at most: a storm of refused Events must not grow the agent (the oldest go).
    pub const MOST: usize = 256;
    pub const FIRST_RETRY: Duration = Duration::from_secs(1);
    pub const LAST_RETRY: Duration = Duration::from_secs(30);

    /// What a step left unpublished, `attempted` whether it published any Event, `retried`
    /// whether it carried Events refused before. Only a failed retry doubles the delay: fresh
    /// Events refused meanwhile wait for the retry already due.
    pub fn answered(
        &mut self,
        unpublished: Vec<Event>,
        attempted: bool,
        retried: bool,
        now: Instant,
    ) {
        if !attempted {
            return;
        }
        for event in unpublished {
            if !self.events.contains(&event) {
                self.events.push(event);
            }
        }
        let excess = self.events.len().saturating_sub(Self::MOST);
        self.events.drain(..excess);
        if self.events.is_empty() {
            self.failures = 0;
            self.due = None;
            return;
        }
        if retried || self.due.is_none() {
            if retried {
                self.failures = self.failures.saturating_add(1);
            }
            let delay = Self::FIRST_RETRY
                .saturating_mul(1 << self.failures.min(16))
                .min(Self::LAST_RETRY);
            self.due = Some(now + delay);
        }
    }

    /// The Events to publish again in a leading step at `now`, if their retry is due.
    pub fn take_due(&mut self, now: Instant) -> Vec<Event> {
        if self.due.is_some_and(|at| at <= now) {
            self.due = None;
            return std::mem::take(&mut self.events);
        }
        Vec::new()
    }

    /// When the next retry is due.
    pub fn next(&self, now: Instant) -> Option<Duration> {
        self.due.map(|at| at.saturating_duration_since(now))
    }

    pub fn len(&self) -> usize {
        self.events.len()
    }

    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            about: About::Import(ObjectKey::new("demo", "web")),
            announcement: Announcement {
                warning: false,
                reason: reason.to_owned(),
                note: String::new(),
                action: "Import",
            },
        }
    }

    #[test]
    fn refused_events_are_retried_with_a_doubling_delay_until_published() {
        let start = Instant::now();
        let mut pending = Unpublished::default();
        pending.answered(vec![event("A"), event("B")], true, false, start);
        // More fresh refusals do not push the retry back.
        pending.answered(
            vec![event("C")],
            true,
            false,
            start + Duration::from_millis(500),
        );
        assert_eq!(pending.take_due(start), vec![], "not before the delay");
        let t1 = start + Unpublished::FIRST_RETRY;
        assert_eq!(
            pending.take_due(t1),
            vec![event("A"), event("B"), event("C")]
        );
        // The retry refused again: twice the delay, each once.
        pending.answered(vec![event("B"), event("B")], true, true, t1);
        assert_eq!(pending.next(t1), Some(Unpublished::FIRST_RETRY * 2));
        let t2 = t1 + Unpublished::FIRST_RETRY * 2;
        assert_eq!(pending.take_due(t2), vec![event("B")]);
        pending.answered(Vec::new(), true, true, t2);
        assert_eq!((pending.len(), pending.next(t2)), (0, None), "published");
    }

    #[test]
    fn a_storm_of_refused_events_keeps_the_newest() {
        let now = Instant::now();
        let mut pending = Unpublished::default();
        let storm: Vec<Event> = (0..Unpublished::MOST + 10)
            .map(|i| event(&format!("R{i}")))
            .collect();
        pending.answered(storm, true, false, now);
        assert_eq!(pending.len(), Unpublished::MOST);
        let kept = pending.take_due(now + Unpublished::FIRST_RETRY);
        assert_eq!(kept.first(), Some(&event("R10")));
    }
}
