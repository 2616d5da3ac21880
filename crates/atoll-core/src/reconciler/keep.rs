//! When the leader keeps the liveness decisions in its member (see `crate::liveness::Persisted`):
//! at once when a decision a successor must not lose changes (a cluster withdrawn, restored or
//! gone stale, a cluster not seen to beat since some time), and accepted claim epochs, which
//! change with every change anywhere in the ClusterSet, at most once per batch interval.
//! Nothing is written while nothing changes.
//!
//! Keeping is bookkeeping: it speeds a successor up and carries history, and safety never
//! depends on it (an importer uses a cluster only once it has seen it beat). So a refused write
//! is tried again with a delay that doubles up to [`MAX_RETRY`], reported, and stops nothing
//! else; and nothing is written before what the member holds has been read once (by this
//! replica, or since it became the leader), so a predecessor's decisions are never overwritten
//! unread.

use std::time::{Duration, Instant};

use crate::liveness::Persisted;

/// How often accepted epochs alone are written at most.
pub const EPOCH_BATCH: Duration = Duration::from_secs(30);

/// How soon a refused keep write is tried again; the delay doubles up to [`MAX_RETRY`].
pub const FIRST_RETRY: Duration = Duration::from_millis(500);
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// How keeping stands, for the agent's status, metrics and Events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Keeping {
    /// What the member holds is read and what is due is written.
    Kept,
    /// What the member holds has not been read (yet): nothing is written until it is.
    Unread,
    /// Writes have failed since then, this many in a row; the last error.
    Failing {
        since: Instant,
        failures: u32,
        error: String,
    },
}

/// How keeping stands, as the member's heartbeat Lease says it (`atoll status` shows it): `kept`,
/// `unread`, or `failing for <s>s (<n> writes): <error>` (bounded: annotations are small).
pub fn keeping_text(keeping: &Keeping, now: Instant) -> String {
    match keeping {
        Keeping::Kept => "kept".to_owned(),
        Keeping::Unread => "unread".to_owned(),
        Keeping::Failing {
            since,
            failures,
            error,
        } => {
            let text = format!(
                "failing for {}s ({failures} writes): {error}",
                now.saturating_duration_since(*since).as_secs()
            );
            text.chars().take(512).collect()
        }
    }
}

/// What has been kept, and what is on its way.
#[derive(Clone, Debug)]
pub struct KeepBook {
    /// What the member holds (read at start, or last written), and when it was written.
    kept: Option<(Persisted, Option<Instant>)>,
    pending: Option<Persisted>,
    /// Whether what the member holds has been read.
    read: bool,
    /// Refused writes in a row, the first's and the last's time, and the last error.
    failed: Option<(u32, Instant, Instant, String)>,
}

impl Default for KeepBook {
    fn default() -> Self {
        Self::found(None)
    }
}

impl KeepBook {
    /// Starts from what the member holds (`None`: nothing, a new member).
    pub fn found(persisted: Option<Persisted>) -> Self {
        Self {
            kept: persisted.map(|p| (p, None)),
            pending: None,
            read: true,
            failed: None,
        }
    }

    /// What the member holds could not be read: nothing is written until it is.
    pub fn unread() -> Self {
        Self {
            read: false,
            ..Self::found(None)
        }
    }

    /// The end of the last block of beats kept in the member (0: none).
    pub fn reserved(&self) -> u64 {
        self.kept.as_ref().map_or(0, |(p, _)| p.reserved)
    }

    /// How keeping stands.
    pub fn keeping(&self) -> Keeping {
        match (&self.failed, self.read) {
            (_, false) => Keeping::Unread,
            (Some((failures, since, _, error)), true) => Keeping::Failing {
                since: *since,
                failures: *failures,
                error: error.clone(),
            },
            (None, true) => Keeping::Kept,
        }
    }

    /// What to write now, if anything, for the tracker's current decisions.
    pub fn due(&mut self, current: &Persisted, now: Instant) -> Option<Persisted> {
        if !self.read || self.retry_at().is_some_and(|at| now < at) {
            return None;
        }
        let empty = Persisted::default();
        let (kept, written_at) = match &self.kept {
            Some((p, at)) => (p, *at),
            None => (&empty, None),
        };
        if kept.sources == current.sources && kept.reserved == current.reserved {
            return None;
        }
        let batch_passed =
            written_at.is_none_or(|at| now.saturating_duration_since(at) >= EPOCH_BATCH);
        if kept.decisions_differ(current) || batch_passed || self.failed.is_some() {
            self.pending = Some(current.clone());
            return self.pending.clone();
        }
        None
    }

    /// The writer's answer (`Err`: the API's message).
    pub fn answered(&mut self, result: Result<(), String>, now: Instant) {
        let Some(p) = self.pending.take() else {
            return;
        };
        match result {
            Ok(()) => {
                self.kept = Some((p, Some(now)));
                self.failed = None;
            }
            Err(error) => {
                let (failures, since) = self
                    .failed
                    .as_ref()
                    .map_or((0, now), |(n, since, _, _)| (*n, *since));
                self.failed = Some((failures.saturating_add(1), since, now, error));
            }
        }
    }

