//! The few pieces of the DNS wire format (RFC 1035, 6891, 8914) the server needs: parsing one
//! query, encoding names and resource records. Nothing here allocates on the query path except
//! the response buffer the caller hands in.

/// Record types the zone serves.
pub mod rtype {
    pub const A: u16 = 1;
    pub const NS: u16 = 2;
    pub const SOA: u16 = 6;
    pub const TXT: u16 = 16;
    pub const AAAA: u16 = 28;
    pub const SRV: u16 = 33;
    pub const OPT: u16 = 41;
}

/// Class IN.
pub const CLASS_IN: u16 = 1;

/// Response codes.
pub mod rcode {
    pub const NOERROR: u8 = 0;
    pub const FORMERR: u8 = 1;
    pub const SERVFAIL: u8 = 2;
    pub const NXDOMAIN: u8 = 3;
    pub const NOTIMP: u8 = 4;
    pub const REFUSED: u8 = 5;
    /// An extended response code (RFC 6891 §9): its low 4 bits (0) go in the header, the rest
    /// in the OPT record, which a BADVERS response therefore always carries.
    pub const BADVERS: u8 = 16;
}

/// Longest possible wire-format name (RFC 1035 §2.3.4).
pub const MAX_NAME: usize = 255;
/// Size of the DNS header.
pub const HEADER: usize = 12;

/// A parsed query. `question` borrows the question section from the packet, so the response
/// can echo it byte for byte (client-chosen letter case included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<'a> {
    pub id: u16,
    /// The RD bit, echoed in the response.
    pub recursion_desired: bool,
    /// Opcode (0 = standard query).
    pub opcode: u8,
    /// The whole question: name, type and class, as sent.
    pub question: &'a [u8],
    /// The name, lowercased, in wire format.
    pub name_lower: [u8; MAX_NAME],
    pub name_len: usize,
    pub qtype: u16,
    pub qclass: u16,
    /// The requester's UDP payload size if it sent an OPT record (EDNS0).
    pub edns_payload: Option<u16>,
    /// The EDNS version of the requester's OPT record (0 without one).
    pub edns_version: u8,
}

impl Query<'_> {
    /// The lowercased name in wire format.
    pub fn name(&self) -> &[u8] {
        &self.name_lower[..self.name_len]
    }
}

/// Why a packet is not a query we can answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseError {
    /// Too short or otherwise unusable: drop it, there is nothing to answer to.
    Unanswerable,
    /// A header we can answer to, with this rcode (FORMERR or NOTIMP).
    Reply { id: u16, rcode: u8 },
}

fn u16_at(packet: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*packet.get(at)?, *packet.get(at + 1)?]))
}

/// Parses a query: exactly one question, no answers or authorities, at most one additional
/// record (which, if present, must be an OPT record at the root).
pub fn parse_query(packet: &[u8]) -> Result<Query<'_>, ParseError> {
    if packet.len() < HEADER {
        return Err(ParseError::Unanswerable);
    }
    let id = u16::from_be_bytes([packet[0], packet[1]]);
    let flags = packet[2];
    let formerr = ParseError::Reply {
        id,
        rcode: rcode::FORMERR,
    };
    if flags & 0x80 != 0 {
        // A response, not a query: never answer (no reflection loops).
        return Err(ParseError::Unanswerable);
    }
    let opcode = (flags >> 3) & 0x0f;
    let (qd, an, ns, ar) = (
        u16_at(packet, 4).unwrap_or(0),
        u16_at(packet, 6).unwrap_or(0),
        u16_at(packet, 8).unwrap_or(0),
        u16_at(packet, 10).unwrap_or(0),
    );
    if opcode != 0 {
        return Err(ParseError::Reply {
            id,
            rcode: rcode::NOTIMP,
        });
    }
    if qd != 1 || an != 0 || ns != 0 || ar > 1 {
        return Err(formerr);
    }
    let mut name_lower = [0u8; MAX_NAME];
    let mut at = HEADER;
    let mut name_len = 0;
    loop {
        let len = *packet.get(at).ok_or(formerr)? as usize;
        if len & 0xc0 != 0 {
            // Compression (or a reserved label type) in a question is not something a client sends.
            return Err(formerr);
        }
        if name_len + len + 1 > MAX_NAME {
            return Err(formerr);
        }
        let label = packet.get(at..at + 1 + len).ok_or(formerr)?;
        for (i, b) in label.iter().enumerate() {
            name_lower[name_len + i] = if i == 0 { *b } else { b.to_ascii_lowercase() };
        }
        name_len += len + 1;
        at += len + 1;
        if len == 0 {
            break;
        }
    }
    let qtype = u16_at(packet, at).ok_or(formerr)?;
    let qclass = u16_at(packet, at + 2).ok_or(formerr)?;
    let question = &packet[HEADER..at + 4];
    at += 4;
    let mut edns_payload = None;
    let mut edns_version = 0;
    if ar == 1 {
        // OPT: root name, type 41, class = payload size, ttl (extended rcode, version, flags),
        // rdlength, rdata.
        if packet.get(at) != Some(&0) || u16_at(packet, at + 1) != Some(rtype::OPT) {
            return Err(formerr);
        }
        let payload = u16_at(packet, at + 3).ok_or(formerr)?;
        edns_version = *packet.get(at + 6).ok_or(formerr)?;
        let rdlen = u16_at(packet, at + 9).ok_or(formerr)? as usize;
        if packet.len() < at + 11 + rdlen {
            return Err(formerr);
        }
        edns_payload = Some(payload.max(512));
    }
    Ok(Query {
        id,
        recursion_desired: flags & 0x01 != 0,
        opcode,
        question,
        name_lower,
        name_len,
        qtype,
        qclass,
        edns_payload,
        edns_version,
    })
}

