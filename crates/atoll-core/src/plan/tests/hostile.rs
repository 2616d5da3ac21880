//! A hostile or careless member, as an importer's plan sees it: whatever the member writes into
//! its own hub namespace changes nothing of what the importer holds for anyone else.

use proptest::prelude::*;

use super::*;
use crate::validate::Reason;

/// A member's record as the hub holds it: created on the hub at `hub` seconds.
fn published(cluster: &str, name: &str, ports: &[(&str, &str, i32)], hub: i64) -> ExportedService {
    let svc = service(name, ports, &["IPv4"]);
    let mut record = remote_record(cluster, name, hub, &svc);
    record.metadata.creation_timestamp = Some(at(hub));
    record
}

/// A member's copy of an endpoint slice of `name`, with `addresses`.
fn endpoints(
    cluster: &str,
    name: &str,
    addresses: &[&str],
) -> atoll_api::hub::ExportedEndpointSlice {
    let mut copy =
        crate::export::hub_slice(cluster, NS, name, &local_slice(name, addresses, TCP42));
    copy.metadata.name = Some(hub::record_name(NS, &format!("{name}-{cluster}")));
    copy
}

/// The importer's ServiceCIDRs: the default one, of `cidr`.
fn service_cidr(cidr: &str) -> Vec<Arc<k8s_openapi::api::networking::v1::ServiceCIDR>> {
    let object =
        serde_json::json!({ "metadata": {"name": "kubernetes"}, "spec": {"cidrs": [cidr]} });
    vec![Arc::new(serde_json::from_value(object).unwrap())]
}

fn publish(world: &mut World, record: ExportedService) {
    upsert(&mut world.observed.records, record, |r| &r.metadata);
}

fn publish_copy(world: &mut World, copy: atoll_api::hub::ExportedEndpointSlice) {
    upsert(&mut world.observed.hub_slices, copy, |c| &c.metadata);
}

/// Addresses of the MCS slices of `service` from `cluster`, sorted.
fn imported(world: &World, service: &str, cluster: &str) -> Vec<String> {
    let mut addresses: Vec<String> = world
        .observed
        .mcs_slices
        .iter()
        .filter(|s| {
            s.label(labels::SERVICE_NAME) == Some(service)
                && s.label(labels::SOURCE_CLUSTER) == Some(cluster)
        })
        .flat_map(|s| s.endpoints.iter().flat_map(|e| e.addresses.to_strings()))
        .collect();
    addresses.sort();
    addresses
}

#[test]
fn services_whose_old_slice_names_collided_each_keep_their_own_endpoints() {
    let mut world = World::new("c1");
    publish(&mut world, published("us-east", "web", TCP42, 0));
    publish_copy(&mut world, endpoints("us-east", "web", &["10.3.0.1"]));
    publish(&mut world, published("east", "web-us", TCP42, 0));
    publish_copy(&mut world, endpoints("east", "web-us", &["10.4.0.1"]));
    world.converge();
    assert_eq!(imported(&world, "web", "us-east"), ["10.3.0.1"]);
    assert_eq!(imported(&world, "web-us", "east"), ["10.4.0.1"]);
    assert_eq!(world.observed.mcs_slices.len(), 2);
    assert_eq!(
        world.plan().writes(),
        0,
        "nothing is rewritten while nothing changes"
    );
}

/// An MCS slice as the previous naming (`{service}-{cluster}-{family}-{index}`) wrote it.
fn old_named(world: &World, service: &str, cluster: &str) -> McsSlice {
    let mut slice = world
        .observed
        .mcs_slices
        .iter()
        .find(|s| s.label(labels::SOURCE_CLUSTER) == Some(cluster))
        .map(|s| s.as_ref().clone())
        .unwrap();
    slice.name = format!("{service}-{cluster}-ipv4-0").into_boxed_str();
    slice
}

#[test]
fn slices_named_the_old_way_go_only_once_their_replacements_are_observed() {
    let mut world = World::new("c1");
    publish(&mut world, published("c3", "web", TCP42, 0));
    publish_copy(
        &mut world,
        endpoints("c3", "web", &["10.3.0.1", "10.3.0.2"]),
    );
    world.converge();
    // The cluster as an agent before the new naming left it: the same slice, its old name.
    let old = old_named(&world, "web", "c3");
    world.observed.mcs_slices = vec![Arc::new(old.clone())];
    let endpoints_held = |world: &World| imported(world, "web", "c3").len();

    let first = world.step();
    assert_eq!(first.member.apply_slices.len(), 1, "the new one first");
    assert!(
        first.member.delete_slices.is_empty(),
        "the old one stays meanwhile"
    );
    assert_eq!(endpoints_held(&world), 4, "both, for a moment");
    let second = world.step();
    assert_eq!(
        second.member.delete_slices,
        [old.key()],
        "then the old one, once the new one is observed"
    );
    assert_eq!(endpoints_held(&world), 2);
    assert_eq!(world.plan().writes(), 0);
}

