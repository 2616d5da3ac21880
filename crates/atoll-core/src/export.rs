//! Export side, pure: is a ServiceExport exportable, and what does the member publish for it on
//! the hub (the ExportedService record and copies of the Service's EndpointSlices).

use std::collections::BTreeMap;

use atoll_api::endpoint::PortableEndpoint;
use atoll_api::hub::{
    self, ExportedEndpointSlice, ExportedEndpointSliceSpec, ExportedService, ExportedServiceSpec,
};
use atoll_api::multicluster::{
    ClientIpConfig, ServiceImportType, ServicePort, SessionAffinityConfig, export_condition,
};
use atoll_api::v1beta1::ServiceExport;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

/// Whether an export can be published, with the `Valid` condition's reason and message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Validity {
    Valid,
    /// No Service with the export's namespace and name.
    NoService,
    /// The Service has a type that cannot be exported (ExternalName).
    InvalidServiceType(String),
    /// The ClusterSet's namespace policy excludes the namespace (the message says how).
    NamespaceExcluded(String),
    /// KEP-5939: cluster selectors on a headless Service (its clients resolve every endpoint
    /// through DNS; selection applies to a ClusterSetIP's endpoints).
    HeadlessWithSelectors,
    /// KEP-5939: the export's cluster selectors are malformed (the message says how).
    InvalidClusterSelector(String),
}

impl Validity {
    /// Validates an export and the Service it refers to.
    pub fn of(export: &ServiceExport, service: Option<&Service>) -> Self {
        let Some(service) = service else {
            return Self::NoService;
        };
        let spec = service.spec.as_ref();
        if spec.and_then(|s| s.type_.as_deref()) == Some("ExternalName") {
            return Self::InvalidServiceType("ExternalName".to_owned());
        }
        match crate::selection::of_export(export) {
            Err(e) => Self::InvalidClusterSelector(e.to_string()),
            Ok(selectors)
                if !selectors.is_empty()
                    && spec.and_then(|s| s.cluster_ip.as_deref()) == Some("None") =>
            {
                Self::HeadlessWithSelectors
            }
            Ok(_) => Self::Valid,
        }
    }

    /// `(status, reason, message)` of the `Valid` condition.
    pub fn condition(&self) -> (bool, &'static str, String) {
        match self {
            Self::Valid => (true, export_condition::REASON_VALID, "the Service is exported".to_owned()),
            Self::NoService => (
                false,
                export_condition::REASON_NO_SERVICE,
                "no Service with this namespace and name exists; create it or delete this ServiceExport".to_owned(),
            ),
            Self::InvalidServiceType(t) => (
                false,
                export_condition::REASON_INVALID_SERVICE_TYPE,
                format!("Services of type {t} cannot be exported"),
            ),
            Self::NamespaceExcluded(why) => (
                false,
                export_condition::REASON_NAMESPACE_EXCLUDED,
                format!("{why}; change the policy on the hub to export from here"),
            ),
            Self::HeadlessWithSelectors => (
                false,
                export_condition::REASON_INVALID_SERVICE_TYPE,
                "cluster selectors apply to ClusterSetIP services only, and this Service is headless; remove the selectors or give the Service a cluster IP".to_owned(),
            ),
            Self::InvalidClusterSelector(why) => (
                false,
                export_condition::REASON_INVALID_CLUSTER_SELECTOR,
                format!("{why}; the export is not published until the selectors are fixed"),
            ),
        }
    }
}

