//! What the passes so far found, per service: each pass replaces what it planned.

use std::collections::BTreeSet;

use atoll_api::keys::ServiceKey;

use crate::plan::{Feedback, Plan, Published, Report};

/// Reports, published names and refused writes, per service.
#[derive(Clone, Debug, Default)]
pub struct Books {
    pub report: Report,
    pub published: Published,
    pub feedback: Feedback,
}

impl Books {
    /// Takes in a plan over `scope` (every service when `None`).
    pub fn absorb_plan(&mut self, scope: Option<&BTreeSet<ServiceKey>>, planned: &Plan) {
        self.report.absorb(scope, planned.report.clone());
        match scope {
            None => self.published = planned.published.clone(),
            Some(keys) => {
                self.published.retain(|k, _| !keys.contains(k));
                self.published.extend(planned.published.clone());
            }
        }
    }
}
