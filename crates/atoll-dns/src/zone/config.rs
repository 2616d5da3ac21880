//! Settings of the served zone.

/// The largest UDP answer Atoll sends by default, and what its OPT record advertises: the DNS
/// flag day 2020 value, which fits an unfragmented IPv6 packet on common links. Honouring
/// whatever size a requester claims (up to 65,535 bytes) would let a spoofed 60-byte query
/// draw a kilobytes-long answer at a victim.
pub const DEFAULT_MAX_UDP_PAYLOAD: u16 = 1232;
/// The smallest UDP payload size there is: plain DNS's, and the floor of any EDNS size (RFC 6891
/// §6.2.3 says smaller values count as 512).
pub const MIN_UDP_PAYLOAD: u16 = 512;

/// Settings of the served zone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConfig {
    /// The zone, `clusterset.local` by default.
    pub zone: String,
    /// TTL of every service record (CoreDNS uses 5 s).
    pub ttl: u32,
    /// TTL of the `dns-version` TXT record.
    pub txt_ttl: u32,
    /// The largest UDP answer the server sends, whatever the requester's EDNS size; also the
    /// size its OPT record advertises. Values under 512 count as 512.
    pub max_udp_payload: u16,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        Self {
            zone: "clusterset.local".to_owned(),
            ttl: 5,
            txt_ttl: 28800,
            max_udp_payload: DEFAULT_MAX_UDP_PAYLOAD,
        }
    }
}