/// The hub record for a valid export of `service` from `cluster`.
pub fn record(cluster: &str, export: &ServiceExport, service: &Service) -> ExportedService {
    let namespace = export.metadata.namespace.clone().unwrap_or_default();
    let name = export.metadata.name.clone().unwrap_or_default();
    let spec = service.spec.clone().unwrap_or_default();
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ports = spec
        .ports
        .unwrap_or_default()
        .into_iter()
        .map(|p| ServicePort {
            name: p.name.filter(|n| !n.is_empty()),
            protocol: Some(p.protocol.unwrap_or_else(|| "TCP".to_owned())),
            app_protocol: p.app_protocol,
            port: p.port,
        })
        .collect();
    let export_spec = export.spec.clone().unwrap_or_default();
    let record = ExportedServiceSpec {
        cluster: cluster.to_owned(),
        namespace: namespace.clone(),
        name: name.clone(),
        export_created: export
            .metadata
            .creation_timestamp
            .clone()
            .unwrap_or(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH)),
        type_: if headless {
            ServiceImportType::Headless
        } else {
            ServiceImportType::ClusterSetIP
        },
        ports,
        session_affinity: spec.session_affinity,
        session_affinity_config: spec.session_affinity_config.map(|c| SessionAffinityConfig {
            client_ip: c.client_ip.map(|ip| ClientIpConfig {
                timeout_seconds: ip.timeout_seconds,
            }),
        }),
        ip_families: spec.ip_families.unwrap_or_default(),
        internal_traffic_policy: spec.internal_traffic_policy,
        traffic_distribution: spec.traffic_distribution,
        exported_labels: export_spec.exported_labels,
        exported_annotations: export_spec.exported_annotations,
        // Checked by `Validity::of` before a record is built.
        cluster_selectors: crate::selection::of_export(export).unwrap_or_default(),
    };
    let mut object = ExportedService::new(&hub::record_name(&namespace, &name), record);
    object.metadata.namespace = Some(hub::namespace_for(cluster));
    object.metadata.labels = Some(BTreeMap::from([(
        hub::LABEL_CLUSTER.to_owned(),
        cluster.to_owned(),
    )]));
    object
}

