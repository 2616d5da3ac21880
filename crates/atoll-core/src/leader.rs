//! Leader election between the agent replicas of one member, decided without I/O.
//!
//! The replicas share a `coordination.k8s.io` Lease in the member. Like client-go's
//! leaderelection, a replica never compares the Lease's `renewTime` with its own clock (clocks
//! of different nodes disagree): it notes, on its own monotonic clock, when it last saw the
//! Lease's record change, and treats the Lease as expired once that record has stayed unchanged
//! for longer than the Lease's duration. An empty holder (the leader released it on shutdown)
//! can be taken at once. The leader counts itself leader only while its last successful renewal
//! is younger than the renew deadline, which is shorter than the Lease's duration, so it stops
//! writing before any standby may start.

use std::time::{Duration, Instant};

/// Timings of the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timings {
    /// How long a Lease whose record does not change keeps others from taking it.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal.
    pub renew_deadline: Duration,
    /// How often every replica looks at the Lease (and the leader renews it).
    pub retry_period: Duration,
}

impl Default for Timings {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(6),
            renew_deadline: Duration::from_secs(4),
            retry_period: Duration::from_secs(1),
        }
    }
}

/// Timings that cannot keep two leaders apart.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TimingsError {
    #[error(
        "the renew deadline ({deadline:?}) must be shorter than the lease duration ({lease:?}), or a leader could still write after a standby took over"
    )]
    DeadlineNotShorter { deadline: Duration, lease: Duration },
    #[error(
        "the retry period ({retry:?}) must be shorter than the renew deadline ({deadline:?}), or the leader loses the Lease between two renewals"
    )]
    RetryNotShorter { retry: Duration, deadline: Duration },
    #[error(
        "the retry period ({retry:?}) must be at least {MIN_RETRY_PERIOD:?}, or every replica spins on the apiserver"
    )]
    RetryTooShort { retry: Duration },
    #[error(
        "the lease duration ({lease:?}) must be at most {MAX_LEASE:?} (clock readings plus it must not overflow)"
    )]
    LeaseTooLong { lease: Duration },
}

/// Shortest retry period: a replica looks at the Lease this often at most.
pub const MIN_RETRY_PERIOD: Duration = Duration::from_millis(100);
/// Longest lease duration.
pub const MAX_LEASE: Duration = Duration::from_secs(3600);

impl Timings {
    /// Checks that the timings keep at most one replica leading.
    pub fn validate(&self) -> Result<(), TimingsError> {
        if self.lease_duration > MAX_LEASE {
            return Err(TimingsError::LeaseTooLong {
                lease: self.lease_duration,
            });
        }
        if self.retry_period < MIN_RETRY_PERIOD {
            return Err(TimingsError::RetryTooShort {
                retry: self.retry_period,
            });
        }
        if self.renew_deadline >= self.lease_duration {
            return Err(TimingsError::DeadlineNotShorter {
                deadline: self.renew_deadline,
                lease: self.lease_duration,
            });
        }
        if self.retry_period >= self.renew_deadline {
            return Err(TimingsError::RetryNotShorter {
                retry: self.retry_period,
                deadline: self.renew_deadline,
            });
        }
        Ok(())
    }
}

/// What a replica read of the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    /// `spec.holderIdentity`; `None` or empty when nobody holds it.
    pub holder: Option<String>,
    /// `spec.renewTime` as written (compared for change only, never with a clock).
    pub renew_time: Option<String>,
    /// `spec.leaseDurationSeconds`.
    pub duration_seconds: Option<i32>,
    /// `spec.leaseTransitions`.
    pub transitions: i32,
}

impl Observed {
    fn holder(&self) -> Option<&str> {
        self.holder.as_deref().filter(|h| !h.is_empty())
    }

    fn duration(&self, fallback: Duration) -> Duration {
        self.duration_seconds
            .and_then(|s| u64::try_from(s).ok())
            .filter(|s| *s > 0)
            .map_or(fallback, Duration::from_secs)
    }
}

/// The write a replica makes next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Lease exists: create it, held by this replica.
    Create,
    /// The Lease is free or expired: take it (update against the version read), with this
    /// `transitions` count.
    Acquire { transitions: i32 },
    /// This replica holds the Lease: renew it (update against the version read).
    Renew,
    /// Another replica holds a live Lease: write nothing.
    Follow { holder: String },
}

/// One replica's view of the election.
#[derive(Debug)]
pub struct Elector {
    identity: String,
    timings: Timings,
    /// The record last seen, and when (this replica's monotonic clock) it was first seen.
    seen: Option<(Observed, Instant)>,
    /// When this replica's last write of the Lease as its holder succeeded.
    renewed: Option<Instant>,
}

impl Elector {
    pub fn new(identity: impl Into<String>, timings: Timings) -> Self {
        Self {
            identity: identity.into(),
            timings,
            seen: None,
            renewed: None,
        }
    }

    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Decides the next step from the Lease as read at `now` (`None`: it does not exist).
    pub fn decide(&mut self, now: Instant, lease: Option<&Observed>) -> Step {
        let Some(lease) = lease else {
            self.seen = None;
            return Step::Create;
        };
        let first_seen = match &self.seen {
            Some((record, at)) if record == lease => *at,
            _ => now,
        };
        self.seen = Some((lease.clone(), first_seen));
        match lease.holder() {
            Some(holder) if holder == self.identity => Step::Renew,
            None => Step::Acquire {
                transitions: lease.transitions.saturating_add(1),
            },
            Some(holder) => {
                let unchanged_for = now.saturating_duration_since(first_seen);
                if unchanged_for > lease.duration(self.timings.lease_duration) {
                    Step::Acquire {
                        transitions: lease.transitions.saturating_add(1),
                    }
                } else {
                    // Someone else leads: whatever this replica wrote before no longer counts.
                    self.renewed = None;
                    Step::Follow {
                        holder: holder.to_owned(),
                    }
                }
            }
        }
    }

    /// Records that this replica's Create, Acquire or Renew succeeded at `now`.
    pub fn wrote(&mut self, now: Instant) {
        self.renewed = Some(now);
    }

    /// Records that another replica won a race for the Lease (a conflicting write).
    pub fn lost(&mut self) {
        self.renewed = None;
    }

    /// Whether this replica leads at `now`: its last successful write as holder is younger
    /// than the renew deadline.
    pub fn leading(&self, now: Instant) -> bool {
        self.renewed
            .is_some_and(|at| now.saturating_duration_since(at) < self.timings.renew_deadline)
    }

    /// When leadership lapses unless renewed (for the caller's timer), if leading.
    pub fn lapses_at(&self) -> Option<Instant> {
        self.renewed.map(|at| at + self.timings.renew_deadline)
    }
}

#[cfg(test)]
#[path = "leader_tests.rs"]
mod tests;
