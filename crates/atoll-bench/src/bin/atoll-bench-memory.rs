//! `make bench-memory`: what the agent's stores cost per hub object, without a cluster. For
//! each size (clusters × services, `BENCH_SIZES`, default `10x100,50x200,100x200,250x200`) the
//! fleet's hub objects (a record and a 10-endpoint copy per cluster and service, as
//! `make bench-scale` publishes them) are encoded as the apiserver sends them (uid,
//! resourceVersion, creation time, a managed-fields entry), decoded and reduced exactly as the
//! agent's watches do (`atoll_watch::cached_form` with `atoll_agent::compact`'s trims) into
//! kube reflector stores; so are the MCS EndpointSlices an importer of everything writes (one
//! per source cluster and service, built by `atoll_core::import::mcs_slices`). A counting
//! allocator gives the live heap bytes the stores hold; the JSON size shows the wire form.
//!
//! Heap bytes are the floor of what the agent's RSS pays per object (the allocator's own
//! overhead and freed-but-kept pages come on top); `make bench-scale` measures the RSS.

use std::alloc::System;
use std::collections::BTreeMap;

use anyhow::Context;
use atoll_api::endpoint::ServedSlice;
use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::interner::Interner;
use atoll_api::mcs_slice::McsSlice;
use atoll_bench::fleet::{addresses, cluster_name, copy, record};
use atoll_bench::member_at_bounds::{Attack, headless_import};
use atoll_core::import::{EndpointCheck, mcs_slices};
use atoll_core::validate::{AddressPolicy, Family};
use atoll_watch::KeptStore;
use atoll_watch::kept::kept_store;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
use k8s_openapi::jiff::Timestamp;
use kube::Resource;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use serde::Serialize;
use serde::de::DeserializeOwned;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static ALLOCATOR: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// Live heap bytes of the whole process. (The counting allocator adds a reallocation's growth
/// to `bytes_allocated` and its shrinking to `bytes_deallocated`; `bytes_reallocated` is the
/// same change again, and adding it counted every list that grew while decoding twice: about
/// 1 KiB per object measured before 2026-12-06.)
fn live() -> isize {
    let stats = ALLOCATOR.stats();
    stats.bytes_allocated as isize - stats.bytes_deallocated as isize
}

/// `object` as a watch delivers it: server-set metadata and one managed-fields entry.
fn as_served<K: Resource + Serialize>(mut object: K, version: &mut u64) -> anyhow::Result<Vec<u8>> {
    *version += 1;
    let meta = object.meta_mut();
    meta.uid = Some(format!("{:08x}-0000-4000-8000-{:012x}", *version, *version));
    meta.resource_version = Some(version.to_string());
    meta.generation = Some(1);
    meta.creation_timestamp = Some(Time(Timestamp::now()));
    let spec = serde_json::to_value(&object)?;
    object.meta_mut().managed_fields = Some(vec![ManagedFieldsEntry {
        manager: Some("atoll-agent".into()),
        operation: Some("Apply".into()),
        api_version: Some("hub.atoll.dev/v1alpha1".into()),
        time: Some(Time(Timestamp::now())),
        fields_type: Some("FieldsV1".into()),
        fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
            field_set(&spec),
        )),
        subresource: None,
    }]);
    Ok(serde_json::to_vec(&object)?)
}

/// A server-side-apply field set naming every field of `value` (`f:<name>`), as the
/// apiserver records what a manager owns.
fn field_set(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(fields) => serde_json::Value::Object(
            fields
                .iter()
                .filter(|(name, _)| !matches!(name.as_str(), "apiVersion" | "kind"))
                .map(|(name, v)| (format!("f:{name}"), field_set(v)))
                .collect(),
        ),
        _ => serde_json::json!({}),
    }
}

/// A hub copy as the agent held it before its compact forms (up to 8c9fd2d): the full Endpoint type.
#[derive(Clone, Debug, serde::Deserialize)]
struct FullCopy {
    metadata: kube::api::ObjectMeta,
    #[allow(dead_code)] // Held to be measured.
    spec: FullCopySpec,
}

