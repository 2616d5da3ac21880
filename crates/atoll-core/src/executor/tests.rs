//! The executor against a recording apiserver: the exact calls, their order, and the outcome
//! each answer makes.

use std::cell::RefCell;
use std::collections::BTreeMap;

use atoll_api::hub::ExportedService;
use atoll_api::keys::{ObjectKey, ServiceKey};
use atoll_api::labels;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;
use crate::announce::Announcement;
use crate::events::About;
use crate::liveness::Claim;

/// Records every call as `verb name`; answers with the refusal scripted for it (by that text),
/// and never answers the call named `hold` (an apiserver that hangs on it).
#[derive(Default)]
struct Recorder {
    calls: RefCell<Vec<String>>,
    refuse: BTreeMap<String, u16>,
    hold: Option<String>,
}

impl Recorder {
    fn refusing(refuse: &[(&str, u16)]) -> Self {
        Self {
            refuse: refuse.iter().map(|(c, s)| ((*c).to_owned(), *s)).collect(),
            ..Self::default()
        }
    }

    fn calls(&self) -> Vec<String> {
        self.calls.borrow().clone()
    }

    fn position(&self, call: &str) -> usize {
        let calls = self.calls();
        calls
            .iter()
            .position(|c| c == call)
            .unwrap_or_else(|| panic!("{call} never called: {calls:?}"))
    }
}

fn name(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn label(write: Write<'_>) -> String {
    match write {
        Write::Keep(_) => "keep".into(),
        Write::Renew(..) => "renew".into(),
        Write::Record(r) => format!("record {}", name(&r.metadata)),
        Write::Copy(c) => format!("copy {}", name(&c.metadata)),
        Write::DeleteRecord(k) => format!("delete-record {}", k.name),
        Write::DeleteCopy(k) => format!("delete-copy {}", k.name),
        Write::Profile(p) => format!("profile {}", p.key.name),
        Write::Derived(s) => format!("derived {}", name(&s.metadata)),
        Write::Import(i) => format!("import {}", name(&i.object.metadata)),
        Write::Slice(s) => format!("slice {}", name(&s.metadata)),
        Write::DeleteImport(k) => format!("delete-import {}", k.name),
        Write::DeleteDerived(k) => format!("delete-derived {}", k.name),
        Write::DeleteSlice(k) => format!("delete-slice {}", k.name),
        Write::DeleteSlices(c) => format!("collection {}", c.source_clusters.join(",")),
        Write::ImportStatus(s) => format!("import-status {}", s.key.name),
        Write::ExportStatus(s) => format!("export-status {}", s.key.name),
    }
}

impl Apiserver for Recorder {
    async fn write(&self, write: Write<'_>) -> Result<(), Refusal> {
        let call = label(write);
        self.calls.borrow_mut().push(call.clone());
        if self.hold.as_ref() == Some(&call) {
            std::future::pending::<()>().await;
        }
        match self.refuse.get(&call) {
            Some(code) => Err(Refusal {
                code: *code,
                message: format!("refused {code}"),
            }),
            None => Ok(()),
        }
    }

    async fn notice(&self, notice: Notice<'_>) -> bool {
        let call = match notice {
            Notice::Event(event) => match &event.about {
                About::Export { key, .. } => format!("event-export {}", key.name),
                About::Import(key) => format!("event-import {}", key.name),
                About::Member(related) => format!(
                    "event-member {}",
                    related.as_ref().map_or("", |(_, k)| k.name.as_str())
                ),
            },
            Notice::CollectionRefused(c) => format!("fallback {}", c.source_clusters.join(",")),
        };
        self.calls.borrow_mut().push(call.clone());
        !self.refuse.contains_key(&call)
    }
}

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some("demo".into()),
        ..ObjectMeta::default()
    }
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("demo", name)
}

fn step(plan: Plan) -> Step {
    Step::carrying(plan)
}

/// The hub record member `c1` publishes for its export of `demo/<name>`.
fn record(name: &str) -> ExportedService {
    let mut export = atoll_api::v1beta1::ServiceExport::new(name, None);
    export.metadata.namespace = Some("demo".into());
    export.metadata.creation_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        ));
    let service = Service {
        metadata: meta(name),
        ..Service::default()
    };
    crate::export::record("c1", &export, &service)
}

fn import(name: &str) -> ImportApply {
    let mut object = atoll_api::v1beta1::ServiceImport::new(name, None);
    object.metadata.namespace = Some("demo".into());
    ImportApply {
        object,
        first_export: None,
    }
}

fn import_status(name: &str) -> ImportStatus {
    ImportStatus {
        key: key(name),
        status: Default::default(),
        announcements: vec![announcement("SourceClusterRestored")],
    }
}

fn announcement(reason: &str) -> Announcement {
    Announcement {
        warning: false,
        reason: reason.into(),
        note: format!("{reason} happened"),
        action: "Import",
    }
}

fn slice(name: &str) -> EndpointSlice {
    EndpointSlice {
        metadata: meta(name),
        address_type: "IPv4".into(),
        endpoints: Vec::new(),
        ports: None,
    }
}