/// The importer c1, converged on `service` exported by c3 (its record created on the hub at
/// `hub` seconds) with one endpoint.
fn importing(service: &str, hub: i64) -> World {
    let mut world = World::new("c1");
    publish(&mut world, published("c3", service, TCP42, hub));
    publish_copy(&mut world, endpoints("c3", service, &["10.3.0.1"]));
    world.converge();
    world
}

#[test]
fn a_replacement_the_apiserver_refuses_never_costs_the_old_slice() {
    let mut world = importing("web", 0);
    let old = old_named(&world, "web", "c3");
    world.observed.mcs_slices = vec![Arc::new(old)];
    for _ in 0..3 {
        // The write of the new slice never lands (the watch never shows it).
        let plan = world.plan();
        assert_eq!(plan.member.apply_slices.len(), 1);
        assert!(plan.member.delete_slices.is_empty());
    }
}

#[test]
fn a_backdated_record_that_reached_the_hub_later_wins_no_conflict() {
    let mut world = importing("dual", 10);
    let before = world.import("dual").unwrap().spec.clone();
    let mut headless = published("x-c3", "dual", TCP42, 20);
    headless.spec.type_ = ServiceImportType::Headless;
    headless.spec.export_created = Time(Timestamp::UNIX_EPOCH);
    publish(&mut world, headless);
    world.converge();
    let after = world.import("dual").unwrap().spec.clone();
    assert_eq!(after, before, "still ClusterSetIP, with the same VIP");
}

#[test]
fn a_bad_record_is_left_out_alone_and_reported_under_its_member() {
    let mut world = importing("dual", 10);
    let before = world.observed.clone();
    publish(
        &mut world,
        published("x-c3", "dual", &[("tcp", "TCP", 70000)], 20),
    );
    let plan = world.plan();
    assert_eq!(plan.writes(), 0, "the co-exported service is untouched");
    let rejected = &plan.report.rejected[0];
    assert_eq!(
        (rejected.cluster.as_str(), rejected.reason, rejected.kind),
        ("x-c3", Reason::Port, HubKind::Record)
    );
    assert_eq!(rejected.service, ServiceKey::new(NS, "dual"));
    assert!(rejected.problem.contains("70000"), "{}", rejected.problem);
    assert_eq!(world.observed.imports.len(), before.imports.len());
}

#[test]
fn endpoints_that_point_into_the_importer_are_dropped_one_by_one() {
    let mut world = World::new("c1");
    world.observed.denied_cidrs = vec!["192.168.0.0/24".parse().unwrap()];
    world.observed.service_cidrs = service_cidr("10.101.0.0/16");
    world.observed.node_addresses =
        std::collections::BTreeMap::from([("172.18.0.3".parse().unwrap(), "node-a".to_owned())]);
    publish(&mut world, published("x-c3", "web", TCP42, 0));
    publish_copy(
        &mut world,
        endpoints(
            "x-c3",
            "web",
            &[
                "10.203.0.9",
                "127.0.0.1",
                "10.101.0.1",
                "192.168.0.4",
                "169.254.0.1",
                "172.18.0.3",
            ],
        ),
    );
    world.converge();
    assert_eq!(imported(&world, "web", "x-c3"), ["10.203.0.9"]);
    let mut reasons: Vec<(Reason, usize)> = world
        .plan()
        .report
        .dropped
        .iter()
        .map(|d| (d.reason, d.count))
        .collect();
    reasons.sort();
    assert_eq!(
        reasons,
        [
            (Reason::Address, 2),
            (Reason::ServiceCidr, 1),
            (Reason::DeniedCidr, 1),
            (Reason::NodeAddress, 1)
        ]
    );
}

#[test]
fn a_copy_of_another_family_or_too_large_is_dropped_whole() {
    let mut world = World::new("c1");
    publish(&mut world, published("x-c3", "web", TCP42, 0));
    let mut fqdn = endpoints("x-c3", "web", &["10.203.0.9"]);
    fqdn.spec.address_type = "FQDN".into();
    publish_copy(&mut world, fqdn);
    let plan = world.plan();
    assert_eq!(plan.report.dropped[0].kind, HubKind::Copy);
    assert_eq!(plan.report.dropped[0].reason, Reason::AddressType);
    world.converge();
    assert!(imported(&world, "web", "x-c3").is_empty());
}

/// What an importer holds of one service, without what the apiserver changes on every write.
fn held(world: &World, service: &str) -> Vec<String> {
    let o = &world.observed;
    let mut out: Vec<String> = o
        .imports
        .iter()
        .filter(|i| i.metadata.name.as_deref() == Some(service))
        .map(|i| format!("{:?}", (&i.spec, &i.metadata.labels)))
        .chain(
            o.mcs_slices
                .iter()
                .filter(|s| s.label(labels::SERVICE_NAME) == Some(service))
                .map(|s| format!("{:?}", (&s.name, &s.endpoints, &s.ports))),
        )
        .collect();
    out.sort();
    out
}

