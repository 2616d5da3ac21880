//! Invariant (viii), checked as a step is carried out: an import's status is written only
//! after every write of its data plane in the same step was answered (derived Service, MCS
//! slices: what traffic follows comes first), and never for an import whose apply failed (it
//! may not exist).

use std::collections::BTreeMap;

use atoll_api::keys::ObjectKey;
use atoll_api::labels;
use atoll_core::executor::Write;
use atoll_core::plan::ImportStatus;
use atoll_core::reconciler::Step;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// The writes of one step answered so far: (kind, object) -> whether it was done.
#[derive(Debug, Default)]
pub struct Answered(BTreeMap<(&'static str, ObjectKey), bool>);

/// The import a data-plane object serves (its namespace, the service-name label).
fn served(meta: &ObjectMeta) -> Option<ObjectKey> {
    let service = meta.labels.as_ref()?.get(labels::SERVICE_NAME)?;
    Some(ObjectKey::new(meta.namespace.as_deref()?, service))
}

impl Answered {
    /// Takes in the answer to `write`.
    pub fn answer(&mut self, write: Write<'_>, done: bool) {
        let key = match write {
            Write::Import(apply) => ObjectKey::of(&apply.object.metadata),
            Write::Slice(slice) => ObjectKey::of(&slice.metadata),
            Write::Derived(service) => ObjectKey::of(&service.metadata),
            _ => return,
        };
        self.0.insert((write.kind(), key), done);
    }

    /// What is wrong with writing `status` now, in `step`, if anything.
    pub fn status_too_early(&self, step: &Step, status: &ImportStatus) -> Option<String> {
        let import = &status.key;
        if self.0.get(&("Import", import.clone())) == Some(&false) {
            return Some(format!(
                "the status of {import} is written although its apply failed"
            ));
        }
        let member = &step.plan.member;
        let slices = member.apply_slices.iter().map(|s| ("Slice", &s.metadata));
        let derived = member
            .apply_derived
            .iter()
            .map(|s| ("Derived", &s.metadata));
        for (kind, meta) in slices.chain(derived) {
            if served(meta).as_ref() != Some(import) {
                continue;
            }
            let key = ObjectKey::of(meta);
            if !self.0.contains_key(&(kind, key.clone())) {
                return Some(format!(
                    "the status of {import} is written before its {kind} {key} was answered"
                ));
            }
        }
        None
    }
}
