//! `atoll dns` on the local ClusterSet (one server per cluster, `hack/dns.sh`), fed by the
//! objects the agents write: answers follow export, endpoint changes and unexport.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use atoll_api::labels;
use atoll_testing::dns::{addresses, ask};
use atoll_testing::fixtures;
use atoll_testing::mcs::{HELLO_PORTS, deploy_and_export, wait_endpoints_within, wait_import};
use atoll_testing::{ClusterSet, dns_admin_port, dns_port, metric, wait_for};
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

/// How long the DNS server may take to reflect a change it can see in the API.
const DNS_LAG: Duration = Duration::from_secs(2);

async fn wait_answer(
    index: usize,
    name: &str,
    want: &(ResponseCode, Vec<IpAddr>),
    within: Duration,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    wait_for(
        &format!("{name} from DNS of c{}", index + 1),
        within,
        || async {
            let got = addresses(&ask(dns_port(index)?, name, RecordType::A)?);
            Ok(if &got == want {
                Ok(started.elapsed())
            } else {
                Err(got)
            })
        },
    )
    .await
}

#[tokio::test]
async fn clusterset_ip_answers_follow_export_and_unexport() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("dns").await?;
    let fqdn = format!("hello.{}.svc.clusterset.local.", ns.name);
    assert_eq!(
        addresses(&ask(dns_port(0)?, &fqdn, RecordType::A)?).0,
        ResponseCode::NXDomain
    );
    deploy_and_export(&set.members[1], &ns.name, HELLO_PORTS, false).await?;
    for (i, member) in set.members.iter().enumerate() {
        let import = wait_import(member, &ns.name, "hello", |imp| {
            if imp.spec.as_ref().is_some_and(|s| !s.ips.is_empty()) {
                Ok(())
            } else {
                Err("no ips".into())
            }
        })
        .await?;
        let ips: Vec<IpAddr> = import
            .spec
            .unwrap()
            .ips
            .iter()
            .filter_map(|s| s.parse().ok())
            .collect();
        let lag = wait_answer(i, &fqdn, &(ResponseCode::NoError, ips), DNS_LAG).await?;
        println!(
            "c{}: DNS answered {lag:?} after the ServiceImport had its IP",
            i + 1
        );
        // Bare-name SRV: one record for tcp/42 + udp/42 (conformance C17).
        let srv = ask(dns_port(i)?, &fqdn, RecordType::SRV)?;
        assert_eq!(srv.answers.len(), 1, "c{}: {srv:?}", i + 1);
    }
    fixtures::unexport(&set.members[1].client, &ns.name, "hello").await?;
    for i in 0..set.members.len() {
        wait_answer(
            i,
            &fqdn,
            &(ResponseCode::NXDomain, vec![]),
            Duration::from_secs(20),
        )
        .await?;
    }
    ns.cleanup().await
}

#[tokio::test]
async fn headless_answers_follow_endpoint_changes() -> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("dnshl").await?;
    let fqdn = format!("hello.{}.svc.clusterset.local.", ns.name);
    let exporter = &set.members[2];
    deploy_and_export(exporter, &ns.name, HELLO_PORTS, true).await?;
    for replicas in [2usize, 3, 1] {
        Api::<Deployment>::namespaced(exporter.client.clone(), &ns.name)
            .patch(
                "hello",
                &PatchParams::default(),
                &Patch::Merge(&serde_json::json!({"spec": {"replicas": replicas}})),
            )
            .await?;
        // The endpoints c1 imported, then the same set from c1's DNS server.
        let member = &set.members[0];
        let slices =
            wait_endpoints_within(member, &ns.name, "hello", replicas, Duration::from_secs(30))
                .await?;
        let mut ips: Vec<IpAddr> = slices
            .iter()
            .flat_map(|s| &s.endpoints)
            .flat_map(|e| e.addresses.iter().filter_map(|a| a.parse().ok()))
            .collect();
        ips.sort();
        anyhow::ensure!(
            ips.len() == replicas,
            "one address per endpoint expected: {ips:?}"
        );
        wait_answer(0, &fqdn, &(ResponseCode::NoError, ips.clone()), DNS_LAG).await?;
        // Each endpoint also has its own name: <dashed-ip>.<cluster>.<svc>.<ns>.svc.clusterset.local.
        let first = ips[0];
        let per_endpoint = format!("{}.c3.{fqdn}", first.to_string().replace('.', "-"));
        wait_answer(
            0,
            &per_endpoint,
            &(ResponseCode::NoError, vec![first]),
            DNS_LAG,
        )
        .await?;
    }
    // The reserved <clusterid>.<svc> name never resolves.
    let reserved = format!("c3.{fqdn}");
    assert_eq!(
        addresses(&ask(dns_port(0)?, &reserved, RecordType::A)?).0,
        ResponseCode::NXDomain
    );
    ns.cleanup().await
}

