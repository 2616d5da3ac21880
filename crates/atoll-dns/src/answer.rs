//! Answering one query from a [`Zone`]: parse, look up, copy pre-encoded bytes; [`fit`] decides
//! which records go when a response is larger than its transport allows.

mod fit;

use crate::wire::{
    self, HEADER, ParseError, Query, opt_len, parse_query, push_header, push_opt, rcode,
};
use crate::zone::{MIN_UDP_PAYLOAD, Missing, RrSet, Zone};
use fit::{Sections, fit};

/// Extended DNS Error info codes (RFC 8914).
const EDE_OTHER: u16 = 0;
const EDE_NOT_READY: u16 = 14;

/// The Extended DNS Error text of an answer whose records were trimmed in the zone.
const TRIMMED: &str = "answer cut: this name holds more records than one DNS message can carry";

/// What happened to a packet, for metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// The response code sent (extended codes such as BADVERS included), or `None` when the
    /// packet was dropped (nothing to answer).
    pub rcode: Option<u8>,
    /// The query type, when the packet parsed.
    pub qtype: Option<u16>,
    /// Whether the UDP answer was truncated.
    pub truncated: bool,
}

/// Writes into `out` the response to `packet`, received over TCP when `tcp` is true, otherwise
/// over UDP. A UDP response is at most the requester's EDNS size (512 without EDNS) and at most
/// the zone's [`max_udp_payload`](crate::zone::ZoneConfig::max_udp_payload), a TCP response at
/// most 65,535 bytes; a response that does not fit is trimmed to whole records ([`fit`]), with
/// TC over UDP when answer records were left out, so the client retries over TCP. A query of
/// an EDNS version other than 0 gets BADVERS (RFC 6891 §6.1.3). `out` is left empty when the
/// packet must be dropped.
pub fn answer(zone: &Zone, packet: &[u8], tcp: bool, out: &mut Vec<u8>) -> Outcome {
    out.clear();
    let query = match parse_query(packet) {
        Ok(q) => q,
        Err(ParseError::Unanswerable) => {
            return Outcome {
                rcode: None,
                qtype: None,
                truncated: false,
            };
        }
        Err(ParseError::Reply { id, rcode }) => {
            push_header(out, id, false, false, false, rcode, [0; 4]);
            return Outcome {
                rcode: Some(rcode),
                qtype: None,
                truncated: false,
            };
        }
    };
    let qtype = Some(query.qtype);
    if query.edns_version > 0 {
        // Only version 0 exists; the OPT record carries the upper bits of BADVERS and says
        // which version we speak.
        push_header(
            out,
            query.id,
            query.recursion_desired,
            false,
            false,
            rcode::BADVERS,
            [1, 0, 0, 1],
        );
        out.extend_from_slice(query.question);
        push_opt(out, zone.max_udp_payload, rcode::BADVERS, None);
        return Outcome {
            rcode: Some(rcode::BADVERS),
            qtype,
            truncated: false,
        };
    }
    let limit = if tcp {
        usize::from(u16::MAX)
    } else {
        usize::from(
            query
                .edns_payload
                .unwrap_or(MIN_UDP_PAYLOAD)
                .min(zone.max_udp_payload),
        )
    };
    let (code, set, authority, ede) = classify(zone, &query);
    let empty = RrSet::default();
    let set = set.unwrap_or(&empty);
    let soa: &[u8] = if authority { &zone.soa } else { &[] };
    let edns = query.edns_payload.is_some();
    let sections = Sections {
        answers: &set.answers,
        answer_count: set.answer_count,
        authority: soa,
        additional: &set.additional,
        additional_count: set.additional_count,
        opt: edns.then(|| (opt_len(ede), opt_len(None))),
    };
    let fit = fit(HEADER + query.question.len(), &sections, limit, tcp);
    let aa = matches!(code, rcode::NOERROR | rcode::NXDOMAIN);
    let counts = [
        1,
        fit.answer_count,
        u16::from(fit.authority && authority),
        fit.additional_count.saturating_add(u16::from(edns)),
    ];
    push_header(
        out,
        query.id,
        query.recursion_desired,
        aa,
        fit.truncated,
        code,
        counts,
    );
    out.extend_from_slice(query.question);
    out.extend_from_slice(&set.answers[..fit.answer_bytes]);
    if fit.authority {
        out.extend_from_slice(soa);
    }
    out.extend_from_slice(&set.additional[..fit.additional_bytes]);
    if edns {
        push_opt(
            out,
            zone.max_udp_payload,
            rcode::NOERROR,
            ede.filter(|_| fit.ede),
        );
    }
    Outcome {
        rcode: Some(code),
        qtype,
        truncated: fit.truncated,
    }
}

/// (rcode, record set, SOA in authority?, extended error) for a parsed query.
fn classify<'z>(
    zone: &'z Zone,
    query: &Query<'_>,
) -> (u8, Option<&'z RrSet>, bool, Option<(u16, &'static str)>) {
    if query.qclass != wire::CLASS_IN {
        return (rcode::REFUSED, None, false, None);
    }
    let name = query.name();
    if !under(name, &zone.apex) {
        // Never an open resolver.
        return (rcode::REFUSED, None, false, None);
    }
    if !zone.synced {
        return (
            rcode::SERVFAIL,
            None,
            false,
            Some((EDE_NOT_READY, "not yet synced with the cluster")),
        );
    }
    match zone.node(name) {
        Some(node) => match node.sets.iter().find(|(t, _)| *t == query.qtype) {
            Some((_, set)) => {
                let trimmed = (set.trimmed > 0).then_some((EDE_OTHER, TRIMMED));
                (rcode::NOERROR, Some(set), false, trimmed)
            }
            None => (rcode::NOERROR, None, true, None),
        },
        None => {
            let why: Missing = zone.why_missing(name);
            (rcode::NXDOMAIN, None, true, Some((EDE_OTHER, why.text())))
        }
    }
}

/// Whether wire name `name` equals `apex` or ends with it at a label boundary.
fn under(name: &[u8], apex: &[u8]) -> bool {
    if name.len() < apex.len() || !name.ends_with(apex) {
        return false;
    }
    // Walk the labels to make sure the suffix starts at a label boundary.
    let mut at = 0;
    while at < name.len() - apex.len() {
        at += usize::from(name[at]) + 1;
    }
    at == name.len() - apex.len()
}

#[cfg(test)]
mod tests;