/// Encodes a dotted name (`a.b.c`, trailing dot optional) in lowercase wire format. Returns
/// `None` for an empty label, a label over 63 bytes or a name over 255 bytes.
pub fn encode_name(dotted: &str) -> Option<Vec<u8>> {
    let trimmed = dotted.strip_suffix('.').unwrap_or(dotted);
    let mut out = Vec::with_capacity(trimmed.len() + 2);
    if !trimmed.is_empty() {
        for label in trimmed.split('.') {
            if label.is_empty() || label.len() > 63 {
                return None;
            }
            out.push(label.len() as u8);
            out.extend(label.bytes().map(|b| b.to_ascii_lowercase()));
        }
    }
    out.push(0);
    (out.len() <= MAX_NAME).then_some(out)
}

/// Appends one resource record with an explicit (uncompressed) owner name.
pub fn push_rr(out: &mut Vec<u8>, owner: &[u8], rtype: u16, ttl: u32, rdata: &[u8]) {
    out.extend_from_slice(owner);
    push_rr_tail(out, rtype, ttl, rdata);
}

/// Appends type, class IN, TTL, RDLENGTH and RDATA (everything after the owner name).
pub fn push_rr_tail(out: &mut Vec<u8>, rtype: u16, ttl: u32, rdata: &[u8]) {
    out.extend_from_slice(&rtype.to_be_bytes());
    out.extend_from_slice(&CLASS_IN.to_be_bytes());
    out.extend_from_slice(&ttl.to_be_bytes());
    out.extend_from_slice(&(rdata.len() as u16).to_be_bytes());
    out.extend_from_slice(rdata);
}

/// Longest Extended DNS Error text sent, in bytes.
const MAX_EDE_TEXT: usize = 200;

/// Bytes [`push_opt`] appends for `ede`.
pub fn opt_len(ede: Option<(u16, &str)>) -> usize {
    11 + ede.map_or(0, |(_, text)| 6 + text.len().min(MAX_EDE_TEXT))
}

/// Appends an OPT record of EDNS version 0 advertising `payload`, carrying `rcode`'s upper 8
/// bits (0 but for extended codes such as [`rcode::BADVERS`]), with an Extended DNS Error option
/// when given.
pub fn push_opt(out: &mut Vec<u8>, payload: u16, rcode: u8, ede: Option<(u16, &str)>) {
    out.push(0);
    out.extend_from_slice(&rtype::OPT.to_be_bytes());
    out.extend_from_slice(&payload.to_be_bytes());
    // TTL: extended rcode, version 0, no flags.
    out.extend_from_slice(&[rcode >> 4, 0, 0, 0]);
    match ede {
        Some((code, text)) => {
            let text = &text.as_bytes()[..text.len().min(MAX_EDE_TEXT)];
            let option_len = 2 + text.len();
            out.extend_from_slice(&((4 + option_len) as u16).to_be_bytes());
            out.extend_from_slice(&15u16.to_be_bytes());
            out.extend_from_slice(&(option_len as u16).to_be_bytes());
            out.extend_from_slice(&code.to_be_bytes());
            out.extend_from_slice(text);
        }
        None => out.extend_from_slice(&0u16.to_be_bytes()),
    }
}

/// Appends a response header.
pub fn push_header(
    out: &mut Vec<u8>,
    id: u16,
    rd: bool,
    aa: bool,
    tc: bool,
    rcode: u8,
    counts: [u16; 4],
) {
    out.extend_from_slice(&id.to_be_bytes());
    let flags_hi = 0x80 | if aa { 0x04 } else { 0 } | if tc { 0x02 } else { 0 } | u8::from(rd);
    out.push(flags_hi);
    out.push(rcode & 0x0f);
    for count in counts {
        out.extend_from_slice(&count.to_be_bytes());
    }
}
