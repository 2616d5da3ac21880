//! `atoll explain`, pure: from what one member, the hub and any other reachable members hold
//! about one service, the path of that service hop by hop (exports, namespace policy, hub
//! records, source clusters, merge, this member's namespace, ServiceImport, endpoints, DNS),
//! each hop with what was found and, when it is broken, a concrete fix.

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::ops::ControlFlow;

use atoll_api::hub::{ExportedService, ExportedServiceSpec, NamespacePolicySpec};
use atoll_api::v1beta1::{ServiceExport, ServiceImport};
use atoll_api::{Condition, ConditionStatus};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::liveness::Verdict;
use crate::merge::merge_records;
use crate::namespaces::excluded;
use crate::trust::record_problem;

/// What one inspected member holds for the service.
#[derive(Clone, Debug, Default)]
pub struct MemberView {
    pub cluster: String,
    pub service: Option<Service>,
    pub export: Option<ServiceExport>,
}

/// Everything gathered for `namespace/name`, from the point of view of `member`.
#[derive(Clone, Debug, Default)]
pub struct Facts {
    pub namespace: String,
    pub name: String,
    /// The member whose point of view this is.
    pub member: String,
    /// Every member that could be inspected (this one included).
    pub members: Vec<MemberView>,
    /// Hub records of this service, in every member namespace.
    pub records: Vec<ExportedService>,
    /// Members with a heartbeat Lease on the hub.
    pub leases: BTreeSet<String>,
    /// The liveness decisions this member's agent keeps (`None`: it keeps none, or they
    /// cannot be read): its verdicts on the source clusters.
    pub kept: Option<crate::liveness::Persisted>,
    pub policy: NamespacePolicySpec,
    /// Whether the namespace exists in this member.
    pub namespace_exists: bool,
    pub import: Option<ServiceImport>,
    pub slices: Vec<EndpointSlice>,
    /// What `atoll dns` answers for the service's name here: response code and addresses.
    pub dns: Option<(String, Vec<IpAddr>)>,
    /// Cluster properties by cluster id (this member's own, and the others' as their
    /// ClusterProfiles mirror them), for KEP-5939 cluster selectors.
    pub properties: std::collections::BTreeMap<String, std::collections::BTreeMap<String, String>>,
}

/// One hop of the service's path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hop {
    pub name: String,
    pub ok: bool,
    pub detail: String,
    /// What to do, when the hop is broken.
    pub fix: Option<String>,
}

fn ok(name: impl Into<String>, detail: impl Into<String>) -> Hop {
    Hop {
        name: name.into(),
        ok: true,
        detail: detail.into(),
        fix: None,
    }
}

fn broken(name: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Hop {
    Hop {
        name: name.into(),
        ok: false,
        detail: detail.into(),
        fix: Some(fix.into()),
    }
}

fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// The hops, in order. The first that is not `ok` is what to fix first.
pub fn explain(f: &Facts) -> Vec<Hop> {
    let mut trace = Trace {
        facts: f,
        id: format!("{}/{}", f.namespace, f.name),
        hops: Vec::new(),
    };
    // A hop that cuts the path ends the trace: every later hop depends on it.
    let _ = trace.follow();
    trace.hops
}

/// The hops found so far, for the service `id` (`namespace/name`) of `facts`.
struct Trace<'f> {
    facts: &'f Facts,
    id: String,
    hops: Vec<Hop>,
}

impl<'f> Trace<'f> {
    fn follow(&mut self) -> ControlFlow<()> {
        self.exports()?;
        self.namespace_policy()?;
        let trusted = self.hub_records()?;
        self.source_clusters(&trusted);
        self.merge(&trusted);
        self.member_namespace()?;
        let import = self.service_import(trusted.len())?;
        let f = self.facts;
        if let Some(v) = selection::verdict(&f.member, Some(import), &f.slices, &f.properties) {
            self.hops.push(Hop {
                name: format!("cluster selection in {}", f.member),
                ok: v.ok,
                detail: v.detail,
                fix: v.fix,
            });
        }
        self.endpoints()?;
        self.dns(import);
        ControlFlow::Continue(())
    }