/// A renewal of beat `beat` with claim epoch 1.
fn renewal(beat: u64) -> Renewal {
    Renewal {
        claim: Claim {
            epoch: 1,
            digest: "d".into(),
        },
        beat,
    }
}

fn run(api: &Recorder, step: &Step) -> Outcome {
    futures::executor::block_on(execute(api, step))
}

#[test]
fn the_kept_decisions_go_first_the_renewal_after_the_hub_writes_and_statuses_after_the_data_plane()
{
    let mut plan = Plan::default();
    let web = record("web");
    let record_call = format!("record {}", name(&web.metadata));
    plan.hub.apply_records.push(web);
    plan.member.apply_imports.push(import("web"));
    plan.member.apply_slices.push(slice("web-c2"));
    plan.member.delete_slices.push(key("web-c3"));
    plan.member.import_statuses.push(import_status("web"));
    let mut step = step(plan);
    step.keep = Some(Persisted::default());
    step.renewal = Some(renewal(7));
    let api = Recorder::default();
    let outcome = run(&api, &step);
    assert_eq!(api.position("keep"), 0, "{:?}", api.calls());
    assert!(api.position(&record_call) < api.position("renew"));
    for data_plane in ["import web", "slice web-c2", "delete-slice web-c3"] {
        assert!(
            api.position(data_plane) < api.position("import-status web"),
            "{data_plane} after the status: {:?}",
            api.calls()
        );
    }
    assert_eq!(
        api.position("event-import web"),
        api.position("import-status web") + 1
    );
    assert_eq!(outcome.kept, Some(Ok(())));
    assert_eq!(outcome.renewal, Some(true));
    assert_eq!(outcome.errors, 0);
}

#[test]
fn a_failed_import_gets_no_status_and_counts_once() {
    let mut plan = Plan::default();
    plan.member.apply_imports.push(import("web"));
    plan.member.apply_imports.push(import("db"));
    plan.member.import_statuses.push(import_status("web"));
    plan.member.import_statuses.push(import_status("db"));
    let api = Recorder::refusing(&[("import web", 500)]);
    let outcome = run(&api, &step(plan));
    let calls = api.calls();
    assert!(
        !calls.contains(&"import-status web".to_owned()),
        "{calls:?}"
    );
    assert!(calls.contains(&"import-status db".to_owned()), "{calls:?}");
    assert!(!calls.contains(&"event-import web".to_owned()), "{calls:?}");
    assert_eq!(outcome.errors, 1);
}

#[test]
fn only_a_forbidden_or_disallowed_collection_falls_back_to_named_deletes() {
    let collection = |cluster: &str| SliceCollection {
        namespace: "demo".into(),
        source_clusters: vec![cluster.into()],
        slices: vec![
            key(&format!("web-{cluster}")),
            key(&format!("db-{cluster}")),
        ],
    };
    for (code, fallback, errors) in [
        (403, true, 0),
        (405, true, 0),
        (500, false, 1),
        (0, false, 1),
    ] {
        let mut plan = Plan::default();
        plan.member.delete_slice_collections.push(collection("c9"));
        let api = Recorder::refusing(&[("collection c9", code)]);
        let outcome = run(&api, &step(plan));
        let calls = api.calls();
        assert_eq!(
            calls.contains(&"delete-slice web-c9".to_owned()),
            fallback,
            "{code}: {calls:?}"
        );
        assert_eq!(
            calls.contains(&"delete-slice db-c9".to_owned()),
            fallback,
            "{code}: {calls:?}"
        );
        assert_eq!(outcome.errors, errors, "{code}");
        assert_eq!(
            calls.contains(&"fallback c9".to_owned()),
            fallback,
            "{code}: {calls:?}"
        );
    }
    // A named delete of the fallback that fails counts.
    let mut plan = Plan::default();
    plan.member.delete_slice_collections.push(collection("c9"));
    let api = Recorder::refusing(&[("collection c9", 403), ("delete-slice db-c9", 503)]);
    assert_eq!(run(&api, &step(plan)).errors, 1);
}

#[test]
fn answers_become_the_feedback_the_next_plan_needs() {
    let mut plan = Plan::default();
    let web_record = record("web");
    let record_name = name(&web_record.metadata);
    plan.hub.apply_records.push(web_record);
    plan.hub.delete_records.push(key("c1-old"));
    plan.member.apply_derived.push(Service {
        metadata: ObjectMeta {
            labels: Some([(labels::SERVICE_NAME.to_owned(), "web".to_owned())].into()),
            ..meta("derived-web")
        },
        ..Service::default()
    });
    let mut step = step(plan);
    step.renewal = Some(renewal(1));
    let api = Recorder::refusing(&[
        (format!("record {record_name}").as_str(), 422),
        ("delete-record c1-old", 409),
        ("derived derived-web", 422),
        ("renew", 0),
    ]);
    let outcome = run(&api, &step);
    let web = ServiceKey::new("demo", "web");
    assert_eq!(outcome.feedback.publish_failures[&web].code, 422);
    assert_eq!(outcome.feedback.derived_failures[&web].code, 422);
    assert_eq!(
        outcome.hub,
        vec![
            HubWriteResult {
                name: record_claim_name(&record_name),
                apply: true,
                answer: Answer::Refused,
            },
            HubWriteResult {
                name: record_claim_name("c1-old"),
                apply: false,
                answer: Answer::Unanswered,
            },
        ]
    );
    assert_eq!(outcome.renewal, Some(false));
    assert_eq!(outcome.errors, 3);
}

