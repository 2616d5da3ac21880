use super::*;
use proptest::prelude::*;

const OWN: &str = "atoll-c1";

fn obj<'a>(kind: Kind, namespace: &'a str, name: &'a str, bytes: usize) -> Weighed<'a> {
    Weighed {
        kind,
        namespace,
        name,
        bytes,
        oversize: None,
    }
}

fn record<'a>(namespace: &'a str, name: &'a str, bytes: usize) -> Weighed<'a> {
    obj(Kind::Record, namespace, name, bytes)
}

fn copy<'a>(namespace: &'a str, name: &'a str, bytes: usize) -> Weighed<'a> {
    obj(Kind::Copy, namespace, name, bytes)
}

#[test]
fn a_member_is_held_up_to_its_budget_records_and_copies_together() {
    let mut ledger = Ledger::new(100, OWN);
    assert_eq!(ledger.apply(&record("atoll-c2", "a", 40)), Verdict::Hold);
    assert_eq!(ledger.apply(&copy("atoll-c2", "a", 60)), Verdict::Hold);
    assert_eq!(
        ledger.apply(&copy("atoll-c2", "b", 1)),
        Verdict::LeaveOut(Reason::OverByteBudget)
    );
    assert_eq!(ledger.held_bytes("atoll-c2"), 100);
    // Another member is not touched by c2's budget.
    assert_eq!(ledger.apply(&record("atoll-c3", "a", 100)), Verdict::Hold);
    // The importer's own objects are never counted nor left out.
    assert_eq!(ledger.apply(&record(OWN, "a", 10_000)), Verdict::Hold);
    assert_eq!(ledger.held_bytes(OWN), 0);
}

#[test]
fn a_grown_version_that_no_longer_fits_is_left_out_and_its_old_bytes_released() {
    let mut ledger = Ledger::new(100, OWN);
    ledger.apply(&record("atoll-c2", "a", 50));
    ledger.apply(&record("atoll-c2", "b", 40));
    // Its older version no longer counts: 40 + 60 fits.
    assert_eq!(ledger.apply(&record("atoll-c2", "a", 60)), Verdict::Hold);
    assert_eq!(ledger.held_bytes("atoll-c2"), 100);
    assert_eq!(
        ledger.apply(&record("atoll-c2", "a", 61)),
        Verdict::LeaveOut(Reason::OverByteBudget)
    );
    assert_eq!(
        ledger.held_bytes("atoll-c2"),
        40,
        "the store dropped the old one"
    );
    let report = ledger.report();
    let c2 = report.iter().find(|r| r.namespace == "atoll-c2").cloned();
    assert_eq!(
        c2.map(|r| r.left_out),
        Some(BTreeMap::from([(
            (Kind::Record, Reason::OverByteBudget),
            (1, 61)
        )]))
    );
}

#[test]
fn an_oversize_object_is_left_out_whatever_the_budget_and_wants_no_relist() {
    let mut ledger = Ledger::new(1_000_000, OWN);
    let big = Weighed {
        oversize: Some(Reason::Annotation),
        ..record("atoll-c2", "a", 300_000)
    };
    assert_eq!(ledger.apply(&big), Verdict::LeaveOut(Reason::Annotation));
    assert_eq!(ledger.held_bytes("atoll-c2"), 0);
    assert!(!ledger.wants_relist(Kind::Record, "atoll-c2"));
    // The importer's own objects are exempt even from per-object limits (it wrote them).
    let own = Weighed {
        namespace: OWN,
        ..big
    };
    assert_eq!(ledger.apply(&own), Verdict::Hold);
}

#[test]
fn room_made_by_a_delete_asks_for_a_relist_that_brings_the_left_out_back() {
    let mut ledger = Ledger::new(100, OWN);
    ledger.apply(&record("atoll-c2", "a", 80));
    assert_eq!(
        ledger.apply(&record("atoll-c2", "b", 30)),
        Verdict::LeaveOut(Reason::OverByteBudget)
    );
    assert!(
        !ledger.wants_relist(Kind::Record, "atoll-c2"),
        "no room yet"
    );
    ledger.delete(Kind::Record, "atoll-c2", "a");
    assert!(ledger.wants_relist(Kind::Record, "atoll-c2"));
    assert!(!ledger.wants_relist(Kind::Copy, "atoll-c2"));
    assert!(!ledger.wants_relist(Kind::Record, "atoll-c3"));
    // The relist: b is listed again and held.
    ledger.begin_relist(Kind::Record);
    assert_eq!(
        ledger.relist_apply(&record("atoll-c2", "b", 30)),
        Verdict::Hold
    );
    ledger.end_relist(Kind::Record);
    assert!(!ledger.wants_relist(Kind::Record, "atoll-c2"));
    assert_eq!(ledger.held_bytes("atoll-c2"), 30);
    assert_eq!(ledger.report()[0].objects_left_out(), 0);
}

