// Helpers here run only inside tests, where a panic is the failure report.
#![allow(clippy::unwrap_used)]

//! The zone source against a fake apiserver on 127.0.0.1 that refuses every list (403) until
//! told otherwise: meanwhile DNS answers SERVFAIL, the readiness names both waiting watches and
//! the source keeps retrying instead of returning; once lists succeed the zone is served.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use atoll_dns::answer::answer;
use atoll_dns::metrics::DnsMetrics;
use atoll_dns::source::{FIRST_SNAPSHOT, MCS_ENDPOINT_SLICES, SERVICE_IMPORTS};
use atoll_dns::wire::rcode;
use atoll_dns::zone::{SliceTrust, ZoneConfig};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use common::{eventually, query};
use serde_json::json;

#[derive(Default)]
struct Apiserver {
    /// Whether lists succeed; until then every request gets 403.
    allow: AtomicBool,
    refused_imports: AtomicUsize,
    refused_slices: AtomicUsize,
    /// Extra ServiceImports and the MCS EndpointSlices the lists return.
    imports: Vec<serde_json::Value>,
    slices: Vec<serde_json::Value>,
}

async fn handle(State(api): State<Arc<Apiserver>>, request: Request) -> Response {
    let path = request.uri().path().to_owned();
    let watch = request.uri().query().unwrap_or("").contains("watch=true");
    let imports = path.ends_with("/serviceimports");
    if !api.allow.load(Ordering::SeqCst) {
        let counter = if imports {
            &api.refused_imports
        } else {
            &api.refused_slices
        };
        counter.fetch_add(1, Ordering::SeqCst);
        let status = json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "reason": "Forbidden", "code": 403,
            "message": format!("{path} is forbidden")});
        return json_response(StatusCode::FORBIDDEN, &status);
    }
    if watch {
        // A watch that stays open with no events, like an apiserver's with nothing changing.
        std::future::pending::<()>().await;
    }
    let items = if imports {
        let mut items = vec![
            json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": "hello", "namespace": "demo", "resourceVersion": "5"},
            "spec": {"type": "ClusterSetIP", "ips": ["10.96.0.10"],
                "ports": [{"name": "tcp", "protocol": "TCP", "port": 42}]}}),
        ];
        items.extend(api.imports.iter().cloned());
        items
    } else {
        api.slices.clone()
    };
    let list = json!({"apiVersion": "v1", "kind": "List",
        "metadata": {"resourceVersion": "7"}, "items": items});
    json_response(StatusCode::OK, &list)
}

fn json_response(status: StatusCode, body: &serde_json::Value) -> Response {
    (
        status,
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn rcode_of(zone: &atoll_dns::SharedZone, name: &str) -> u8 {
    let mut out = Vec::new();
    answer(&zone.load(), &query(name), false, &mut out);
    out[3] & 0x0f
}

/// Serves `api` on 127.0.0.1 and returns a client of it.
async fn client_of(api: Arc<Apiserver>) -> kube::Client {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(handle).with_state(api);
    tokio::spawn(async move { axum::serve(listener, app).await });
    kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap()
}

/// An MCS EndpointSlice of `demo/web` from cluster `cluster` with one ready `address`, managed
/// by `manager` (none: no managed-by label).
fn mcs_slice(name: &str, cluster: &str, address: &str, manager: Option<&str>) -> serde_json::Value {
    let mut labels = json!({"multicluster.kubernetes.io/service-name": "web",
        "multicluster.kubernetes.io/source-cluster": cluster});
    if let Some(manager) = manager {
        labels["endpointslice.kubernetes.io/managed-by"] = json!(manager);
    }
    json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "demo", "resourceVersion": "6", "labels": labels},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": true}}],
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]})
}

/// The A records `zone` answers for `name`.
fn addresses_of(zone: &atoll_dns::SharedZone, name: &str) -> Vec<String> {
    let mut out = Vec::new();
    answer(&zone.load(), &query(name), true, &mut out);
    let mut found: Vec<String> = hickory_proto::op::Message::from_vec(&out)
        .unwrap()
        .answers
        .iter()
        .map(|r| r.data.to_string())
        .collect();
    found.sort();
    found
}