    /// Records a broken hop the rest of the path depends on.
    fn cut<T>(&mut self, hop: Hop) -> ControlFlow<(), T> {
        self.hops.push(hop);
        ControlFlow::Break(())
    }

    /// 1. Exports in the members that could be inspected, and whether anyone exports at all.
    fn exports(&mut self) -> ControlFlow<()> {
        let f = self.facts;
        for m in &f.members {
            if let Some(hop) = member_export(m, &self.id) {
                self.hops.push(hop);
            }
        }
        let exported_somewhere = f.members.iter().any(|m| m.export.is_some());
        if !f.records.is_empty() || exported_somewhere {
            return ControlFlow::Continue(());
        }
        let id = &self.id;
        let local: Vec<&str> = f
            .members
            .iter()
            .filter(|m| m.service.is_some())
            .map(|m| m.cluster.as_str())
            .collect();
        self.cut(broken(
            "exports",
            format!("no cluster exports {id}"),
            match local.first() {
                Some(c) => format!("create a ServiceExport {id} next to the Service in {c}"),
                None => format!("create the Service {id} and a ServiceExport next to it in the clusters that serve it"),
            },
        ))
    }

    /// 2. Namespace policy.
    fn namespace_policy(&mut self) -> ControlFlow<()> {
        let f = self.facts;
        if let Some(why) = excluded(&f.policy, &f.namespace) {
            return self.cut(broken(
                "namespace policy",
                why,
                "edit the NamespacePolicy clusterset on the hub (kubectl edit namespacepolicy clusterset)",
            ));
        }
        self.hops.push(ok(
            "namespace policy",
            format!("namespace {} takes part in the ClusterSet", f.namespace),
        ));
        ControlFlow::Continue(())
    }

