//! Atoll's CRDs are structurally identical to the upstream ones (see
//! `atoll_testing::crd_compat` for what is compared). The upstream files are gathered outside
//! the repository by `hack/reference-crds.sh`, whose printed directory `ATOLL_REFERENCE_CRDS`
//! names; `make test` sets it. Needs no ClusterSet, but lives here because plain unit-test runs
//! do not have the files.

use atoll_api::crd;
use atoll_testing::crd_compat::{assert_compatible, reference};

#[test]
fn service_export_crd_matches_upstream() -> anyhow::Result<()> {
    assert_compatible(
        &crd::service_export()?,
        reference("multicluster.x-k8s.io_serviceexports.yaml")?,
    )
}

#[test]
fn service_import_crd_matches_upstream() -> anyhow::Result<()> {
    assert_compatible(
        &crd::service_import()?,
        reference("multicluster.x-k8s.io_serviceimports.yaml")?,
    )
}

#[test]
fn cluster_property_crd_matches_upstream() -> anyhow::Result<()> {
    assert_compatible(
        &crd::cluster_property()?,
        reference("about.k8s.io_clusterproperties.yaml")?,
    )
}

#[test]
fn cluster_profile_crd_matches_upstream() -> anyhow::Result<()> {
    assert_compatible(
        &crd::cluster_profile()?,
        reference("multicluster.x-k8s.io_clusterprofiles.yaml")?,
    )
}
