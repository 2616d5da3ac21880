//! Why a name under the zone does not exist, sent as an Extended DNS Error.

/// Why a name under the zone does not exist; sent as an Extended DNS Error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Missing {
    /// No ServiceImport of that name in an imported namespace.
    NoSuchService,
    /// No ServiceImport at all in that namespace.
    NamespaceNotImported,
    /// A headless service without ready endpoints (the spec wants NXDOMAIN).
    NoReadyEndpoints,
    /// `<clusterid>.<svc>.<ns>.svc.<zone>` is reserved and never resolves.
    ClusterScopedName,
    /// Anything else under the zone.
    NoSuchName,
}

impl Missing {
    /// The Extended DNS Error text.
    pub fn text(self) -> &'static str {
        match self {
            Self::NoSuchService => "no such service is imported into this cluster",
            Self::NamespaceNotImported => {
                "no service of this namespace is imported into this cluster"
            }
            Self::NoReadyEndpoints => "the headless service has no ready endpoints",
            Self::ClusterScopedName => {
                "<clusterid>.<service> names are reserved by the MCS DNS spec"
            }
            Self::NoSuchName => "no such name in the clusterset zone",
        }
    }
}
