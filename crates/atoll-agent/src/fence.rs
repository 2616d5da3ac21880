//! Whether this replica may write, checked before every write: the leader may write until its
//! leadership lapses (its last renewal of the election Lease plus the renew deadline), and
//! each write is bounded by what is left of that, so no write of a replica that lost the Lease
//! is still under way when a standby may take it over (the Lease's full duration after the
//! last renewal). Without an election the process always writes, each write bounded by the
//! write timeout.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Shortest time left in which a write is still started.
const MIN_BUDGET: Duration = Duration::from_millis(100);

/// Leadership as the writer sees it.
#[derive(Clone, Debug)]
pub struct Fence {
    /// When leadership lapses (`None`: not leading); unused without an election.
    lapses_at: Arc<Mutex<Option<Instant>>>,
    elected: bool,
    write_timeout: Duration,
}

impl Fence {
    /// No election: every write may go, within `write_timeout`.
    pub fn always(write_timeout: Duration) -> Self {
        Self {
            lapses_at: Arc::new(Mutex::new(None)),
            elected: false,
            write_timeout,
        }
    }

    /// Elected leadership, lapsing as the election task says (not leading until it does).
    pub fn elected(write_timeout: Duration) -> Self {
        Self {
            elected: true,
            ..Self::always(write_timeout)
        }
    }

    /// The election's view: leading until `lapses_at` (`None`: not leading).
    pub fn set(&self, lapses_at: Option<Instant>) {
        *self
            .lapses_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = lapses_at;
    }

    /// How long a write started at `now` may take, if one may start at all.
    pub fn budget(&self, now: Instant) -> Option<Duration> {
        if !self.elected {
            return Some(self.write_timeout);
        }
        let lapses_at = (*self
            .lapses_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner))?;
        let left = lapses_at.saturating_duration_since(now);
        (left >= MIN_BUDGET).then(|| left.min(self.write_timeout))
    }

    /// Whether this replica leads at `now`.
    pub fn leading(&self, now: Instant) -> bool {
        self.budget(now).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_stop_before_leadership_lapses_and_are_bounded_by_what_is_left() {
        let fence = Fence::elected(Duration::from_secs(10));
        let now = Instant::now();
        assert_eq!(fence.budget(now), None, "not leading until elected");
        fence.set(Some(now + Duration::from_secs(3)));
        assert_eq!(fence.budget(now), Some(Duration::from_secs(3)));
        assert_eq!(
            fence.budget(now + Duration::from_millis(2_950)),
            None,
            "too little left to start"
        );
        fence.set(None);
        assert!(!fence.leading(now));
        let always = Fence::always(Duration::from_secs(10));
        assert_eq!(always.budget(now), Some(Duration::from_secs(10)));
    }
}
