//! Which MCS EndpointSlices the zone is built from. Anyone allowed to create an EndpointSlice in
//! a namespace could label one `multicluster.kubernetes.io/service-name=<svc>` and put their own
//! addresses into the answers of an imported headless service, so a slice counts only when its
//! `endpointslice.kubernetes.io/managed-by` names a controller the server is told to trust:
//! Atoll's by default, others for other MCS implementations (`--trusted-slice-manager`). The
//! admission policy (`atoll admission-policy`) keeps everyone but those controllers from
//! writing such slices; this is the check on the reading side.

use std::collections::BTreeSet;

use atoll_api::labels;
use k8s_openapi::api::discovery::v1::EndpointSlice;

/// The `managed-by` values whose MCS EndpointSlices DNS answers from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceTrust {
    managers: BTreeSet<String>,
}

impl Default for SliceTrust {
    /// Atoll's agent only.
    fn default() -> Self {
        Self::with_managers([])
    }
}

impl SliceTrust {
    /// Atoll's agent and the controllers whose `managed-by` values are `others`.
    pub fn with_managers(others: impl IntoIterator<Item = String>) -> Self {
        let mut managers: BTreeSet<String> = others.into_iter().collect();
        managers.insert(labels::ATOLL_ENDPOINTSLICE_MANAGER.to_owned());
        Self { managers }
    }

    /// The trusted `managed-by` values, sorted.
    pub fn managers(&self) -> impl Iterator<Item = &str> {
        self.managers.iter().map(String::as_str)
    }

    /// `Ok` when `slice` is managed by a trusted controller; otherwise the `managed-by` value
    /// it has, if any.
    pub fn check(&self, slice: &EndpointSlice) -> Result<(), Option<String>> {
        let manager = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::ENDPOINTSLICE_MANAGED_BY));
        match manager {
            Some(manager) if self.managers.contains(manager) => Ok(()),
            other => Err(other.cloned()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::mk_slice;

    fn managed_by(manager: Option<&str>) -> EndpointSlice {
        let mut slice = mk_slice("demo", "web", "c1", "IPv4", &[("10.1.0.1", None, true)]);
        if let Some(labels) = slice.metadata.labels.as_mut() {
            labels.remove(labels::ENDPOINTSLICE_MANAGED_BY);
            if let Some(manager) = manager {
                labels.insert(
                    labels::ENDPOINTSLICE_MANAGED_BY.to_owned(),
                    manager.to_owned(),
                );
            }
        }
        slice
    }

    #[test]
    fn atolls_slices_are_trusted_by_default_and_others_only_when_named() {
        let atoll = managed_by(Some(labels::ATOLL_ENDPOINTSLICE_MANAGER));
        let other = managed_by(Some("mcs-controller.example.dev"));
        let bare = managed_by(None);
        let default = SliceTrust::default();
        assert_eq!(default.check(&atoll), Ok(()));
        assert_eq!(
            default.check(&other),
            Err(Some("mcs-controller.example.dev".to_owned()))
        );
        assert_eq!(default.check(&bare), Err(None));
        let wider = SliceTrust::with_managers(["mcs-controller.example.dev".to_owned()]);
        assert_eq!(wider.check(&other), Ok(()));
        assert_eq!(wider.check(&atoll), Ok(()), "Atoll's stay trusted");
        assert_eq!(wider.check(&bare), Err(None));
        assert_eq!(
            wider.managers().collect::<Vec<_>>(),
            [
                labels::ATOLL_ENDPOINTSLICE_MANAGER,
                "mcs-controller.example.dev"
            ]
        );
    }
}
