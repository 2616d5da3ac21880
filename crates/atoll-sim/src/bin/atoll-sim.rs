//! `make simulate`: runs fault schedules and prints, last, `simulation: N schedules, M
//! invariant violations (seed S)`. SIM_SCHEDULES (default 10000), SIM_SEED (default: from the
//! clock, printed), SIM_SCHEDULE (one schedule's seed, printed with its violations: reruns a
//! failing schedule alone), SIM_THREADS (default 2), SIM_REGION_FAULT_RATE (the region fault's
//! chance per quantum; 0 by default), SIM_WRITE_FAULT_RATE (the write faults': landed without
//! an answer, collections refused or late, etcd and re-creating restores, refused Events),
//! SIM_MASS_UNEXPORT_RATE (a member unexporting everything at once, moving many services to
//! new names; 0 by default: see `Shape`). Before the last line it prints what the
//! schedules exercised (writes by kind, refusals, withdrawals, faults). Exits 1 on any
//! violation, and on a run of at least 1,000 schedules that never reached something
//! `atoll_sim::MUST_EXERCISE` names.

use std::time::Instant;

/// The agent's allocator (see `atoll`'s main): the simulation allocates and frees as its
/// passes do, and spent a third of its time in the C library's allocator.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn env(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.parse().ok()
}

fn main() {
    // SIM_REGION_FAULT_RATE turns on the region fault (off in the default shape);
    // SIM_WRITE_FAULT_RATE sets the write faults' (0 replays schedules as before they existed).
    let rate = |name: &str, default: f64| {
        std::env::var(name)
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(default)
    };
    let default = atoll_sim::Shape::default();
    let shape = atoll_sim::Shape {
        region_fault_rate: rate("SIM_REGION_FAULT_RATE", default.region_fault_rate),
        write_fault_rate: rate("SIM_WRITE_FAULT_RATE", default.write_fault_rate),
        mass_unexport_rate: rate("SIM_MASS_UNEXPORT_RATE", default.mass_unexport_rate),
        ..default
    };
    let started = Instant::now();
    if let Some(seed) = env("SIM_SCHEDULE") {
        let references = atoll_sim::schedule::References::default();
        let report = atoll_sim::schedule::run(seed, &shape, &references);
        for v in &report.violations {
            println!("  invariant ({}) at {:.1} s: {}", v.invariant, v.at, v.what);
        }
        println!(
            "simulation: 1 schedules, {} invariant violations (schedule {seed}, {} faults, {} steps)",
            report.violations.len(),
            report.faults,
            report.steps
        );
        std::process::exit(i32::from(!report.violations.is_empty()));
    }
    let schedules = env("SIM_SCHEDULES").unwrap_or(10_000);
    let seed = env("SIM_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(1)
    });
    let threads = env("SIM_THREADS").map_or(2, |t| t as usize);
    let summary = atoll_sim::simulate(schedules, seed, threads, &shape);
    for failure in &summary.failures {
        println!(
            "schedule {} (rerun: SIM_SCHEDULE={} make simulate):",
            failure.seed, failure.seed
        );
        for v in failure.violations.iter().take(5) {
            println!("  invariant ({}) at {:.1} s: {}", v.invariant, v.at, v.what);
        }
    }
    println!(
        "{} faults injected, {} reconciler steps, {:.1} s on {threads} threads",
        summary.faults,
        summary.steps,
        started.elapsed().as_secs_f64()
    );
    println!(
        "{} spells of repeated beat numbers (clock set back, kept decisions lost and hub restored before one start; excused in (i), and in (iv) while it lasts)",
        summary.repeats
    );
    println!("exercised:");
    for (what, times) in &summary.exercised {
        println!("  {times:>9}  {what}");
    }
    let unreached = summary.unreached();
    let coverage_fails = schedules >= 1_000 && !unreached.is_empty();
    if !unreached.is_empty() {
        println!(
            "never exercised{}: {}",
            if coverage_fails {
                ""
            } else {
                " (fewer than 1,000 schedules: not a failure)"
            },
            unreached.join(", ")
        );
    }
    println!(
        "simulation: {} schedules, {} invariant violations{} (seed {seed})",
        summary.schedules,
        summary.violations,
        if coverage_fails {
            format!(", {} features never exercised", unreached.len())
        } else {
            String::new()
        }
    );
    std::process::exit(i32::from(summary.violations > 0 || coverage_fails));
}
