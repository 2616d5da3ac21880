//! Well-known label and annotation keys of the MCS API (KEP-1645) and the EndpointSlice API.

/// On an MCS EndpointSlice: the name of the ServiceImport (= exported Service) it belongs to.
pub const SERVICE_NAME: &str = "multicluster.kubernetes.io/service-name";
/// On an MCS EndpointSlice: the cluster id of the cluster whose endpoints the slice holds.
pub const SOURCE_CLUSTER: &str = "multicluster.kubernetes.io/source-cluster";
/// On an MCS EndpointSlice (KEP-5939): `"false"` when the importer's cluster selectors leave its
/// cluster out; consumers select `multicluster.kubernetes.io/active!=false`.
pub const ACTIVE: &str = "multicluster.kubernetes.io/active";
/// On every EndpointSlice: who manages it. MCS slices must not claim the core controller.
pub const ENDPOINTSLICE_MANAGED_BY: &str = "endpointslice.kubernetes.io/managed-by";
/// The value of [`ENDPOINTSLICE_MANAGED_BY`] on slices Atoll writes.
pub const ATOLL_ENDPOINTSLICE_MANAGER: &str = "atoll.multicluster.x-k8s.io";
/// The core controller's managed-by value, which MCS slices must never carry.
pub const CORE_ENDPOINTSLICE_MANAGER: &str = "endpointslice-controller.k8s.io";
/// On an EndpointSlice: the Service kube-proxy programs it for (Atoll: the derived Service).
pub const KUBERNETES_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Annotation on a ServiceImport naming its derived Service (as the upstream reference does).
pub const DERIVED_SERVICE: &str = "multicluster.kubernetes.io/derived-service";

/// CRD label: the mcs-api release the schema follows.
pub const MCS_RELEASE_VERSION: &str = "multicluster.x-k8s.io/release-version";
/// CRD label: bumped on every schema change within a release, so installers can refuse downgrades.
pub const MCS_CRD_SCHEMA_REVISION: &str = "multicluster.x-k8s.io/crd-schema-revision";
/// The upstream mcs-api release our MCS CRDs are compatible with.
pub const MCS_RELEASE: &str = "v0.5.2";
/// Our revision of the MCS CRD schemas within [`MCS_RELEASE`].
pub const MCS_SCHEMA_REVISION: &str = "0";

/// ClusterProperty name holding the cluster id (KEP-2149; formerly `id.k8s.io`).
pub const CLUSTER_ID_PROPERTY: &str = "cluster.clusterset.k8s.io";
/// ClusterProperty name holding the ClusterSet membership (KEP-2149).
pub const CLUSTERSET_PROPERTY: &str = "clusterset.k8s.io";
