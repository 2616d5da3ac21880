use super::*;
use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use proptest::prelude::*;

fn record(cluster: &str, name: &str, created: i64) -> Arc<ExportedService> {
    let svc = Service {
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut export = atoll_api::v1beta1::ServiceExport::new(name, None);
    export.metadata.namespace = Some("demo".into());
    let mut r = crate::export::record(cluster, &export, &svc);
    r.metadata.creation_timestamp = Some(Time(
        Timestamp::from_second(1_800_000_000 + created).unwrap(),
    ));
    Arc::new(r)
}

fn copy(cluster: &str, name: &str, endpoints: usize, created: i64) -> Arc<ExportedEndpointSlice> {
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: (0..endpoints)
            .map(|i| Endpoint {
                addresses: vec![format!("10.0.0.{}", i + 1)],
                ..Default::default()
            })
            .collect(),
        ports: None,
    };
    let mut c = crate::export::hub_slice(cluster, "demo", name, &slice);
    c.metadata.creation_timestamp = Some(Time(
        Timestamp::from_second(1_800_000_000 + created).unwrap(),
    ));
    Arc::new(c)
}

/// A copy of `service` named `slice`, with `endpoints` endpoints and `ports` ports.
fn copy_of(
    service: &str,
    slice: &str,
    endpoints: usize,
    ports: usize,
    created: i64,
) -> Arc<ExportedEndpointSlice> {
    let mut c = (*copy("east", service, endpoints, created)).clone();
    c.metadata.name = Some(format!("demo.{service}.{slice}"));
    c.spec.ports = (0..ports)
        .map(|i| k8s_openapi::api::discovery::v1::EndpointPort {
            name: Some(format!("p{i}")),
            port: Some(8000 + i as i32),
            ..Default::default()
        })
        .collect();
    Arc::new(c)
}

fn names<T>(objects: &[Arc<T>], meta: impl Fn(&T) -> &ObjectMeta) -> Vec<String> {
    let mut v: Vec<String> = objects
        .iter()
        .map(|o| ObjectKey::of(meta(o)).to_string())
        .collect();
    v.sort();
    v
}

fn limits(records: usize, endpoints: usize) -> Limits {
    Limits {
        records,
        endpoints,
        ..Limits::default()
    }
}

#[test]
fn a_member_over_its_record_limit_loses_its_newest_records_only() {
    let limits = limits(2, 100);
    let records = vec![
        record("east", "c", 3),
        record("east", "a", 1),
        record("east", "b", 2),
        record("west", "x", 9),
        record("west", "y", 9),
        record("west", "z", 9),
    ];
    let (admitted, ignored) = admit(&limits, &records, &[]);
    assert_eq!(
        names(&admitted.records, |r| &r.metadata),
        [
            "atoll-east/demo.a",
            "atoll-east/demo.b",
            "atoll-west/demo.x",
            "atoll-west/demo.y"
        ]
    );
    assert_eq!(ignored.records.len(), 2);
    assert_eq!(admitted.over.len(), 2);
    let east = &admitted.over[0];
    assert_eq!(
        (east.cluster.as_str(), east.published, east.ignored),
        ("east", 3, 1)
    );
    assert_eq!(east.reason, Reason::TooManyRecords);
    assert!(
        east.message()
            .contains("publishes 3 records, more than the limit of 2")
    );
}

#[test]
fn endpoint_copies_are_taken_oldest_first_up_to_the_limit() {
    let limits = limits(10, 5);
    let copies = vec![
        copy("east", "new", 1, 3),
        copy("east", "old", 3, 1),
        copy("east", "mid", 3, 2),
    ];
    let (admitted, _) = admit(&limits, &[], &copies);
    assert_eq!(
        names(&admitted.copies, |c| &c.metadata),
        ["atoll-east/demo.old"]
    );
    assert_eq!(admitted.over[0].reason, Reason::TooManyEndpoints);
    assert_eq!(admitted.over[0].published, 7);
    assert_eq!(admitted.over[0].ignored, 2);
}

#[test]
fn a_member_over_its_port_limit_loses_its_newest_records_only() {
    let limits = Limits {
        ports: 3,
        ..limits(10, 100)
    };
    let with_ports = |name: &str, ports: u16, created: i64| {
        let mut r = (*record("east", name, created)).clone();
        r.spec.ports = (0..ports)
            .map(|i| crate::test_support::port(&format!("p{i}"), "TCP", 80 + i32::from(i)))
            .collect();
        Arc::new(r)
    };
    let records = vec![
        with_ports("new", 1, 3),
        with_ports("old", 2, 1),
        with_ports("mid", 2, 2),
        record("west", "x", 9),
    ];
    let (admitted, ignored) = admit(&limits, &records, &[]);
    assert_eq!(
        names(&admitted.records, |r| &r.metadata),
        ["atoll-east/demo.old", "atoll-west/demo.x"],
        "from the first record that does not fit, none (the same in every importer)"
    );
    assert_eq!(ignored.records.len(), 2);
    let east = &admitted.over[0];
    assert_eq!(
        (east.reason, east.published, east.limit, east.ignored),
        (Reason::TooManyPorts, 5, 3, 2)
    );
    assert!(
        east.message().contains("publishes 5 Service ports"),
        "{}",
        east.message()
    );
}