#[tokio::test]
async fn mcs_slices_of_untrusted_controllers_are_not_served_and_are_counted() {
    let api = Arc::new(Apiserver {
        allow: AtomicBool::new(true),
        imports: vec![
            json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": "demo", "resourceVersion": "5"},
            "spec": {"type": "Headless", "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}]}}),
        ],
        slices: vec![
            mcs_slice(
                "web-c1",
                "c1",
                "10.1.0.1",
                Some("atoll.multicluster.x-k8s.io"),
            ),
            // Made by hand with only the two MCS labels, as anyone allowed to create an
            // EndpointSlice in the namespace could.
            mcs_slice("forged", "c2", "10.6.6.6", None),
            mcs_slice(
                "other-mcs",
                "c3",
                "10.3.0.1",
                Some("mcs-controller.example.dev"),
            ),
        ],
        ..Apiserver::default()
    });
    let web = "web.demo.svc.clusterset.local.";
    for (trust, want, untrusted) in [
        (SliceTrust::default(), vec!["10.1.0.1"], 2),
        (
            SliceTrust::with_managers(["mcs-controller.example.dev".to_owned()]),
            vec!["10.1.0.1", "10.3.0.1"],
            1,
        ),
    ] {
        let config = ZoneConfig::default();
        let zone = atoll_dns::initial_zone(&config);
        let readiness = atoll_dns::source::readiness();
        let metrics = DnsMetrics::default();
        let source = tokio::spawn(atoll_dns::source::run(
            client_of(api.clone()).await,
            config,
            trust,
            zone.clone(),
            metrics.clone(),
            readiness.clone(),
        ));
        assert!(eventually(Duration::from_secs(30), || readiness.is_ready()).await);
        assert_eq!(addresses_of(&zone, web), want);
        assert_eq!(metrics.untrusted_slices.get(), untrusted);
        source.abort();
    }
}

#[tokio::test]
async fn the_zone_stays_servfail_and_not_ready_while_lists_are_refused() {
    let api = Arc::new(Apiserver::default());
    let client = client_of(api.clone()).await;
    let config = ZoneConfig::default();
    let zone = atoll_dns::initial_zone(&config);
    let readiness = atoll_dns::source::readiness();
    let source = tokio::spawn(atoll_dns::source::run(
        client,
        config,
        SliceTrust::default(),
        zone.clone(),
        DnsMetrics::default(),
        readiness.clone(),
    ));

    // Both watches try and are refused; nothing is ready and DNS says SERVFAIL.
    assert!(
        eventually(Duration::from_secs(10), || {
            api.refused_imports.load(Ordering::SeqCst) >= 2
                && api.refused_slices.load(Ordering::SeqCst) >= 2
        })
        .await,
        "both watches retry their refused lists"
    );
    assert_eq!(
        readiness.waiting(),
        vec![SERVICE_IMPORTS, MCS_ENDPOINT_SLICES, FIRST_SNAPSHOT]
    );
    assert!(!readiness.is_ready());
    let hello = "hello.demo.svc.clusterset.local.";
    assert_eq!(rcode_of(&zone, hello), rcode::SERVFAIL);
    assert!(
        !source.is_finished(),
        "the source waits, it does not give up"
    );

    // Once lists succeed, the zone is served and nothing is awaited any more.
    api.allow.store(true, Ordering::SeqCst);
    assert!(
        eventually(Duration::from_secs(60), || readiness.is_ready()).await,
        "still waiting for {:?}",
        readiness.waiting()
    );
    assert_eq!(rcode_of(&zone, hello), rcode::NOERROR);
    assert_eq!(
        rcode_of(&zone, "nope.demo.svc.clusterset.local."),
        rcode::NXDOMAIN
    );
    assert!(!source.is_finished());
    source.abort();
}