#[derive(Clone, Debug, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
#[allow(dead_code)] // Held to be measured.
struct FullCopySpec {
    cluster: String,
    namespace: String,
    service: String,
    address_type: String,
    endpoints: Vec<k8s_openapi::api::discovery::v1::Endpoint>,
    ports: Vec<k8s_openapi::api::discovery::v1::EndpointPort>,
}

impl Resource for FullCopy {
    type DynamicType = ();
    type Scope = k8s_openapi::NamespaceResourceScope;
    fn kind(_: &()) -> std::borrow::Cow<'_, str> {
        ExportedEndpointSlice::kind(&())
    }
    fn group(_: &()) -> std::borrow::Cow<'_, str> {
        ExportedEndpointSlice::group(&())
    }
    fn version(_: &()) -> std::borrow::Cow<'_, str> {
        ExportedEndpointSlice::version(&())
    }
    fn plural(_: &()) -> std::borrow::Cow<'_, str> {
        ExportedEndpointSlice::plural(&())
    }
    fn meta(&self) -> &kube::api::ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut kube::api::ObjectMeta {
        &mut self.metadata
    }
}

/// How the agent reduced an object before its compact forms (up to 8c9fd2d): managed fields emptied (their
/// list's allocation kept), everything else as decoded.
fn before_compact<K: Resource>(object: &mut K) {
    if let Some(fields) = &mut object.meta_mut().managed_fields {
        fields.clear();
    }
}

/// Decodes `wire` into a store, each object reduced by `reduce`, as a watch does; returns the
/// heap bytes the store holds for them, and keeps the store alive in `keep`.
fn stored<K>(
    wire: &[Vec<u8>],
    reduce: impl Fn(&mut K),
    keep: &mut Vec<Store<K>>,
) -> anyhow::Result<isize>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Send + Sync + 'static,
{
    let before = live();
    let (reader, mut writer) = reflector::store();
    for bytes in wire {
        let mut object: K = serde_json::from_slice(bytes).context("decoding")?;
        reduce(&mut object);
        writer.apply_watcher_event(&Event::Apply(object));
    }
    keep.push(reader);
    Ok(live() - before)
}

/// Decodes `wire` into a store keyed by a hash of each object's name, each object reduced by
/// `reduce`, as the agent's watches of hub objects do; returns the heap bytes the store holds
/// for them, and keeps the store alive in `keep`.
fn kept_hub_objects<K>(
    wire: &[Vec<u8>],
    reduce: impl Fn(&mut K),
    keep: &mut Vec<KeptStore<K>>,
) -> anyhow::Result<isize>
where
    K: Resource + DeserializeOwned,
{
    let before = live();
    let (reader, mut writer) = kept_store::<K>(|o| {
        let meta = o.meta();
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    });
    for bytes in wire {
        let mut object: K = serde_json::from_slice(bytes).context("decoding")?;
        reduce(&mut object);
        writer.apply(&Event::Apply(std::sync::Arc::new(object)));
    }
    keep.push(reader);
    Ok(live() - before)
}

/// Decodes `wire` (MCS EndpointSlices) into a store as the agent's watch of them does: each
/// kept as an `McsSlice`, repeated values shared through one interner (counted: it lives as
/// long as the watch). Returns the heap bytes held; keeps the store alive in `keep`.
fn kept_mcs_slices(
    wire: &[Vec<u8>],
    keep: &mut Vec<(KeptStore<McsSlice>, Interner)>,
) -> anyhow::Result<isize> {
    let before = live();
    let (reader, mut writer) = kept_store::<McsSlice>(|s| (&s.namespace, &s.name));
    let mut interner = Interner::default();
    for bytes in wire {
        let served: ServedSlice = serde_json::from_slice(bytes).context("decoding")?;
        let slice = McsSlice::kept(served, &mut interner);
        writer.apply(&Event::Apply(std::sync::Arc::new(slice)));
    }
    keep.push((reader, interner));
    Ok(live() - before)
}

