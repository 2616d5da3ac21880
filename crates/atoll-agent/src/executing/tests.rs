//! The writer at the level of HTTP requests, against a mock apiserver that records every
//! request and answers as each test scripts: which request each call of the executor becomes,
//! in which order, the fallback of a refused collection, and the fence (no request at all from
//! a replica that does not lead).

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use atoll_api::keys::ObjectKey;
use atoll_core::liveness::{Claim, Persisted};
use atoll_core::plan::{ImportStatus, Plan, SliceCollection};
use atoll_core::reconciler::{Renewal, Step};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Client;
use kube::client::Body;
use kube::runtime::events::{Recorder, Reporter};

use super::execute;
use crate::events::Announcer;
use crate::fence::Fence;
use crate::writer::{Context, Targets, WriteCounter};

/// Every request as `METHOD path?query`; the answer to each decided by `status_of`.
#[derive(Clone)]
struct MockApiserver {
    requests: Arc<Mutex<Vec<String>>>,
}

impl MockApiserver {
    /// A client whose requests this records; `status_of` gives each request's HTTP status.
    fn client(status_of: fn(&str) -> u16) -> (Self, Client) {
        let requests: Arc<Mutex<Vec<String>>> = Arc::default();
        let log = requests.clone();
        let service = tower::service_fn(move |request: http::Request<Body>| {
            let log = log.clone();
            async move {
                let line = format!(
                    "{} {}",
                    request.method(),
                    request.uri().path_and_query().map_or("", |p| p.as_str())
                );
                let status = status_of(&line);
                let body = request
                    .into_body()
                    .collect_bytes()
                    .await
                    .map(|b| b.to_vec())
                    .unwrap_or_default();
                let answer = answer(&line, status, body);
                if let Ok(mut log) = log.lock() {
                    log.push(line);
                }
                Ok::<_, Infallible>(answer)
            }
        });
        (Self { requests }, Client::new(service, "default"))
    }

    fn requests(&self) -> Vec<String> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// The requests that are not Events (published on the side).
    fn writes(&self) -> Vec<String> {
        self.requests()
            .into_iter()
            .filter(|r| !r.contains("/events"))
            .collect()
    }

    fn position(&self, fragment: &str) -> usize {
        let writes = self.writes();
        writes
            .iter()
            .position(|r| r.contains(fragment))
            .unwrap_or_else(|| panic!("no request with {fragment}: {writes:#?}"))
    }
}

/// What the mock answers: a Status for deletes and failures, the applied object for applies (a
/// status apply gets a whole ServiceImport: the client reads one back).
fn answer(line: &str, status: u16, body: Vec<u8>) -> http::Response<Body> {
    let json = if status >= 300 {
        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": "scripted refusal", "reason": "Forbidden", "code": status})
        .to_string()
        .into_bytes()
    } else if line.starts_with("DELETE") {
        br#"{"kind":"Status","apiVersion":"v1","status":"Success"}"#.to_vec()
    } else if line.contains("/status?") {
        br#"{"apiVersion":"multicluster.x-k8s.io/v1beta1","kind":"ServiceImport","metadata":{"name":"web","namespace":"demo"},"spec":{"ports":[],"type":"ClusterSetIP"}}"#.to_vec()
    } else {
        body
    };
    let mut response = http::Response::new(Body::from(json));
    *response.status_mut() = http::StatusCode::from_u16(status).unwrap_or_default();
    response.headers_mut().insert(
        "content-type",
        http::HeaderValue::from_static("application/json"),
    );
    response
}

fn writing_as(client: &Client, fence: Fence) -> Context {
    let metrics = crate::metrics::Metrics::default();
    Context {
        writes: WriteCounter::new(metrics.writes.clone()),
        metrics,
        announcer: Announcer {
            recorder: Recorder::new(
                client.clone(),
                Reporter {
                    controller: "atoll-agent".into(),
                    instance: None,
                },
            ),
            fence: fence.clone(),
        },
        fence,
    }
}

fn targets() -> Targets {
    Targets {
        cluster_id: "c1".into(),
        interval: Duration::from_secs(2),
        grace: Duration::from_secs(12),
        kept: ObjectKey::new("atoll-system", "atoll-kept"),
    }
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("demo", name)
}

fn step(plan: Plan) -> Step {
    Step::carrying(plan)
}

fn slice(name: &str) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("demo".into()),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: Vec::new(),
        ports: None,
    }
}

fn collection() -> SliceCollection {
    SliceCollection {
        namespace: "demo".into(),
        source_clusters: vec!["c8".into(), "c9".into()],
        slices: vec![key("web-c8"), key("web-c9")],
    }
}

