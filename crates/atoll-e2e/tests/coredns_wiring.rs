//! Wiring `clusterset.local` into a real CoreDNS (the binary `hack/build-tools.sh coredns`
//! builds), as the chart's opt-in hook does: `atoll coredns wire` edits the Corefile in the
//! ConfigMap `kube-system/coredns` of c1; a CoreDNS on 127.0.0.1 reads that Corefile from a file
//! the test keeps in step with the ConfigMap (as the kubelet projects it) and reloads it. Before
//! the edit CoreDNS answers NXDOMAIN for a clusterset name; after it the answer is the import's
//! ClusterSetIP, which only `atoll dns` knows; after `atoll coredns unwire` the ConfigMap is
//! byte for byte what it was and the name is NXDOMAIN again.

use std::path::Path;
use std::process::{Child, Command};
use std::time::Duration;

use anyhow::Context;

use atoll_testing::dns::{addresses, ask};
use atoll_testing::mcs::{HELLO_PORTS, deploy_and_export, import, wait_import_clusters};
use atoll_testing::membership::{atoll, kubectl};
use atoll_testing::tools::cached_tool;
use atoll_testing::{ClusterSet, Undo, dns_port, wait_for};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::PostParams;

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::UdpSocket::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// What CoreDNS serves before Atoll: every name NXDOMAIN, on 127.0.0.1 only.
const USERS_COREFILE: &str = "# the cluster's own configuration\n. {\n    bind 127.0.0.1\n    errors\n    reload 2s 1s\n    template ANY ANY {\n        rcode NXDOMAIN\n    }\n}\n";

async fn corefile_of(api: &Api<ConfigMap>) -> anyhow::Result<String> {
    Ok(api
        .get("coredns")
        .await?
        .data
        .and_then(|d| d.get("Corefile").cloned())
        .unwrap_or_default())
}

/// Copies the ConfigMap's Corefile to `file`, as the kubelet projects a ConfigMap volume.
async fn project(api: &Api<ConfigMap>, file: &Path) -> anyhow::Result<String> {
    let text = corefile_of(api).await?;
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, &text)?;
    std::fs::rename(&tmp, file)?;
    Ok(text)
}

/// `(rcode, addresses)` CoreDNS gives for `name`.
fn answer(port: u16, name: &str) -> anyhow::Result<(ResponseCode, Vec<String>)> {
    let (code, ips) = addresses(&ask(port, name, RecordType::A)?);
    Ok((code, ips.iter().map(ToString::to_string).collect()))
}

