//! The simulation itself: reproducible, and its invariants catch what they are for.

use super::*;

/// A shorter fault phase; the quiet phase stays longer than the batch of kept epochs (30 s),
/// the last write a change may cause before the ClusterSet is idle.
fn short() -> Shape {
    Shape {
        faults: std::time::Duration::from_secs(20),
        ..Shape::default()
    }
}

#[test]
fn a_schedule_is_reproduced_from_its_seed() {
    let references = schedule::References::default();
    let a = schedule::run(7, &short(), &references);
    let b = schedule::run(7, &short(), &references);
    assert_eq!((a.faults, a.steps), (b.faults, b.steps));
    assert_eq!(a.violations, b.violations);
}

#[test]
fn schedules_without_faults_and_with_them_hold_every_invariant() {
    let calm = Shape {
        fault_rate: 0.0,
        ..short()
    };
    let summary = simulate(4, 1, 1, &calm);
    assert_eq!(summary.violations, 0, "{:#?}", summary.failures);
    let summary = simulate(20, 2, 2, &short());
    assert_eq!(summary.violations, 0, "{:#?}", summary.failures);
    assert!(
        summary.faults > 20,
        "faults were injected: {}",
        summary.faults
    );
}
