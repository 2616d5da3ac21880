//! What a plan found besides its writes, for logs and metrics; kept per service, so a pass
//! over some services updates the ClusterSet's totals.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::keys::{ObjectKey, ServiceKey};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use crate::validate::Reason;

/// `namespace/name@resourceVersion` of a hub object, and what about it (one report per
/// version). Not the uid: importers do not keep other members' uids (36 bytes, twice, for each
/// of 100,000 hub objects), and a name with a resourceVersion names one version of one object.
pub(crate) fn version(meta: &ObjectMeta, what: Option<&str>) -> String {
    let mut version = format!(
        "{}/{}@{}",
        meta.namespace.as_deref().unwrap_or_default(),
        meta.name.as_deref().unwrap_or_default(),
        meta.resource_version.as_deref().unwrap_or_default()
    );
    if let Some(what) = what {
        version.push('/');
        version.push_str(what);
    }
    version
}

/// The member whose hub namespace holds an object (empty if none does).
pub(crate) fn stored_by(meta: &ObjectMeta) -> String {
    meta.namespace
        .as_deref()
        .and_then(|n| n.strip_prefix(atoll_api::hub::NAMESPACE_PREFIX))
        .unwrap_or_default()
        .to_owned()
}

/// What was left out of a member's publication.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HubKind {
    /// An ExportedService record.
    #[default]
    Record,
    /// An ExportedEndpointSlice copy, whole.
    Copy,
    /// Endpoints of a copy whose other endpoints are used.
    Endpoint,
}

impl HubKind {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Record => "record",
            Self::Copy => "copy",
            Self::Endpoint => "endpoint",
        }
    }
}

/// A hub object (or some endpoints of one) that is not used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// The hub object: a record or an endpoint copy.
    pub record: ObjectKey,
    /// The service it describes.
    pub service: ServiceKey,
    /// `uid@resourceVersion` (and the reason for endpoints): one report per version.
    pub version: String,
    pub problem: String,
    pub kind: HubKind,
    /// The member whose hub namespace holds it (whatever it claims).
    pub cluster: String,
    pub reason: Reason,
    /// How many were left out: 1 for a record or a copy, the endpoints for endpoints.
    pub count: usize,
}

/// What a plan found, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Hub records used in the merge, per service.
    pub trusted: BTreeMap<ServiceKey, usize>,
    /// Hub records ignored.
    pub rejected: Vec<Rejected>,
    /// Endpoint copies, or endpoints of them, ignored by the services this member imports.
    pub dropped: Vec<Rejected>,
    /// Merged services whose exports disagree.
    pub conflicting: BTreeSet<ServiceKey>,
    /// Imports this member holds or is about to.
    pub imported: BTreeSet<ServiceKey>,
    /// Services not imported because their namespace does not exist in this member.
    pub skipped: Vec<ServiceKey>,
    /// Services not imported because the namespace policy excludes their namespace.
    pub excluded: Vec<ServiceKey>,
    /// Services merged by the pass: what it cost (a pass over a few services merges those).
    pub merged: usize,
    /// KEP-5939: for each imported service with cluster selectors, the clusters this member
    /// uses and the selector that decided.
    pub selections: BTreeMap<ServiceKey, crate::selection::Selection>,
}

impl Report {
    /// Hub records used in the merge.
    pub fn trusted_records(&self) -> usize {
        self.trusted.values().sum()
    }

    /// Takes in the report of a pass over `scope` (every service when `None`): it replaces
    /// what was known of those services, so the totals are those of the whole ClusterSet.
    pub fn absorb(&mut self, scope: Option<&BTreeSet<ServiceKey>>, pass: Report) {
        let Some(scope) = scope else {
            *self = pass;
            return;
        };
        self.trusted.retain(|k, _| !scope.contains(k));
        self.trusted.extend(pass.trusted);
        self.rejected.retain(|r| !scope.contains(&r.service));
        self.rejected.extend(pass.rejected);
        self.dropped.retain(|r| !scope.contains(&r.service));
        self.dropped.extend(pass.dropped);
        self.conflicting.retain(|k| !scope.contains(k));
        self.conflicting.extend(pass.conflicting);
        self.imported.retain(|k| !scope.contains(k));
        self.imported.extend(pass.imported);
        self.skipped.retain(|k| !scope.contains(k));
        self.skipped.extend(pass.skipped);
        self.excluded.retain(|k| !scope.contains(k));
        self.excluded.extend(pass.excluded);
        self.selections.retain(|k, _| !scope.contains(k));
        self.selections.extend(pass.selections);
        self.merged = pass.merged;
    }
}
