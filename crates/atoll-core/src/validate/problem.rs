//! Why something a member wrote on the hub is not used: a reason short enough for a metric
//! label, and a message for people. A leaf of the `validate` modules.

use std::fmt;

/// The kind of problem, as the `reason` label of the rejection metric and in `atoll status`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Reason {
    /// The cluster id it names is not a usable id (invalid, reserved, too long).
    #[default]
    ClusterId,
    /// It is stored in the hub namespace of another member than the one it names.
    WrongNamespace,
    /// A namespace, service or object name that is not what the apiserver would accept.
    Name,
    /// A port: number, protocol, name, appProtocol, a duplicate, or too many.
    Port,
    /// sessionAffinity and its config, ipFamilies, internalTrafficPolicy, trafficDistribution.
    Spec,
    /// An exported label that is not a valid label.
    Label,
    /// An exported annotation that is not a valid annotation, or too many bytes of them.
    Annotation,
    /// The address type of an endpoint copy (only IPv4 and IPv6 are imported).
    AddressType,
    /// An endpoint address that is not an IP of the slice's family in canonical form, or a
    /// special one (loopback, link-local, multicast, unspecified, broadcast).
    Address,
    /// An endpoint address inside the importing cluster's own Service CIDRs.
    ServiceCidr,
    /// An endpoint address inside a range the importer's operator denied (`--deny-endpoint-cidrs`).
    DeniedCidr,
    /// An endpoint address that is one of the importing cluster's own Node addresses.
    NodeAddress,
    /// An endpoint's hostname or zone, or its address count.
    Endpoint,
    /// Endpoint copies with more endpoints than an EndpointSlice may hold.
    TooManyEndpointsInCopy,
    /// The member publishes more records than `--max-records-per-member`.
    TooManyRecords,
    /// The member publishes more endpoints than `--max-endpoints-per-member`.
    TooManyEndpoints,
    /// The member publishes more Service ports than `--max-ports-per-member`.
    TooManyPorts,
    /// The member publishes more endpoint-port pairs for one service than
    /// `--max-endpoint-ports-per-service`.
    TooManyEndpointPorts,
    /// The member's hub objects take more bytes than `--max-hub-bytes-per-member`.
    OverByteBudget,
}

impl Reason {
    /// Every reason, for tests and for resetting gauges.
    pub const ALL: [Reason; 19] = [
        Reason::ClusterId,
        Reason::WrongNamespace,
        Reason::Name,
        Reason::Port,
        Reason::Spec,
        Reason::Label,
        Reason::Annotation,
        Reason::AddressType,
        Reason::Address,
        Reason::ServiceCidr,
        Reason::DeniedCidr,
        Reason::NodeAddress,
        Reason::Endpoint,
        Reason::TooManyEndpointsInCopy,
        Reason::TooManyRecords,
        Reason::TooManyEndpoints,
        Reason::TooManyPorts,
        Reason::TooManyEndpointPorts,
        Reason::OverByteBudget,
    ];

    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterId => "cluster-id",
            Self::WrongNamespace => "wrong-namespace",
            Self::Name => "name",
            Self::Port => "port",
            Self::Spec => "spec",
            Self::Label => "label",
            Self::Annotation => "annotation",
            Self::AddressType => "address-type",
            Self::Address => "address",
            Self::ServiceCidr => "service-cidr",
            Self::DeniedCidr => "denied-cidr",
            Self::NodeAddress => "node-address",
            Self::Endpoint => "endpoint",
            Self::TooManyEndpointsInCopy => "too-many-endpoints-in-copy",
            Self::TooManyRecords => "too-many-records",
            Self::TooManyEndpoints => "too-many-endpoints",
            Self::TooManyPorts => "too-many-ports",
            Self::TooManyEndpointPorts => "too-many-endpoint-ports",
            Self::OverByteBudget => "over-byte-budget",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One problem: its reason and what exactly is wrong.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Problem {
    pub reason: Reason,
    pub message: String,
}

impl Problem {
    pub fn new(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            reason,
            message: message.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// `Err(problem)` unless `ok`.
pub(crate) fn ensure(
    ok: bool,
    reason: Reason,
    message: impl FnOnce() -> String,
) -> Result<(), Problem> {
    if ok {
        Ok(())
    } else {
        Err(Problem::new(reason, message()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_its_own_label() {
        let labels: std::collections::BTreeSet<&str> =
            Reason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(labels.len(), Reason::ALL.len());
        for label in labels {
            assert!(
                label.bytes().all(|b| b.is_ascii_lowercase() || b == b'-'),
                "{label}"
            );
        }
    }
}