/// A client of member `index` acting as `user` in the group `system:masters` (the ClusterSet's
/// administrator may impersonate anyone).
async fn impersonating(set: &ClusterSet, index: usize, user: &str) -> anyhow::Result<Client> {
    let file = Kubeconfig::read_from(&set.kubeconfig)?;
    let options = KubeConfigOptions {
        context: Some(set.members[index].context.clone()),
        ..Default::default()
    };
    let mut config = Config::from_custom_kubeconfig(file, &options).await?;
    config.auth_info.impersonate = Some(user.to_owned());
    config.auth_info.impersonate_groups = Some(vec!["system:masters".to_owned()]);
    Ok(Client::try_from(config)?)
}

#[tokio::test]
async fn hand_made_mcs_slices_are_refused_and_untrusted_ones_are_never_answered()
-> anyhow::Result<()> {
    let set = ClusterSet::from_env().await?;
    let ns = set.namespace("dnstrust").await?;
    let fqdn = format!("hello.{}.svc.clusterset.local.", ns.name);
    deploy_and_export(&set.members[2], &ns.name, HELLO_PORTS, true).await?;
    let member = &set.members[0];
    let imported =
        wait_endpoints_within(member, &ns.name, "hello", 2, Duration::from_secs(30)).await?;
    let mut ips: Vec<IpAddr> = imported
        .iter()
        .flat_map(|s| &s.endpoints)
        .flat_map(|e| e.addresses.iter().filter_map(|a| a.parse().ok()))
        .collect();
    ips.sort();
    let served = (ResponseCode::NoError, ips);
    wait_answer(0, &fqdn, &served, DNS_LAG).await?;

    // An MCS slice made by hand, with only the two MCS labels, putting an address of the
    // user's choice into the answers of the imported headless service.
    let forged: EndpointSlice = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "hello-forged", "namespace": ns.name, "labels": {
            labels::SERVICE_NAME: "hello", labels::SOURCE_CLUSTER: "c9"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.66.6.6"], "conditions": {"ready": true}}],
        "ports": [{"name": "tcp", "protocol": "TCP", "port": 42}]
    }))?;
    // The admission policy refuses it to the administrator...
    let refused = Api::<EndpointSlice>::namespaced(member.client.clone(), &ns.name)
        .create(&PostParams::default(), &forged)
        .await;
    match refused {
        Err(kube::Error::Api(e)) => anyhow::ensure!(
            e.code == 403 && e.message.contains(atoll_core::admission::SLICE_MESSAGE),
            "refused for another reason: {e:?}"
        ),
        other => anyhow::bail!("a hand-made MCS slice was not refused: {other:?}"),
    }
    // ...and when one gets in anyway (here as one of the cluster's own controllers, which the
    // policy lets through), DNS does not serve it: no trusted controller manages it.
    Api::<EndpointSlice>::namespaced(
        impersonating(&set, 0, "system:serviceaccount:kube-system:e2e-forger").await?,
        &ns.name,
    )
    .create(&PostParams::default(), &forged)
    .await?;
    let admin = dns_admin_port(0)?;
    wait_for(
        "the forged slice counted as untrusted by c1's DNS",
        Duration::from_secs(20),
        || async {
            let untrusted = metric(admin, "atoll_dns_untrusted_slices").await?;
            Ok(if untrusted >= 1.0 {
                Ok(())
            } else {
                Err(untrusted)
            })
        },
    )
    .await?;
    let got = addresses(&ask(dns_port(0)?, &fqdn, RecordType::A)?);
    assert_eq!(got, served, "the forged address is not served");
    let per_endpoint = format!("10-66-6-6.c9.{fqdn}");
    assert_eq!(
        addresses(&ask(dns_port(0)?, &per_endpoint, RecordType::A)?).0,
        ResponseCode::NXDomain
    );
    ns.cleanup().await
}
