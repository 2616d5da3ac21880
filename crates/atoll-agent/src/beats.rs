//! What the Lease watch saw of each member's heartbeat, and when: a beat is taken in by the
//! reconciler as seen at that moment (`atoll_core::liveness::BeatsSeen`), so a renewal that
//! changes nothing but the beat needs no pass. Only the beats of clusters whose state a beat
//! changes (withdrawn, stale, pinned, unconfirmed, unmatched; or every cluster while this
//! importer is blind) wake the reconciler; the others wait for the next pass, which liveness
//! deadlines schedule anyway.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use atoll_core::liveness::{Beat, BeatsSeen, Liveness};

/// Shared by the Lease watch (which writes what it saw) and the reconcile loop (which reads it
/// at each step and says which clusters are quiet).
#[derive(Clone, Debug, Default)]
pub struct Beats {
    inner: Arc<Mutex<Inner>>,
}

#[derive(Debug, Default)]
struct Inner {
    seen: BeatsSeen,
    /// Clusters whose beat changes nothing the reconciler must act on at once.
    quiet: HashSet<String>,
}

impl Beats {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every update is one call: the map stays consistent if a holder panicked.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The watch saw `cluster`'s Lease hold `beat` at `at`; returns whether the reconciler
    /// should be woken for it.
    pub fn saw(&self, cluster: &str, beat: Beat, at: Instant) -> bool {
        let mut inner = self.lock();
        let moved = inner.seen.get(cluster).is_none_or(|(b, _)| *b != beat);
        if moved {
            inner.seen.insert(cluster.to_owned(), (beat, at));
        }
        !inner.quiet.contains(cluster)
    }

    /// `cluster`'s Lease is gone.
    pub fn forget(&self, cluster: &str) {
        let mut inner = self.lock();
        inner.seen.remove(cluster);
        inner.quiet.remove(cluster);
    }

    /// The watch lists again: what it saw before no longer counts.
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.seen.clear();
        inner.quiet.clear();
    }

    /// When each cluster's current beat was seen.
    pub fn seen(&self) -> BeatsSeen {
        self.lock().seen.clone()
    }

    /// Takes in what the last step judged: every cluster it judged is quiet but those a beat
    /// changes something for; none while this importer is blind.
    pub fn judged(&self, liveness: &Liveness) {
        let quiet: HashSet<String> = if liveness.blind {
            HashSet::new()
        } else {
            liveness
                .last_seen_seconds
                .keys()
                .filter(|c| {
                    !liveness.withdrawn.contains_key(*c)
                        && !liveness.stale.contains_key(*c)
                        && !liveness.unmatched.contains_key(*c)
                        && !liveness.pinned.contains(*c)
                        && !liveness.unconfirmed.contains(*c)
                })
                .cloned()
                .collect()
        };
        self.lock().quiet = quiet;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quiet_clusters_beat_is_noted_without_a_wake_and_a_withdrawn_ones_wakes() {
        let beats = Beats::default();
        let t0 = Instant::now();
        assert!(beats.saw("c2", Beat::Counter(1), t0), "nothing judged yet");
        let mut liveness = Liveness::default();
        liveness.last_seen_seconds.insert("c2".into(), 1.0);
        liveness.last_seen_seconds.insert("c3".into(), 30.0);
        liveness.withdrawn.insert(
            "c3".into(),
            atoll_core::liveness::Withdrawal {
                last_seen: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                services: Default::default(),
            },
        );
        beats.judged(&liveness);
        let t1 = t0 + std::time::Duration::from_secs(2);
        assert!(!beats.saw("c2", Beat::Counter(2), t1));
        assert!(
            beats.saw("c3", Beat::Counter(9), t1),
            "a withdrawn cluster beats again"
        );
        // The same beat seen again keeps when it was first seen.
        assert!(!beats.saw(
            "c2",
            Beat::Counter(2),
            t1 + std::time::Duration::from_secs(1)
        ));
        assert_eq!(beats.seen().get("c2"), Some(&(Beat::Counter(2), t1)));
        // Blind: every beat wakes.
        liveness.blind = true;
        beats.judged(&liveness);
        assert!(beats.saw("c2", Beat::Counter(3), t1));
        beats.forget("c2");
        assert_eq!(beats.seen().get("c2"), None);
    }
}