/// The fleet's objects as the apiservers send them.
struct Wire {
    records: Vec<Vec<u8>>,
    copies: Vec<Vec<u8>>,
    /// The MCS EndpointSlices an importer of everything writes in its own cluster.
    mcs: Vec<Vec<u8>>,
}

fn fleet(size: &str) -> anyhow::Result<Wire> {
    let (clusters, services) = size
        .split_once('x')
        .and_then(|(c, s)| Some((c.parse::<usize>().ok()?, s.parse::<usize>().ok()?)))
        .with_context(|| format!("size {size}: expected CLUSTERSxSERVICES"))?;
    let mut version = 0;
    let (mut records, mut copies) = (Vec::new(), Vec::new());
    // Specs by service, to build what an importer writes.
    let mut by_service: BTreeMap<usize, Vec<(ExportedService, ExportedEndpointSlice)>> =
        BTreeMap::new();
    for c in 0..clusters {
        let cluster = cluster_name(size, c);
        for s in 0..services {
            let name = format!("svc-{s:04}");
            let (r, copy) = (
                record(&cluster, &name),
                copy(&cluster, &name, &addresses(c, s)),
            );
            records.push(as_served(r.clone(), &mut version)?);
            copies.push(as_served(copy.clone(), &mut version)?);
            by_service.entry(s).or_default().push((r, copy));
        }
    }
    let policy = AddressPolicy::default();
    let check = EndpointCheck {
        policy: &policy,
        remote: true,
    };
    let mut mcs = Vec::new();
    for exports in by_service.values() {
        let specs: Vec<_> = exports.iter().map(|(r, _)| &r.spec).collect();
        let merged = atoll_core::merge::merge(&specs).context("merging a service")?;
        for (r, copy) in exports {
            let (slices, _) = mcs_slices(&merged, &r.spec.cluster, &[(copy, Family::V4)], &check);
            for slice in slices {
                mcs.push(as_served(slice, &mut version)?);
            }
        }
    }
    Ok(Wire {
        records,
        copies,
        mcs,
    })
}

/// Heap bytes per object of each store, and of all three per hub object.
struct Measured {
    record: isize,
    copy: isize,
    mcs: isize,
    per_hub_object: isize,
}

/// The three stores as the agent held them before its compact forms (up to 8c9fd2d).
fn measure_before(wire: &Wire) -> anyhow::Result<Measured> {
    let (mut r, mut c, mut m) = (Vec::new(), Vec::new(), Vec::new());
    let records = stored::<ExportedService>(&wire.records, before_compact, &mut r)?;
    let copies = stored::<FullCopy>(&wire.copies, before_compact, &mut c)?;
    let mcs = stored::<EndpointSlice>(&wire.mcs, before_compact, &mut m)?;
    Ok(Measured::of(wire, records, copies, mcs))
}

/// The three stores as the agent holds them now, each an `atoll_watch::KeptStore`: records and
/// copies by `atoll_watch::cached_form` with the trims of `atoll_agent::compact`, MCS slices
/// kept as `atoll_api::mcs_slice::McsSlice`s.
fn measure_now(wire: &Wire) -> anyhow::Result<Measured> {
    use atoll_agent::compact;
    use atoll_watch::cached_form;
    let (mut r, mut c) = (Vec::new(), Vec::new());
    // The importer is a member of its own (no fleet object is in its hub namespace).
    let own = atoll_api::hub::namespace_for("importer");
    let record = |o: &mut ExportedService| compact::record(o, &own);
    let copy = |o: &mut ExportedEndpointSlice| compact::hub_slice(o, &own);
    let records = kept_hub_objects(&wire.records, |o| cached_form(o, &record), &mut r)?;
    let copies = kept_hub_objects(&wire.copies, |o| cached_form(o, &copy), &mut c)?;
    let mut kept = Vec::new();
    let mcs = kept_mcs_slices(&wire.mcs, &mut kept)?;
    Ok(Measured::of(wire, records, copies, mcs))
}

