//! The simulated apiservers: the hub (records, endpoint copies, heartbeat Leases) and each
//! member (exports, Services, EndpointSlices, namespaces, imports, the election Lease, the
//! ConfigMap with the kept liveness decisions). Writes keep what the server owns (statuses,
//! allocated cluster IPs) as server-side apply does.

use std::collections::BTreeMap;

use atoll_api::hub::{ExportedEndpointSlice, ExportedService};
use atoll_api::keys::ObjectKey;
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::store::{Counters, Kind, Restore};

/// The one namespace every member has (where services are exported and imported).
pub const NAMESPACE: &str = "app";

/// The namespace of the services of other shapes (`crate::scenario::EXTRA`).
pub const OTHER_NAMESPACE: &str = "data";

/// The hub.
#[derive(Clone, Debug, Default)]
pub struct Hub {
    pub counters: Counters,
    pub records: Kind<ExportedService>,
    pub copies: Kind<ExportedEndpointSlice>,
    pub leases: Kind<Lease>,
}

impl Hub {
    /// What a backup holds.
    pub fn snapshot(&self) -> Hub {
        Hub {
            counters: self.counters,
            records: self.records.snapshot(),
            copies: self.copies.snapshot(),
            leases: self.leases.snapshot(),
        }
    }

    /// Everything replaced by `backup`, done `how`.
    pub fn restore(&mut self, backup: &Hub, how: &Restore) {
        let counters = &mut self.counters;
        self.records.restore(&backup.records, counters, how.clone());
        self.copies.restore(&backup.copies, counters, how.clone());
        self.leases.restore(&backup.leases, counters, how.clone());
        if let Restore::Etcd = how {
            counters.version = backup.counters.version;
        }
    }

    /// Every record, copy and heartbeat of member `cluster` deleted.
    pub fn wipe(&mut self, cluster: &str) {
        let ns = atoll_api::hub::namespace_for(cluster);
        let of = |k: &ObjectKey| k.namespace == ns;
        let records: Vec<ObjectKey> = self
            .records
            .all()
            .map(|r| ObjectKey::of(&r.metadata))
            .filter(of)
            .collect();
        for key in records {
            self.records.delete(&key, &mut self.counters);
        }
        let copies: Vec<ObjectKey> = self
            .copies
            .all()
            .map(|c| ObjectKey::of(&c.metadata))
            .filter(of)
            .collect();
        for key in copies {
            self.copies.delete(&key, &mut self.counters);
        }
    }
}

/// The election Lease of a member's agent replicas (read and written with a version check).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ElectionLease {
    pub holder: Option<String>,
    /// Changes with every write (what replicas compare).
    pub renewals: u64,
    pub duration_seconds: i32,
    pub transitions: i32,
    pub version: u64,
}

/// One member cluster.
#[derive(Clone, Debug, Default)]
pub struct Member {
    pub counters: Counters,
    pub exports: Kind<ServiceExport>,
    pub services: Kind<Service>,
    pub slices: Kind<EndpointSlice>,
    pub namespaces: Kind<Namespace>,
    pub imports: Kind<ServiceImport>,
    pub election: Option<ElectionLease>,
    /// The kept liveness decisions (the ConfigMap's data).
    pub kept: Option<String>,
    /// Cluster IPs handed out so far.
    next_ip: u32,
    /// The member's index (its service range).
    pub index: u32,
}

impl Member {
    pub fn new(index: u32, now: &Time) -> Self {
        let mut member = Self {
            index,
            ..Self::default()
        };
        for name in [NAMESPACE, OTHER_NAMESPACE] {
            let mut ns = Namespace::default();
            ns.metadata.name = Some(name.to_owned());
            member
                .namespaces
                .put(ns, &mut member.counters, now, |_, _| {});
        }
        member
    }

    /// Applies a Service: a new ClusterIP Service gets cluster IPs, as the apiserver
    /// allocates them; an existing one keeps its own.
    pub fn apply_service(&mut self, service: Service, now: &Time) {
        let index = self.index;
        let next = &mut self.next_ip;
        self.services
            .put(service, &mut self.counters, now, |old, new| {
                let spec = new.spec.get_or_insert_with(Default::default);
                match old.and_then(|o| o.spec.as_ref()) {
                    Some(old) if old.cluster_ips.is_some() => {
                        spec.cluster_ip = old.cluster_ip.clone();
                        spec.cluster_ips = old.cluster_ips.clone();
                    }
                    _ if spec.cluster_ip.as_deref() == Some("None") => {}
                    _ => {
                        *next += 1;
                        let ip = format!("10.{}.{}.{}", 100 + index, *next / 250, *next % 250 + 1);
                        spec.cluster_ip = Some(ip.clone());
                        spec.cluster_ips = Some(vec![ip]);
                    }
                }
            });
    }

    /// Applies an import's spec, labels and annotations, keeping its status.
    pub fn apply_import(&mut self, import: ServiceImport, now: &Time) {
        self.imports
            .put(import, &mut self.counters, now, |old, new| {
                new.status = old.and_then(|o| o.status.clone());
            });
    }

    /// Writes an import's status; `false` if the import does not exist.
    pub fn import_status(
        &mut self,
        key: &ObjectKey,
        status: atoll_api::multicluster::ServiceImportStatus,
        now: &Time,
    ) -> bool {
        let Some(existing) = self.imports.get(key) else {
            return false;
        };
        let mut import = (**existing).clone();
        import.status = Some(status);
        self.imports.put(import, &mut self.counters, now, |_, _| {});
        true
    }

    /// Writes an export's conditions; `false` if the export does not exist.
    pub fn export_conditions(
        &mut self,
        key: &ObjectKey,
        conditions: Vec<atoll_api::Condition>,
        now: &Time,
    ) -> bool {
        let Some(existing) = self.exports.get(key) else {
            return false;
        };
        let mut export = (**existing).clone();
        export
            .status
            .get_or_insert_with(Default::default)
            .conditions = conditions;
        self.exports.put(export, &mut self.counters, now, |_, _| {});
        true
    }
}

/// Every apiserver of the simulated ClusterSet.
#[derive(Clone, Debug, Default)]
pub struct Apis {
    pub hub: Hub,
    pub members: BTreeMap<String, Member>,
}
