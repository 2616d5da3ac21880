//! Pre-encoded record sets, and the builder that collects a set of names' records and encodes
//! them once.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::wire::{push_rr, push_rr_tail, rtype};

/// Pre-encoded records of one type at one name: the answer RRs (owner = pointer to the
/// question) and the additional RRs (owners spelled out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RrSet {
    pub answers: Vec<u8>,
    pub answer_count: u16,
    pub additional: Vec<u8>,
    pub additional_count: u16,
}

/// A name that exists; a type without an entry gets NODATA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub sets: Vec<(u16, RrSet)>,
}

impl Node {
    /// Bytes of pre-encoded records.
    pub fn bytes(&self) -> usize {
        self.sets
            .iter()
            .map(|(_, s)| s.answers.len() + s.additional.len())
            .sum()
    }
}

/// TTLs of the encoded records.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ttls {
    pub records: u32,
    pub txt: u32,
}

/// The records of one type at one name while names are being collected: answer RDATAs and
/// additional records as (owner, type, RDATA), sorted and de-duplicated once at encoding.
#[derive(Default)]
struct PendingSet {
    answers: Vec<Vec<u8>>,
    additional: Vec<(Vec<u8>, u16, Vec<u8>)>,
}

/// Collects records by name (wire format), then encodes them into [`Node`]s.
#[derive(Default)]
pub(crate) struct Builder {
    names: BTreeMap<Vec<u8>, Vec<(u16, PendingSet)>>,
}

impl Builder {
    fn sets(&mut self, name: &[u8]) -> &mut Vec<(u16, PendingSet)> {
        self.names.entry(name.to_vec()).or_default()
    }

    fn set(&mut self, name: &[u8], rtype: u16) -> &mut PendingSet {
        let sets = self.sets(name);
        let index = match sets.iter().position(|(t, _)| *t == rtype) {
            Some(index) => index,
            None => {
                sets.push((rtype, PendingSet::default()));
                sets.len() - 1
            }
        };
        &mut sets[index].1
    }

    /// `name` exists, with or without records.
    pub fn touch(&mut self, name: &[u8]) {
        self.sets(name);
    }

    /// An answer record of `rtype` at `name`.
    pub fn add(&mut self, name: &[u8], rtype: u16, rdata: Vec<u8>) {
        self.set(name, rtype).answers.push(rdata);
    }

    /// An address record for the additional section of `rtype` answers at `name`.
    pub fn add_additional(&mut self, name: &[u8], rtype: u16, owner: &[u8], address: &IpAddr) {
        let (add_type, rdata) = a_or_aaaa(address);
        self.set(name, rtype)
            .additional
            .push((owner.to_vec(), add_type, rdata));
    }

    /// An A or AAAA answer record at `name`.
    pub fn add_address(&mut self, name: &[u8], address: &IpAddr) {
        let (t, rdata) = a_or_aaaa(address);
        self.add(name, t, rdata);
    }

    /// The encoded nodes, sorted by name.
    pub fn encode(self, ttls: Ttls) -> Vec<(Box<[u8]>, Node)> {
        self.names
            .into_iter()
            .map(|(owner, types)| (owner.into_boxed_slice(), encode_node(types, ttls)))
            .collect()
    }
}

fn encode_node(mut types: Vec<(u16, PendingSet)>, ttls: Ttls) -> Node {
    types.sort_by_key(|(t, _)| *t);
    let mut node = Node::default();
    for (t, pending) in types {
        let PendingSet {
            answers: mut rdatas,
            mut additional,
        } = pending;
        rdatas.sort();
        rdatas.dedup();
        additional.sort();
        additional.dedup();
        let ttl = if t == rtype::TXT {
            ttls.txt
        } else {
            ttls.records
        };
        let mut set = RrSet::default();
        for rdata in rdatas {
            set.answers.extend_from_slice(&[0xc0, 0x0c]);
            push_rr_tail(&mut set.answers, t, ttl, &rdata);
            set.answer_count += 1;
        }
        for (add_owner, add_type, rdata) in additional {
            push_rr(
                &mut set.additional,
                &add_owner,
                add_type,
                ttls.records,
                &rdata,
            );
            set.additional_count += 1;
        }
        set.answers.shrink_to_fit();
        set.additional.shrink_to_fit();
        node.sets.push((t, set));
    }
    node.sets.shrink_to_fit();
    node
}

/// The record type and RDATA of an address.
pub(crate) fn a_or_aaaa(address: &IpAddr) -> (u16, Vec<u8>) {
    match address {
        IpAddr::V4(a) => (rtype::A, a.octets().to_vec()),
        IpAddr::V6(a) => (rtype::AAAA, a.octets().to_vec()),
    }
}

/// The RDATA of an SRV record of priority 0.
pub(crate) fn srv_rdata(weight: u16, port: u16, target: &[u8]) -> Vec<u8> {
    let mut rdata = Vec::with_capacity(6 + target.len());
    rdata.extend_from_slice(&0u16.to_be_bytes());
    rdata.extend_from_slice(&weight.to_be_bytes());
    rdata.extend_from_slice(&port.to_be_bytes());
    rdata.extend_from_slice(target);
    rdata
}
