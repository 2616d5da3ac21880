//! Exact plans for the situations the end-to-end tests cover, on a small in-memory world: the
//! stores of one member (which may double as the hub) that a plan's writes are applied to, as
//! the apiserver and the watches would, so a test can step pass by pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use atoll_api::hub::{self, ExportedService};
use atoll_api::labels;
use atoll_api::mcs_slice::McsSlice;
use atoll_api::multicluster::{EndpointSliceObjects, ServiceImportType};
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_api::{Condition, ConditionStatus};
use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;

use super::*;
use crate::ClusterId;
use crate::derived::derived_service_name;

const NS: &str = "demo";

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(1_800_000_000 + seconds).unwrap())
}

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: Some(ns.to_owned()),
        name: Some(name.to_owned()),
        ..Default::default()
    }
}

fn service(name: &str, ports: &[(&str, &str, i32)], families: &[&str]) -> Service {
    Service {
        metadata: meta(NS, name),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".into()),
            cluster_ip: Some("10.102.0.7".into()),
            cluster_ips: Some(vec!["10.102.0.7".into()]),
            ip_families: Some(families.iter().map(|f| (*f).to_owned()).collect()),
            selector: Some(BTreeMap::from([("app".into(), name.into())])),
            ports: Some(
                ports
                    .iter()
                    .map(|(n, p, port)| ServicePort {
                        name: Some((*n).into()),
                        protocol: Some((*p).into()),
                        port: *port,
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        status: None,
    }
}

fn export(name: &str, created: i64) -> ServiceExport {
    let mut export = ServiceExport::new(name, None);
    export.metadata.namespace = Some(NS.into());
    export.metadata.creation_timestamp = Some(at(created));
    export
}

fn local_slice(service: &str, addresses: &[&str], ports: &[(&str, &str, i32)]) -> EndpointSlice {
    let mut metadata = meta(NS, &format!("{service}-abcde"));
    metadata.labels = Some(BTreeMap::from([
        (labels::KUBERNETES_SERVICE_NAME.into(), service.into()),
        (
            labels::ENDPOINTSLICE_MANAGED_BY.into(),
            labels::CORE_ENDPOINTSLICE_MANAGER.into(),
        ),
    ]));
    EndpointSlice {
        metadata,
        address_type: "IPv4".into(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![(*a).into()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    ..Default::default()
                }),
                node_name: Some("node-0".into()),
                ..Default::default()
            })
            .collect(),
        ports: Some(
            ports
                .iter()
                .map(|(n, p, port)| EndpointPort {
                    name: Some((*n).into()),
                    protocol: Some((*p).into()),
                    port: Some(*port),
                    app_protocol: None,
                })
                .collect(),
        ),
    }
}

fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A record another member published, made as that member's agent would.
fn remote_record(cluster: &str, name: &str, created: i64, svc: &Service) -> ExportedService {
    crate::export::record(cluster, &export(name, created), svc)
}

const TCP42: &[(&str, &str, i32)] = &[("tcp", "TCP", 42)];

/// The stores of one member that is also the hub, and the apiserver's answers to writes.
struct World {
    member: Member,
    observed: Observed,
    feedback: Feedback,
    /// Derived Services the member's apiserver refuses (namespace/name -> refusal).
    refuse_derived: BTreeMap<String, Refusal>,
    /// Hub records the hub refuses.
    refuse_records: BTreeMap<String, Refusal>,
    clock: i64,
}

fn upsert<K: Clone>(list: &mut Vec<Arc<K>>, object: K, meta: impl Fn(&K) -> &ObjectMeta) {
    let key = ObjectKey::of(meta(&object));
    list.retain(|o| ObjectKey::of(meta(o)) != key);
    list.push(Arc::new(object));
}

fn remove<K>(list: &mut Vec<Arc<K>>, key: &ObjectKey, meta: impl Fn(&K) -> &ObjectMeta) {
    list.retain(|o| &ObjectKey::of(meta(o)) != key);
}

impl World {
    fn new(cluster: &str) -> Self {
        let observed = Observed {
            namespaces: vec![Arc::new(namespace(NS))],
            ..Default::default()
        };
        Self {
            member: Member::new(ClusterId::new(cluster).unwrap()),
            observed,
            feedback: Feedback::default(),
            refuse_derived: BTreeMap::new(),
            refuse_records: BTreeMap::new(),
            clock: 100,
        }
    }

    fn plan(&self) -> Plan {
        plan(
            &self.member,
            &self.observed,
            &self.feedback,
            &at(self.clock),
        )
    }

    /// Plans one pass and applies its writes, as the writer and the watches would.
    fn step(&mut self) -> Plan {
        let plan = self.plan();
        self.apply(&plan);
        plan
    }

    /// Steps until a pass plans no write; returns how many passes wrote.
    fn converge(&mut self) -> usize {
        for passes in 0..10 {
            if self.step().writes() == 0 {
                return passes;
            }
        }
        panic!("no convergence in 10 passes: {:#?}", self.plan());
    }

    fn apply(&mut self, plan: &Plan) {
        self.clock += 1;
        let o = &mut self.observed;
        let mut feedback = Feedback::default();
        for record in &plan.hub.apply_records {
            let key = ObjectKey::of(&record.metadata).to_string();
            if let Some(refusal) = self.refuse_records.get(&key) {
                let spec = &record.spec;
                feedback.publish_failures.insert(
                    ServiceKey::new(&spec.namespace, &spec.name),
                    refusal.clone(),
                );
            } else {
                upsert(&mut o.records, record.clone(), |r| &r.metadata);
            }
        }
        for key in &plan.hub.delete_records {
            remove(&mut o.records, key, |r| &r.metadata);
        }
        for slice in &plan.hub.apply_slices {
            upsert(&mut o.hub_slices, slice.clone(), |s| &s.metadata);
        }
        for key in &plan.hub.delete_slices {
            remove(&mut o.hub_slices, key, |s| &s.metadata);
        }
        for derived in &plan.member.apply_derived {
            let key = ObjectKey::of(&derived.metadata);
            if let Some(refusal) = self.refuse_derived.get(&key.to_string()) {
                let service =
                    derived.metadata.labels.as_ref().unwrap()[labels::SERVICE_NAME].clone();
                feedback
                    .derived_failures
                    .insert(ServiceKey::new(&key.namespace, &service), refusal.clone());
                continue;
            }
            // The apiserver allocates the VIP and keeps it across updates.
            let mut stored = derived.clone();
            let spec = stored.spec.get_or_insert_with(Default::default);
            spec.cluster_ips = Some(vec!["10.101.0.9".into()]);
            spec.ip_families = Some(vec!["IPv4".into()]);
            upsert(&mut o.services, stored, |s| &s.metadata);
        }
        for apply in &plan.member.apply_imports {
            let key = ObjectKey::of(&apply.object.metadata);
            let status = o
                .imports
                .iter()
                .find(|i| ObjectKey::of(&i.metadata) == key)
                .and_then(|i| i.status.clone());
            let mut stored = apply.object.clone();
            stored.status = status;
            upsert(&mut o.imports, stored, |i| &i.metadata);
        }
        for update in &plan.member.import_statuses {
            let mut stored = o
                .imports
                .iter()
                .find(|i| ObjectKey::of(&i.metadata) == update.key)
                .map(|i| i.as_ref().clone())
                .expect("status of an import that does not exist");
            stored.status = Some(update.status.clone());
            upsert(&mut o.imports, stored, |i| &i.metadata);
        }
        for slice in &plan.member.apply_slices {
            let slice = McsSlice::from(slice);
            o.mcs_slices.retain(|s| s.key() != slice.key());
            o.mcs_slices.push(Arc::new(slice));
        }
        for key in &plan.member.delete_imports {
            remove(&mut o.imports, key, |i| &i.metadata);
        }
        for key in &plan.member.delete_derived {
            remove(&mut o.services, key, |s| &s.metadata);
        }
        for key in &plan.member.delete_slices {
            o.mcs_slices.retain(|s| &s.key() != key);
        }
        for update in &plan.export_statuses {
            let mut stored = o
                .exports
                .iter()
                .find(|e| ObjectKey::of(&e.metadata) == update.key)
                .map(|e| e.as_ref().clone())
                .expect("status of an export that does not exist");
            stored.status = Some(atoll_api::multicluster::ServiceExportStatus {
                conditions: update.conditions.clone(),
            });
            upsert(&mut o.exports, stored, |e| &e.metadata);
        }
        self.feedback = feedback;
    }

    /// Creates `name` with a ServiceExport, a Service and its endpoint slice in this member.
    fn export_local(&mut self, name: &str, addresses: &[&str]) {
        let o = &mut self.observed;
        upsert(&mut o.services, service(name, TCP42, &["IPv4"]), |s| {
            &s.metadata
        });
        upsert(
            &mut o.service_slices,
            local_slice(name, addresses, TCP42),
            |s| &s.metadata,
        );
        upsert(&mut o.exports, export(name, 0), |e| &e.metadata);
    }

    fn import(&self, name: &str) -> Option<&ServiceImport> {
        self.observed
            .imports
            .iter()
            .find(|i| i.metadata.name.as_deref() == Some(name))
            .map(Arc::as_ref)
    }

    fn export_conditions(&self, name: &str) -> Vec<(String, ConditionStatus, String)> {
        self.observed
            .exports
            .iter()
            .find(|e| e.metadata.name.as_deref() == Some(name))
            .and_then(|e| e.status.clone())
            .map(|s| summary(&s.conditions))
            .unwrap_or_default()
    }
}

fn summary(conditions: &[Condition]) -> Vec<(String, ConditionStatus, String)> {
    conditions
        .iter()
        .map(|c| (c.type_.clone(), c.status, c.reason.clone()))
        .collect()
}

fn c(type_: &str, status: ConditionStatus, reason: &str) -> (String, ConditionStatus, String) {
    (type_.into(), status, reason.into())
}

fn names<K>(objects: &[K], meta: impl Fn(&K) -> &ObjectMeta) -> Vec<String> {
    objects
        .iter()
        .map(|o| ObjectKey::of(meta(o)).to_string())
        .collect()
}

#[test]
fn an_export_is_published_then_imported_in_its_own_cluster() {
    let mut world = World::new("c2");
    world.export_local("hello", &["10.202.0.5", "10.202.0.6"]);

    // Pass 1: publish the record and the slice copy; Ready waits for the hub to show them.
    let first = world.step();
    assert_eq!(
        names(&first.hub.apply_records, |r| &r.metadata),
        ["atoll-c2/demo.hello"]
    );
    assert_eq!(
        names(&first.hub.apply_slices, |s| &s.metadata),
        ["atoll-c2/demo.hello-abcde"]
    );
    assert!(first.export_statuses.is_empty());
    assert_eq!(first.member, MemberWrites::default());

    // Pass 2: the hub holds the record: conditions, the derived Service and the MCS slice;
    // the import waits for the derived Service's VIP.
    let second = world.step();
    assert!(second.hub.is_empty());
    assert_eq!(
        world.export_conditions("hello"),
        [
            c("Valid", ConditionStatus::True, "Valid"),
            c("Ready", ConditionStatus::True, "Exported"),
            c("Conflict", ConditionStatus::False, "NoConflicts"),
        ]
    );
    let announced: Vec<&str> = second.export_statuses[0]
        .announcements
        .iter()
        .map(|a| a.reason.as_str())
        .collect();
    assert_eq!(announced, ["Exported"]);
    let derived = derived_service_name(NS, "hello");
    assert_eq!(
        names(&second.member.apply_derived, |s| &s.metadata),
        [format!("demo/{derived}")]
    );
    assert!(second.member.apply_imports.is_empty());
    assert_eq!(
        names(&second.member.apply_slices, |s| &s.metadata),
        ["demo/hello.c2.ipv4.0"]
    );
    let slice = &second.member.apply_slices[0];
    assert_eq!(slice.endpoints.len(), 2);
    assert_eq!(
        slice.metadata.labels.as_ref().unwrap()[labels::KUBERNETES_SERVICE_NAME],
        derived
    );

    // Pass 3: the derived Service has its VIP: the import and its status.
    let third = world.step();
    assert_eq!(third.member.apply_imports.len(), 1);
    assert_eq!(third.member.apply_imports[0].first_export, Some(at(0)));
    assert_eq!(third.member.import_statuses.len(), 1);
    assert_eq!(third.writes(), 2);
    let import = world.import("hello").unwrap();
    let spec = import.spec.as_ref().unwrap();
    assert_eq!(spec.type_, ServiceImportType::ClusterSetIP);
    assert_eq!(spec.ips, ["10.101.0.9"]);
    let status = import.status.as_ref().unwrap();
    assert_eq!(status.clusters.len(), 1);
    assert_eq!(
        status.endpoint_slice_objects,
        Some(EndpointSliceObjects::Present)
    );
    assert_eq!(
        summary(&status.conditions),
        [
            c("Ready", ConditionStatus::True, "Ready"),
            c(
                "hub.atoll.dev/SourceClusters",
                ConditionStatus::True,
                "AllLive"
            ),
        ]
    );

    // Steady state: nothing to write.
    let steady = world.plan();
    assert_eq!(steady.writes(), 0, "{steady:#?}");
    assert_eq!(steady.report.imported.len(), 1);
}

#[test]
fn unexport_withdraws_the_record_then_every_imported_object() {
    let mut world = World::new("c2");
    world.export_local("hello", &["10.202.0.5"]);
    world.converge();
    let key = ObjectKey::new(NS, "hello");
    remove(&mut world.observed.exports, &key, |e| &e.metadata);

    let first = world.step();
    assert_eq!(
        first.hub.delete_records,
        [ObjectKey::new("atoll-c2", "demo.hello")]
    );
    assert_eq!(
        first.hub.delete_slices,
        [ObjectKey::new("atoll-c2", "demo.hello-abcde")]
    );
    assert_eq!(
        first.member,
        MemberWrites::default(),
        "imports wait for the hub"
    );

    let second = world.step();
    assert_eq!(second.member.delete_imports, [key]);
    assert_eq!(
        second.member.delete_derived,
        [ObjectKey::new(NS, &derived_service_name(NS, "hello"))]
    );
    assert_eq!(
        second.member.delete_slices,
        [ObjectKey::new(NS, "hello.c2.ipv4.0")]
    );
    assert_eq!(second.writes(), 3);
    assert_eq!(world.plan().writes(), 0);
}

#[test]
fn a_port_conflict_keeps_the_oldest_ports_and_flags_our_export() {
    let mut world = World::new("c2");
    world.export_local("hello", &["10.202.0.5"]);
    // c1 exported the same service earlier, on another port.
    let older = service("hello", &[("tcp", "TCP", 43)], &["IPv4"]);
    let mut record = remote_record("c1", "hello", -50, &older);
    record.metadata.uid = Some("r1".into());
    upsert(&mut world.observed.records, record, |r| &r.metadata);
    world.converge();

    let conditions = world.export_conditions("hello");
    assert_eq!(
        conditions[2],
        c("Conflict", ConditionStatus::True, "PortConflict")
    );
    let export = world.observed.exports[0].status.clone().unwrap();
    let message = &export.conditions[2].message;
    assert!(message.contains("from cluster c1, wins"), "{message}");
    assert!(message.contains("clusters that differ: c2"), "{message}");
    let import = world.import("hello").unwrap();
    let ports: Vec<i32> = import
        .spec
        .as_ref()
        .unwrap()
        .ports
        .iter()
        .map(|p| p.port)
        .collect();
    assert_eq!(ports, [43], "the oldest export's port wins");
    assert_eq!(import.status.as_ref().unwrap().clusters.len(), 2);
    // c2 exposes no port of the import: its slice carries no port.
    let ours = world
        .observed
        .mcs_slices
        .iter()
        .find(|s| &*s.name == "hello.c2.ipv4.0")
        .unwrap();
    assert_eq!(ours.ports.as_deref(), Some(&[][..]));
}

#[test]
fn a_service_whose_namespace_is_missing_is_skipped_and_nothing_is_created() {
    let mut world = World::new("c3");
    let svc = service("hello", TCP42, &["IPv4"]);
    let mut record = remote_record("c2", "hello", 0, &svc);
    record.spec.namespace = "elsewhere".into();
    record.metadata.name = Some(hub::record_name("elsewhere", "hello"));
    upsert(&mut world.observed.records, record, |r| &r.metadata);
    let plan = world.plan();
    assert_eq!(plan.writes(), 0);
    assert_eq!(plan.report.skipped, [ServiceKey::new("elsewhere", "hello")]);
    assert_eq!(plan.report.imported.len(), 0);
}

#[test]
fn a_spoofed_record_is_rejected_and_imports_nothing() {
    let mut world = World::new("c3");
    let svc = service("hello", TCP42, &["IPv4"]);
    // Stored in c1's namespace but claiming to come from c9.
    let mut record = remote_record("c9", "hello", 0, &svc);
    record.metadata.namespace = Some(hub::namespace_for("c1"));
    record.metadata.resource_version = Some("7".into());
    upsert(&mut world.observed.records, record, |r| &r.metadata);
    let plan = world.plan();
    assert_eq!(plan.writes(), 0);
    assert_eq!(plan.report.trusted_records(), 0);
    assert_eq!(
        plan.report.rejected,
        [Rejected {
            record: ObjectKey::new("atoll-c1", "demo.hello"),
            service: ServiceKey::new(NS, "hello"),
            version: "atoll-c1/demo.hello@7".into(),
            problem: "claims cluster c9 but is stored in another member's namespace".into(),
            kind: HubKind::Record,
            cluster: "c1".into(),
            reason: crate::validate::Reason::WrongNamespace,
            count: 1,
        }]
    );
}

#[test]
fn an_ipv6_only_import_in_an_ipv4_cluster_says_why_it_has_no_vip() {
    let mut world = World::new("c1");
    let svc = service("v6only", TCP42, &["IPv6"]);
    upsert(
        &mut world.observed.records,
        remote_record("c9", "v6only", 0, &svc),
        |r| &r.metadata,
    );
    let derived = derived_service_name(NS, "v6only");
    let refusal = Refusal {
        code: 422,
        message: "Service \"x\" is invalid: spec.ipFamilies[0]: Invalid value: \"IPv6\": not configured on this cluster".into(),
    };
    world
        .refuse_derived
        .insert(format!("{NS}/{derived}"), refusal.clone());

    let first = world.step();
    assert_eq!(first.member.apply_derived.len(), 1);
    assert!(first.member.apply_imports.is_empty());
    assert_eq!(
        world.feedback.derived_failures,
        BTreeMap::from([(ServiceKey::new(NS, "v6only"), refusal)])
    );

    // The refusal is reported on the import, which carries the service's families, no IPs.
    let second = world.step();
    assert_eq!(
        second.member.apply_derived.len(),
        1,
        "the derived Service is retried"
    );
    let import = world.import("v6only").unwrap();
    let spec = import.spec.as_ref().unwrap();
    assert!(spec.ips.is_empty());
    assert_eq!(spec.ip_families, ["IPv6"]);
    let status = import.status.as_ref().unwrap();
    assert_eq!(
        summary(&status.conditions),
        [
            c("Ready", ConditionStatus::False, "IPFamilyNotSupported"),
            c(
                "hub.atoll.dev/SourceClusters",
                ConditionStatus::True,
                "AllLive"
            ),
        ]
    );
    assert!(status.conditions[0].message.contains("not configured"));

    // From then on only the retry of the derived Service is planned.
    let third = world.step();
    assert_eq!(third.writes(), 1);
    assert_eq!(third.member.apply_derived.len(), 1);
}

#[test]
fn an_endpoint_change_rewrites_one_hub_copy_then_one_member_slice() {
    let mut world = World::new("c2");
    world.export_local("hello", &["10.202.0.5", "10.202.0.6"]);
    world.converge();
    for addresses in [
        &["10.202.0.5", "10.202.0.6", "10.202.0.7", "10.202.0.8"][..],
        &["10.202.0.8"][..],
    ] {
        upsert(
            &mut world.observed.service_slices,
            local_slice("hello", addresses, TCP42),
            |s| &s.metadata,
        );
        let first = world.step();
        assert_eq!(first.writes(), 1);
        assert_eq!(
            first.hub.apply_slices[0].spec.endpoints.len(),
            addresses.len()
        );
        let second = world.step();
        assert_eq!(second.writes(), 1);
        let slice = &second.member.apply_slices[0];
        let imported: Vec<&str> = slice
            .endpoints
            .iter()
            .map(|e| e.addresses[0].as_str())
            .collect();
        assert_eq!(imported, addresses);
        assert_eq!(world.plan().writes(), 0);
    }
}

#[test]
fn a_refused_record_is_reported_as_pending_with_the_error() {
    let mut world = World::new("c2");
    world.export_local("hello", &["10.202.0.5"]);
    world.refuse_records.insert(
        "atoll-c2/demo.hello".into(),
        Refusal {
            code: 403,
            message: "forbidden: cannot create exportedservices in atoll-c2".into(),
        },
    );
    world.step();
    world.step();
    assert_eq!(
        world.export_conditions("hello"),
        [
            c("Valid", ConditionStatus::True, "Valid"),
            c("Ready", ConditionStatus::False, "Pending"),
        ]
    );
    world.refuse_records.clear();
    world.converge();
    assert_eq!(
        world.export_conditions("hello")[1],
        c("Ready", ConditionStatus::True, "Exported")
    );
}

#[test]
fn an_invalid_export_says_why_and_publishes_nothing() {
    let mut world = World::new("c2");
    upsert(&mut world.observed.exports, export("ghost", 0), |e| {
        &e.metadata
    });
    let plan = world.step();
    assert!(plan.hub.is_empty());
    assert_eq!(
        world.export_conditions("ghost"),
        [
            c("Valid", ConditionStatus::False, "NoService"),
            c("Ready", ConditionStatus::False, "Failed"),
        ]
    );
    assert!(plan.export_statuses[0].announcements[0].warning);
    assert_eq!(world.plan().writes(), 0);
}

#[test]
fn objects_atoll_does_not_own_are_never_deleted() {
    let mut world = World::new("c2");
    let mut theirs = ServiceImport::new("manual", None);
    theirs.metadata.namespace = Some(NS.into());
    upsert(&mut world.observed.imports, theirs, |i| &i.metadata);
    let mut plain = service("plain", TCP42, &["IPv4"]);
    plain.metadata.labels = Some(BTreeMap::from([(labels::SERVICE_NAME.into(), "x".into())]));
    upsert(&mut world.observed.services, plain, |s| &s.metadata);
    assert_eq!(world.plan().writes(), 0);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    fn name(i: usize) -> String {
        format!("svc-{i}")
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]

        /// Any mix of local exports (some without a Service) converges within four passes,
        /// after which nothing is written; and the plan is a function of its inputs.
        #[test]
        fn any_set_of_exports_converges_and_then_writes_nothing(
            services in prop::collection::vec((1usize..4, any::<bool>()), 0..6),
        ) {
            let mut world = World::new("c2");
            for (i, (endpoints, has_service)) in services.iter().enumerate() {
                let addresses: Vec<String> = (0..*endpoints).map(|e| format!("10.202.{i}.{e}")).collect();
                let refs: Vec<&str> = addresses.iter().map(String::as_str).collect();
                if *has_service {
                    world.export_local(&name(i), &refs);
                } else {
                    upsert(&mut world.observed.exports, export(&name(i), 0), |e| &e.metadata);
                }
            }
            let a = world.plan();
            let b = world.plan();
            prop_assert_eq!(a.writes(), b.writes());
            prop_assert_eq!(&a.member, &b.member);
            let passes = world.converge();
            prop_assert!(passes <= 4, "took {} passes", passes);
            let exported = services.iter().filter(|(_, s)| *s).count();
            prop_assert_eq!(world.observed.imports.len(), exported);
            prop_assert_eq!(world.observed.records.len(), exported);
            for (i, (endpoints, has_service)) in services.iter().enumerate() {
                let import = world.import(&name(i));
                prop_assert_eq!(import.is_some(), *has_service);
                if *has_service {
                    let slices: usize = world
                        .observed
                        .mcs_slices
                        .iter()
                        .filter(|s| s.label(labels::SERVICE_NAME) == Some(name(i).as_str()))
                        .map(|s| s.endpoints.len())
                        .sum();
                    prop_assert_eq!(slices, *endpoints);
                }
            }
        }
    }
}

