//! Pre-encoded record sets, and the builder that collects a set of names' records and encodes
//! them once.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::wire::{push_rr, push_rr_tail, rtype};

/// The most records of one type at one name the zone keeps: more than one DNS message can
/// carry (65,535 bytes hold at most 4,095 A records), so no answer loses anything it could have
/// sent, no record count can overflow, and one member's huge headless service costs bounded
/// memory. What is over is trimmed (the first in wire order kept: the same records in every
/// replica) and counted; the answer says so with an Extended DNS Error.
pub(crate) const MAX_RRSET: usize = 4_096;

/// The most records the zone keeps for one service, over all its names: a headless service of
/// 20,000 endpoints with 100 ports each would otherwise be four million SRV records in every
/// importer's `atoll dns`. Names past the budget are left out (counted as trimmed).
pub(crate) const MAX_SERVICE_RECORDS: usize = 100_000;

/// Pre-encoded records of one type at one name: the answer RRs (owner = pointer to the
/// question) and the additional RRs (owners spelled out).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RrSet {
    pub answers: Vec<u8>,
    pub answer_count: u16,
    pub additional: Vec<u8>,
    pub additional_count: u16,
    /// Answer records left out at [`MAX_RRSET`].
    pub trimmed: u32,
}

/// A name that exists; a type without an entry gets NODATA.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Node {
    pub sets: Vec<(u16, RrSet)>,
}

impl Node {
    /// Bytes of pre-encoded records.
    pub fn bytes(&self) -> usize {
        self.sets.iter().fold(0usize, |sum, (_, s)| {
            sum.saturating_add(s.answers.len())
                .saturating_add(s.additional.len())
        })
    }

    /// Answer records left out of this name's sets at [`MAX_RRSET`].
    pub fn trimmed(&self) -> u64 {
        self.sets
            .iter()
            .fold(0u64, |sum, (_, s)| sum.saturating_add(u64::from(s.trimmed)))
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

/// Collects records by name (wire format), then encodes them into [`Node`]s, at most
/// `budget` records in all (`None`: no budget).
#[derive(Default)]
pub(crate) struct Builder {
    names: BTreeMap<Vec<u8>, Vec<(u16, PendingSet)>>,
    budget: Option<usize>,
    /// Records left out because the budget was spent.
    over_budget: u64,
}

impl Builder {
    /// A builder that keeps at most `records` records (answers and additional ones).
    pub fn with_budget(records: usize) -> Self {
        Self {
            budget: Some(records),
            ..Self::default()
        }
    }

    /// Takes one record from the budget; `false` (and counted) when it is spent.
    fn spend(&mut self) -> bool {
        match &mut self.budget {
            Some(0) => {
                self.over_budget = self.over_budget.saturating_add(1);
                false
            }
            Some(left) => {
                *left = left.saturating_sub(1);
                true
            }
            None => true,
        }
    }

    /// Records left out because the budget was spent.
    pub fn over_budget(&self) -> u64 {
        self.over_budget
    }

    fn sets(&mut self, name: &[u8]) -> &mut Vec<(u16, PendingSet)> {
        self.names.entry(name.to_vec()).or_default()
    }

    fn set(&mut self, name: &[u8], rtype: u16) -> &mut PendingSet {
        let sets = self.sets(name);
        let index = match sets.iter().position(|(t, _)| *t == rtype) {
            Some(index) => index,
            None => {
                sets.push((rtype, PendingSet::default()));
                sets.len().saturating_sub(1)
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
        if self.spend() {
            self.set(name, rtype).answers.push(rdata);
        }
    }

    /// An address record for the additional section of `rtype` answers at `name`.
    pub fn add_additional(&mut self, name: &[u8], rtype: u16, owner: &[u8], address: &IpAddr) {
        if !self.spend() {
            return;
        }
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
        let trimmed = rdatas.len().saturating_sub(MAX_RRSET);
        rdatas.truncate(MAX_RRSET);
        additional.truncate(MAX_RRSET);
        let ttl = if t == rtype::TXT {
            ttls.txt
        } else {
            ttls.records
        };
        // Both counts are at most MAX_RRSET, far below u16::MAX.
        let mut set = RrSet {
            answer_count: u16::try_from(rdatas.len()).unwrap_or(u16::MAX),
            additional_count: u16::try_from(additional.len()).unwrap_or(u16::MAX),
            trimmed: u32::try_from(trimmed).unwrap_or(u32::MAX),
            ..RrSet::default()
        };
        for rdata in rdatas {
            set.answers.extend_from_slice(&[0xc0, 0x0c]);
            push_rr_tail(&mut set.answers, t, ttl, &rdata);
        }
        for (add_owner, add_type, rdata) in additional {
            push_rr(
                &mut set.additional,
                &add_owner,
                add_type,
                ttls.records,
                &rdata,
            );
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
    let mut rdata = Vec::with_capacity(target.len().saturating_add(6));
    rdata.extend_from_slice(&0u16.to_be_bytes());
    rdata.extend_from_slice(&weight.to_be_bytes());
    rdata.extend_from_slice(&port.to_be_bytes());
    rdata.extend_from_slice(target);
    rdata
}