#[test]
fn a_refused_keep_is_reported_and_stops_nothing() {
    let mut plan = Plan::default();
    plan.member.delete_slices.push(key("web-c3"));
    let mut step = step(plan);
    step.keep = Some(Persisted::default());
    let api = Recorder::refusing(&[("keep", 403)]);
    let outcome = run(&api, &step);
    assert_eq!(outcome.kept, Some(Err("refused 403".to_owned())));
    assert!(api.calls().contains(&"delete-slice web-c3".to_owned()));
}

#[test]
fn events_go_before_what_they_announce() {
    let mut plan = Plan::default();
    plan.export_statuses.push(ExportStatus {
        key: key("web"),
        uid: None,
        conditions: Vec::new(),
        announcements: vec![announcement("Exported")],
    });
    plan.member.withdrawn_imports.push((
        key("gone"),
        Announcement {
            warning: true,
            reason: "SourceClustersWithdrawn".into(),
            note: "every source cluster withdrawn".into(),
            action: "Withdraw",
        },
    ));
    plan.member.delete_imports.push(key("gone"));
    let api = Recorder::default();
    let outcome = run(&api, &step(plan));
    assert!(api.position("event-export web") < api.position("export-status web"));
    assert!(api.position("event-import gone") < api.position("delete-import gone"));
    assert_eq!(outcome.errors, 0);
}

/// Runs `step` until it can go no further (some call hangs); returns whether it finished.
fn run_until_stuck(api: &Recorder, step: &Step) -> bool {
    let mut execution = std::pin::pin!(execute(api, step));
    futures::executor::block_on(async { futures::poll!(&mut execution).is_ready() })
}

#[test]
fn the_renewal_does_not_wait_for_the_members_writes_and_statuses_wait_for_the_data_plane() {
    // The recorder answers at once, so the order tests above cannot tell "after" from "behind":
    // here one slice deletion never answers (a member apiserver deleting thousands).
    let mut plan = Plan::default();
    plan.hub.apply_records.push(record("web"));
    plan.member.delete_slices.push(key("web-c3"));
    plan.member.import_statuses.push(import_status("web"));
    let mut step = step(plan);
    step.renewal = Some(renewal(2));
    let api = Recorder {
        hold: Some("delete-slice web-c3".into()),
        ..Recorder::default()
    };
    assert!(!run_until_stuck(&api, &step));
    let calls = api.calls();
    assert!(calls.contains(&"renew".to_owned()), "{calls:?}");
    assert!(
        !calls.contains(&"import-status web".to_owned()),
        "{calls:?}"
    );
}

#[test]
fn nothing_goes_before_the_kept_decisions_are_answered() {
    let mut plan = Plan::default();
    plan.hub.apply_records.push(record("web"));
    plan.member.delete_slices.push(key("web-c3"));
    let mut step = step(plan);
    step.keep = Some(Persisted::default());
    let api = Recorder {
        hold: Some("keep".into()),
        ..Recorder::default()
    };
    assert!(!run_until_stuck(&api, &step));
    assert_eq!(api.calls(), ["keep"]);
}

#[test]
fn refused_events_come_back_and_are_published_again_after_the_writes() {
    let mut plan = Plan::default();
    plan.member.apply_imports.push(import("web"));
    plan.member.import_statuses.push(import_status("web"));
    let api = Recorder::refusing(&[("event-import web", 429)]);
    let outcome = run(&api, &step(plan));
    assert!(outcome.events_published);
    assert_eq!(outcome.errors, 0, "an Event is no write of the plan");
    let [refused] = outcome.unpublished.as_slice() else {
        panic!("{:?}", outcome.unpublished);
    };
    assert_eq!(refused.about, About::Import(key("web")));
    // Carried by a later step: published after its writes; this time it goes.
    let mut plan = Plan::default();
    plan.member.apply_slices.push(slice("db-c2"));
    let mut again = step(plan);
    again.events_again = outcome.unpublished.clone();
    let api = Recorder::default();
    let outcome = run(&api, &again);
    assert_eq!(api.calls(), ["slice db-c2", "event-import web"]);
    assert!(outcome.events_published && outcome.unpublished.is_empty());
}

#[test]
fn the_last_refusal_is_what_the_heartbeat_shows_and_unanswered_writes_are_counted() {
    let mut plan = Plan::default();
    plan.member.apply_imports.push(import("web"));
    plan.member.apply_slices.push(slice("web-c2"));
    let api = Recorder::refusing(&[("import web", 403), ("slice web-c2", 503)]);
    let outcome = run(&api, &step(plan));
    assert_eq!((outcome.writes, outcome.unanswered), (2, 1));
    let last = outcome.last_error.unwrap_or_default();
    assert!(
        last == "Import: refused 403" || last == "Slice: refused 503",
        "{last}"
    );
}