#[test]
fn an_export_in_an_excluded_namespace_is_invalid_and_such_records_are_not_imported() {
    let mut world = World::new("c2");
    upsert(
        &mut world.observed.namespaces,
        namespace("kube-system"),
        |n| &n.metadata,
    );
    let mut svc = service("dns", TCP42, &["IPv4"]);
    svc.metadata.namespace = Some("kube-system".into());
    upsert(&mut world.observed.services, svc.clone(), |s| &s.metadata);
    let mut exp = export("dns", 0);
    exp.metadata.namespace = Some("kube-system".into());
    upsert(&mut world.observed.exports, exp.clone(), |e| &e.metadata);
    // Another member publishes a record for kube-system anyway.
    let record = crate::export::record("c9", &exp, &svc);
    upsert(&mut world.observed.records, record, |r| &r.metadata);

    let plan = world.step();
    assert!(
        plan.hub.apply_records.is_empty(),
        "nothing published from kube-system"
    );
    assert!(plan.member.apply_derived.is_empty() && plan.member.apply_imports.is_empty());
    assert_eq!(
        plan.report.excluded,
        [ServiceKey::new("kube-system", "dns")]
    );
    let status = &plan.export_statuses[0];
    assert_eq!(status.key, ObjectKey::new("kube-system", "dns"));
    assert_eq!(
        summary(&status.conditions)[0],
        c("Valid", ConditionStatus::False, "NamespaceExcluded")
    );
    assert!(
        status.conditions[0]
            .message
            .contains("NamespacePolicy clusterset")
    );

    // A policy that includes kube-system lets it through, without a restart.
    let policy = atoll_api::hub::NamespacePolicy::new(
        atoll_api::hub::NAMESPACE_POLICY,
        atoll_api::hub::NamespacePolicySpec::default(),
    );
    let mut open = policy.clone();
    open.spec.exclude.clear();
    world.observed.policies = vec![Arc::new(open)];
    world.converge();
    assert!(world.import("dns").is_some());
    assert_eq!(
        world.export_conditions("dns")[0],
        c("Valid", ConditionStatus::True, "Valid")
    );
}