#[test]
fn a_relist_of_one_kind_keeps_the_other_kinds_bytes_counted() {
    let mut ledger = Ledger::new(100, OWN);
    ledger.apply(&copy("atoll-c2", "a", 70));
    ledger.apply(&record("atoll-c2", "a", 20));
    ledger.begin_relist(Kind::Record);
    assert_eq!(
        ledger.relist_apply(&record("atoll-c2", "a", 20)),
        Verdict::Hold
    );
    assert_eq!(
        ledger.relist_apply(&record("atoll-c2", "b", 20)),
        Verdict::LeaveOut(Reason::OverByteBudget)
    );
    // Until the relist is complete, the held records are those of before.
    assert_eq!(ledger.held_bytes("atoll-c2"), 90);
    ledger.end_relist(Kind::Record);
    assert_eq!(ledger.held_bytes("atoll-c2"), 90);
    // A member gone from the relist is forgotten (its copies too, once they go).
    ledger.begin_relist(Kind::Record);
    ledger.end_relist(Kind::Record);
    assert_eq!(ledger.held_bytes("atoll-c2"), 70);
    ledger.delete(Kind::Copy, "atoll-c2", "a");
    assert_eq!(ledger.report(), Vec::new());
}

#[test]
fn served_bytes_is_the_length_of_the_json() {
    let value = serde_json::json!({"a": "bc", "d": [1, 2]});
    assert_eq!(
        served_bytes(&value),
        serde_json::to_vec(&value).map(|v| v.len()).unwrap_or(0)
    );
}

/// One event of a member's watch.
#[derive(Clone, Debug)]
enum Step {
    Apply { kind: bool, name: u8, bytes: u16 },
    Delete { kind: bool, name: u8 },
    Relist { kind: bool },
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (any::<bool>(), 0u8..12, 0u16..400).prop_map(|(kind, name, bytes)| Step::Apply { kind, name, bytes }),
        2 => (any::<bool>(), 0u8..12).prop_map(|(kind, name)| Step::Delete { kind, name }),
        1 => any::<bool>().prop_map(|kind| Step::Relist { kind }),
    ]
}

fn kind_of(record: bool) -> Kind {
    if record { Kind::Record } else { Kind::Copy }
}

proptest! {
    /// Whatever a member writes, what the store holds of it (modelled as the store applies the
    /// verdicts) never exceeds the budget, the ledger's count is exactly what the store holds,
    /// and another member's held objects are never left out.
    #[test]
    fn a_member_never_holds_more_than_its_budget(
        steps in proptest::collection::vec(step(), 0..80),
        budget in 0usize..1500,
    ) {
        let mut ledger = Ledger::new(budget, OWN);
        ledger.apply(&record("atoll-c3", "other", 10));
        // What the store holds of c2: (kind, name) -> bytes.
        let mut store: BTreeMap<(Kind, u8), usize> = BTreeMap::new();
        for s in steps {
            match s {
                Step::Apply { kind, name, bytes } => {
                    let kind = kind_of(kind);
                    let n = name.to_string();
                    match ledger.apply(&obj(kind, "atoll-c2", &n, usize::from(bytes))) {
                        Verdict::Hold => { store.insert((kind, name), usize::from(bytes)); }
                        Verdict::LeaveOut(_) => { store.remove(&(kind, name)); }
                    }
                }
                Step::Delete { kind, name } => {
                    let kind = kind_of(kind);
                    ledger.delete(kind, "atoll-c2", &name.to_string());
                    store.remove(&(kind, name));
                }
                Step::Relist { kind } => {
                    // The store relists what it held plus what the member still has (left
                    // out): modelled as relisting what it held, in name order.
                    let kind = kind_of(kind);
                    ledger.begin_relist(kind);
                    let listed: Vec<(u8, usize)> = store
                        .iter()
                        .filter(|((k, _), _)| *k == kind)
                        .map(|((_, n), b)| (*n, *b))
                        .collect();
                    store.retain(|(k, _), _| *k != kind);
                    for (name, bytes) in listed {
                        let n = name.to_string();
                        if ledger.relist_apply(&obj(kind, "atoll-c2", &n, bytes)) == Verdict::Hold {
                            store.insert((kind, name), bytes);
                        }
                    }
                    if kind == Kind::Record && budget >= 10 {
                        // c3's record is listed in the same relist.
                        prop_assert_eq!(
                            ledger.relist_apply(&record("atoll-c3", "other", 10)),
                            Verdict::Hold
                        );
                    }
                    ledger.end_relist(kind);
                }
            }
            let held: usize = store.values().sum();
            prop_assert!(held <= budget, "held {held} > budget {budget}");
            prop_assert_eq!(ledger.held_bytes("atoll-c2"), held);
            prop_assert_eq!(ledger.held_bytes("atoll-c3"), if budget >= 10 { 10 } else { 0 });
        }
    }
}
