//! A pass over some services plans exactly what a full pass plans for them, and merges only
//! them: the ground the agent's incremental passes stand on.

use std::collections::BTreeSet;

use proptest::prelude::*;

use super::*;

/// Every write of a plan, one line each, sorted (a multiset to compare plans by).
fn write_lines(plan: &Plan) -> Vec<String> {
    let h = &plan.hub;
    let m = &plan.member;
    let mut lines: Vec<String> = Vec::new();
    let mut add = |kind: &str, items: Vec<String>| {
        lines.extend(items.into_iter().map(|i| format!("{kind} {i}")));
    };
    add(
        "record",
        h.apply_records.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "-record",
        h.delete_records.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "copy",
        h.apply_slices.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "-copy",
        h.delete_slices.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "derived",
        m.apply_derived.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "import",
        m.apply_imports.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "status",
        m.import_statuses.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "slice",
        m.apply_slices.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "-import",
        m.delete_imports.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "withdrawn",
        m.withdrawn_imports
            .iter()
            .map(|o| format!("{o:?}"))
            .collect(),
    );
    add(
        "-derived",
        m.delete_derived.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "-slice",
        m.delete_slices.iter().map(|o| format!("{o:?}")).collect(),
    );
    add(
        "export",
        plan.export_statuses
            .iter()
            .map(|o| format!("{o:?}"))
            .collect(),
    );
    lines.sort();
    lines
}

fn scoped_plan(world: &World, keys: &BTreeSet<ServiceKey>) -> Plan {
    plan(
        &world.member,
        &world.observed.restrict(keys),
        &world.feedback,
        &at(world.clock),
    )
}

fn key(i: usize) -> ServiceKey {
    ServiceKey::new(NS, &format!("svc-{i}"))
}

/// Remote members: ids that are prefixes and suffixes of each other.
const REMOTES: [&str; 4] = ["c3", "x-c3", "c3-x", "c4"];
/// Namespaces a service may live in (both exist in the member).
const NAMESPACES: [&str; 2] = [NS, "shop"];

/// What one service is in a random world.
#[derive(Clone, Debug)]
struct Shape {
    local: bool,
    /// Remote clusters exporting it (indexes into [`REMOTES`]), and whether they publish
    /// endpoints too.
    remote: Vec<(usize, bool)>,
    /// Its port; 0 and 70000 are out of range (a record with them is rejected).
    port: i32,
    /// Passes applied before the world is judged (0: nothing written yet).
    unexport_after: Option<usize>,
    /// Its name gets a suffix with a dash that a cluster id also ends with (`svc-1-c3`).
    dashed: bool,
    /// It lives in the second namespace.
    other_namespace: bool,
    /// Its remote records claim 1970 (the hub created them at their usual time).
    backdated: bool,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        any::<bool>(),
        prop::collection::vec((0usize..REMOTES.len(), any::<bool>()), 0..3),
        prop::sample::select(vec![42, 43, 0, 70000]),
        prop::option::of(0usize..3),
        (any::<bool>(), any::<bool>(), any::<bool>()),
    )
        .prop_map(
            |(local, remote, port, unexport_after, (dashed, other_namespace, backdated))| Shape {
                local,
                remote,
                port,
                unexport_after,
                dashed,
                other_namespace,
                backdated,
            },
        )
}

impl Shape {
    fn name(&self, i: usize) -> String {
        if self.dashed {
            format!("svc-{i}-c3")
        } else {
            format!("svc-{i}")
        }
    }

    fn namespace(&self) -> &'static str {
        NAMESPACES[usize::from(self.other_namespace)]
    }
}

/// Moves a record made in [`NS`] to `namespace`.
fn moved_record(mut record: ExportedService, namespace: &str) -> ExportedService {
    record.metadata.name = Some(hub::record_name(namespace, &record.spec.name));
    record.spec.namespace = namespace.to_owned();
    record
}

