//! An ExportedService record, field by field, against what the importer would write from it:
//! the ServiceImport (ports, type, affinity, families, policies, exported labels and
//! annotations) and the derived Service (the same, as a core Service). A record the apiserver
//! would make an importer's write fail for is refused alone, so it never blocks the import of
//! the other clusters exporting the same service.

use atoll_api::hub::{self, ExportedService, ExportedServiceSpec};

use super::names;
use super::ports::service_ports;
use super::problem::{Problem, Reason, ensure};
use crate::ClusterId;

/// Longest ClientIP affinity the apiserver accepts (a day).
pub const MAX_AFFINITY_SECONDS: i32 = 86_400;
/// The trafficDistribution values the apiserver accepts on a Service.
pub const TRAFFIC_DISTRIBUTIONS: [&str; 3] = ["PreferClose", "PreferSameZone", "PreferSameNode"];

/// The cluster a hub object claims, checked against where it is stored.
pub fn owner(cluster: &str, stored_in: Option<&str>) -> Result<(), Problem> {
    ClusterId::new(cluster).map_err(|e| Problem::new(Reason::ClusterId, e.to_string()))?;
    ensure(
        stored_in == Some(hub::namespace_for(cluster).as_str()),
        Reason::WrongNamespace,
        || format!("claims cluster {cluster} but is stored in another member's namespace"),
    )
}

fn spec_fields(spec: &ExportedServiceSpec) -> Result<(), Problem> {
    let affinity = spec.session_affinity.as_deref().unwrap_or("None");
    ensure(
        matches!(affinity, "None" | "ClientIP"),
        Reason::Spec,
        || format!("sessionAffinity {affinity:?} is not None or ClientIP"),
    )?;
    let timeout = spec
        .session_affinity_config
        .as_ref()
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds);
    if let Some(t) = timeout {
        ensure(
            (1..=MAX_AFFINITY_SECONDS).contains(&t),
            Reason::Spec,
            || {
                format!(
                    "sessionAffinityConfig timeout {t} is out of range (1-{MAX_AFFINITY_SECONDS})"
                )
            },
        )?;
    }
    let families = &spec.ip_families;
    ensure(
        families.len() <= 2
            && families.iter().all(|f| f == "IPv4" || f == "IPv6")
            && !(families.len() == 2 && families[0] == families[1]),
        Reason::Spec,
        || format!("ipFamilies {families:?} are not up to two distinct of IPv4 and IPv6"),
    )?;
    if let Some(policy) = &spec.internal_traffic_policy {
        ensure(
            matches!(policy.as_str(), "Cluster" | "Local"),
            Reason::Spec,
            || format!("internalTrafficPolicy {policy:?} is not Cluster or Local"),
        )?;
    }
    if let Some(distribution) = &spec.traffic_distribution {
        ensure(
            TRAFFIC_DISTRIBUTIONS.contains(&distribution.as_str()),
            Reason::Spec,
            || format!("trafficDistribution {distribution:?} is not one the apiserver accepts"),
        )?;
    }
    Ok(())
}

/// Every check of a record; the first problem found.
pub fn record(record: &ExportedService) -> Result<(), Problem> {
    let spec = &record.spec;
    owner(&spec.cluster, record.metadata.namespace.as_deref())?;
    names::service(&spec.namespace, &spec.name)?;
    ensure(
        record.metadata.name.as_deref()
            == Some(hub::record_name(&spec.namespace, &spec.name).as_str()),
        Reason::Name,
        || "object name does not match the service it describes".to_owned(),
    )?;
    service_ports(&spec.ports)?;
    spec_fields(spec)?;
    names::labels(&spec.exported_labels)?;
    names::annotations(&spec.exported_annotations)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::port;
    use atoll_api::multicluster::{ClientIpConfig, SessionAffinityConfig};

    fn good() -> ExportedService {
        let svc: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "web", "namespace": "demo"},
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}], "ipFamilies": ["IPv4"],
                     "sessionAffinity": "ClientIP", "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}}}
        }))
        .unwrap();
        let mut export = atoll_api::v1beta1::ServiceExport::new("web", None);
        export.metadata.namespace = Some("demo".into());
        crate::export::record("east", &export, &svc)
    }

    fn reason(r: &ExportedService) -> Option<Reason> {
        record(r).err().map(|p| p.reason)
    }

    #[test]
    fn what_an_agent_publishes_passes() {
        assert_eq!(record(&good()), Ok(()));
    }

    #[test]
    fn each_bad_field_is_named_by_its_reason() {
        type Change = Box<dyn Fn(&mut ExportedService)>;
        let cases: Vec<(Reason, Change)> = vec![
            (
                Reason::ClusterId,
                Box::new(|r| r.spec.cluster = "system".into()),
            ),
            (
                Reason::WrongNamespace,
                Box::new(|r| r.metadata.namespace = Some("atoll-west".into())),
            ),
            (Reason::Name, Box::new(|r| r.spec.name = "Web".into())),
            (
                Reason::Port,
                Box::new(|r| r.spec.ports = vec![port("http", "TCP", 70000)]),
            ),
            (
                Reason::Spec,
                Box::new(|r| r.spec.session_affinity = Some("Sticky".into())),
            ),
            (
                Reason::Spec,
                Box::new(|r| {
                    r.spec.session_affinity_config = Some(SessionAffinityConfig {
                        client_ip: Some(ClientIpConfig {
                            timeout_seconds: Some(0),
                        }),
                    })
                }),
            ),
            (
                Reason::Spec,
                Box::new(|r| r.spec.ip_families = vec!["IPv4".into(), "IPv4".into()]),
            ),
            (
                Reason::Spec,
                Box::new(|r| r.spec.internal_traffic_policy = Some("Node".into())),
            ),
            (
                Reason::Spec,
                Box::new(|r| r.spec.traffic_distribution = Some("Anywhere".into())),
            ),
            (
                Reason::Label,
                Box::new(|r| {
                    r.spec.exported_labels.insert("a b".into(), "x".into());
                }),
            ),
            (
                Reason::Annotation,
                Box::new(|r| {
                    r.spec
                        .exported_annotations
                        .insert("a/b/c".into(), "x".into());
                }),
            ),
        ];
        for (want, change) in cases {
            let mut r = good();
            change(&mut r);
            assert_eq!(reason(&r), Some(want), "{:?}", r.spec);
        }
    }
}
