//! Incremental zone updates: a zone updated service by service, as watch events arrive, answers
//! every question byte for byte as a zone built from scratch out of the final objects, and an
//! update copies only what it changes.

use std::collections::BTreeSet;

use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::multicluster::ServiceImportType;
use atoll_api::v1beta1::ServiceImport;
use hickory_proto::op::{Message, Query as HQuery};
use hickory_proto::rr::{Name, RecordType};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use proptest::prelude::*;

use super::*;
use crate::answer::answer;
use crate::fixtures::{mk_import, mk_slice};
use crate::resolve::resolve;

const NAMESPACES: [&str; 2] = ["a", "b"];
const SERVICES: [&str; 3] = ["s0", "s1", "s2"];
const CLUSTERS: [&str; 3] = ["c1", "c2", ""];
const SLICES: [&str; 4] = ["x0", "x1", "x2", "x3"];

/// One watch event, in terms of the small world above.
#[derive(Debug, Clone)]
enum Event {
    Import {
        ns: usize,
        svc: usize,
        headless: bool,
        ips: Vec<u8>,
        named_port: bool,
    },
    Unimport {
        ns: usize,
        svc: usize,
    },
    Slice {
        ns: usize,
        slice: usize,
        svc: usize,
        cluster: usize,
        endpoints: Vec<(u8, bool, bool)>,
    },
    Unslice {
        ns: usize,
        slice: usize,
    },
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        (
            0..2usize,
            0..3usize,
            any::<bool>(),
            proptest::collection::vec(0..4u8, 0..3),
            any::<bool>()
        )
            .prop_map(|(ns, svc, headless, ips, named_port)| Event::Import {
                ns,
                svc,
                headless,
                ips,
                named_port
            }),
        (0..2usize, 0..3usize).prop_map(|(ns, svc)| Event::Unimport { ns, svc }),
        (
            0..2usize,
            0..4usize,
            0..3usize,
            0..3usize,
            proptest::collection::vec((0..6u8, any::<bool>(), any::<bool>()), 0..4)
        )
            .prop_map(|(ns, slice, svc, cluster, endpoints)| Event::Slice {
                ns,
                slice,
                svc,
                cluster,
                endpoints
            }),
        (0..2usize, 0..4usize).prop_map(|(ns, slice)| Event::Unslice { ns, slice }),
    ]
}

fn import_of(ns: usize, svc: usize, headless: bool, ips: &[u8], named_port: bool) -> ServiceImport {
    let ips: Vec<String> = ips.iter().map(|i| format!("10.96.0.{i}")).collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let ports: &[(&str, &str, i32)] = if named_port {
        &[("tcp", "TCP", 42), ("", "UDP", 53)]
    } else {
        &[("", "TCP", 42)]
    };
    let kind = if headless {
        ServiceImportType::Headless
    } else {
        ServiceImportType::ClusterSetIP
    };
    mk_import(NAMESPACES[ns], SERVICES[svc], kind, &refs, ports)
}

/// A slice named `SLICES[slice]`; endpoints are (address, has a hostname, ready).
fn slice_of(
    ns: usize,
    slice: usize,
    svc: usize,
    cluster: usize,
    endpoints: &[(u8, bool, bool)],
) -> EndpointSlice {
    let addresses: Vec<(String, Option<String>, bool)> = endpoints
        .iter()
        .map(|(a, named, ready)| {
            (
                format!("10.1.0.{a}"),
                named.then(|| format!("host-{a}")),
                *ready,
            )
        })
        .collect();
    let refs: Vec<(&str, Option<&str>, bool)> = addresses
        .iter()
        .map(|(a, h, r)| (a.as_str(), h.as_deref(), *r))
        .collect();
    let mut s = mk_slice(
        NAMESPACES[ns],
        SERVICES[svc],
        CLUSTERS[cluster],
        "IPv4",
        &refs,
    );
    s.metadata.name = Some(SLICES[slice].to_owned());
    s
}

/// Applies `event` to `catalog` as the DNS source does; returns the services it changed.
fn apply(catalog: &mut Catalog, event: &Event) -> Vec<ServiceKey> {
    match event {
        Event::Import {
            ns,
            svc,
            headless,
            ips,
            named_port,
        } => {
            let (key, record) =
                ImportRecord::of(&import_of(*ns, *svc, *headless, ips, *named_port)).unwrap();
            if catalog.set_import(key.clone(), Some(record)) {
                vec![key]
            } else {
                vec![]
            }
        }
        Event::Unimport { ns, svc } => {
            let key = ServiceKey::new(NAMESPACES[*ns], SERVICES[*svc]);
            if catalog.set_import(key.clone(), None) {
                vec![key]
            } else {
                vec![]
            }
        }
        Event::Slice {
            ns,
            slice,
            svc,
            cluster,
            endpoints,
        } => {
            let (key, record) =
                SliceRecord::of(&slice_of(*ns, *slice, *svc, *cluster, endpoints)).unwrap();
            catalog.set_slice(key, Some(record))
        }
        Event::Unslice { ns, slice } => {
            catalog.set_slice(ObjectKey::new(NAMESPACES[*ns], SLICES[*slice]), None)
        }
    }
}