/// One thing a hostile member may publish about the honest service or a service of its own.
#[derive(Clone, Debug)]
enum Attack {
    /// A record for the honest service with an out-of-range port.
    BadPort(i32),
    /// A headless record for the honest service, claiming 1970.
    Backdated,
    /// Its own service named so that the old slice names collided with the honest one's.
    Collide,
    /// Endpoints for the honest service that point into the importer.
    Inward(&'static str),
    /// A record for the honest service with an invalid exported label.
    BadLabel,
}

fn attack() -> impl Strategy<Value = Attack> {
    prop_oneof![
        prop::sample::select(vec![0, -1, 65536, 70000]).prop_map(Attack::BadPort),
        Just(Attack::Backdated),
        Just(Attack::Collide),
        prop::sample::select(vec!["127.0.0.1", "10.101.0.1", "0.0.0.0", "224.0.0.5"])
            .prop_map(Attack::Inward),
        Just(Attack::BadLabel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever mix of attacks a member makes, the honest service (exported by c3, and by the
    /// importer itself) is imported exactly as without them.
    #[test]
    fn attacks_change_nothing_the_importer_holds_for_others(attacks in prop::collection::vec(attack(), 1..5)) {
        let honest = |world: &mut World| {
            world.export_local("web-x", &["10.1.0.1"]);
            publish(world, published("c3", "web-x", TCP42, 0));
            publish_copy(world, endpoints("c3", "web-x", &["10.3.0.1"]));
            world.observed.service_cidrs = service_cidr("10.101.0.0/16");
        };
        let mut calm = World::new("c1");
        honest(&mut calm);
        calm.converge();
        let mut attacked = World::new("c1");
        honest(&mut attacked);
        attacked.converge();
        for attack in &attacks {
            match attack {
                Attack::BadPort(port) => publish(&mut attacked, published("x-c3", "web-x", &[("tcp", "TCP", *port)], 50)),
                Attack::Backdated => {
                    let mut r = published("x-c3", "web-x", TCP42, 50);
                    r.spec.type_ = ServiceImportType::Headless;
                    r.spec.export_created = Time(Timestamp::UNIX_EPOCH);
                    publish(&mut attacked, r);
                }
                Attack::Collide => {
                    publish(&mut attacked, published("x-c3", "web", TCP42, 50));
                    publish_copy(&mut attacked, endpoints("x-c3", "web", &["10.9.9.9"]));
                }
                Attack::Inward(address) => publish_copy(&mut attacked, endpoints("x-c3", "web-x", &[address])),
                Attack::BadLabel => {
                    let mut r = published("x-c3", "web-x", TCP42, 50);
                    r.spec.exported_labels.insert("bad key!".into(), "x".into());
                    publish(&mut attacked, r);
                }
            }
        }
        attacked.converge();
        // A valid backdated record joins (the member may export the service too) but changes
        // neither the import's spec nor anyone's slices.
        prop_assert_eq!(held(&attacked, "web-x"), held(&calm, "web-x"));
        for cluster in ["c1", "c3"] {
            prop_assert_eq!(imported(&attacked, "web-x", cluster), imported(&calm, "web-x", cluster));
        }
    }
}

#[test]
fn a_record_over_the_cap_comes_in_once_an_older_one_makes_room() {
    use crate::caps::{Caps, Limits};
    let mut world = World::new("c1");
    let mut caps = Caps::new(Limits {
        records: 2,
        endpoints: 100,
        ..Limits::default()
    });
    for (i, name) in ["a", "b", "capped"].iter().enumerate() {
        publish(&mut world, published("x-c3", name, TCP42, i as i64));
    }
    // A pass as the agent makes one: the caps on the whole view, then the services some event
    // marked, plus those whose admission changed.
    let pass = |world: &mut World, caps: &mut Caps, marked: &[&str]| {
        let capped = caps.admit(&world.observed.records, &world.observed.hub_slices);
        world.observed.sources = Some(Sources {
            records: capped.records,
            copies: capped.copies,
        });
        let mut keys: std::collections::BTreeSet<ServiceKey> =
            marked.iter().map(|n| ServiceKey::new(NS, n)).collect();
        keys.extend(capped.touched);
        let plan = plan(
            &world.member,
            &world.observed.restrict(&keys),
            &world.feedback,
            &at(world.clock),
        );
        world.apply(&plan);
        plan
    };
    for _ in 0..4 {
        pass(&mut world, &mut caps, &["a", "b", "capped"]);
    }
    assert!(world.import("capped").is_none());
    assert!(world.import("a").is_some() && world.import("b").is_some());
    // `a` goes: the watch marks `a` only.
    let key = ObjectKey::new("atoll-x-c3", &hub::record_name(NS, "a"));
    remove(&mut world.observed.records, &key, |r| &r.metadata);
    pass(&mut world, &mut caps, &["a"]);
    for _ in 0..3 {
        // Then the watches mark what the writes touched.
        pass(&mut world, &mut caps, &["capped"]);
    }
    assert!(
        world.import("capped").is_some(),
        "the newest record came in"
    );
}
