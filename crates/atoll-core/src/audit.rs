//! What each member publishes that an importer leaves out, judged from the hub's objects alone
//! (for `atoll status`): the same checks and caps the agent applies, run over everything a
//! member holds rather than pass by pass.

use std::collections::BTreeMap;
use std::sync::Arc;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ObjectKey;

use crate::caps::{Limits, admit};
use crate::validate::{self, AddressPolicy, Reason};

/// One thing a member published that importers leave out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The hub object, or the member for a limit.
    pub object: String,
    pub reason: Reason,
    pub message: String,
}

/// The member whose hub namespace is `namespace` (empty if it is none).
fn member_of(namespace: &str) -> String {
    namespace
        .strip_prefix(atoll_api::hub::NAMESPACE_PREFIX)
        .unwrap_or_default()
        .to_owned()
}

/// The findings of every member, by member, as `importer` (with its `policy`) judges them.
pub fn audit(
    importer: &str,
    records: &[Arc<ExportedService>],
    copies: &[Arc<ExportedEndpointSlice>],
    policy: &AddressPolicy,
    limits: &Limits,
) -> BTreeMap<String, Vec<Finding>> {
    // What a relisting importer holds within each member's byte budget, first.
    let (records, copies, ledger) =
        crate::budget::held_after_relist(importer, limits.hub_bytes, records, copies);
    let (records, copies) = (records.as_slice(), copies.as_slice());
    let mut found: BTreeMap<String, Vec<Finding>> = BTreeMap::new();
    for member in ledger.report() {
        for ((kind, reason), (objects, bytes)) in &member.left_out {
            let why = match reason {
                Reason::OverByteBudget => format!(
                    "over the member's budget of {} bytes (--max-hub-bytes-per-member; {} held)",
                    limits.hub_bytes, member.held_bytes
                ),
                _ => "their exported annotations take more than an import may carry".to_owned(),
            };
            found
                .entry(member_of(&member.namespace))
                .or_default()
                .push(Finding {
                    object: member.namespace.clone(),
                    reason: *reason,
                    message: format!(
                        "{objects} {} ({bytes} bytes) not held by importers: {why}",
                        match kind {
                            crate::budget::Kind::Record => "records",
                            crate::budget::Kind::Copy => "endpoint copies",
                        }
                    ),
                });
        }
    }
    let mut note = |key: ObjectKey, reason: Reason, message: String| {
        found
            .entry(member_of(&key.namespace))
            .or_default()
            .push(Finding {
                object: key.to_string(),
                reason,
                message,
            });
    };
    for record in records {
        if let Err(p) = validate::record::record(record) {
            note(ObjectKey::of(&record.metadata), p.reason, p.message);
        }
    }
    for copy in copies {
        let key = ObjectKey::of(&copy.metadata);
        let family = match validate::endpoints::copy(copy) {
            Ok(family) => family,
            Err(p) => {
                note(key, p.reason, p.message);
                continue;
            }
        };
        let remote = copy.spec.cluster != importer;
        let mut by_reason: BTreeMap<Reason, (usize, String)> = BTreeMap::new();
        for endpoint in &copy.spec.endpoints {
            if let Err(p) = validate::endpoints::endpoint(endpoint, family, policy, remote) {
                let entry = by_reason.entry(p.reason).or_insert((0, p.message));
                entry.0 += 1;
            }
        }
        for (reason, (count, example)) in by_reason {
            note(
                key.clone(),
                reason,
                format!("{count} endpoint(s) ignored, e.g. {example}"),
            );
        }
    }
    let (admitted, _) = admit(limits, records, copies);
    for over in admitted.over {
        found
            .entry(over.cluster.clone())
            .or_default()
            .push(Finding {
                object: atoll_api::hub::namespace_for(&over.cluster),
                reason: over.reason,
                message: over.message(),
            });
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;

    #[test]
    fn each_member_is_told_what_of_its_own_is_left_out() {
        let svc: Service = serde_json::from_value(serde_json::json!({
            "spec": {"ports": [{"name": "http", "port": 70000}]}
        }))
        .unwrap();
        let mut export = atoll_api::v1beta1::ServiceExport::new("web", None);
        export.metadata.namespace = Some("demo".into());
        let record = Arc::new(crate::export::record("x-c3", &export, &svc));
        let copy = Arc::new(crate::test_support::copy_of(
            "x-c3",
            "IPv4",
            &["127.0.0.1", "10.1.0.5", "10.2.0.5"],
        ));
        let policy = AddressPolicy {
            service_cidrs: vec!["10.1.0.0/16".parse().unwrap()],
            ..Default::default()
        };
        let limits = Limits {
            records: 0,
            endpoints: 100,
            ..Limits::default()
        };
        let found = audit("c1", &[record], &[copy], &policy, &limits);
        let reasons: Vec<Reason> = found["x-c3"].iter().map(|f| f.reason).collect();
        assert_eq!(
            reasons,
            [
                Reason::Port,
                Reason::Address,
                Reason::ServiceCidr,
                Reason::TooManyRecords
            ]
        );
        assert!(
            found["x-c3"][1]
                .message
                .starts_with("1 endpoint(s) ignored")
        );
    }
}
