//! A minimum hold on a selection: a cluster whose endpoints flap (ready, not ready, ready), or
//! whose properties flip, would otherwise make every importer replace every other cluster's MCS
//! slices at each flip. A change that is needed (failover: an active cluster is gone, or none
//! of them serves) is never held; any other waits until the selection in place is
//! [`MIN_HOLD_SECONDS`] old.
//!
//! The selection in place is the one this importer's last pass applied (the reconciler's
//! report), with when it was first applied: never what the member's slices show, which lag
//! behind a switch (the old active slices stay until their replacements are observed) and
//! would hold the switch's own transition again.

use super::{Candidate, Selection};

/// Least time a selection stays in place before it changes again without need.
pub const MIN_HOLD_SECONDS: i64 = 30;

/// The selection to use at `now` (seconds since the epoch), given the one evaluated now
/// (`wanted`) and the one the last pass applied (`applied`, `None` for a service new to this
/// process). `imported_since` is when this member's ServiceImport was created: a service new
/// here is not held, its first selection may have been made before every cluster's
/// properties arrived.
pub fn hold(
    mut wanted: Selection,
    applied: Option<&Selection>,
    candidates: &[Candidate<'_>],
    imported_since: Option<i64>,
    now: i64,
) -> Selection {
    let Some(applied) = applied else {
        wanted.since = Some(now);
        return wanted;
    };
    if applied.active == wanted.active {
        wanted.since = applied.since.or(Some(now));
        return wanted;
    }
    let find = |id: &str| candidates.iter().find(|c| c.id == id);
    let all_there = applied.active.iter().all(|id| find(id).is_some());
    let one_serves = applied
        .active
        .iter()
        .any(|id| find(id).is_some_and(|c| c.serving));
    let new_here = imported_since.is_none_or(|at| now < at.saturating_add(MIN_HOLD_SECONDS));
    let until = applied
        .since
        .map_or(now, |since| since.saturating_add(MIN_HOLD_SECONDS));
    if all_there && one_serves && !new_here && now < until {
        return Selection {
            decided_by: applied.decided_by,
            active: applied.active.clone(),
            since: applied.since,
            held_until: Some(until),
        };
    }
    wanted.since = Some(now);
    wanted
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn selection(active: &[&str], since: Option<i64>) -> Selection {
        Selection {
            decided_by: Some(0),
            active: active.iter().map(|c| (*c).to_owned()).collect(),
            since,
            held_until: None,
        }
    }

    fn candidates<'a>(
        properties: &'a BTreeMap<String, String>,
        serving: &[(&'a str, bool)],
    ) -> Vec<Candidate<'a>> {
        serving
            .iter()
            .map(|(id, serving)| Candidate {
                id,
                properties,
                serving: *serving,
            })
            .collect()
    }

    #[test]
    fn a_change_without_need_waits_for_the_hold_and_failover_never_does() {
        let p = BTreeMap::new();
        let both = candidates(&p, &[("a", true), ("b", true)]);
        // Failed over to b at 100; a serves again at 110: b is held until 130.
        let applied = selection(&["b"], Some(100));
        let held = hold(selection(&["a"], None), Some(&applied), &both, Some(0), 110);
        assert_eq!(held.active, applied.active);
        assert_eq!((held.since, held.held_until), (Some(100), Some(130)));
        // At 130 the change goes, from then on.
        let moved = hold(selection(&["a"], None), Some(&applied), &both, Some(0), 130);
        assert_eq!(moved.active, selection(&["a"], None).active);
        assert_eq!((moved.since, moved.held_until), (Some(130), None));
        // b stops serving at 105: failover at once, whatever the hold.
        let b_down = candidates(&p, &[("a", true), ("b", false)]);
        let failover = hold(
            selection(&["a"], None),
            Some(&applied),
            &b_down,
            Some(0),
            105,
        );
        assert_eq!(failover.since, Some(105));
        assert_eq!(failover.active, selection(&["a"], None).active);
        // b is gone (withdrawn): the same.
        let a_only = candidates(&p, &[("a", true)]);
        let gone = hold(
            selection(&["a"], None),
            Some(&applied),
            &a_only,
            Some(0),
            105,
        );
        assert_eq!(gone.since, Some(105));
    }

    #[test]
    fn an_unchanged_selection_keeps_when_it_began_and_a_new_one_is_not_held() {
        let p = BTreeMap::new();
        let both = candidates(&p, &[("a", true), ("b", true)]);
        let applied = selection(&["a"], Some(100));
        let same = hold(selection(&["a"], None), Some(&applied), &both, Some(0), 200);
        assert_eq!((same.since, same.held_until), (Some(100), None));
        // Nothing applied yet (a new service, a restarted agent): as evaluated.
        let first = hold(selection(&["b"], None), None, &both, Some(0), 200);
        assert_eq!((first.since, first.held_until), (Some(200), None));
        // A service whose import here is younger than the hold: not held.
        let young = hold(
            selection(&["b"], None),
            Some(&applied),
            &both,
            Some(95),
            110,
        );
        assert_eq!(young.active, selection(&["b"], None).active);
    }

    #[test]
    fn a_flapping_cluster_moves_the_selection_at_most_twice_per_hold() {
        // b (preferred) flaps every 2 s for 120 s; a always serves. Passes every second.
        // Mutation: without the hold, the selection changes at every flip (60 times).
        let p = BTreeMap::new();
        let mut applied: Option<Selection> = None;
        let mut changes = 0;
        for now in 1000..1120 {
            let b_serving = (now / 2) % 2 == 0;
            let c = candidates(&p, &[("a", true), ("b", b_serving)]);
            let wanted = if b_serving {
                selection(&["b"], None)
            } else {
                selection(&["a"], None)
            };
            let next = hold(wanted, applied.as_ref(), &c, Some(0), now);
            if applied.as_ref().is_some_and(|a| a.active != next.active) {
                changes += 1;
            }
            applied = Some(next);
        }
        eprintln!("a cluster flapping every 2 s for 120 s: {changes} changes of selection");
        // Away from b is failover (never held); back to b waits for the hold: at most two
        // changes per 30 s.
        assert!(changes <= 2 * 120 / 30 + 1, "{changes} changes");
        assert!(changes >= 2, "it still moves: {changes}");
    }
}