impl Measured {
    fn of(wire: &Wire, records: isize, copies: isize, mcs: isize) -> Self {
        let per = |bytes: isize, n: usize| bytes / n.max(1) as isize;
        Self {
            record: per(records, wire.records.len()),
            copy: per(copies, wire.copies.len()),
            mcs: per(mcs, wire.mcs.len()),
            per_hub_object: per(
                records + copies + mcs,
                wire.records.len() + wire.copies.len(),
            ),
        }
    }
}

/// The agent's target: 2.5 KiB per hub object.
const TARGET: isize = 2560;

/// Objects one member writes in each attack (the importers' record cap).
const ATTACK_OBJECTS: usize = atoll_core::caps::Limits::DEFAULT_RECORDS;

/// What an importer holds of one member writing `ATTACK_OBJECTS` objects of `attack`, through
/// the shipping path: decoded, reduced (`atoll_agent::compact`), weighed and passed or left out
/// by the per-member budget (`atoll_agent::budget::Gate`), kept. Returns (wire bytes written,
/// bytes the budget holds, objects left out, heap held).
fn attacked(attack: Attack, budget_bytes: usize) -> anyhow::Result<(usize, usize, usize, isize)> {
    use atoll_agent::budget::Budget;
    use atoll_agent::compact;
    use atoll_core::budget::Kind;
    use atoll_watch::cached_form;
    let own = atoll_api::hub::namespace_for("importer");
    let budget = Budget::new(budget_bytes, &own);
    let mut version = 0;
    let mut written = 0;
    let held = if attack.records() {
        through_budget(&budget, Kind::Record, &mut written, |i| {
            let wire = as_served(attack.record(i), &mut version)?;
            let mut object: ExportedService = serde_json::from_slice(&wire)?;
            cached_form(&mut object, &|o: &mut ExportedService| {
                compact::record(o, &own)
            });
            Ok((object, wire.len()))
        })?
    } else {
        through_budget(&budget, Kind::Copy, &mut written, |i| {
            let wire = as_served(attack.copy(i), &mut version)?;
            let mut object: ExportedEndpointSlice = serde_json::from_slice(&wire)?;
            cached_form(&mut object, &|o: &mut ExportedEndpointSlice| {
                compact::hub_slice(o, &own)
            });
            Ok((object, wire.len()))
        })?
    };
    let (report, _) = budget.report();
    let member = report.first();
    Ok((
        written,
        member.map_or(0, |m| m.held_bytes),
        member.map_or(0, |m| m.objects_left_out()),
        held,
    ))
}

/// Passes `ATTACK_OBJECTS` objects (the `i`-th decoded and reduced by `object(i)`, with its
/// wire size, added to `written`) through the gate of `kind` into a kept store; returns the heap
/// the store and the budget hold of them.
fn through_budget<K: atoll_agent::budget::Weigh + Send + Sync + 'static>(
    budget: &atoll_agent::budget::Budget,
    kind: atoll_core::budget::Kind,
    written: &mut usize,
    mut object: impl FnMut(usize) -> anyhow::Result<(K, usize)>,
) -> anyhow::Result<isize> {
    let before = live();
    let (reader, mut writer) = kept_store::<K>(atoll_watch::namespace_and_name);
    let (mut gate, _relist) = budget.gate::<K>(kind);
    for i in 0..ATTACK_OBJECTS {
        let (o, wire) = object(i)?;
        *written += wire;
        if let Some(event) = gate.pass(Event::Apply(std::sync::Arc::new(o))) {
            writer.apply(&event);
        }
    }
    let heap = live() - before;
    drop(reader);
    Ok(heap)
}

