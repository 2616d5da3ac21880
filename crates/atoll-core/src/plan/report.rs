//! What a plan found besides its writes, for logs and metrics; kept per service, so a pass
//! over some services updates the ClusterSet's totals.

use std::collections::{BTreeMap, BTreeSet};

use atoll_api::keys::{ObjectKey, ServiceKey};

/// A hub record that is not used, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejected {
    pub record: ObjectKey,
    /// The service the record describes.
    pub service: ServiceKey,
    /// `uid@resourceVersion`: one report per version of a record.
    pub version: String,
    pub problem: String,
}

/// What a plan found, for logs and metrics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Hub records used in the merge, per service.
    pub trusted: BTreeMap<ServiceKey, usize>,
    /// Hub records ignored.
    pub rejected: Vec<Rejected>,
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
        self.conflicting.retain(|k| !scope.contains(k));
        self.conflicting.extend(pass.conflicting);
        self.imported.retain(|k| !scope.contains(k));
        self.imported.extend(pass.imported);
        self.skipped.retain(|k| !scope.contains(k));
        self.skipped.extend(pass.skipped);
        self.excluded.retain(|k| !scope.contains(k));
        self.excluded.extend(pass.excluded);
        self.merged = pass.merged;
    }
}