#[test]
fn the_cluster_profile_mirrors_the_members_cluster_properties() {
    let mut world = World::new("c2");
    let key = ObjectKey::new("atoll-inventory", "c2");
    world.member.profile = Some(key.clone());
    let mut profile = atoll_api::inventory::ClusterProfile::new("c2", Default::default());
    profile.metadata.namespace = Some("atoll-inventory".into());
    world.observed.profiles = vec![Arc::new(profile.clone())];
    let property = |name: &str, value: &str| {
        Arc::new(atoll_api::about::v1beta1::ClusterProperty::new(
            name,
            Some(atoll_api::about::ClusterPropertySpec {
                value: value.into(),
            }),
        ))
    };
    world.observed.properties = vec![
        property("cluster.clusterset.k8s.io", "c2"),
        property("region", "eu-1"),
    ];
    let plan = world.plan();
    let status = plan.profile.expect("the profile lags behind");
    assert_eq!(status.key, key);
    let pairs: Vec<(&str, &str)> = status
        .properties
        .iter()
        .map(|p| (p.name.as_str(), p.value.as_str()))
        .collect();
    assert_eq!(
        pairs,
        [("cluster.clusterset.k8s.io", "c2"), ("region", "eu-1")]
    );
    profile.status = Some(atoll_api::inventory::ClusterProfileStatus {
        properties: status.properties,
        ..Default::default()
    });
    world.observed.profiles = vec![Arc::new(profile)];
    world.clock += 100;
    assert!(
        world.plan().profile.is_none(),
        "only a change of value is written"
    );
}

