//! The local ClusterSet's port scheme, the same as `hack/lib.sh` defines for the scripts that
//! start the processes: for cluster `cN` (N = member index + 1, 1 ≤ N ≤ 99) the agent's admin
//! server listens on 127.0.0.1:(19100 + N), the DNS server on 127.0.0.1:(19300 + N) (UDP and
//! TCP) and the DNS server's admin server on 127.0.0.1:(19500 + N). The ranges do not overlap
//! for any N ≤ 99, and they lie below Linux's ephemeral range (32768–60999, from which outgoing
//! connections take their ports) and below the ports kwokctl picks for the control planes
//! (counting down from 32766).

use anyhow::ensure;

/// Most clusters the scheme has ports for.
pub const MAX_CLUSTERS: usize = 99;

const AGENT_ADMIN_BASE: u16 = 19_100;
const DNS_BASE: u16 = 19_300;
const DNS_ADMIN_BASE: u16 = 19_500;

/// An agent admin port that no cluster of the scheme uses (it is the one of "c0"), for a test
/// that runs an agent of its own beside those `hack/agents.sh` started.
pub const SPARE_AGENT_ADMIN_PORT: u16 = AGENT_ADMIN_BASE;

fn port(base: u16, member_index: usize) -> anyhow::Result<u16> {
    ensure!(
        member_index < MAX_CLUSTERS,
        "member index {member_index}: the local ClusterSet's port scheme covers c1..c{MAX_CLUSTERS}"
    );
    // member_index < 99, so the sum stays far below u16::MAX.
    Ok(base + member_index as u16 + 1)
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