#[tokio::test]
async fn wiring_coredns_makes_clusterset_names_resolve_through_atoll_dns() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("xcoredns").await?;
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    wait_import_clusters(&set.members[0], &ns.name, "hello", 1).await?;
    let vip = wait_for(
        "the import's ClusterSetIP in c1",
        Duration::from_secs(30),
        || async {
            let ips = import(&set.members[0], &ns.name, "hello")
                .await?
                .and_then(|i| i.spec)
                .map(|s| s.ips)
                .unwrap_or_default();
            Ok(match ips.first() {
                Some(ip) => Ok(ip.clone()),
                None => Err("no ip"),
            })
        },
    )
    .await?;
    let name = format!("hello.{}.svc.clusterset.local", ns.name);

    // kwok clusters have no CoreDNS: the test gives c1 the ConfigMap a cluster's CoreDNS reads.
    let configmaps = Api::<ConfigMap>::namespaced(set.members[0].client.clone(), "kube-system");
    let mut map = ConfigMap::default();
    map.metadata.name = Some("coredns".to_owned());
    map.data = Some([("Corefile".to_owned(), USERS_COREFILE.to_owned())].into());
    configmaps.create(&PostParams::default(), &map).await?;
    let dir = std::env::temp_dir().join(format!("atoll-{}", ns.name));
    std::fs::create_dir_all(&dir)?;
    let file = dir.join("Corefile");
    project(&configmaps, &file).await?;
    let port = free_port()?;
    // CoreDNS's own output, shown when a wait below fails.
    let log_file = dir.join("coredns.log");
    let log = std::fs::File::create(&log_file)?;
    let coredns: Child = Command::new(cached_tool("COREDNS_VERSION", "coredns", "coredns")?)
        .arg("-conf")
        .arg(&file)
        .args(["-dns.port", &port.to_string()])
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?;
    let coredns_log = || {
        format!(
            "CoreDNS on 127.0.0.1:{port} said:\n{}",
            std::fs::read_to_string(&log_file).unwrap_or_default()
        )
    };
    let _cleanup = {
        let set = set.clone();
        let mut coredns = Some(coredns);
        let dir = dir.clone();
        Undo::new(move || {
            if let Some(mut c) = coredns.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
            let _ = std::fs::remove_dir_all(&dir);
            let _ = kubectl(
                &set,
                "kwok-c1",
                &[
                    "-n",
                    "kube-system",
                    "delete",
                    "configmap",
                    "coredns",
                    "--ignore-not-found",
                ],
            );
        })
    };
    let before = wait_for("CoreDNS to answer", Duration::from_secs(15), || async {
        Ok(answer(port, &name).map_err(|e| e.to_string()))
    })
    .await
    .with_context(coredns_log)?;
    assert_eq!(
        before.0,
        ResponseCode::NXDomain,
        "before wiring: {before:?}"
    );

    let kubeconfig = set.kubeconfig.display().to_string();
    let target = format!("127.0.0.1:{}", dns_port(0)?);
    let cluster = ["--kubeconfig", kubeconfig.as_str(), "--context", "kwok-c1"];
    let check = atoll(&[&["coredns", "check"][..], &cluster[..]].concat())?;
    assert_eq!(check.status.code(), Some(1), "check before wiring");
    let status = || -> anyhow::Result<String> {
        let out = atoll(&[&["status"][..], &cluster[..]].concat())?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let before_status = status()?;
    assert!(
        before_status.contains("Cluster DNS of c1: NOT WIRED"),
        "atoll status before wiring: {before_status}"
    );
    let wire = atoll(
        &[
            &["coredns", "wire"][..],
            &cluster[..],
            &["--target", &target, "--bind", "127.0.0.1"][..],
        ]
        .concat(),
    )?;
    assert!(
        wire.status.success(),
        "wire: {}",
        String::from_utf8_lossy(&wire.stderr)
    );
    let wired = project(&configmaps, &file).await?;
    assert!(
        wired.starts_with(USERS_COREFILE),
        "the user's part is untouched"
    );
    // Wiring again changes nothing.
    let again = atoll(
        &[
            &["coredns", "wire"][..],
            &cluster[..],
            &["--target", &target, "--bind", "127.0.0.1"][..],
        ]
        .concat(),
    )?;
    assert!(String::from_utf8_lossy(&again.stdout).contains("nothing written"));
    assert_eq!(corefile_of(&configmaps).await?, wired);
    let check = atoll(&[&["coredns", "check"][..], &cluster[..]].concat())?;
    assert_eq!(check.status.code(), Some(0), "check after wiring");
    let after_status = status()?;
    assert!(
        after_status.contains(&format!(
            "Cluster DNS of c1: wired: CoreDNS forwards clusterset.local to {target}"
        )),
        "atoll status after wiring: {after_status}"
    );

    let after = wait_for(
        "CoreDNS to reload and forward to atoll dns",
        Duration::from_secs(20),
        || async {
            let got = answer(port, &name)?;
            Ok(if got.0 == ResponseCode::NoError && !got.1.is_empty() {
                Ok(got)
            } else {
                Err(got)
            })
        },
    )
    .await
    .with_context(coredns_log)?;
    assert_eq!(
        after.1,
        vec![vip.clone()],
        "the answer is the import's ClusterSetIP"
    );
    eprintln!("CoreDNS forwards {name} to atoll dns: {vip}");

    let unwire = atoll(&[&["coredns", "unwire"][..], &cluster[..]].concat())?;
    assert!(
        unwire.status.success(),
        "unwire: {}",
        String::from_utf8_lossy(&unwire.stderr)
    );
    assert_eq!(
        project(&configmaps, &file).await?,
        USERS_COREFILE,
        "unwiring restores the Corefile byte for byte"
    );
    wait_for(
        "CoreDNS to stop forwarding",
        Duration::from_secs(20),
        || async {
            let got = answer(port, &name)?;
            Ok(if got.0 == ResponseCode::NXDomain {
                Ok(())
            } else {
                Err(got)
            })
        },
    )
    .await
    .with_context(coredns_log)?;
    ns.cleanup().await
}
