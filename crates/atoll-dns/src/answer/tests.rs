//! The record table of the MCS DNS specification, checked by decoding our responses with
//! hickory-proto (an independent implementation of the wire format).

use std::net::IpAddr;

use atoll_api::multicluster::ServiceImportType;
use atoll_api::v1beta1::ServiceImport;
use hickory_proto::op::{Edns, Message, Query as HQuery, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use proptest::prelude::*;

use super::*;
use crate::fixtures::{mk_import, mk_slice};
use crate::zone::ZoneConfig;
use crate::zone::{MAX_RRSET, MAX_SERVICE_RECORDS};

fn zone() -> Zone {
    let hello = mk_import(
        "demo",
        "hello",
        ServiceImportType::ClusterSetIP,
        &["10.96.0.10", "fd00::10"],
        &[("tcp", "TCP", 42), ("udp", "UDP", 42)],
    );
    let web = mk_import(
        "demo",
        "web",
        ServiceImportType::Headless,
        &[],
        &[("tcp", "TCP", 42), ("udp", "UDP", 42)],
    );
    let idle = mk_import(
        "demo",
        "idle",
        ServiceImportType::Headless,
        &[],
        &[("tcp", "TCP", 42)],
    );
    let s1 = mk_slice(
        "demo",
        "web",
        "c1",
        "IPv4",
        &[
            ("10.201.0.1", Some("web-0"), true),
            ("10.201.0.2", None, true),
            ("10.201.0.3", None, false),
        ],
    );
    let s2 = mk_slice(
        "demo",
        "web",
        "c2",
        "IPv4",
        &[("10.202.0.1", Some("web-0"), true)],
    );
    let s3 = mk_slice("demo", "idle", "c1", "IPv4", &[("10.201.0.9", None, false)]);
    Zone::build(
        &ZoneConfig::default(),
        &[&hello, &web, &idle],
        &[&s1, &s2, &s3],
    )
}

fn ask_with(
    zone: &Zone,
    name: &str,
    rtype: RecordType,
    edns: Option<u16>,
    tcp: bool,
) -> (Message, Vec<u8>) {
    let mut query = Message::query();
    query.metadata.id = 4242;
    query.metadata.recursion_desired = true;
    query.add_query(HQuery::query(Name::from_ascii(name).unwrap(), rtype));
    if let Some(size) = edns {
        let mut e = Edns::new();
        e.set_max_payload(size);
        query.set_edns(e);
    }
    let mut out = Vec::new();
    answer(zone, &query.to_vec().unwrap(), tcp, &mut out);
    (Message::from_vec(&out).unwrap(), out)
}

fn ask(zone: &Zone, name: &str, rtype: RecordType) -> Message {
    ask_with(zone, name, rtype, None, false).0
}

fn ips(m: &Message) -> Vec<IpAddr> {
    let mut out: Vec<IpAddr> = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::A(a) => Some(IpAddr::V4(a.0)),
            RData::AAAA(a) => Some(IpAddr::V6(a.0)),
            _ => None,
        })
        .collect();
    out.sort();
    out
}

