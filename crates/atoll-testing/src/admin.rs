//! The admin HTTP servers of the agents and DNS servers: plain GETs and their metrics.

use anyhow::Context;

use crate::mcs::CONVERGE;
use crate::wait::wait_for;

/// `(status code, body)` of `GET <path>` on the admin server at 127.0.0.1:`port` (HTTP/1.0).
pub async fn http_get(port: u16, path: &str) -> anyhow::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = format!("127.0.0.1:{port}");
    let mut stream = tokio::net::TcpStream::connect(&address)
        .await
        .with_context(|| format!("admin server at {address}"))?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no HTTP status from {address}: {head}"))?;
    Ok((code, body.to_owned()))
}

/// The samples of metric `name` in a `/metrics` body: each with its label set as exposed
/// (`kind="Lease",verb="apply"`; empty when it has none) and its value.
pub fn samples<'a>(body: &'a str, name: &'a str) -> impl Iterator<Item = (&'a str, f64)> + 'a {
    body.lines()
        .filter(move |l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| {
            let labels = l
                .split_once('{')
                .and_then(|(_, rest)| rest.split_once('}'))
                .map_or("", |(s, _)| s);
            Some((labels, l.rsplit(' ').next()?.parse::<f64>().ok()?))
        })
}

/// The value of metric `name` (summed over its label sets) from the admin server on
/// 127.0.0.1:`port`; 0 when the metric has no sample yet.
pub async fn metric(port: u16, name: &str) -> anyhow::Result<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    Ok(samples(&body, name).map(|(_, v)| v).sum())
}

/// The value of metric `name` with every label of `labels` (other labels may differ, and are
/// summed over) from the admin server on 127.0.0.1:`port`; 0 when there is no such sample.
pub async fn metric_labelled(
    port: u16,
    name: &str,
    labels: &[(&str, &str)],
) -> anyhow::Result<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    let wanted: Vec<String> = labels.iter().map(|(k, v)| format!("{k}=\"{v}\"")).collect();
    Ok(samples(&body, name)
        .filter(|(set, _)| wanted.iter().all(|w| set.split(',').any(|pair| pair == w)))
        .map(|(_, v)| v)
        .sum())
}

/// The API writes of the agent whose admin server is on 127.0.0.1:`port`, besides the
/// renewals of its heartbeat Lease (one per interval, whatever happens: what a benchmark
/// counts per change or while idle is everything else). Both counters come from one scrape,
/// so a renewal between two reads cannot skew the difference.
pub async fn agent_writes_besides_heartbeats(port: u16) -> anyhow::Result<f64> {
    let (_, body) = http_get(port, "/metrics").await?;
    let sum = |name| samples(&body, name).map(|(_, v)| v).sum::<f64>();
    Ok(sum("atoll_agent_api_writes_total") - sum("atoll_agent_heartbeats_total"))
}

/// Every sample of metric `name` from the admin server on 127.0.0.1:`port`, by its label set
/// as exposed (`kind="Lease",verb="apply"`; empty when it has no labels).
pub async fn metric_samples(
    port: u16,
    name: &str,
) -> anyhow::Result<std::collections::BTreeMap<String, f64>> {
    let (_, body) = http_get(port, "/metrics").await?;
    Ok(samples(&body, name)
        .map(|(labels, v)| (labels.to_owned(), v))
        .collect())
}

/// Waits until metric `name` on the admin server at 127.0.0.1:`port` is exactly `want`
/// (gauges and counters hold whole numbers, so the comparison is exact).
pub async fn wait_metric(port: u16, name: &str, want: f64) -> anyhow::Result<()> {
    wait_for(
        &format!("{name} = {want} on 127.0.0.1:{port}"),
        CONVERGE,
        || async {
            let got = metric(port, name).await?;
            Ok(if got == want { Ok(()) } else { Err(got) })
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::samples;

    #[test]
    fn samples_are_read_by_name_with_their_label_sets() {
        let body = "# HELP atoll_agent_api_writes_total x\n\
                    atoll_agent_api_writes_total{kind=\"Lease\",verb=\"apply\"} 25\n\
                    atoll_agent_api_writes_total{kind=\"ConfigMap\",verb=\"apply\"} 2\n\
                    atoll_agent_api_writes_total_created 1\n\
                    atoll_agent_heartbeats_total 25\n";
        let writes: Vec<(&str, f64)> = samples(body, "atoll_agent_api_writes_total").collect();
        assert_eq!(
            writes,
            [
                ("kind=\"Lease\",verb=\"apply\"", 25.0),
                ("kind=\"ConfigMap\",verb=\"apply\"", 2.0)
            ]
        );
        assert_eq!(
            samples(body, "atoll_agent_heartbeats_total").collect::<Vec<_>>(),
            [("", 25.0)]
        );
    }
}