/// The hub copy of one of an exported Service's EndpointSlices. Only what importers need is
/// kept: addresses, conditions, hostname and zone (node names and pod references mean nothing
/// in another cluster).
pub fn hub_slice(
    cluster: &str,
    namespace: &str,
    service: &str,
    slice: &EndpointSlice,
) -> ExportedEndpointSlice {
    let source_name = slice.metadata.name.clone().unwrap_or_default();
    let mut copy = ExportedEndpointSlice::new(
        &hub::record_name(namespace, &source_name),
        ExportedEndpointSliceSpec {
            cluster: cluster.to_owned(),
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            address_type: slice.address_type.as_str().into(),
            endpoints: slice.endpoints.iter().map(PortableEndpoint::from).collect(),
            ports: slice.ports.clone().unwrap_or_default(),
        },
    );
    copy.metadata.namespace = Some(hub::namespace_for(cluster));
    copy.metadata.labels = Some(BTreeMap::from([(
        hub::LABEL_CLUSTER.to_owned(),
        cluster.to_owned(),
    )]));
    copy
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{ServicePort as CorePort, ServiceSpec};
    use k8s_openapi::api::discovery::v1::Endpoint;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn mk_service(type_: &str, cluster_ip: &str) -> Service {
        Service {
            metadata: ObjectMeta {
                name: Some("hello".into()),
                namespace: Some("demo".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some(type_.into()),
                cluster_ip: Some(cluster_ip.into()),
                ports: Some(vec![CorePort {
                    name: Some("tcp".into()),
                    port: 42,
                    protocol: Some("TCP".into()),
                    ..Default::default()
                }]),
                ip_families: Some(vec!["IPv4".into()]),
                internal_traffic_policy: Some("Cluster".into()),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn mk_export() -> ServiceExport {
        let mut e = ServiceExport::new("hello", None);
        e.metadata.namespace = Some("demo".into());
        e
    }

    fn with_selectors(annotation: &str) -> ServiceExport {
        let mut e = mk_export();
        e.metadata.annotations = Some(BTreeMap::from([(
            crate::selection::SELECTORS_ANNOTATION.to_owned(),
            annotation.to_owned(),
        )]));
        e
    }

    const REGIONAL: &str =
        r#"[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]"#;

    #[test]
    fn validity_follows_the_service() {
        let e = mk_export();
        assert_eq!(Validity::of(&e, None), Validity::NoService);
        assert_eq!(
            Validity::of(&e, Some(&mk_service("ClusterIP", "10.0.0.1"))),
            Validity::Valid
        );
        assert_eq!(
            Validity::of(&e, Some(&mk_service("NodePort", "10.0.0.1"))),
            Validity::Valid
        );
        let external = Validity::of(&e, Some(&mk_service("ExternalName", "")));
        assert_eq!(external.condition().1, "InvalidServiceType");
        assert!(!external.condition().0);
    }

    #[test]
    fn cluster_selectors_are_validated_with_the_keps_reasons() {
        let clusterset_ip = mk_service("ClusterIP", "10.0.0.1");
        let headless = mk_service("ClusterIP", "None");
        assert_eq!(
            Validity::of(&with_selectors(REGIONAL), Some(&clusterset_ip)),
            Validity::Valid
        );
        let on_headless = Validity::of(&with_selectors(REGIONAL), Some(&headless));
        assert_eq!(on_headless, Validity::HeadlessWithSelectors);
        assert_eq!(on_headless.condition().1, "InvalidServiceType");
        // An empty list selects nothing to refuse: a headless Service may carry it.
        assert_eq!(
            Validity::of(&with_selectors("[]"), Some(&headless)),
            Validity::Valid
        );
        for bad in [
            "not json",
            r#"[{"propertySelector":{"matchExpressions":[{"key":"region","operator":"Near"}]}}]"#,
            r#"[{"propertySelector":{},"weight":3}]"#,
        ] {
            let verdict = Validity::of(&with_selectors(bad), Some(&clusterset_ip));
            let (ok, reason, message) = verdict.condition();
            assert!(!ok, "{bad}");
            assert_eq!(reason, "InvalidClusterSelector", "{bad}");
            assert!(message.contains("selector"), "{message}");
        }
    }

    #[test]
    fn the_spec_field_wins_over_the_annotation() {
        let mut e = with_selectors("not json");
        e.spec = Some(atoll_api::multicluster::ServiceExportSpec {
            cluster_selectors: Some(crate::selection::parse(REGIONAL).unwrap()),
            ..Default::default()
        });
        let service = mk_service("ClusterIP", "10.0.0.1");
        assert_eq!(Validity::of(&e, Some(&service)), Validity::Valid);
        let r = record("c2", &e, &service);
        assert_eq!(
            r.spec.cluster_selectors,
            crate::selection::parse(REGIONAL).unwrap()
        );
        assert!(
            record("c2", &mk_export(), &service)
                .spec
                .cluster_selectors
                .is_empty()
        );
    }

    #[test]
    fn record_lives_in_the_members_namespace_and_detects_headless() {
        let r = record("c2", &mk_export(), &mk_service("ClusterIP", "None"));
        assert_eq!(r.metadata.namespace.as_deref(), Some("atoll-c2"));
        assert_eq!(r.metadata.name.as_deref(), Some("demo.hello"));
        assert_eq!(r.spec.type_, ServiceImportType::Headless);
        assert_eq!(r.spec.ports[0].name.as_deref(), Some("tcp"));
        let r = record("c2", &mk_export(), &mk_service("ClusterIP", "10.0.0.1"));
        assert_eq!(r.spec.type_, ServiceImportType::ClusterSetIP);
    }

    #[test]
    fn hub_slice_drops_cluster_local_fields() {
        let slice = EndpointSlice {
            metadata: ObjectMeta {
                name: Some("hello-abcde".into()),
                ..Default::default()
            },
            address_type: "IPv4".into(),
            endpoints: vec![Endpoint {
                addresses: vec!["10.202.0.1".into()],
                node_name: Some("node-1".into()),
                hostname: Some("web-0".into()),
                ..Default::default()
            }],
            ports: None,
        };
        let copy = hub_slice("c2", "demo", "hello", &slice);
        assert_eq!(copy.metadata.name.as_deref(), Some("demo.hello-abcde"));
        assert_eq!(copy.metadata.namespace.as_deref(), Some("atoll-c2"));
        // A portable endpoint has no node name: serialized, the copy's endpoint has none.
        let published = serde_json::to_value(&copy.spec.endpoints[0]).unwrap();
        assert_eq!(published.get("nodeName"), None);
        assert_eq!(copy.spec.endpoints[0].hostname.as_deref(), Some("web-0"));
        assert_eq!(
            (
                copy.spec.cluster.as_str(),
                copy.spec.namespace.as_str(),
                copy.spec.service.as_str()
            ),
            ("c2", "demo", "hello")
        );
    }
}
