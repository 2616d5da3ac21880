//! Precedence with records as a hub holds them: members write their own export times, the hub
//! writes when it created each record.

use super::*;
use crate::test_support::port;
use atoll_api::multicluster::ServiceImportType;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

const EPOCH: i64 = 1_800_000_000;

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(EPOCH + seconds).unwrap())
}

/// A record of `cluster` claiming its export was made at `claimed`, created on the hub at `hub`.
fn on_hub(cluster: &str, claimed: i64, hub: i64, type_: ServiceImportType) -> ExportedService {
    let spec = ExportedServiceSpec {
        cluster: cluster.to_owned(),
        namespace: "demo".to_owned(),
        name: "dual".to_owned(),
        export_created: at(claimed),
        type_,
        ports: vec![port("tcp", "TCP", 80)],
        session_affinity: None,
        session_affinity_config: None,
        ip_families: vec!["IPv4".to_owned()],
        internal_traffic_policy: None,
        traffic_distribution: None,
        exported_labels: BTreeMap::new(),
        exported_annotations: BTreeMap::new(),
        cluster_selectors: Vec::new(),
    };
    let mut record = ExportedService::new("demo.dual", spec);
    record.metadata.namespace = Some(atoll_api::hub::namespace_for(cluster));
    record.metadata.creation_timestamp = Some(at(hub));
    record
}

#[test]
fn a_record_backdated_to_1970_does_not_beat_an_older_record_on_the_hub() {
    let honest = on_hub("c3", 100, 100, ServiceImportType::ClusterSetIP);
    let mut backdated = on_hub("x-c3", 0, 200, ServiceImportType::Headless);
    backdated.spec.export_created = Time(Timestamp::UNIX_EPOCH);
    let m = merge_records(&[&backdated, &honest]).unwrap();
    assert_eq!(m.winner, "c3");
    assert_eq!(m.spec.type_, ServiceImportType::ClusterSetIP);
    assert_eq!(m.oldest_export, at(100));
    assert_eq!(m.conflicts.reason(), "TypeConflict");
    assert_eq!(m.conflicts.disagreeing, BTreeSet::from(["x-c3".to_owned()]));
    // Taken at its word (the rule before), the backdated record won and made it headless.
    let naive = merge(&[&backdated.spec, &honest.spec]).unwrap();
    assert_eq!(naive.spec.type_, ServiceImportType::Headless);
}

#[test]
fn an_honest_export_keeps_its_own_time_when_its_record_arrives_in_the_same_second() {
    let a = on_hub("c1", 10, 10, ServiceImportType::ClusterSetIP);
    let b = on_hub("c2", 11, 11, ServiceImportType::Headless);
    assert_eq!(merge_records(&[&a, &b]).unwrap().winner, "c1");
    // A record re-published later (the hub was wiped) counts from its new creation.
    let b_first = on_hub("c2", 11, 11, ServiceImportType::Headless);
    let a_again = on_hub("c1", 10, 50, ServiceImportType::ClusterSetIP);
    assert_eq!(merge_records(&[&a_again, &b_first]).unwrap().winner, "c2");
}

/// Honest records: the hub created each in the second its export was made.
fn honest() -> impl Strategy<Value = Vec<ExportedService>> {
    prop::collection::vec((0i64..30, any::<bool>()), 1..6).prop_map(|specs| {
        specs
            .into_iter()
            .enumerate()
            .map(|(i, (t, headless))| {
                let type_ = if headless {
                    ServiceImportType::Headless
                } else {
                    ServiceImportType::ClusterSetIP
                };
                // Ids that are prefixes and suffixes of each other.
                let cluster =
                    ["c3", "x-c3", "c3-x", "c", "x"][i % 5].to_owned() + &"-1".repeat(i / 5);
                on_hub(&cluster, t, t, type_)
            })
            .collect()
    })
}

fn refs(records: &[ExportedService]) -> Vec<&ExportedService> {
    records.iter().collect()
}

proptest! {
    /// Backdating its claim to any time before the hub created its record gives a record no
    /// precedence over records the hub created in an earlier second.
    #[test]
    fn backdating_wins_nothing_over_records_the_hub_held_earlier(
        records in honest(),
        liar in any::<prop::sample::Index>(),
        claim in -1_800_000_000i64..0,
    ) {
        let before = merge_records(&refs(&records)).unwrap();
        let mut forged = records.clone();
        let i = liar.index(forged.len());
        forged[i].spec.export_created = at(claim);
        let after = merge_records(&refs(&forged)).unwrap();
        // Not even a tie on the hub's second: the claim never breaks one (mutation: put the
        // claim back into `precedence::key` before the cluster id, and this fails).
        prop_assert_eq!(&after.winner, &before.winner);
    }

    /// A hub restored by re-creating every record (a backup tool, or members re-publishing
    /// into an emptied hub) gives them new creation times. Re-created within one second, the
    /// cluster id decides (no member chooses it); spread over seconds, the order of
    /// re-creation does. Either way every importer decides the same.
    #[test]
    fn a_restore_decides_by_recreation_then_cluster_id_the_same_everywhere(
        records in honest(),
        restored_at in 100i64..200,
        spread in prop::collection::vec(0i64..3, 6),
    ) {
        let mut restored = records.clone();
        for r in &mut restored {
            r.metadata.creation_timestamp = Some(at(restored_at));
        }
        let same_second = merge_records(&refs(&restored)).unwrap();
        let smallest = restored.iter().map(|r| r.spec.cluster.clone()).min().unwrap();
        prop_assert_eq!(&same_second.winner, &smallest);
        for (r, delay) in restored.iter_mut().zip(&spread) {
            r.metadata.creation_timestamp = Some(at(restored_at + delay));
        }
        let spread_out = merge_records(&refs(&restored)).unwrap();
        let first_back = restored
            .iter()
            .map(|r| (r.metadata.creation_timestamp.clone().unwrap().0, r.spec.cluster.clone()))
            .min()
            .unwrap();
        prop_assert_eq!(&spread_out.winner, &first_back.1);
        // Every importer computes the same from the same records, whatever their order.
        let mut shuffled = refs(&restored);
        shuffled.reverse();
        prop_assert_eq!(merge_records(&shuffled), Some(spread_out.clone()));
    }
}
