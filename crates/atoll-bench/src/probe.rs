//! What the scale benchmark reads off the machine: a process's CPU and memory from `/proc`, a
//! pid from the pid file its starter wrote, and the hub's footprint (etcd's database file, the
//! RSS of its apiserver and etcd, the requests its apiserver served) from kwokctl's cluster
//! directory and the apiserver's `/metrics`.

use std::path::{Path, PathBuf};

use anyhow::Context;

/// CPU seconds (user + system) and resident memory of one process.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub cpu_seconds: f64,
    pub rss_mib: f64,
    pub peak_rss_mib: f64,
}

/// What `/proc` says of `pid` now.
pub fn usage(pid: u32) -> anyhow::Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .with_context(|| format!("reading /proc/{pid}/stat"))?;
    // Fields after the command (which may hold spaces) start at the state, field 3.
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| -> f64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0.0) };
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("reading /proc/{pid}/status"))?;
    let kib = |key: &str| -> f64 {
        status
            .lines()
            .find(|l| l.starts_with(key))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0)
    };
    Ok(Usage {
        // utime and stime are fields 14 and 15 (indexes 11, 12 here), in USER_HZ = 100 ticks/s.
        cpu_seconds: (ticks(11) + ticks(12)) / 100.0,
        rss_mib: kib("VmRSS:") / 1024.0,
        peak_rss_mib: kib("VmHWM:") / 1024.0,
    })
}

/// The pid written in `file` (by `hack/lib.sh`'s `proc_start` or by kwokctl).
pub fn pid_in(file: &Path) -> anyhow::Result<u32> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
    text.trim()
        .parse()
        .with_context(|| format!("{} holds no pid: {text:?}", file.display()))
}

/// kwokctl's directory of the hub cluster (`…/kwok/clusters/c1`).
#[derive(Clone, Debug)]
pub struct HubDir(pub PathBuf);

/// The hub's footprint at one moment.
#[derive(Clone, Copy, Debug, Default)]
pub struct HubFootprint {
    /// etcd's database file: what counts against its quota (it grows with history until
    /// compaction and defragmentation give space back).
    pub etcd_db_mib: f64,
    pub etcd_rss_mib: f64,
    pub apiserver_rss_mib: f64,
}

impl HubDir {
    fn pid(&self, component: &str) -> anyhow::Result<u32> {
        pid_in(&self.0.join("pids").join(format!("{component}.pid")))
    }

    /// etcd's database file under the cluster directory (`…/member/snap/db`).
    fn etcd_db(&self) -> anyhow::Result<PathBuf> {
        let mut dirs = vec![self.0.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).with_context(|| format!("{}", dir.display()))? {
                let path = entry?.path();
                if path.ends_with("member/snap/db") {
                    return Ok(path);
                }
                if path.is_dir() && !path.is_symlink() {
                    dirs.push(path);
                }
            }
        }
        anyhow::bail!(
            "no etcd database (member/snap/db) under {}",
            self.0.display()
        )
    }

    pub fn footprint(&self) -> anyhow::Result<HubFootprint> {
        let db = std::fs::metadata(self.etcd_db()?)?.len();
        Ok(HubFootprint {
            etcd_db_mib: db as f64 / (1024.0 * 1024.0),
            etcd_rss_mib: usage(self.pid("etcd")?)?.rss_mib,
            apiserver_rss_mib: usage(self.pid("kube-apiserver")?)?.rss_mib,
        })
    }
}

/// Requests the hub's apiserver has served since it started (`apiserver_request_total`).
#[derive(Clone, Copy, Debug, Default)]
pub struct Requests {
    /// Creates, updates, patches, applies and deletes.
    pub writes: f64,
    /// Watches open now (`apiserver_longrunning_requests`).
    pub watches: f64,
}

const WRITE_VERBS: [&str; 6] = [
    "verb=\"CREATE\"",
    "verb=\"UPDATE\"",
    "verb=\"PATCH\"",
    "verb=\"APPLY\"",
    "verb=\"DELETE\"",
    "verb=\"DELETECOLLECTION\"",
];

/// Reads the counters from the apiserver's `/metrics` body.
pub fn requests_in(metrics: &str) -> Requests {
    let writes = atoll_testing::samples(metrics, "apiserver_request_total")
        .filter(|(labels, _)| labels.split(',').any(|l| WRITE_VERBS.contains(&l)))
        .map(|(_, v)| v)
        .sum();
    let watches = atoll_testing::samples(metrics, "apiserver_longrunning_requests")
        .filter(|(labels, _)| labels.split(',').any(|l| l == "verb=\"WATCH\""))
        .map(|(_, v)| v)
        .sum();
    Requests { writes, watches }
}

/// The hub apiserver's counters now.
pub async fn requests(hub: &kube::Client) -> anyhow::Result<Requests> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let body = hub
        .request_text(request)
        .await
        .context("reading the hub apiserver's /metrics")?;
    Ok(requests_in(&body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_sum_the_mutating_verbs_and_watches_the_open_ones() {
        let body = "# HELP apiserver_request_total x\n\
            apiserver_request_total{code=\"200\",resource=\"leases\",verb=\"APPLY\"} 7\n\
            apiserver_request_total{code=\"201\",resource=\"endpointslices\",verb=\"CREATE\"} 3\n\
            apiserver_request_total{code=\"200\",resource=\"leases\",verb=\"GET\"} 100\n\
            apiserver_request_total{code=\"200\",resource=\"leases\",verb=\"LIST\"} 5\n\
            apiserver_request_total{code=\"200\",resource=\"pods\",verb=\"DELETE\"} 2\n\
            apiserver_longrunning_requests{resource=\"leases\",scope=\"cluster\",verb=\"WATCH\"} 4\n\
            apiserver_longrunning_requests{resource=\"pods\",scope=\"namespace\",verb=\"WATCH\"} 1\n";
        let r = requests_in(body);
        assert_eq!(r.writes, 12.0);
        assert_eq!(r.watches, 5.0);
    }

    #[test]
    fn the_pid_file_is_read_and_garbage_is_refused() -> anyhow::Result<()> {
        let dir = std::env::temp_dir().join(format!("atoll-bench-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        let file = dir.join("x.pid");
        std::fs::write(&file, "1234\n")?;
        assert_eq!(pid_in(&file)?, 1234);
        std::fs::write(&file, "nope")?;
        assert!(pid_in(&file).is_err());
        std::fs::remove_dir_all(&dir)?;
        Ok(())
    }
}