#[test]
fn withdrawn_sources_leave_the_import_say_so_and_the_last_one_takes_it_away() {
    let mut world = World::new("c1");
    let svc = service("hello", TCP42, &["IPv4"]);
    for cluster in ["c2", "c3"] {
        upsert(
            &mut world.observed.records,
            remote_record(cluster, "hello", 0, &svc),
            |r| &r.metadata,
        );
    }
    world.converge();
    assert_eq!(
        world
            .import("hello")
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .clusters
            .len(),
        2
    );

    // The tracker withdrew c3: its record is left out of the view, and the plan is told.
    let withdraw = |world: &mut World, cluster: &str| {
        world.observed.records.retain(|r| r.spec.cluster != cluster);
        world.observed.liveness.withdrawn.insert(
            cluster.to_owned(),
            crate::liveness::Withdrawal {
                last_seen: at(5),
                services: [ServiceKey::new(NS, "hello")].into(),
            },
        );
    };
    withdraw(&mut world, "c3");
    let plan = world.step();
    let status = &plan.member.import_statuses[0];
    let clusters: Vec<&str> = status
        .status
        .clusters
        .iter()
        .map(|c| c.cluster.as_str())
        .collect();
    assert_eq!(clusters, ["c2"]);
    let condition = &status.status.conditions[1];
    assert_eq!(
        (
            condition.type_.as_str(),
            condition.status,
            condition.reason.as_str()
        ),
        (
            "hub.atoll.dev/SourceClusters",
            ConditionStatus::False,
            "SourcesWithdrawn"
        )
    );
    assert!(
        condition
            .message
            .starts_with("withdrawn: c3 (no heartbeat within the grace"),
        "{}",
        condition.message
    );
    assert_eq!(status.announcements[0].reason, "SourceClusterWithdrawn");
    assert_eq!(world.plan().writes(), 0, "the withdrawal is written once");

    withdraw(&mut world, "c2");
    let plan = world.step();
    assert_eq!(plan.member.delete_imports, [ObjectKey::new(NS, "hello")]);
    let (key, event) = &plan.member.withdrawn_imports[0];
    assert_eq!(key, &ObjectKey::new(NS, "hello"));
    assert!(
        event
            .note
            .contains("every source cluster (c2, c3) is withdrawn"),
        "{}",
        event.note
    );
}

#[test]
fn a_forged_record_left_out_of_the_liveness_view_is_still_reported() {
    let mut world = World::new("c3");
    let svc = service("hello", TCP42, &["IPv4"]);
    let mut forged = remote_record("c3", "hello", 0, &svc);
    forged.metadata.namespace = Some(hub::namespace_for("c2"));
    upsert(&mut world.observed.records, forged, |r| &r.metadata);
    // c2's claim does not cover it: the tracker's view holds c2's last claimed set (nothing).
    world.observed.sources = Some(Sources::default());
    let plan = world.plan();
    assert_eq!(plan.report.rejected.len(), 1);
    assert_eq!(
        plan.report.rejected[0].record,
        ObjectKey::new("atoll-c2", "demo.hello")
    );
    assert_eq!(plan.writes(), 0);
}

mod hostile;
mod pinned;
mod scoped;
mod selectors;