fn everything() -> Step {
    let mut plan = Plan::default();
    plan.member.apply_slices.push(slice("web-c2"));
    plan.member.delete_slices.push(key("web-c3"));
    plan.member.delete_slice_collections.push(collection());
    plan.member.import_statuses.push(ImportStatus {
        key: key("web"),
        status: Default::default(),
        announcements: Vec::new(),
    });
    let mut step = step(plan);
    step.keep = Some(Persisted::default());
    step.renewal = Some(Renewal {
        claim: Claim {
            epoch: 1,
            digest: "d".into(),
        },
        beat: 3,
    });
    step
}

#[tokio::test]
async fn each_write_is_the_request_it_should_be_in_the_executors_order() {
    let (api, client) = MockApiserver::client(|_| 200);
    let context = writing_as(&client, Fence::always(Duration::from_secs(5)));
    let outcome = execute(&client, &client, &everything(), &targets(), &context).await;
    assert_eq!(outcome.errors, 0, "{:#?}", api.requests());
    assert_eq!(outcome.kept, Some(Ok(())));
    assert_eq!(outcome.renewal, Some(true));
    let keep = api.position("PATCH /api/v1/namespaces/atoll-system/configmaps/atoll-kept?");
    assert_eq!(keep, 0, "the kept decisions first");
    api.position("PATCH /apis/coordination.k8s.io/v1/namespaces/atoll-c1/leases/");
    let applied =
        api.position("PATCH /apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-c2?");
    let deleted =
        api.position("DELETE /apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-c3");
    let collected = api.position(
        "DELETE /apis/discovery.k8s.io/v1/namespaces/demo/endpointslices?&labelSelector=",
    );
    let status = api.position(
        "PATCH /apis/multicluster.x-k8s.io/v1beta1/namespaces/demo/serviceimports/web/status?",
    );
    for data_plane in [applied, deleted, collected] {
        assert!(data_plane < status, "{:#?}", api.writes());
    }
    assert!(
        api.writes()[collected].contains("source-cluster+in+%28c8%2Cc9%29"),
        "{}",
        api.writes()[collected]
    );
    assert!(
        api.writes()[applied].contains("fieldManager=atoll-agent")
            && api.writes()[applied].contains("force=true"),
        "{}",
        api.writes()[applied]
    );
}

#[tokio::test]
async fn a_forbidden_collection_becomes_named_deletes_and_a_failing_one_does_not() {
    let (api, client) = MockApiserver::client(|line| {
        if line.contains("endpointslices?&labelSelector") {
            403
        } else {
            200
        }
    });
    let context = writing_as(&client, Fence::always(Duration::from_secs(5)));
    let outcome = execute(&client, &client, &everything(), &targets(), &context).await;
    assert_eq!(outcome.errors, 0, "{:#?}", api.writes());
    api.position("DELETE /apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-c8");
    api.position("DELETE /apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-c9");

    let (api, client) = MockApiserver::client(|line| {
        if line.contains("endpointslices?&labelSelector") {
            503
        } else {
            200
        }
    });
    let context = writing_as(&client, Fence::always(Duration::from_secs(5)));
    let outcome = execute(&client, &client, &everything(), &targets(), &context).await;
    assert_eq!(outcome.errors, 1, "{:#?}", api.writes());
    assert!(
        !api.writes()
            .iter()
            .any(|r| r.contains("endpointslices/web-c8")),
        "{:#?}",
        api.writes()
    );
}

#[tokio::test]
async fn a_replica_that_does_not_lead_sends_nothing() {
    let (api, client) = MockApiserver::client(|_| 200);
    let context = writing_as(&client, Fence::elected(Duration::from_secs(5)));
    let outcome = execute(&client, &client, &everything(), &targets(), &context).await;
    assert_eq!(api.requests(), Vec::<String>::new());
    assert!(matches!(outcome.kept, Some(Err(_))));
    assert_eq!(outcome.renewal, Some(false));
    // The slice, its deletion, the collection; the import's status.
    assert_eq!(outcome.errors, 4);
}

#[tokio::test]
async fn an_object_already_gone_is_deleted() {
    let (api, client) =
        MockApiserver::client(|line| if line.starts_with("DELETE") { 404 } else { 200 });
    let context = writing_as(&client, Fence::always(Duration::from_secs(5)));
    let mut plan = Plan::default();
    plan.member.delete_slices.push(key("web-c3"));
    let outcome = execute(&client, &client, &step(plan), &targets(), &context).await;
    assert_eq!(outcome.errors, 0, "{:#?}", api.writes());
}