    /// 3. Hub records; the trusted ones go on.
    fn hub_records(&mut self) -> ControlFlow<(), Vec<&'f ExportedServiceSpec>> {
        let f = self.facts;
        let mut trusted: Vec<&ExportedServiceSpec> = Vec::new();
        for r in &f.records {
            let name = format!(
                "hub record {}/{}",
                r.metadata.namespace.as_deref().unwrap_or_default(),
                r.metadata.name.as_deref().unwrap_or_default()
            );
            match record_problem(r) {
                Some(problem) => self.hops.push(broken(
                    name,
                    format!("ignored by every importer: {problem}"),
                    "delete the record; only the agent of the cluster it names may publish it",
                )),
                None => {
                    self.hops
                        .push(ok(name, format!("published by {}", r.spec.cluster)));
                    trusted.push(&r.spec);
                }
            }
        }
        if !trusted.is_empty() {
            return ControlFlow::Continue(trusted);
        }
        let exporters: Vec<&str> = f
            .members
            .iter()
            .filter(|m| m.export.is_some())
            .map(|m| m.cluster.as_str())
            .collect();
        self.cut(broken(
            "hub records",
            format!("the hub holds no record of {}", self.id),
            format!(
                "check the Atoll agent of {} (its log, /readyz, and the export's Ready condition)",
                exporters.join(", ")
            ),
        ))
    }

    /// 4. The source clusters of the trusted records.
    fn source_clusters(&mut self, trusted: &[&ExportedServiceSpec]) {
        let f = self.facts;
        for spec in trusted {
            let hop = format!("source cluster {}", spec.cluster);
            let verdict = f
                .kept
                .as_ref()
                .map_or(Verdict::Live, |k| k.verdict(&spec.cluster));
            let since = |t: &Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
                t.as_ref().map_or(String::new(), |t| {
                    format!(" (heartbeat last seen moving at {})", t.0)
                })
            };
            self.hops.push(match verdict {
                Verdict::Withdrawn(at) => broken(
                    hop,
                    format!(
                        "{} withdrawn by the agent of {}: no heartbeat within its grace{}",
                        spec.cluster,
                        f.member,
                        since(&at)
                    ),
                    format!(
                        "bring the Atoll agent of {} back (or `atoll leave` it)",
                        spec.cluster
                    ),
                ),
                Verdict::Stale(at) => ok(
                    hop,
                    format!("stale: its heartbeat is late, still imported{}", since(&at)),
                ),
                Verdict::Unmatched(at) => broken(
                    hop,
                    format!(
                        "its hub objects have not matched what it claims since {} (the agent of {} imports the last matching set)",
                        at.0, f.member
                    ),
                    format!(
                        "check the Atoll agent of {} (its log and `atoll_agent_unpublishable_objects`): a write of its own keeps failing, or the hub lost its objects",
                        spec.cluster
                    ),
                ),
                Verdict::Live if f.leases.contains(&spec.cluster) => {
                    ok(hop, format!("live, as the agent of {} judges it", f.member))
                }
                Verdict::Live => ok(hop, "no heartbeat Lease (imported as published)"),
            });
        }
    }

    /// 5. Merge.
    fn merge(&mut self, trusted: &[&ExportedServiceSpec]) {
        // As the importers merge: precedence needs each record's hub creation time.
        let records: Vec<&atoll_api::hub::ExportedService> = self
            .facts
            .records
            .iter()
            .filter(|r| trusted.iter().any(|t| std::ptr::eq(*t, &r.spec)))
            .collect();
        let Some(m) = merge_records(&records) else {
            return;
        };
        self.hops.push(if m.conflicts.any() {
            broken(
                "merge",
                format!(
                    "{}: {}",
                    m.conflicts.reason(),
                    m.conflicts.message(&m.winner)
                ),
                format!(
                    "make the Services {} agree in every exporting cluster",
                    self.id
                ),
            )
        } else {
            ok(
                "merge",
                format!(
                    "{:?} from {} cluster(s), no conflict",
                    m.spec.type_,
                    m.clusters.len()
                ),
            )
        });
    }

    /// 6. This member's namespace (Atoll never creates one).
    fn member_namespace(&mut self) -> ControlFlow<()> {
        let f = self.facts;
        if f.namespace_exists {
            return ControlFlow::Continue(());
        }
        self.cut(broken(
            format!("namespace in {}", f.member),
            format!("namespace {} does not exist in {}", f.namespace, f.member),
            format!(
                "create it: kubectl create namespace {} (Atoll never creates namespaces)",
                f.namespace
            ),
        ))
    }

    /// 7. This member's ServiceImport, made from `records` trusted records.
    fn service_import(&mut self, records: usize) -> ControlFlow<(), &'f ServiceImport> {
        let f = self.facts;
        let hop = format!("ServiceImport in {}", f.member);
        let Some(import) = &f.import else {
            return self.cut(broken(
                hop,
                format!(
                    "no ServiceImport {} in {} although the hub has {records} record(s)",
                    self.id, f.member
                ),
                format!(
                    "check the Atoll agent of {} (its /readyz and log)",
                    f.member
                ),
            ));
        };
        let status = import.status.clone().unwrap_or_default();
        let conditions = status.conditions.as_slice();
        if let Some(r) = find(conditions, "Ready").filter(|c| c.status != ConditionStatus::True) {
            return self.cut(broken(
                hop,
                format!("not ready: {} ({})", r.reason, r.message),
                if r.reason == "IPFamilyNotSupported" {
                    "export the service with an IP family this cluster has (e.g. PreferDualStack)"
                        .to_owned()
                } else {
                    format!("check the Atoll agent of {}", f.member)
                },
            ));
        }
        if let Some(s) = find(conditions, crate::conditions::SOURCE_CLUSTERS)
            .filter(|c| c.status != ConditionStatus::True)
        {
            return self.cut(broken(
                hop,
                format!("{}: {}", s.reason, s.message),
                "bring the withdrawn or stale clusters' agents back",
            ));
        }
        let sources: Vec<String> = status.clusters.iter().map(|c| c.cluster.clone()).collect();
        self.hops.push(ok(
            hop,
            format!(
                "ready, IPs {:?}, from {}",
                import_ips(import),
                sources.join(", ")
            ),
        ));
        ControlFlow::Continue(import)
    }

    /// 8. Ready endpoints in this member's MCS EndpointSlices.
    fn endpoints(&mut self) -> ControlFlow<()> {
        let f = self.facts;
        let hop = format!("endpoints in {}", f.member);
        // Inactive clusters' slices (KEP-5939) serve no traffic here.
        let ready: usize = f
            .slices
            .iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(atoll_api::labels::ACTIVE))
                    .map(String::as_str)
                    != Some("false")
            })
            .flat_map(|s| s.endpoints.iter())
            .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) != Some(false))
            .count();
        if ready == 0 {
            return self.cut(broken(
                hop,
                "no ready endpoint in any active cluster's MCS EndpointSlice",
                "check the pods behind the Service in the exporting clusters",
            ));
        }
        self.hops
            .push(ok(hop, format!("{ready} ready endpoint(s)")));
        ControlFlow::Continue(())
    }

    /// 9. What `atoll dns` answers for the service's name here, when that was asked.
    fn dns(&mut self, import: &ServiceImport) {
        let f = self.facts;
        let Some((rcode, addresses)) = &f.dns else {
            return;
        };
        let fqdn = format!("{}.{}.svc.clusterset.local", f.name, f.namespace);
        let want: Vec<IpAddr> = import_ips(import)
            .iter()
            .filter_map(|i| i.parse().ok())
            .collect();
        let headless = import
            .spec
            .as_ref()
            .is_some_and(|s| s.type_ == atoll_api::multicluster::ServiceImportType::Headless);
        self.hops.push(
            if rcode == "NOERROR"
                && !addresses.is_empty()
                && (headless || want.iter().all(|w| addresses.contains(w)))
            {
                ok("DNS", format!("{fqdn} -> {addresses:?}"))
            } else {
                broken(
                    "DNS",
                    format!("atoll dns would answer {rcode} {addresses:?} for {fqdn}"),
                    format!("check that atoll dns runs in {} and that CoreDNS forwards clusterset.local to it", f.member),
                )
            },
        );
    }
}

