//! Atoll's alert rules and dashboard against a real Prometheus (Debian's, from
//! `hack/build-tools.sh prometheus`) on 127.0.0.1, scraping every agent and DNS server of the
//! local ClusterSet once a second. The faults the other suites cause are caused again, one after
//! another, and each must make its alert fire and, once the fault ends, resolve, as Prometheus's
//! alerts API reports it:
//! - a forged record (a member's record claiming another cluster) → AtollMemberRecordsRejected;
//! - a hub write that keeps failing (a ResourceQuota on endpoint copies) →
//!   AtollExportsUnpublishable and AtollAPIWritesFailing;
//! - c3's kept liveness decisions refused by an admission policy →
//!   AtollLivenessDecisionsNotKept (its heartbeat goes on: no AtollMemberWithdrawn);
//! - an agent stopped past the grace → AtollAgentDown, and AtollMemberWithdrawn in the others;
//! - the hub down → AtollHubUnreachable.
//!
//! The rules are the shipped file with every duration divided by 10 (`for: 1m` → 6 s, `[10m]`
//! → 60 s), as the local ClusterSet runs 2 s heartbeats and a 12 s grace; expressions and
//! labels are unchanged. (Not by more: the agent's own retry backoff, up to 30 s, is not
//! scaled, and AtollAPIWritesFailing counts retries in its window.) Then every query of the dashboard must run, and each metric it names
//! must have had series in this Prometheus during the run (no misspelt panel).
//!
//! Disruptive (stops an agent and the hub): run alone, after the others.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::Duration;