    /// When a refused write may be tried again.
    fn retry_at(&self) -> Option<Instant> {
        let (failures, _, last, _) = self.failed.as_ref()?;
        let doubled = FIRST_RETRY.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
        Some(*last + doubled.min(MAX_RETRY))
    }

    /// When epochs waiting for their batch, or a retry, are due.
    pub fn next_due(&self, current: &Persisted, now: Instant) -> Option<Duration> {
        if !self.read {
            return None;
        }
        if let Some(at) = self.retry_at() {
            return Some(at.saturating_duration_since(now));
        }
        let (kept, at) = self.kept.as_ref()?;
        let at = (*at)?;
        (kept.sources != current.sources).then(|| (at + EPOCH_BATCH).saturating_duration_since(now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::liveness::{PersistedSource, Standing};
    use std::collections::BTreeMap;

    fn with(cluster: &str, source: PersistedSource) -> Persisted {
        Persisted {
            format: 1,
            reserved: 0,
            sources: BTreeMap::from([(cluster.to_owned(), source)]),
        }
    }

    #[test]
    fn decisions_are_kept_at_once_and_epochs_in_batches() {
        let start = Instant::now();
        let mut book = KeepBook::found(None);
        let epoch = |e| {
            with(
                "c2",
                PersistedSource {
                    accepted_epoch: e,
                    ..Default::default()
                },
            )
        };
        assert_eq!(
            book.due(&epoch(1), start),
            Some(epoch(1)),
            "nothing kept yet"
        );
        book.answered(Ok(()), start);
        assert_eq!(
            book.due(&epoch(1), start),
            None,
            "nothing changed: nothing written"
        );
        assert_eq!(
            book.due(&epoch(2), start + Duration::from_secs(5)),
            None,
            "epochs wait"
        );
        assert_eq!(
            book.next_due(&epoch(2), start + Duration::from_secs(5)),
            Some(EPOCH_BATCH - Duration::from_secs(5))
        );
        let withdrawn = with(
            "c2",
            PersistedSource {
                accepted_epoch: 2,
                standing: Some(Standing::Withdrawn),
                beat: Some(9),
                ..Default::default()
            },
        );
        assert_eq!(
            book.due(&withdrawn, start + Duration::from_secs(6)),
            Some(withdrawn.clone()),
            "a withdrawal is kept at once"
        );
        book.answered(Err("refused".into()), start + Duration::from_secs(6));
        assert!(
            book.due(&withdrawn, start + Duration::from_secs(7))
                .is_some(),
            "tried again"
        );
        book.answered(Ok(()), start + Duration::from_secs(7));
        let later = with(
            "c2",
            PersistedSource {
                accepted_epoch: 3,
                standing: Some(Standing::Withdrawn),
                beat: Some(9),
                ..Default::default()
            },
        );
        assert_eq!(
            book.due(&later, start + Duration::from_secs(7) + EPOCH_BATCH),
            Some(later)
        );
    }

    #[test]
    fn a_refused_write_is_retried_with_a_doubling_delay_and_reported() {
        let start = Instant::now();
        let ms = |n: u64| start + Duration::from_millis(n);
        let mut book = KeepBook::found(None);
        let decision = with(
            "c2",
            PersistedSource {
                standing: Some(Standing::Withdrawn),
                beat: Some(9),
                ..Default::default()
            },
        );
        assert!(book.due(&decision, start).is_some());
        book.answered(Err("denied by policy".into()), start);
        assert_eq!(
            book.keeping(),
            Keeping::Failing {
                since: start,
                failures: 1,
                error: "denied by policy".into()
            }
        );
        assert!(book.due(&decision, ms(100)).is_none(), "not at every step");
        assert_eq!(
            book.next_due(&decision, ms(100)),
            Some(Duration::from_millis(400))
        );
        assert!(book.due(&decision, ms(500)).is_some());
        book.answered(Err("denied by policy".into()), ms(500));
        assert!(book.due(&decision, ms(1_400)).is_none(), "then a second");
        assert!(book.due(&decision, ms(1_500)).is_some());
        let mut at = ms(1_500);
        for _ in 0..20 {
            book.answered(Err("denied by policy".into()), at);
            at += MAX_RETRY;
            assert!(book.due(&decision, at).is_some(), "never longer than 30 s");
        }
        book.answered(Ok(()), at);
        assert_eq!(book.keeping(), Keeping::Kept);
        assert!(book.due(&decision, at).is_none());
    }

    #[test]
    fn nothing_is_written_before_what_the_member_holds_is_read() {
        let start = Instant::now();
        let mut book = KeepBook::unread();
        let decision = with(
            "c2",
            PersistedSource {
                standing: Some(Standing::Stale),
                beat: Some(9),
                ..Default::default()
            },
        );
        assert_eq!(book.keeping(), Keeping::Unread);
        assert!(book.due(&decision, start).is_none());
        assert!(book.next_due(&decision, start).is_none());
        let mut book = KeepBook::found(None);
        assert!(book.due(&decision, start).is_some());
    }
}
