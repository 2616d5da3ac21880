//! When the leader keeps the liveness decisions in its member (see `crate::liveness::Persisted`):
//! at once when a decision a successor must not lose changes (a cluster withdrawn, restored or
//! gone stale), and accepted claim epochs, which change with every change anywhere in the
//! ClusterSet, at most once per batch interval. Nothing is written while nothing changes.

use std::time::{Duration, Instant};

use crate::liveness::Persisted;

/// How often accepted epochs alone are written at most.
pub const EPOCH_BATCH: Duration = Duration::from_secs(30);

/// What has been kept, and what is on its way.
#[derive(Clone, Debug, Default)]
pub struct KeepBook {
    /// What the member holds (read at start, or last written), and when it was written.
    kept: Option<(Persisted, Option<Instant>)>,
    pending: Option<Persisted>,
}

impl KeepBook {
    /// Starts from what the member holds.
    pub fn found(persisted: Option<Persisted>) -> Self {
        Self {
            kept: persisted.map(|p| (p, None)),
            pending: None,
        }
    }

    /// The end of the last block of beats kept in the member (0: none).
    pub fn reserved(&self) -> u64 {
        self.kept.as_ref().map_or(0, |(p, _)| p.reserved)
    }

    /// What to write now, if anything, for the tracker's current decisions.
    pub fn due(&mut self, current: &Persisted, now: Instant) -> Option<Persisted> {
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
        if kept.decisions_differ(current) || batch_passed {
            self.pending = Some(current.clone());
            return self.pending.clone();
        }
        None
    }

    /// The writer's answer.
    pub fn answered(&mut self, ok: bool, now: Instant) {
        if let Some(p) = self.pending.take()
            && ok
        {
            self.kept = Some((p, Some(now)));
        }
    }

    /// When epochs waiting for their batch are due.
    pub fn next_due(&self, current: &Persisted, now: Instant) -> Option<Duration> {
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
        book.answered(true, start);
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
        book.answered(false, start + Duration::from_secs(6));
        assert!(
            book.due(&withdrawn, start + Duration::from_secs(7))
                .is_some(),
            "tried again"
        );
        book.answered(true, start + Duration::from_secs(7));
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
}