fn srv(m: &Message) -> Vec<(String, u16)> {
    let mut out: Vec<(String, u16)> = m
        .answers
        .iter()
        .filter_map(|r| match &r.data {
            RData::SRV(s) => Some((s.target.to_ascii(), s.port)),
            _ => None,
        })
        .collect();
    out.sort();
    out
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn clusterset_ip_answers_a_and_aaaa_from_spec_ips() {
    let z = zone();
    let a = ask(&z, "hello.demo.svc.clusterset.local.", RecordType::A);
    assert_eq!(a.metadata.response_code, ResponseCode::NoError);
    assert!(a.metadata.authoritative);
    assert_eq!(ips(&a), vec![ip("10.96.0.10")]);
    assert_eq!(a.answers[0].ttl, 5);
    assert_eq!(
        ips(&ask(
            &z,
            "hello.demo.svc.clusterset.local.",
            RecordType::AAAA
        )),
        vec![ip("fd00::10")]
    );
}

#[test]
fn bare_srv_is_deduplicated_per_target_and_port() {
    // Conformance C17: tcp/42 + udp/42 give exactly one SRV record.
    let m = ask(&zone(), "hello.demo.svc.clusterset.local.", RecordType::SRV);
    assert_eq!(
        srv(&m),
        vec![("hello.demo.svc.clusterset.local.".to_owned(), 42)]
    );
    assert!(
        !m.additionals.is_empty(),
        "targets' addresses go in the additional section"
    );
    let named = ask(
        &zone(),
        "_udp._udp.hello.demo.svc.clusterset.local.",
        RecordType::SRV,
    );
    assert_eq!(
        srv(&named),
        vec![("hello.demo.svc.clusterset.local.".to_owned(), 42)]
    );
    let wrong_proto = ask(
        &zone(),
        "_udp._tcp.hello.demo.svc.clusterset.local.",
        RecordType::SRV,
    );
    assert_eq!(wrong_proto.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn headless_answers_ready_endpoints_of_every_cluster() {
    let z = zone();
    let m = ask(&z, "web.demo.svc.clusterset.local.", RecordType::A);
    assert_eq!(
        ips(&m),
        vec![ip("10.201.0.1"), ip("10.201.0.2"), ip("10.202.0.1")]
    );
    // Per-endpoint names: explicit hostname, or the dashed address.
    assert_eq!(
        ips(&ask(
            &z,
            "web-0.c1.web.demo.svc.clusterset.local.",
            RecordType::A
        )),
        vec![ip("10.201.0.1")]
    );
    assert_eq!(
        ips(&ask(
            &z,
            "web-0.c2.web.demo.svc.clusterset.local.",
            RecordType::A
        )),
        vec![ip("10.202.0.1")]
    );
    assert_eq!(
        ips(&ask(
            &z,
            "10-201-0-2.c1.web.demo.svc.clusterset.local.",
            RecordType::A
        )),
        vec![ip("10.201.0.2")]
    );
    // Not-ready endpoints are not served.
    let unready = ask(
        &z,
        "10-201-0-3.c1.web.demo.svc.clusterset.local.",
        RecordType::A,
    );
    assert_eq!(unready.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn a_cluster_the_selectors_leave_out_is_not_answered() {
    let web = mk_import(
        "demo",
        "web",
        ServiceImportType::Headless,
        &[],
        &[("tcp", "TCP", 42)],
    );
    let active = mk_slice("demo", "web", "c1", "IPv4", &[("10.201.0.1", None, true)]);
    let mut inactive = mk_slice("demo", "web", "c2", "IPv4", &[("10.202.0.1", None, true)]);
    let mark = |slice: &mut EndpointSlice, value: &str| {
        if let Some(labels) = slice.metadata.labels.as_mut() {
            labels.insert(atoll_api::labels::ACTIVE.to_owned(), value.to_owned());
        }
    };
    let mut marked_active = active.clone();
    mark(&mut marked_active, "true");
    mark(&mut inactive, "false");
    let z = Zone::build(
        &ZoneConfig::default(),
        &[&web],
        &[&marked_active, &inactive],
    );
    let m = ask(&z, "web.demo.svc.clusterset.local.", RecordType::A);
    assert_eq!(ips(&m), vec![ip("10.201.0.1")]);
    let left_out = ask(
        &z,
        "10-202-0-1.c2.web.demo.svc.clusterset.local.",
        RecordType::A,
    );
    assert_eq!(left_out.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn headless_srv_has_one_record_per_endpoint_and_port() {
    let m = ask(&zone(), "web.demo.svc.clusterset.local.", RecordType::SRV);
    let targets = srv(&m);
    assert_eq!(targets.len(), 3, "{targets:?}");
    assert!(targets.iter().all(|(_, port)| *port == 42));
    assert!(
        targets
            .iter()
            .any(|(t, _)| t == "10-201-0-2.c1.web.demo.svc.clusterset.local.")
    );
    let named = ask(
        &zone(),
        "_tcp._tcp.web.demo.svc.clusterset.local.",
        RecordType::SRV,
    );
    assert_eq!(srv(&named).len(), 3);
}

#[test]
fn nxdomain_and_nodata_follow_the_digest() {
    let z = zone();
    for (name, expected) in [
        ("nope.demo.svc.clusterset.local.", ResponseCode::NXDomain),
        ("hello.other.svc.clusterset.local.", ResponseCode::NXDomain),
        ("c1.web.demo.svc.clusterset.local.", ResponseCode::NXDomain),
        ("idle.demo.svc.clusterset.local.", ResponseCode::NXDomain),
        (
            "a.b.c.hello.demo.svc.clusterset.local.",
            ResponseCode::NXDomain,
        ),
        ("demo.svc.clusterset.local.", ResponseCode::NoError),
        ("svc.clusterset.local.", ResponseCode::NoError),
    ] {
        let m = ask(&z, name, RecordType::A);
        assert_eq!(m.metadata.response_code, expected, "{name}");
        assert!(m.answers.is_empty(), "{name}");
        assert_eq!(m.authorities.len(), 1, "{name}: SOA in authority");
        assert_eq!(m.authorities[0].record_type(), RecordType::SOA);
    }
    // AAAA on a ClusterSetIP service with only IPv4 would be NODATA; TXT on a service too.
    let nodata = ask(&z, "hello.demo.svc.clusterset.local.", RecordType::TXT);
    assert_eq!(nodata.metadata.response_code, ResponseCode::NoError);
    assert!(nodata.answers.is_empty());
}

#[test]
fn extended_errors_say_why_with_edns() {
    let z = zone();
    let (m, raw) = ask_with(
        &z,
        "idle.demo.svc.clusterset.local.",
        RecordType::A,
        Some(1232),
        false,
    );
    assert_eq!(m.metadata.response_code, ResponseCode::NXDomain);
    assert!(m.edns.is_some());
    let text = String::from_utf8_lossy(&raw);
    assert!(text.contains("no ready endpoints"), "EDE text missing");
    let (_, raw) = ask_with(
        &z,
        "x.nowhere.svc.clusterset.local.",
        RecordType::A,
        Some(1232),
        false,
    );
    assert!(String::from_utf8_lossy(&raw).contains("namespace"));
}

#[test]
fn apex_version_and_case_insensitivity() {
    let z = zone();
    let soa = ask(&z, "clusterset.local.", RecordType::SOA);
    assert_eq!(soa.answers[0].record_type(), RecordType::SOA);
    assert_eq!(
        ask(&z, "clusterset.local.", RecordType::NS).answers.len(),
        1
    );
    let txt = ask(&z, "dns-version.clusterset.local.", RecordType::TXT);
    assert_eq!(txt.answers[0].ttl, 28800);
    assert!(
        txt.answers[0].data.to_string().contains("1.0.0"),
        "{}",
        txt.answers[0].data
    );
    let mixed = ask(&z, "HeLLo.DEMO.svc.ClusterSet.Local.", RecordType::A);
    assert_eq!(ips(&mixed), vec![ip("10.96.0.10")]);
    assert_eq!(
        mixed.queries[0].name().to_ascii(),
        "HeLLo.DEMO.svc.ClusterSet.Local.",
        "question echoed as sent"
    );
}

#[test]
fn outside_the_zone_is_refused_and_unsynced_is_servfail() {
    let z = zone();
    assert_eq!(
        ask(&z, "example.com.", RecordType::A)
            .metadata
            .response_code,
        ResponseCode::Refused
    );
    assert_eq!(
        ask(&z, "notclusterset.local.", RecordType::A)
            .metadata
            .response_code,
        ResponseCode::Refused
    );
    let cold = Zone::unsynced(&ZoneConfig::default());
    assert_eq!(
        ask(&cold, "hello.demo.svc.clusterset.local.", RecordType::A)
            .metadata
            .response_code,
        ResponseCode::ServFail
    );
}

/// A zone with a headless service of `endpoints` ready IPv4 endpoints, named `<name>`.
fn headless_zone(config: &ZoneConfig, services: &[(&str, usize)]) -> Zone {
    let imports: Vec<ServiceImport> = services
        .iter()
        .map(|(name, _)| {
            mk_import(
                "demo",
                name,
                ServiceImportType::Headless,
                &[],
                &[("tcp", "TCP", 42)],
            )
        })
        .collect();
    let slices: Vec<EndpointSlice> = services
        .iter()
        .enumerate()
        .map(|(s, (name, endpoints))| {
            let addresses: Vec<String> = (0..*endpoints)
                .map(|i| format!("10.{}.{}.{}", 200 + s, i / 200, i % 200 + 1))
                .collect();
            let refs: Vec<(&str, Option<&str>, bool)> =
                addresses.iter().map(|a| (a.as_str(), None, true)).collect();
            mk_slice("demo", name, "c1", "IPv4", &refs)
        })
        .collect();
    let import_refs: Vec<&ServiceImport> = imports.iter().collect();
    let slice_refs: Vec<&EndpointSlice> = slices.iter().collect();
    Zone::build(config, &import_refs, &slice_refs)
}

#[test]
fn large_answers_are_trimmed_with_tc_over_udp_and_come_whole_over_tcp() {
    // 100 A records: about 1.7 KB, over 512 and over the default maximum of 1232.
    let z = headless_zone(&ZoneConfig::default(), &[("big", 100)]);
    let name = "big.demo.svc.clusterset.local.";
    let (tcp, _) = ask_with(&z, name, RecordType::A, None, true);
    assert_eq!(tcp.answers.len(), 100);
    assert!(!tcp.metadata.truncation);
    // Over UDP, the first records that fit, and TC.
    let (udp, raw) = ask_with(&z, name, RecordType::A, None, false);
    assert!(udp.metadata.truncation && raw.len() <= 512);
    assert_eq!(
        udp.answers.len(),
        (512 - 12 - 35) / 16,
        "as many A records as fit"
    );
    assert_eq!(udp.answers[..], tcp.answers[..udp.answers.len()]);
    // A requester claiming 4096 bytes still gets at most the server's 1232: TC, and the OPT
    // record says 1232.
    let (capped, raw) = ask_with(&z, name, RecordType::A, Some(4096), false);
    assert!(
        capped.metadata.truncation && raw.len() <= 1232,
        "{} bytes",
        raw.len()
    );
    assert_eq!(capped.answers.len(), (1232 - 12 - 35 - 11) / 16);
    assert_eq!(capped.edns.as_ref().map(Edns::max_payload), Some(1232));
    // A server configured for 4096 answers in full to a requester that accepts it.
    let roomy = ZoneConfig {
        max_udp_payload: 4096,
        ..ZoneConfig::default()
    };
    let z = headless_zone(&roomy, &[("big", 100)]);
    let (edns, raw) = ask_with(&z, name, RecordType::A, Some(4096), false);
    assert!(!edns.metadata.truncation);
    assert_eq!(edns.answers.len(), 100);
    assert!(raw.len() > 1232 && raw.len() <= 4096, "{} bytes", raw.len());
    assert_eq!(edns.edns.as_ref().map(Edns::max_payload), Some(4096));
    // ...but not more than the requester accepts.
    let (small, raw) = ask_with(&z, name, RecordType::A, Some(1400), false);
    assert!(small.metadata.truncation && raw.len() <= 1400);
}

#[test]
fn an_srv_answer_loses_its_additional_records_before_any_srv_record_and_without_tc() {
    // 20 endpoints: 20 SRV records (about 1.2 KB) with 20 addresses in the additional section
    // (about 1.2 KB more) fit 4096 bytes, and their SRV records alone fit 1400.
    let roomy = ZoneConfig {
        max_udp_payload: 4096,
        ..ZoneConfig::default()
    };
    let z = headless_zone(&roomy, &[("mid", 20)]);
    let name = "mid.demo.svc.clusterset.local.";
    let (whole, _) = ask_with(&z, name, RecordType::SRV, Some(4096), false);
    assert_eq!((whole.answers.len(), whole.additionals.len()), (20, 20));
    let (trimmed, raw) = ask_with(&z, name, RecordType::SRV, Some(1400), false);
    assert!(raw.len() <= 1400);
    assert_eq!(trimmed.answers, whole.answers, "every SRV record is kept");
    assert!(trimmed.additionals.len() < 20);
    assert_eq!(
        trimmed.additionals[..],
        whole.additionals[..trimmed.additionals.len()]
    );
    assert!(
        !trimmed.metadata.truncation,
        "RFC 2181 §9: left-out additional records need no retry over TCP"
    );
}

#[test]
fn an_srv_answer_over_65535_bytes_is_trimmed_over_tcp_never_emptied() {
    // 300 endpoints × 4 ports: 1,200 SRV records of about 63 bytes and 300 addresses, about
    // 93 KB in all, more than a TCP message can carry.
    let imports = [mk_import(
        "demo",
        "wide",
        ServiceImportType::Headless,
        &[],
        &[
            ("a", "TCP", 1),
            ("b", "TCP", 2),
            ("c", "TCP", 3),
            ("d", "TCP", 4),
        ],
    )];
    let mut slice = {
        let addresses: Vec<String> = (0..300)
            .map(|i| format!("10.210.{}.{}", i / 200, i % 200 + 1))
            .collect();
        let refs: Vec<(&str, Option<&str>, bool)> =
            addresses.iter().map(|a| (a.as_str(), None, true)).collect();
        mk_slice("demo", "wide", "c1", "IPv4", &refs)
    };
    slice.ports = Some(
        (1..=4)
            .map(|port| k8s_openapi::api::discovery::v1::EndpointPort {
                name: Some(["a", "b", "c", "d"][port - 1].to_owned()),
                protocol: Some("TCP".to_owned()),
                port: Some(port as i32),
                app_protocol: None,
            })
            .collect(),
    );
    let z = Zone::build(&ZoneConfig::default(), &[&imports[0]], &[&slice]);
    let name = "wide.demo.svc.clusterset.local.";
    let set = z
        .node(&crate::wire::encode_name(name).unwrap())
        .and_then(|n| n.sets.iter().find(|(t, _)| *t == crate::wire::rtype::SRV))
        .map(|(_, set)| set.clone())
        .unwrap();
    assert_eq!(set.answer_count, 1200);
    assert!(set.answers.len() + set.additional.len() > 65535);
    let (tcp, raw) = ask_with(&z, name, RecordType::SRV, None, true);
    assert_eq!(tcp.metadata.response_code, ResponseCode::NoError);
    assert!(raw.len() <= 65535, "{} bytes", raw.len());
    assert!(
        tcp.answers.len() > 1000,
        "as many SRV records as fit: {}",
        tcp.answers.len()
    );
    assert!(tcp.additionals.is_empty(), "addresses go first");
    assert!(!tcp.metadata.truncation, "TC means nothing over TCP");
    // Over UDP: the first records that fit, TC set.
    let (udp, raw) = ask_with(&z, name, RecordType::SRV, None, false);
    assert!(raw.len() <= 512 && udp.metadata.truncation);
    assert!(!udp.answers.is_empty());
    assert_eq!(udp.answers[..], tcp.answers[..udp.answers.len()]);
}

#[test]
fn a_query_of_edns_version_1_gets_badvers_with_an_opt_record_of_version_0() {
    let mut query = Message::query();
    query.metadata.id = 77;
    query.add_query(HQuery::query(
        Name::from_ascii("hello.demo.svc.clusterset.local.").unwrap(),
        RecordType::A,
    ));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    edns.set_version(1);
    query.set_edns(edns);
    let packet = query.to_vec().unwrap();
    for tcp in [false, true] {
        let mut out = Vec::new();
        let outcome = answer(&zone(), &packet, tcp, &mut out);
        assert_eq!(outcome.rcode, Some(rcode::BADVERS));
        let m = Message::from_vec(&out).unwrap();
        assert_eq!(m.metadata.id, 77);
        // 16 is BADVERS in an OPT-carrying response (hickory names it BADSIG, its TSIG twin).
        assert_eq!(u16::from(m.metadata.response_code), 16);
        assert!(m.answers.is_empty());
        assert_eq!(m.queries.len(), 1, "the question is echoed");
        let opt = m.edns.as_ref().unwrap();
        assert_eq!(opt.version(), 0);
        assert_eq!(opt.rcode_high(), 1);
    }
    // Version 0 is answered as usual.
    let (m, _) = ask_with(
        &zone(),
        "hello.demo.svc.clusterset.local.",
        RecordType::A,
        Some(1232),
        false,
    );
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert_eq!(m.edns.as_ref().map(Edns::version), Some(0));
}

#[test]
fn max_udp_payload_below_512_counts_as_512() {
    let tiny = ZoneConfig {
        max_udp_payload: 100,
        ..ZoneConfig::default()
    };
    // 20 A records: about 370 bytes, which fit in 512.
    let z = headless_zone(&tiny, &[("mid", 20)]);
    let (m, _) = ask_with(
        &z,
        "mid.demo.svc.clusterset.local.",
        RecordType::A,
        Some(4096),
        false,
    );
    assert!(!m.metadata.truncation);
    assert_eq!(m.answers.len(), 20);
    assert_eq!(m.edns.as_ref().map(Edns::max_payload), Some(512));
}

#[test]
fn malformed_packets_get_formerr_or_nothing() {
    let z = zone();
    let mut out = Vec::new();
    assert_eq!(answer(&z, &[1, 2, 3], false, &mut out).rcode, None);
    assert!(out.is_empty());
    // A header claiming two questions.
    let packet = [0xab, 0xcd, 0x01, 0x00, 0, 2, 0, 0, 0, 0, 0, 0];
    assert_eq!(
        answer(&z, &packet, false, &mut out).rcode,
        Some(rcode::FORMERR)
    );
    assert_eq!(&out[..2], &[0xab, 0xcd]);
    // A response is never answered.
    let response = [0xab, 0xcd, 0x81, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    assert_eq!(answer(&z, &response, false, &mut out).rcode, None);
}

/// Checks what every non-empty response to `packet` must be: at least a header that echoes the
/// id, has QR set and a response code Atoll sends; a header-only reply (the query could not be
/// parsed) has no records and says FORMERR or, for an opcode other than QUERY, NOTIMP; any other
/// reply echoes the question as sent and decodes.
fn check_reply(packet: &[u8], out: &[u8]) -> Result<(), TestCaseError> {
    prop_assert!(out.len() >= 12, "reply shorter than a header: {out:?}");
    prop_assert_eq!(&out[..2], &packet[..2], "id not echoed");
    prop_assert!(out[2] & 0x80 != 0, "QR not set");
    prop_assert_eq!(out[2] & 0x78, 0, "opcode of a reply is QUERY");
    let code = out[3] & 0x0f;
    prop_assert!(
        [
            rcode::NOERROR,
            rcode::FORMERR,
            rcode::SERVFAIL,
            rcode::NXDOMAIN,
            rcode::NOTIMP,
            rcode::REFUSED
        ]
        .contains(&code),
        "rcode {code}"
    );
    let parsed = Message::from_vec(out);
    prop_assert!(parsed.is_ok(), "unparseable response {out:?} to {packet:?}");
    if out.len() == 12 {
        prop_assert_eq!(
            &out[4..],
            &[0u8; 8],
            "a header-only reply carries no records"
        );
        prop_assert_eq!(out[2] & 0x02, 0, "a header-only reply is not truncated");
        let opcode = (packet[2] >> 3) & 0x0f;
        let expected = if opcode == 0 {
            rcode::FORMERR
        } else {
            rcode::NOTIMP
        };
        prop_assert_eq!(code, expected, "opcode {}", opcode);
    } else {
        prop_assert_eq!(&out[4..6], &[0u8, 1], "one question");
        let question_len = parse_query(packet).map(|q| q.question.len());
        prop_assert!(question_len.is_ok(), "a full reply to an unparseable query");
        let question_len = question_len.unwrap_or(0);
        prop_assert_eq!(&out[12..12 + question_len], &packet[12..12 + question_len]);
    }
    Ok(())
}

/// A query for `name` (type `qtype`) whose OPT record, when `claimed` is given, claims exactly
/// that UDP payload size (even under 512, which hickory's encoder would not write).
fn query_claiming(name: &str, qtype: RecordType, claimed: Option<u16>) -> Vec<u8> {
    let mut query = Message::query();
    query.metadata.id = 99;
    query.add_query(HQuery::query(Name::from_ascii(name).unwrap(), qtype));
    let mut packet = query.to_vec().unwrap();
    if let Some(size) = claimed {
        packet[10..12].copy_from_slice(&1u16.to_be_bytes());
        packet.extend_from_slice(&[0, 0, 41]);
        packet.extend_from_slice(&size.to_be_bytes());
        packet.extend_from_slice(&[0; 6]);
    }
    packet
}

/// Names of [`headless_zone`] with `big` (300 endpoints: kilobytes of A and SRV records) and
/// `mid` (40: about 700 bytes of A records), plus small, negative and refused answers.
const SIZED_QUESTIONS: [(&str, RecordType); 8] = [
    ("big.demo.svc.clusterset.local.", RecordType::A),
    ("big.demo.svc.clusterset.local.", RecordType::SRV),
    ("_tcp._tcp.big.demo.svc.clusterset.local.", RecordType::SRV),
    ("mid.demo.svc.clusterset.local.", RecordType::A),
    ("mid.demo.svc.clusterset.local.", RecordType::AAAA),
    ("nope.demo.svc.clusterset.local.", RecordType::A),
    ("clusterset.local.", RecordType::SOA),
    ("example.com.", RecordType::A),
];

proptest! {
    #[test]
    fn no_input_panics_and_every_answer_parses(packet in proptest::collection::vec(any::<u8>(), 0..300)) {
        let z = zone();
        let mut out = Vec::new();
        let outcome = answer(&z, &packet, false, &mut out);
        if out.is_empty() {
            // Dropped: only something without a whole header, or a response (answering it could
            // start a loop between two servers).
            prop_assert!(packet.len() < 12 || packet[2] & 0x80 != 0, "{packet:?} dropped");
            prop_assert_eq!(outcome.rcode, None);
        } else {
            check_reply(&packet, &out)?;
            // The header carries the low 4 bits (BADVERS's upper bits are in the OPT record).
            prop_assert_eq!(outcome.rcode.map(|code| code & 0x0f), Some(out[3] & 0x0f));
        }
    }

    #[test]
    fn headers_alone_get_a_header_only_reply(header in proptest::collection::vec(any::<u8>(), 12..=12)) {
        // Whatever the flags and counts, a query that is just a header (no question to parse)
        // is answered with a header, not ignored.
        let mut packet = header;
        packet[2] &= 0x7f;
        let mut out = Vec::new();
        answer(&zone(), &packet, false, &mut out);
        prop_assert_eq!(out.len(), 12, "{:?}", out);
        check_reply(&packet, &out)?;
    }

    #[test]
    fn mutated_real_queries_never_panic(flip in 0usize..60, byte in any::<u8>()) {
        let mut query = Message::query();
        query.add_query(HQuery::query(Name::from_ascii("web.demo.svc.clusterset.local.").unwrap(), RecordType::SRV));
        let mut packet = query.to_vec().unwrap();
        if flip < packet.len() { packet[flip] = byte; }
        let mut out = Vec::new();
        for tcp in [false, true] {
            answer(&zone(), &packet, tcp, &mut out);
            if !out.is_empty() {
                check_reply(&packet, &out)?;
            }
        }
    }

    #[test]
    fn udp_answers_fit_the_requesters_size_and_the_servers_maximum(
        which in 0..SIZED_QUESTIONS.len(),
        claimed in proptest::option::of(any::<u16>()),
        max in prop_oneof![Just(512u16), Just(1232), Just(4096), Just(u16::MAX), any::<u16>()],
    ) {
        let config = ZoneConfig { max_udp_payload: max, ..ZoneConfig::default() };
        let z = headless_zone(&config, &[("big", 300), ("mid", 40)]);
        let (name, qtype) = SIZED_QUESTIONS[which];
        let packet = query_claiming(name, qtype, claimed);
        let (mut udp, mut tcp) = (Vec::new(), Vec::new());
        let outcome = answer(&z, &packet, false, &mut udp);
        answer(&z, &packet, true, &mut tcp);
        // RFC 6891 §6.2.3: sizes under 512 count as 512, for the requester and the server alike.
        let server_max = max.max(512);
        let limit = usize::from(claimed.map_or(512, |c| c.max(512)).min(server_max));
        prop_assert!(udp.len() <= limit, "{} bytes over UDP, limit {limit}", udp.len());
        let m = Message::from_vec(&udp);
        prop_assert!(m.is_ok());
        let m = m.unwrap();
        let full = Message::from_vec(&tcp);
        prop_assert!(full.is_ok());
        let full = full.unwrap();
        if tcp.len() <= limit {
            prop_assert_eq!(&udp, &tcp, "an answer that fits is sent whole");
            prop_assert!(!outcome.truncated && !m.metadata.truncation);
        } else {
            // Trimmed to the first whole records of each section, question kept.
            prop_assert_eq!(&m.queries, &full.queries);
            prop_assert_eq!(&m.answers[..], &full.answers[..m.answers.len()]);
            prop_assert_eq!(&m.additionals[..], &full.additionals[..m.additionals.len()]);
            let cut = m.answers.len() < full.answers.len()
                || m.authorities.len() < full.authorities.len();
            prop_assert_eq!(outcome.truncated, cut);
            prop_assert_eq!(m.metadata.truncation, cut, "TC exactly when answers were left out");
            if cut {
                prop_assert!(m.additionals.is_empty(), "additional records go first");
            }
            if m.answers.len() < full.answers.len() {
                // As many answer records as fit: the next one of the full answer would not.
                let mut at = crate::wire::HEADER + parse_query(&packet).map(|q| q.question.len()).unwrap_or(0);
                for _ in 0..m.answers.len() {
                    at += super::fit::record_len(&tcp, at).unwrap_or(0);
                }
                let next = super::fit::record_len(&tcp, at).unwrap_or(0);
                prop_assert!(udp.len() + next > limit, "record {} of {} would fit", m.answers.len() + 1, full.answers.len());
            }
        }
        prop_assert!(!full.metadata.truncation, "never TC over TCP");
        prop_assert_eq!(m.edns.as_ref().map(Edns::max_payload), claimed.map(|_| server_max));
    }
}

/// A headless import "huge" with `endpoints` ready IPv4 endpoints (each with a hostname) and
/// `ports` named TCP ports, in one slice of cluster c1.
fn huge_zone(endpoints: usize, ports: usize) -> Zone {
    use k8s_openapi::api::discovery::v1::EndpointPort;
    let port_specs: Vec<(String, i32)> = (0..ports)
        .map(|p| (format!("p{p}"), 1000 + p as i32))
        .collect();
    let spec_refs: Vec<(&str, &str, i32)> = port_specs
        .iter()
        .map(|(n, p)| (n.as_str(), "TCP", *p))
        .collect();
    let import = mk_import("demo", "huge", ServiceImportType::Headless, &[], &spec_refs);
    let addresses: Vec<(String, String)> = (0..endpoints)
        .map(|i| {
            (
                format!("10.{}.{}.{}", i / 65_536, (i / 256) % 256, i % 256),
                format!("pod-{i}"),
            )
        })
        .collect();
    let refs: Vec<(&str, Option<&str>, bool)> = addresses
        .iter()
        .map(|(a, h)| (a.as_str(), Some(h.as_str()), true))
        .collect();
    let mut slice = mk_slice("demo", "huge", "c1", "IPv4", &refs);
    slice.ports = Some(
        port_specs
            .iter()
            .map(|(n, p)| EndpointPort {
                name: Some(n.clone()),
                protocol: Some("TCP".into()),
                port: Some(*p),
                app_protocol: None,
            })
            .collect(),
    );
    Zone::build(&ZoneConfig::default(), &[&import], &[&slice])
}

#[test]
fn a_name_with_more_records_than_a_message_holds_is_trimmed_and_says_so() {
    // 70,000 ready endpoints: more A records at the service's name than a u16 counts (the
    // defect: every `atoll dns` panicked on `attempt to add with overflow`, a release build
    // wrapped and served corrupt counts). The zone keeps MAX_RRSET of them (the same in every
    // replica), counts the rest and says so in an Extended DNS Error; over TCP the answer is
    // what one message carries.
    let z = huge_zone(70_000, 1);
    assert!(z.trimmed > 0, "trimmed records are counted");
    let name = "huge.demo.svc.clusterset.local.";
    let (tcp, raw) = ask_with(&z, name, RecordType::A, Some(1232), true);
    assert_eq!(tcp.metadata.response_code, ResponseCode::NoError);
    assert!(!tcp.answers.is_empty() && tcp.answers.len() <= MAX_RRSET);
    assert!(raw.len() <= usize::from(u16::MAX));
    assert!(
        String::from_utf8_lossy(&raw).contains("answer cut"),
        "the Extended DNS Error says the answer was cut"
    );
    // A name of the same service with few records is whole, without that error.
    let (one, raw) = ask_with(
        &z,
        "pod-7.c1.huge.demo.svc.clusterset.local.",
        RecordType::A,
        Some(1232),
        false,
    );
    assert_eq!(ips(&one), vec![ip("10.0.0.7")]);
    assert!(!String::from_utf8_lossy(&raw).contains("answer cut"));
}

#[test]
fn a_member_at_every_bound_cannot_push_a_service_past_its_record_budget() {
    // The hub CRDs' bounds and the importer's endpoint cap allow 20,000 endpoints with 100
    // ports each: two million SRV records for one service. The zone holds at most
    // MAX_SERVICE_RECORDS of its records (every name's set at most MAX_RRSET), so its bytes
    // stay under a fixed bound (at most 200 bytes a record here) whatever the member sends.
    let z = huge_zone(20_000, 100);
    assert!(z.trimmed > 1_000_000, "{} trimmed", z.trimmed);
    let bound = MAX_SERVICE_RECORDS * 200;
    assert!(z.bytes <= bound, "{} bytes over {bound}", z.bytes);
    let srv = ask_with(
        &z,
        "_p0._tcp.huge.demo.svc.clusterset.local.",
        RecordType::SRV,
        None,
        true,
    )
    .0;
    assert_eq!(srv.metadata.response_code, ResponseCode::NoError);
}