/// The export hop of one inspected member; `None` when it has neither Service nor export.
fn member_export(m: &MemberView, id: &str) -> Option<Hop> {
    let hop = format!("export in {}", m.cluster);
    match (&m.service, &m.export) {
        (_, Some(export)) => {
            let conditions = export
                .status
                .as_ref()
                .map(|s| s.conditions.as_slice())
                .unwrap_or_default();
            Some(match find(conditions, "Valid") {
                Some(v) if v.status == ConditionStatus::False => broken(
                    hop,
                    format!("ServiceExport {id} is not valid: {} ({})", v.reason, v.message),
                    match v.reason.as_str() {
                        "NoService" => format!("create the Service {id} in {}", m.cluster),
                        "NamespaceExcluded" => "change the NamespacePolicy clusterset on the hub, or export from another namespace".to_owned(),
                        _ => format!("fix the Service {id} in {} ({})", m.cluster, v.message),
                    },
                ),
                Some(_) => ok(hop, format!("ServiceExport {id} is valid")),
                None => broken(
                    hop,
                    format!("ServiceExport {id} has no Valid condition yet"),
                    format!("check that the Atoll agent runs in {} (its /readyz)", m.cluster),
                ),
            })
        }
        (Some(_), None) => Some(ok(
            hop,
            format!(
                "Service {id} exists but is not exported (not part of the service unless exported)"
            ),
        )),
        (None, None) => None,
    }
}

/// The import's `spec.ips`.
fn import_ips(import: &ServiceImport) -> Vec<String> {
    import
        .spec
        .as_ref()
        .map(|s| s.ips.clone())
        .unwrap_or_default()
}

#[path = "explain_selection.rs"]
mod selection;

#[cfg(test)]
#[path = "explain_tests.rs"]
mod tests;