/// Builds the world, lets it run `passes` full passes, then unexports what should be; the
/// remote member `withdrawn` (if any) is then left out of the view, as the liveness tracker
/// leaves a withdrawn member out.
fn world_of(shapes: &[Shape], passes: usize, withdrawn: Option<usize>) -> World {
    let mut world = World::new("c2");
    upsert(&mut world.observed.namespaces, namespace("shop"), |n| {
        &n.metadata
    });
    for (i, s) in shapes.iter().enumerate() {
        let name = s.name(i);
        let ns = s.namespace();
        if s.local && ns == NS {
            world.export_local(&name, &[&format!("10.2.{i}.1")]);
        }
        let svc = service(&name, &[("tcp", "TCP", s.port)], &["IPv4"]);
        for (index, endpoints) in &s.remote {
            let cluster = REMOTES[*index];
            let created = i64::try_from(*index).unwrap_or_default();
            let mut record = moved_record(remote_record(cluster, &name, created, &svc), ns);
            record.metadata.creation_timestamp = Some(at(created));
            if s.backdated {
                record.spec.export_created = Time(Timestamp::UNIX_EPOCH);
            }
            upsert(&mut world.observed.records, record, |r| &r.metadata);
            if *endpoints {
                let local = local_slice(&name, &["10.9.0.1", "127.0.0.1"], TCP42);
                let mut copy = crate::export::hub_slice(cluster, ns, &name, &local);
                copy.metadata.name = Some(hub::record_name(ns, &format!("{name}-abcde")));
                upsert(&mut world.observed.hub_slices, copy, |c| &c.metadata);
            }
        }
    }
    for pass in 0..passes {
        for (i, s) in shapes.iter().enumerate() {
            if s.unexport_after == Some(pass) {
                let k = ObjectKey::new(NS, &s.name(i));
                remove(&mut world.observed.exports, &k, |e| &e.metadata);
                world
                    .observed
                    .records
                    .retain(|r| r.spec.name != k.name || r.spec.cluster == "c2");
            }
        }
        world.step();
    }
    if let Some(index) = withdrawn {
        let gone = REMOTES[index];
        let o = &mut world.observed;
        let services = o
            .records
            .iter()
            .filter(|r| r.spec.cluster == gone)
            .map(|r| crate::keys::of_record(r))
            .collect();
        o.sources = Some(Sources {
            records: o
                .records
                .iter()
                .filter(|r| r.spec.cluster != gone)
                .cloned()
                .collect(),
            copies: o
                .hub_slices
                .iter()
                .filter(|c| c.spec.cluster != gone)
                .cloned()
                .collect(),
        });
        o.liveness.withdrawn.insert(
            gone.to_owned(),
            crate::liveness::Withdrawal {
                last_seen: at(1),
                services,
            },
        );
    }
    world
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// On any world (mid-convergence, with conflicts, unexports and remote endpoints), the
    /// passes over each service alone write, between them, exactly what one full pass writes,
    /// claim the same digest and report the same totals.
    #[test]
    fn passes_over_each_service_add_up_to_the_full_pass(
        shapes in prop::collection::vec(shape(), 1..5),
        passes in 0usize..4,
        withdrawn in prop::option::of(0usize..REMOTES.len()),
    ) {
        let world = world_of(&shapes, passes, withdrawn);
        let full = world.plan();
        let mut lines = Vec::new();
        let mut published = Published::new();
        let mut report = Report::default();
        for k in world.observed.service_keys() {
            let scope = BTreeSet::from([k]);
            let part = scoped_plan(&world, &scope);
            prop_assert!(part.report.merged <= 1, "a pass over one service merged {}", part.report.merged);
            lines.extend(write_lines(&part));
            published.extend(part.published.clone());
            report.absorb(Some(&scope), part.report);
        }
        lines.sort();
        prop_assert_eq!(lines, write_lines(&full));
        prop_assert_eq!(&published, &full.published);
        prop_assert_eq!(&report.trusted, &full.report.trusted);
        prop_assert_eq!(&report.conflicting, &full.report.conflicting);
        prop_assert_eq!(&report.imported, &full.report.imported);
        let sorted = |v: &[ServiceKey]| v.iter().cloned().collect::<BTreeSet<_>>();
        prop_assert_eq!(sorted(&report.skipped), sorted(&full.report.skipped));
        prop_assert_eq!(report.rejected.len(), full.report.rejected.len());
        prop_assert_eq!(report.dropped.len(), full.report.dropped.len());
    }
}

/// A service exported by nobody here, in the first namespace, on port 42.
fn plain() -> Shape {
    Shape {
        local: false,
        remote: Vec::new(),
        port: 42,
        unexport_after: None,
        dashed: false,
        other_namespace: false,
        backdated: false,
    }
}

#[test]
fn a_pass_over_one_service_merges_that_service_only() {
    let shapes: Vec<Shape> = (0..50)
        .map(|_| Shape {
            remote: vec![(1, true), (2, true)],
            ..plain()
        })
        .collect();
    let world = world_of(&shapes, 3, None);
    assert_eq!(world.plan().report.merged, 50);
    let one = scoped_plan(&world, &BTreeSet::from([key(7)]));
    assert_eq!(one.report.merged, 1);
    assert_eq!(one.writes(), 0, "a converged world writes nothing");
}

#[test]
fn an_endpoint_change_in_one_service_is_planned_by_a_pass_over_it_alone() {
    let shapes: Vec<Shape> = (0..20)
        .map(|_| Shape {
            remote: vec![(0, true)],
            ..plain()
        })
        .collect();
    let mut world = world_of(&shapes, 3, None);
    assert_eq!(world.plan().writes(), 0);
    let local = local_slice("svc-4", &["10.9.0.1", "10.9.0.2"], TCP42);
    let mut copy = crate::export::hub_slice("c3", NS, "svc-4", &local);
    copy.metadata.name = Some(hub::record_name(NS, "svc-4-abcde"));
    upsert(&mut world.observed.hub_slices, copy, |c| &c.metadata);

    let scoped = scoped_plan(&world, &BTreeSet::from([key(4)]));
    assert_eq!(scoped.member.apply_slices.len(), 1);
    assert_eq!(scoped.writes(), 1);
    assert_eq!(write_lines(&scoped), write_lines(&world.plan()));
    // A pass over another service sees nothing to do.
    assert_eq!(scoped_plan(&world, &BTreeSet::from([key(5)])).writes(), 0);
}
