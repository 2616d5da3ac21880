//! The local ClusterSet's port scheme. Its one source is `hack/ports.env`, which the scripts
//! that start the processes source (`hack/lib.sh`) and this module reads at compile time: for
//! cluster `cN` (N = member index + 1, 1 ≤ N ≤ 99) the agent's admin server listens on
//! 127.0.0.1:(agent base + N), the DNS server on 127.0.0.1:(DNS base + N) (UDP and TCP) and the
//! DNS server's admin server on 127.0.0.1:(DNS admin base + N). A setting missing from the file,
//! or not a port number, fails the build.

use anyhow::ensure;

const PORTS_ENV: &str = include_str!("../../../hack/ports.env");

/// The number on the line `<name>=<number>` of `hack/ports.env`, at compile time.
const fn setting(name: &str) -> u16 {
    let text = PORTS_ENV.as_bytes();
    let key = name.as_bytes();
    let mut line = 0;
    while line < text.len() {
        let mut j = 0;
        while j < key.len() && line + j < text.len() && text[line + j] == key[j] {
            j += 1;
        }
        if j == key.len() && line + j < text.len() && text[line + j] == b'=' {
            let mut k = line + j + 1;
            let mut value: u32 = 0;
            let mut digits = 0;
            while k < text.len() && text[k].is_ascii_digit() {
                value = value * 10 + (text[k] - b'0') as u32;
                assert!(
                    value <= u16::MAX as u32,
                    "hack/ports.env: a port above 65535"
                );
                k += 1;
                digits += 1;
            }
            assert!(digits > 0, "hack/ports.env: a setting that is not a number");
            return value as u16;
        }
        while line < text.len() && text[line] != b'\n' {
            line += 1;
        }
        line += 1;
    }
    panic!("hack/ports.env lacks a setting ports.rs reads")
}

/// Most clusters the scheme has ports for.
pub const MAX_CLUSTERS: usize = setting("PORTS_MAX_CLUSTERS") as usize;

const AGENT_ADMIN_BASE: u16 = setting("PORTS_AGENT_ADMIN_BASE");
const DNS_BASE: u16 = setting("PORTS_DNS_BASE");
const DNS_ADMIN_BASE: u16 = setting("PORTS_DNS_ADMIN_BASE");

/// An agent admin port that no cluster of the scheme uses (it is the one of "c0"), for a test
/// that runs an agent of its own beside those `hack/agents.sh` started.
pub const SPARE_AGENT_ADMIN_PORT: u16 = AGENT_ADMIN_BASE;

fn port(base: u16, member_index: usize) -> anyhow::Result<u16> {
    ensure!(
        member_index < MAX_CLUSTERS,
        "member index {member_index}: the local ClusterSet's port scheme covers c1..c{MAX_CLUSTERS}"
    );
    let offset = u16::try_from(member_index + 1)?;
    base.checked_add(offset)
        .ok_or_else(|| anyhow::anyhow!("member index {member_index}: port above 65535"))
}

/// Admin port (metrics, health) of cluster `c<member_index + 1>`'s agent.
pub fn agent_admin_port(member_index: usize) -> anyhow::Result<u16> {
    port(AGENT_ADMIN_BASE, member_index)
}

/// DNS port (UDP and TCP) of cluster `c<member_index + 1>`'s `atoll dns`.
pub fn dns_port(member_index: usize) -> anyhow::Result<u16> {
    port(DNS_BASE, member_index)
}

/// Admin port of cluster `c<member_index + 1>`'s `atoll dns`.
pub fn dns_admin_port(member_index: usize) -> anyhow::Result<u16> {
    port(DNS_ADMIN_BASE, member_index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn c1_c10_and_c99_get_the_documented_ports() -> anyhow::Result<()> {
        assert_eq!(
            (agent_admin_port(0)?, dns_port(0)?, dns_admin_port(0)?),
            (19_101, 19_301, 19_501)
        );
        assert_eq!(
            (agent_admin_port(9)?, dns_port(9)?, dns_admin_port(9)?),
            (19_110, 19_310, 19_510)
        );
        assert_eq!(
            (agent_admin_port(98)?, dns_port(98)?, dns_admin_port(98)?),
            (19_199, 19_399, 19_599)
        );
        Ok(())
    }

    #[test]
    fn no_two_processes_of_99_clusters_share_a_port() -> anyhow::Result<()> {
        let mut ports = BTreeSet::from([SPARE_AGENT_ADMIN_PORT]);
        for i in 0..MAX_CLUSTERS {
            for p in [agent_admin_port(i)?, dns_port(i)?, dns_admin_port(i)?] {
                assert!(ports.insert(p), "port {p} used twice (member index {i})");
            }
        }
        assert_eq!(ports.len(), 3 * MAX_CLUSTERS + 1);
        Ok(())
    }

    #[test]
    fn a_100th_cluster_has_no_port() {
        assert!(agent_admin_port(MAX_CLUSTERS).is_err());
        assert!(dns_port(MAX_CLUSTERS).is_err());
        assert!(dns_admin_port(MAX_CLUSTERS).is_err());
    }
}
