//! A simulated member and what the faults currently do to it.

use std::time::{Duration, Instant};

use crate::replica::{Replica, Rhythm};

/// A member and what the faults do to it.
#[derive(Debug)]
pub struct MemberState {
    pub name: String,
    pub rhythm: Rhythm,
    pub replicas: Vec<Replica>,
    /// Cannot reach the hub (no watch event, no write, in either direction).
    pub partitioned: bool,
    /// When its last spell of slow writes ended.
    pub slow_ended_at: Option<Instant>,
    /// When its last partition ended.
    pub reconnected_at: Option<Instant>,
    /// The next writes to fail, with this HTTP status (0: a timeout).
    pub failing_writes: u32,
    pub fail_code: u16,
    /// Its wall clock's offset.
    pub skew: Duration,
    pub skew_ahead: bool,
    /// How long each of its writes takes.
    pub write_latency: Duration,
    /// Its last heartbeat renewal the hub accepted.
    pub last_beat: Option<Instant>,
    /// The last moment a fault touched it (crash, restart, partition, failing writes, blind).
    /// Troubles with its kept decisions alone (below) do not count: they must not matter.
    pub disturbed_at: Instant,
    /// Its apiserver refuses every write of the kept decisions (an admission policy, a quota).
    pub refuse_kept: bool,
    /// Every read of the kept decisions fails (no permission, a timeout).
    pub unreadable_kept: bool,
    /// The next writes land but no answer comes (the client timed out first).
    pub unanswered_writes: u32,
    /// Its apiserver refuses `deletecollection` of MCS slices with this status (403: an agent
    /// whose RBAC predates the verb; 405).
    pub refuse_collections: Option<u16>,
    /// Its apiserver answers no collection in time, and goes on deleting after the client gave
    /// up: each lands later (see `World::late`).
    pub late_collections: bool,
    /// Its apiserver refuses Events (throttled, a webhook).
    pub refuse_events: bool,
}
