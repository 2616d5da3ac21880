//! `make bench-deletes`: how fast a member's apiserver deletes the MCS EndpointSlices of withdrawn
//! clusters, by the ways the writer can ask. A regional outage is bounded by this rate, not by
//! planning: a third of a 100×200 fleet is 6,600 slices to delete in the importer, and the
//! outage must cost at most the grace + 5 s.
//!
//! In a namespace of the third member (`c3`, an importer of the local ClusterSet), for each way
//! it creates `BENCH_SLICES` slices (default 3,000) labelled as Atoll's MCS slices of
//! `BENCH_SOURCES` source clusters, then deletes them all and prints slices per second:
//! * named deletes, 16 / 32 / 64 in flight;
//! * collections of 50 slices (one source cluster's, by label), 32 in flight;
//! * one collection per source cluster, all at once.

use std::time::Instant;

use anyhow::Context;
use atoll_api::labels;
use atoll_bench::env_or;
use atoll_testing::ClusterSet;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DeleteParams, ListParams, PostParams};

/// What the importer must reach to take a third of a 100×200 fleet (6,600 slices) out within
/// the 5 s past the grace the regional-outage issue allows.
const TARGET_PER_SECOND: f64 = 1_320.0;

fn slice(index: usize, sources: usize) -> EndpointSlice {
    let source = format!("dead-{:03}", index % sources);
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("svc-{index:05}-{source}")),
            labels: Some(
                [
                    (labels::SOURCE_CLUSTER.to_owned(), source),
                    (
                        "endpointslice.kubernetes.io/managed-by".to_owned(),
                        "bench-deletes".to_owned(),
                    ),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".into(),
        endpoints: (0..10)
            .map(|e| Endpoint {
                addresses: vec![format!("10.{}.{}.{e}", index / 250, index % 250)],
                ..Endpoint::default()
            })
            .collect(),
        ports: None,
    }
}

async fn create_all(api: &Api<EndpointSlice>, n: usize, sources: usize) -> anyhow::Result<()> {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move { api.create(&PostParams::default(), &slice(i, sources)).await }
        })
        .buffer_unordered(64)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("creating the slices")
}

async fn timed(
    way: &str,
    api: &Api<EndpointSlice>,
    n: usize,
    sources: usize,
    delete: impl AsyncFnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    create_all(api, n, sources).await?;
    let started = Instant::now();
    delete().await?;
    let left = api
        .list_metadata(
            &ListParams::default().labels("endpointslice.kubernetes.io/managed-by=bench-deletes"),
        )
        .await?
        .items
        .len();
    let seconds = started.elapsed().as_secs_f64();
    let rate = (n - left) as f64 / seconds;
    println!(
        "  {way:<44} {n:>6} slices in {seconds:>6.2} s: {rate:>7.0}/s (target >= {TARGET_PER_SECOND:.0}/s){}",
        if left > 0 {
            format!(", {left} left")
        } else {
            String::new()
        }
    );
    Ok(())
}

async fn named(
    api: &Api<EndpointSlice>,
    n: usize,
    sources: usize,
    in_flight: usize,
) -> anyhow::Result<()> {
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                let name = slice(i, sources).metadata.name.unwrap_or_default();
                api.delete(&name, &DeleteParams::background()).await
            }
        })
        .buffer_unordered(in_flight)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("named deletes")
}

async fn collections(
    api: &Api<EndpointSlice>,
    selectors: Vec<String>,
    in_flight: usize,
) -> anyhow::Result<()> {
    futures::stream::iter(selectors)
        .map(|selector| {
            let api = api.clone();
            async move {
                api.delete_collection(
                    &DeleteParams::background(),
                    &ListParams::default().labels(&selector),
                )
                .await
            }
        })
        .buffer_unordered(in_flight)
        .try_for_each(|_| async { Ok(()) })
        .await
        .context("collections")
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = env_or("BENCH_SLICES", 3_000);
    let set = ClusterSet::from_env().await?;
    let member = set
        .members
        .get(2)
        .context("the local ClusterSet has no third member")?;
    let ns = set
        .namespace_in("bench-deletes", std::slice::from_ref(member))
        .await?;
    let api: Api<EndpointSlice> = Api::namespaced(member.client.clone(), &ns.name);
    println!(
        "atoll bench-deletes: MCS slices deleted by {} ({n} a way)",
        member.context
    );

    for in_flight in [16, 32, 64] {
        timed(
            &format!("named, {in_flight} in flight"),
            &api,
            n,
            100,
            async || named(&api, n, 100, in_flight).await,
        )
        .await?;
    }
    // Sources of 50 slices each: one collection per source.
    let small = n / 50;
    let selectors = |sources: usize| -> Vec<String> {
        (0..sources)
            .map(|s| format!("{}=dead-{s:03}", labels::SOURCE_CLUSTER))
            .collect()
    };
    for in_flight in [32, 64] {
        timed(
            &format!("collections of 50, {in_flight} in flight"),
            &api,
            n,
            small,
            async || collections(&api, selectors(small), in_flight).await,
        )
        .await?;
    }
    timed(
        "one collection per 10 sources, all at once",
        &api,
        n,
        10,
        async || collections(&api, selectors(10), 10).await,
    )
    .await?;
    ns.cleanup().await
}