use atoll_api::hub::{self, ExportedService};
use atoll_testing::faults::{delete_kept, exported, quota_on_copies, refuse_kept_writes};
use atoll_testing::hub_member::HubMember;
use atoll_testing::mcs::wait_import_clusters;
use atoll_testing::tools::cached_tool;
use atoll_testing::{
    ClusterSet, Undo, agent_admin_port, dns_admin_port, fixtures, http_get, wait_for,
};
use kube::api::{DeleteParams, PostParams};
use serde_json::Value;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `text` with every minute duration (`for: Nm`, `[Nm]`) divided by 10, in seconds.
fn time_scaled(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(m) = rest.find('m') {
        let (before, after) = rest.split_at(m);
        let digits = before.len() - before.trim_end_matches(|c: char| c.is_ascii_digit()).len();
        let number = &before[before.len() - digits..];
        let prefix = &before[..before.len() - digits];
        let opens = prefix.ends_with('[') || prefix.ends_with("for: ");
        let closes = after[1..].starts_with(']') || after[1..].starts_with('\n');
        match number.parse::<u64>() {
            Ok(minutes) if opens && closes => {
                out.push_str(prefix);
                out.push_str(&format!("{}s", minutes * 6));
            }
            _ => {
                out.push_str(before);
                out.push('m');
            }
        }
        rest = &after[1..];
    }
    out.push_str(rest);
    out
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A Prometheus on 127.0.0.1 with its own data directory, stopped and removed on drop.
struct Prometheus {
    child: Child,
    port: u16,
    dir: PathBuf,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One scrape job per agent and per DNS server (jobs named as the chart's Services, with the
/// member's cluster as a suffix: the rules group by job).
fn config(members: usize) -> anyhow::Result<String> {
    let mut jobs = String::new();
    for i in 0..members {
        for (job, port) in [
            ("atoll-agent-metrics", agent_admin_port(i)?),
            ("atoll-dns", dns_admin_port(i)?),
        ] {
            jobs.push_str(&format!(
                "  - job_name: {job}-c{n}\n    static_configs:\n      - targets: ['127.0.0.1:{port}']\n        labels: {{namespace: atoll-system}}\n",
                n = i + 1
            ));
        }
    }
    Ok(format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 900ms\n  evaluation_interval: 1s\nrule_files: [rules.yaml]\nscrape_configs:\n{jobs}"
    ))
}

impl Prometheus {
    fn start(members: usize) -> anyhow::Result<Self> {
        let dir = std::env::temp_dir().join(format!("atoll-prometheus-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let rules = std::fs::read_to_string(repo().join("charts/atoll/files/alerts.rules.yaml"))?;
        std::fs::write(dir.join("rules.yaml"), time_scaled(&rules))?;
        std::fs::write(dir.join("prometheus.yml"), config(members)?)?;
        let port = free_port()?;
        let log = std::fs::File::create(dir.join("prometheus.log"))?;
        let child = Command::new(cached_tool(
            "PROMETHEUS_VERSION",
            "prometheus",
            "prometheus",
        )?)
        .current_dir(&dir)
        .arg(format!(
            "--config.file={}",
            dir.join("prometheus.yml").display()
        ))
        .arg(format!(
            "--storage.tsdb.path={}",
            dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
        Ok(Self { child, port, dir })
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// `data` of a GET on the HTTP API, failing on any status but success.
    async fn api(&self, path: &str) -> anyhow::Result<Value> {
        let (code, body) = http_get(self.port, path).await?;
        let parsed: Value = serde_json::from_str(&body)
            .map_err(|e| anyhow::anyhow!("GET {path}: {code} {e}: {body}"))?;
        anyhow::ensure!(
            code == 200 && parsed["status"] == "success",
            "GET {path}: {code} {body}"
        );
        Ok(parsed["data"].clone())
    }

    async fn query(&self, expr: &str) -> anyhow::Result<Vec<Value>> {
        let data = self
            .api(&format!("/api/v1/query?query={}", encode(expr)))
            .await?;
        Ok(data["result"].as_array().cloned().unwrap_or_default())
    }

    /// The label sets of the alerts named `name` in state `firing`.
    async fn firing(&self, name: &str) -> anyhow::Result<Vec<BTreeMap<String, String>>> {
        let data = self.api("/api/v1/alerts").await?;
        Ok(data["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["labels"]["alertname"] == name && a["state"] == "firing")
            .map(|a| {
                a["labels"]
                    .as_object()
                    .into_iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .collect())
    }

    /// Waits until alert `name` fires with every label of `labels`.
    async fn wait_firing(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<()> {
        let what = format!("{name} firing with {labels:?}");
        wait_for(&what, Duration::from_secs(90), || async {
            let firing = self.firing(name).await?;
            Ok(
                if firing.iter().any(|a| {
                    labels
                        .iter()
                        .all(|(k, v)| a.get(*k).map(String::as_str) == Some(*v))
                }) {
                    Ok(())
                } else {
                    Err(firing)
                },
            )
        })
        .await?;
        eprintln!("{what}");
        Ok(())
    }

    /// Waits until no alert `name` with every label of `labels` is pending or firing.
    async fn wait_resolved(&self, name: &str, labels: &[(&str, &str)]) -> anyhow::Result<()> {
        let what = format!("{name} with {labels:?} resolved");
        wait_for(&what, Duration::from_secs(150), || async {
            let data = self.api("/api/v1/alerts").await?;
            let left: Vec<Value> = data["alerts"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|a| {
                    a["labels"]["alertname"] == name
                        && labels.iter().all(|(k, v)| a["labels"][*k] == *v)
                })
                .cloned()
                .collect();
            Ok(if left.is_empty() { Ok(()) } else { Err(left) })
        })
        .await?;
        eprintln!("{what}");
        Ok(())
    }
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl Prometheus {
    /// Writes every dashboard query's data from `start` to `end` (Unix seconds, 1 s steps) to
    /// `target/alerts/run.json` (`panels: {panel: [[query, result]...]}`, and the `marks` when
    /// each fault began and ended): what `hack/dashboard-png.py` draws for the README.
    async fn record(&self, start: u64, end: u64, marks: &[(&str, u64)]) -> anyhow::Result<()> {
        let mut panels: BTreeMap<String, Vec<Value>> = BTreeMap::new();
        for (panel, expr) in dashboard_queries()? {
            let data = self
                .api(&format!(
                    "/api/v1/query_range?query={}&start={start}&end={end}&step=1",
                    encode(&expr)
                ))
                .await?;
            panels
                .entry(panel)
                .or_default()
                .push(serde_json::json!([expr, data["result"]]));
        }
        let dir = repo().join("target/alerts");
        std::fs::create_dir_all(&dir)?;
        let run = serde_json::json!({
            "start": start, "end": end, "marks": marks, "panels": panels,
        });
        std::fs::write(dir.join("run.json"), serde_json::to_vec(&run)?)?;
        Ok(())
    }
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every metric name (`atoll_…`) an expression names.
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = expr;
    while let Some(at) = rest.find("atoll_") {
        let name: String = rest[at..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        rest = &rest[at + name.len()..];
        names.push(name);
    }
    names
}

/// Every query of the dashboard, with its variables set to "all" and a 10 s rate interval.
fn dashboard_queries() -> anyhow::Result<Vec<(String, String)>> {
    let text = std::fs::read_to_string(repo().join("charts/atoll/files/dashboard.json"))?;
    let dashboard: Value = serde_json::from_str(&text)?;
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().unwrap_or_default();
            queries.push((
                panel["title"].as_str().unwrap_or_default().to_owned(),
                expr.replace("$agent_job", ".*")
                    .replace("$dns_job", ".*")
                    .replace("$__rate_interval", "10s"),
            ));
        }
    }
    anyhow::ensure!(!queries.is_empty(), "the dashboard has no queries");
    Ok(queries)
}

#[test]
fn time_scaling_divides_minutes_by_ten_and_touches_nothing_else() {
    let rules = "expr: rate(x_total[5m]) > 0 and y{a=\"5m\"} == 1\nfor: 1m\nsummary: 2m\n";
    assert_eq!(
        time_scaled(rules),
        "expr: rate(x_total[30s]) > 0 and y{a=\"5m\"} == 1\nfor: 6s\nsummary: 2m\n"
    );
}

#[tokio::test]
async fn alerts_fire_while_faults_happen_and_resolve_when_they_end() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let prometheus = Prometheus::start(set.members.len())?;
    let scraped = wait_for(
        "Prometheus to scrape every agent and DNS server",
        Duration::from_secs(60),
        || async {
            let up = match prometheus.query("up == 1").await {
                Ok(up) => up,
                Err(e) => return Ok(Err(e.to_string())),
            };
            Ok(if up.len() == 2 * set.members.len() {
                Ok(up.len())
            } else {
                Err(format!("{} targets up", up.len()))
            })
        },
    )
    .await;
    if let Err(e) = scraped {
        anyhow::bail!("{e}\nPrometheus said:\n{}", prometheus.log());
    }
    let ns = set.namespace("alerts").await?;
    let started = unix_now();
    // When each fault began and ended, for the picture.
    let mut marks: Vec<(&str, u64)> = Vec::new();

    // A forged record: a member's record in its own hub namespace that claims to be c3's.
    // A fresh id per run: the last run's forger may still be leaving (its hub namespace
    // terminating), and joining under that id again would fail.
    let forger_id = format!("forger-{}", ns.name);
    let forger = HubMember::join(&set, &forger_id).await?;
    let beat = forger.heartbeat();
    let forger_guard = {
        let forger = forger.clone();
        Undo::new(move || {
            beat.abort();
            forger.leave();
        })
    };
    let spec = serde_json::from_value(serde_json::json!({
        "cluster": "c3", "namespace": ns.name, "name": "forged", "exportCreated": "2026-12-01T00:00:00Z",
        "type": "ClusterSetIP", "ports": [{"name": "tcp", "protocol": "TCP", "port": 80}],
        "ipFamilies": ["IPv4"],
    }))?;
    let mut record = ExportedService::new(&hub::record_name(&ns.name, "forged"), spec);
    record.metadata.namespace = Some(forger.namespace());
    marks.push(("forged record", unix_now()));
    forger
        .records()
        .create(&PostParams::default(), &record)
        .await?;
    let rejected = [
        ("cluster", forger_id.as_str()),
        ("job", "atoll-agent-metrics-c3"),
    ];
    prometheus
        .wait_firing("AtollMemberRecordsRejected", &rejected)
        .await?;
    forger
        .records()
        .delete(
            &record.metadata.name.clone().unwrap_or_default(),
            &DeleteParams::default(),
        )
        .await?;
    marks.push(("record removed", unix_now()));
    prometheus
        .wait_resolved(
            "AtollMemberRecordsRejected",
            &[("cluster", forger_id.as_str())],
        )
        .await?;
    drop(forger_guard);

    // A hub write that keeps failing: c2 cannot write the copy of a second export.
    let c2 = &set.members[1];
    exported(c2, &ns.name, "first").await?;
    wait_import_clusters(&set.members[2], &ns.name, "first", 1).await?;
    marks.push(("quota on c2's copies", unix_now()));
    let (_quotas, lift) = quota_on_copies(&set, "c2").await?;
    exported(c2, &ns.name, "second").await?;
    let c2_agent = [("job", "atoll-agent-metrics-c2")];
    prometheus
        .wait_firing("AtollExportsUnpublishable", &c2_agent)
        .await?;
    prometheus
        .wait_firing("AtollAPIWritesFailing", &c2_agent)
        .await?;
    marks.push(("quota lifted", unix_now()));
    drop(lift);
    prometheus
        .wait_resolved("AtollExportsUnpublishable", &c2_agent)
        .await?;
    prometheus
        .wait_resolved("AtollAPIWritesFailing", &c2_agent)
        .await?;

    // c3's keep writes refused (its ConfigMap gone and its agent restarted, so it must write
    // one): the alert fires, and c3 is never withdrawn meanwhile.
    let c3_agent = [("job", "atoll-agent-metrics-c3")];
    let refused = refuse_kept_writes(&set, &set.members[2]).await?;
    delete_kept(&set, &set.members[2])?;
    let restart_c3 = Undo::new(|| {
        let _ = fixtures::agents("start", &["c3"]);
    });
    marks.push(("c3's keep writes refused", unix_now()));
    fixtures::agents("restart", &["c3"])?;
    prometheus
        .wait_firing("AtollLivenessDecisionsNotKept", &c3_agent)
        .await?;
    // c3 itself (another test's leftovers may be withdrawn meanwhile, rightly).
    let c3_withdrawn: Vec<_> = prometheus
        .firing("AtollMemberWithdrawn")
        .await?
        .into_iter()
        .filter(|labels| labels.get("cluster").map(String::as_str) == Some("c3"))
        .collect();
    assert!(
        c3_withdrawn.is_empty(),
        "a member whose keep writes are refused was withdrawn: {c3_withdrawn:?}"
    );
    marks.push(("policy removed", unix_now()));
    drop(refused);
    drop(restart_c3);
    prometheus
        .wait_resolved("AtollLivenessDecisionsNotKept", &c3_agent)
        .await?;

    // c2's agent stopped past the grace: down, and withdrawn by c1 and c3.
    let restart = Undo::new(|| {
        let _ = fixtures::agents("start", &["c2"]);
    });
    marks.push(("c2's agent stopped", unix_now()));
    fixtures::agents("stop", &["c2"])?;
    prometheus
        .wait_firing("AtollAgentDown", &[("job", "atoll-agent-metrics-c2")])
        .await?;
    for importer in ["c1", "c3"] {
        let job = format!("atoll-agent-metrics-{importer}");
        prometheus
            .wait_firing("AtollMemberWithdrawn", &[("cluster", "c2"), ("job", &job)])
            .await?;
    }
    marks.push(("c2's agent started", unix_now()));
    fixtures::agents("start", &["c2"])?;
    drop(restart);
    prometheus
        .wait_resolved("AtollAgentDown", &[("job", "atoll-agent-metrics-c2")])
        .await?;
    prometheus
        .wait_resolved("AtollMemberWithdrawn", &[("cluster", "c2")])
        .await?;

    // The hub (c1's control plane) down: every member's agent finds it unreachable.
    let hub_back = Undo::new(|| {
        let _ = fixtures::cluster("start", "c1");
    });
    marks.push(("hub down", unix_now()));
    fixtures::cluster("stop", "c1")?;
    for member in ["c2", "c3"] {
        let job = format!("atoll-agent-metrics-{member}");
        prometheus
            .wait_firing("AtollHubUnreachable", &[("job", &job)])
            .await?;
    }
    marks.push(("hub back", unix_now()));
    fixtures::cluster("start", "c1")?;
    drop(hub_back);
    prometheus.wait_resolved("AtollHubUnreachable", &[]).await?;

    // Every dashboard query runs, and every metric it names has series here.
    let mut missing = Vec::new();
    for (panel, expr) in dashboard_queries()? {
        prometheus
            .query(&expr)
            .await
            .map_err(|e| anyhow::anyhow!("panel {panel:?}: {e}"))?;
        for name in metric_names(&expr) {
            let series = prometheus
                // Over the whole run: a family written during a fault (write errors) is gone
                // from an agent restarted since.
                .query(&format!(
                    "count(last_over_time({{__name__=\"{name}\"}}[30m]))"
                ))
                .await?;
            if series.is_empty() {
                missing.push(format!("{panel}: {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "dashboard metrics with no series: {missing:?}"
    );
    prometheus.record(started, unix_now(), &marks).await?;
    ns.cleanup().await
}