/// The attacks' table: what one member at every CRD bound costs an importer's agent and its
/// `atoll dns`, beside the per-member budget.
fn member_at_bounds() -> anyhow::Result<()> {
    let budget = atoll_core::caps::Limits::DEFAULT_HUB_BYTES;
    let mib = |b: f64| b / f64::from(1 << 20);
    println!();
    println!(
        "one member at every CRD bound, {ATTACK_OBJECTS} objects each: what an importer's agent holds (budget {:.0} MiB per member, --max-hub-bytes-per-member)",
        mib(budget as f64)
    );
    println!();
    println!(
        "| attack | written (wire) | held by the budget | left out | agent heap held | within budget + 10% |"
    );
    println!("|---|---|---|---|---|---|");
    let mut ok = true;
    for attack in Attack::ALL {
        let (written, held, left_out, heap) = attacked(attack, budget)?;
        let pass = heap as f64 <= budget as f64 * 1.1;
        ok &= pass;
        println!(
            "| {} | {:.0} MiB | {:.1} MiB | {left_out} | {:.1} MiB | {} |",
            attack.describe(),
            mib(written as f64),
            mib(held as f64),
            mib(heap as f64),
            if pass { "PASS" } else { "FAIL" },
        );
    }
    // `atoll dns`: the member at its endpoint-port cap (what the importer writes of it).
    let pairs = atoll_core::caps::Limits::DEFAULT_MEMBER_ENDPOINT_PORTS;
    let (services, endpoints, ports) = (20, 1000, 5);
    let (imports, slices) = headless_import(services, endpoints, ports)?;
    let before = live();
    let zone = atoll_dns::zone::Zone::build(
        &atoll_dns::zone::ZoneConfig::default(),
        &imports.iter().collect::<Vec<_>>(),
        &slices.iter().collect::<Vec<_>>(),
    );
    let heap = live() - before;
    println!();
    println!(
        "atoll dns, the member at its endpoint-port cap ({pairs} pairs: {services} headless services × {endpoints} endpoints × {ports} named ports): zone heap {:.1} MiB",
        mib(heap as f64)
    );
    drop(zone);
    println!(
        "bench-memory (member at bounds): {}",
        if ok {
            "every attack within the budget"
        } else {
            "some attack above the budget"
        }
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let sizes =
        std::env::var("BENCH_SIZES").unwrap_or_else(|_| "10x100,50x200,100x200,250x200".into());
    println!(
        "atoll bench-memory: heap the agent's stores hold per hub object (counting allocator)"
    );
    println!(
        "sizes: Endpoint {} B, ObjectMeta {} B, ExportedEndpointSlice {} B, ExportedService {} B, EndpointSlice {} B",
        std::mem::size_of::<k8s_openapi::api::discovery::v1::Endpoint>(),
        std::mem::size_of::<kube::api::ObjectMeta>(),
        std::mem::size_of::<ExportedEndpointSlice>(),
        std::mem::size_of::<ExportedService>(),
        std::mem::size_of::<EndpointSlice>(),
    );
    println!();
    println!(
        "| size | hub objects | wire JSON record / copy / MCS slice | heap per record / copy / MCS slice, before | now | all stores per hub object, before | now | target ≤ 2.5 KiB |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut ok = true;
    for size in sizes.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let wire = fleet(size)?;
        let before = measure_before(&wire)?;
        let now = measure_now(&wire)?;
        let pass = now.per_hub_object <= TARGET;
        ok &= pass;
        let average = |w: &[Vec<u8>]| w.iter().map(Vec::len).sum::<usize>() / w.len().max(1);
        let kib = |b: isize| format!("{b} B ({:.2} KiB)", b as f64 / 1024.0);
        println!(
            "| {size} | {} | {} / {} / {} B | {} / {} / {} B | {} / {} / {} B | {} | {} | {} |",
            wire.records.len() + wire.copies.len(),
            average(&wire.records),
            average(&wire.copies),
            average(&wire.mcs),
            before.record,
            before.copy,
            before.mcs,
            now.record,
            now.copy,
            now.mcs,
            kib(before.per_hub_object),
            kib(now.per_hub_object),
            if pass { "PASS" } else { "FAIL" },
        );
    }
    println!();
    println!(
        "bench-memory: {}",
        if ok {
            "every size within target"
        } else {
            "some size above target"
        }
    );
    if std::env::var("BENCH_BOUNDS").as_deref() != Ok("0") {
        member_at_bounds()?;
    }
    Ok(())
}