#[test]
fn the_counted_fast_path_sees_every_limit() {
    // The fast path once let a member over its ports through: it counted records and
    // endpoints only.
    let records = vec![record("east", "a", 1), record("east", "b", 2)];
    let copies = vec![copy_of("a", "x", 10, 3, 1)];
    let counts = |r: &[Arc<ExportedService>], c: &[Arc<ExportedEndpointSlice>]| {
        BTreeMap::from([("east".to_owned(), Counts::of(r, c))])
    };
    for (limits, reason) in [
        (
            Limits {
                ports: 1,
                ..limits(10, 100)
            },
            Reason::TooManyPorts,
        ),
        (
            Limits {
                endpoint_ports: 29,
                ..limits(10, 100)
            },
            Reason::TooManyEndpointPorts,
        ),
    ] {
        let mut caps = Caps::new(limits);
        let admitted =
            caps.admit_counted(records.clone(), copies.clone(), &counts(&records, &copies));
        assert_eq!(
            admitted.over.iter().map(|o| o.reason).collect::<Vec<_>>(),
            [reason]
        );
    }
    let mut caps = Caps::new(limits(10, 100));
    let admitted = caps.admit_counted(records.clone(), copies.clone(), &counts(&records, &copies));
    assert_eq!((admitted.records.len(), admitted.over.len()), (2, 0));
}

#[test]
fn a_service_over_its_endpoint_port_limit_loses_its_newest_copies_only() {
    let limits = Limits {
        endpoint_ports: 1000,
        ..limits(10, 100_000)
    };
    let copies = vec![
        copy_of("big", "a", 10, 50, 1),
        copy_of("big", "b", 10, 50, 2),
        copy_of("big", "c", 1, 1, 3),
        copy_of("small", "a", 100, 10, 4),
    ];
    let (admitted, ignored) = admit(&limits, &[], &copies);
    assert_eq!(
        names(&admitted.copies, |c| &c.metadata),
        [
            "atoll-east/demo.big.a",
            "atoll-east/demo.big.b",
            "atoll-east/demo.small.a"
        ],
        "1,000 pairs each fit; the third copy of big does not"
    );
    assert_eq!(ignored.copies.len(), 1);
    let over = &admitted.over[0];
    assert_eq!(
        (over.reason, over.published, over.ignored),
        (Reason::TooManyEndpointPorts, 1001, 1)
    );
    assert!(
        over.message()
            .contains("1001 endpoint-port pairs for demo/big"),
        "{}",
        over.message()
    );
}

#[test]
fn room_made_by_a_deleted_record_marks_the_service_that_takes_it() {
    let mut caps = Caps::new(limits(1, 100));
    let a = record("east", "a", 1);
    let b = record("east", "b", 2);
    let first = caps.admit(&[a.clone(), b.clone()], &[]);
    assert_eq!(first.touched, [ServiceKey::new("demo", "b")].into());
    assert!(
        caps.admit(&[a, b.clone()], &[]).touched.is_empty(),
        "nothing changed"
    );
    let after = caps.admit(&[b], &[]);
    assert_eq!(after.records.len(), 1);
    assert_eq!(after.touched, [ServiceKey::new("demo", "b")].into());
}

proptest! {
    /// Whatever members publish: no member gets more than its limits through, a member within
    /// its limits loses nothing, and the result does not depend on the order of the view.
    #[test]
    fn caps_bound_each_member_and_spare_the_others(
        published in prop::collection::vec((0usize..3, 0i64..5, 0usize..4), 0..24),
        limit_records in 0usize..6,
        limit_endpoints in 0usize..10,
        seed in any::<u64>(),
    ) {
        let limits = limits(limit_records, limit_endpoints);
        let clusters = ["east", "us-east", "east-2"];
        let records: Vec<_> = published.iter().enumerate()
            .map(|(i, (m, t, _))| record(clusters[*m], &format!("s{i}"), *t)).collect();
        let copies: Vec<_> = published.iter().enumerate()
            .map(|(i, (m, t, n))| copy(clusters[*m], &format!("s{i}"), *n, *t)).collect();
        let (admitted, _) = admit(&limits, &records, &copies);
        for cluster in clusters {
            let ns = hub::namespace_for(cluster);
            let mine = |m: &ObjectMeta| m.namespace.as_deref() == Some(ns.as_str());
            let had = records.iter().filter(|r| mine(&r.metadata)).count();
            let kept = admitted.records.iter().filter(|r| mine(&r.metadata)).count();
            prop_assert_eq!(kept, had.min(limit_records));
            let had: usize = copies.iter().filter(|c| mine(&c.metadata)).map(|c| c.spec.endpoints.len()).sum();
            let kept: usize = admitted.copies.iter().filter(|c| mine(&c.metadata)).map(|c| c.spec.endpoints.len()).sum();
            prop_assert!(kept <= limit_endpoints);
            if had <= limit_endpoints {
                prop_assert_eq!(kept, had);
            }
        }
        let mut shuffled_records = records.clone();
        let mut shuffled_copies = copies.clone();
        let rotate = |n: usize| if n == 0 { 0 } else { (seed as usize) % n };
        shuffled_records.rotate_left(rotate(records.len()));
        shuffled_copies.rotate_left(rotate(copies.len()));
        let (again, _) = admit(&limits, &shuffled_records, &shuffled_copies);
        prop_assert_eq!(names(&again.records, |r| &r.metadata), names(&admitted.records, |r| &r.metadata));
        prop_assert_eq!(names(&again.copies, |c| &c.metadata), names(&admitted.copies, |c| &c.metadata));
    }
}