/// Every name the small world can produce, and some it cannot.
fn questions() -> Vec<String> {
    let mut names = vec![
        "clusterset.local.".to_owned(),
        "svc.clusterset.local.".to_owned(),
        "dns-version.clusterset.local.".to_owned(),
        "x.clusterset.local.".to_owned(),
    ];
    for ns in NAMESPACES {
        names.push(format!("{ns}.svc.clusterset.local."));
        names.push(format!("nope.{ns}.svc.clusterset.local."));
        for svc in SERVICES {
            let base = format!("{svc}.{ns}.svc.clusterset.local.");
            for prefix in ["", "_tcp._tcp.", "_udp._udp.", "c1.", "c2.", "c3."] {
                names.push(format!("{prefix}{base}"));
            }
            for a in 0..6 {
                for cluster in ["c1", "c2"] {
                    names.push(format!("host-{a}.{cluster}.{base}"));
                    names.push(format!("10-1-0-{a}.{cluster}.{base}"));
                }
            }
        }
    }
    names
}

/// Every answer of `zone` to [`questions`], as sent over TCP.
fn answers(zone: &Zone) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for name in questions() {
        for rtype in [
            RecordType::A,
            RecordType::AAAA,
            RecordType::SRV,
            RecordType::TXT,
            RecordType::SOA,
        ] {
            let mut query = Message::query();
            query.metadata.id = 7;
            query.add_query(HQuery::query(Name::from_ascii(&name).unwrap(), rtype));
            let mut reply = Vec::new();
            answer(zone, &query.to_vec().unwrap(), true, &mut reply);
            out.push(reply);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn a_zone_updated_event_by_event_answers_as_one_built_from_scratch(
        events in proptest::collection::vec(event(), 1..40)
    ) {
        let config = ZoneConfig::default();
        let mut catalog = Catalog::default();
        let mut zone = Zone::of_catalog(&config, &catalog);
        for event in &events {
            let changed = apply(&mut catalog, event);
            zone = zone.updated(&catalog, &changed);
        }
        let scratch = Zone::of_catalog(&config, &catalog);
        prop_assert_eq!((zone.names, zone.bytes), (scratch.names, scratch.bytes));
        let (incremental, fresh) = (answers(&zone), answers(&scratch));
        for (i, (a, b)) in incremental.iter().zip(&fresh).enumerate() {
            prop_assert_eq!(a, b, "answer {} differs", i);
        }
    }
}

fn world(services: usize) -> (Catalog, Zone) {
    let imports: Vec<ServiceImport> = (0..services)
        .map(|i| {
            mk_import(
                "demo",
                &format!("svc-{i}"),
                ServiceImportType::ClusterSetIP,
                &["10.96.0.1"],
                &[("http", "TCP", 80)],
            )
        })
        .collect();
    let refs: Vec<&ServiceImport> = imports.iter().collect();
    let catalog = Catalog::of(&refs, &[]);
    let zone = Zone::of_catalog(&ZoneConfig::default(), &catalog);
    (catalog, zone)
}

#[test]
fn an_update_of_one_service_copies_one_shard_and_shares_the_rest() {
    let (mut catalog, zone) = world(10_000);
    let total = zone.shared_shards(&zone);
    let changed = mk_import(
        "demo",
        "svc-42",
        ServiceImportType::ClusterSetIP,
        &["10.96.0.2"],
        &[("http", "TCP", 80)],
    );
    let (key, record) = ImportRecord::of(&changed).unwrap();
    assert!(catalog.set_import(key.clone(), Some(record)));
    let updated = zone.updated(&catalog, [&key]);
    assert_eq!(updated.shared_shards(&zone), total - 1);
    let a = |z: &Zone| resolve(z, "svc-42.demo.svc.clusterset.local", 1).unwrap().1;
    assert_eq!(a(&zone), ["10.96.0.1".parse::<std::net::IpAddr>().unwrap()]);
    assert_eq!(
        a(&updated),
        ["10.96.0.2".parse::<std::net::IpAddr>().unwrap()]
    );
    // A new namespace copies one more shard (the namespace map's); nothing else changes.
    let other = mk_import(
        "other",
        "svc-0",
        ServiceImportType::ClusterSetIP,
        &["10.96.1.1"],
        &[],
    );
    let (key, record) = ImportRecord::of(&other).unwrap();
    catalog.set_import(key.clone(), Some(record));
    let grown = updated.updated(&catalog, [&key]);
    assert_eq!(grown.shared_shards(&updated), total - 2);
    assert_eq!(grown.names, updated.names + 2);
}

#[test]
fn an_update_that_changes_nothing_shares_every_shard_of_the_services() {
    let (catalog, zone) = world(1_000);
    let none: BTreeSet<ServiceKey> = BTreeSet::new();
    let same = zone.updated(&catalog, &none);
    assert_eq!(same.shared_shards(&zone), zone.shared_shards(&zone));
}

#[test]
fn events_that_change_nothing_dns_answers_from_change_no_service() {
    let mut catalog = Catalog::default();
    let import = import_of(0, 0, false, &[1], true);
    let (key, record) = ImportRecord::of(&import).unwrap();
    assert!(catalog.set_import(key.clone(), Some(record.clone())));
    // A status update or a new resourceVersion: same record.
    assert!(!catalog.set_import(key.clone(), Some(record)));
    let slice = slice_of(0, 0, 0, 0, &[(1, false, true)]);
    let (slice_key, slice_record) = SliceRecord::of(&slice).unwrap();
    assert_eq!(
        catalog.set_slice(slice_key.clone(), Some(slice_record.clone())),
        [key]
    );
    assert!(
        catalog
            .set_slice(slice_key.clone(), Some(slice_record))
            .is_empty()
    );
    // A not-ready endpoint is not in the record: flipping it is a change only when it was ready.
    let (_, with_unready) = SliceRecord::of(&slice_of(
        0,
        0,
        0,
        0,
        &[(1, false, true), (2, false, false)],
    ))
    .unwrap();
    assert!(catalog.set_slice(slice_key, Some(with_unready)).is_empty());
}

#[test]
fn a_relabelled_slice_changes_its_old_and_its_new_service() {
    let mut catalog = Catalog::default();
    let (key, record) = SliceRecord::of(&slice_of(0, 0, 0, 0, &[(1, false, true)])).unwrap();
    catalog.set_slice(key.clone(), Some(record));
    let (same_key, moved) = SliceRecord::of(&slice_of(0, 0, 1, 0, &[(1, false, true)])).unwrap();
    assert_eq!(same_key, key);
    assert_eq!(
        catalog.set_slice(key.clone(), Some(moved)),
        [ServiceKey::new("a", "s0"), ServiceKey::new("a", "s1")]
    );
    assert_eq!(catalog.slices(&ServiceKey::new("a", "s0")).count(), 0);
    assert_eq!(catalog.slices(&ServiceKey::new("a", "s1")).count(), 1);
    assert_eq!(catalog.set_slice(key, None), [ServiceKey::new("a", "s1")]);
    assert!(catalog.is_empty());
}

#[test]
fn a_relist_changes_only_the_services_that_differ() {
    let mut catalog = Catalog::default();
    let records: Vec<(ServiceKey, ImportRecord)> = (0..3)
        .map(|svc| ImportRecord::of(&import_of(0, svc, false, &[1], false)).unwrap())
        .collect();
    for (key, record) in &records {
        catalog.set_import(key.clone(), Some(record.clone()));
    }
    // Relisted: s0 unchanged, s1 changed, s2 gone, b/s0 new.
    let mut relisted: std::collections::HashMap<ServiceKey, ImportRecord> =
        std::collections::HashMap::new();
    relisted.insert(records[0].0.clone(), records[0].1.clone());
    let (k1, r1) = ImportRecord::of(&import_of(0, 1, false, &[2], false)).unwrap();
    relisted.insert(k1, r1);
    let (k3, r3) = ImportRecord::of(&import_of(1, 0, false, &[1], false)).unwrap();
    relisted.insert(k3, r3);
    let changed: Vec<ServiceKey> = catalog.replace_imports(relisted).into_iter().collect();
    let key = ServiceKey::new;
    assert_eq!(changed, [key("a", "s1"), key("a", "s2"), key("b", "s0")]);
    assert_eq!(catalog.len(), (3, 0));
}

#[test]
fn an_import_whose_name_is_not_one_label_is_not_served() {
    let dotted = mk_import(
        "demo",
        "a.b",
        ServiceImportType::ClusterSetIP,
        &["10.96.0.9"],
        &[],
    );
    let plain = mk_import(
        "demo",
        "b",
        ServiceImportType::ClusterSetIP,
        &["10.96.0.1"],
        &[],
    );
    let zone = Zone::build(&ZoneConfig::default(), &[&dotted, &plain], &[]);
    let a = |name: &str| resolve(&zone, name, 1).unwrap();
    assert_eq!(a("a.b.demo.svc.clusterset.local").0, "NXDOMAIN");
    assert_eq!(
        a("b.demo.svc.clusterset.local").1,
        ["10.96.0.1".parse::<std::net::IpAddr>().unwrap()]
    );
}
