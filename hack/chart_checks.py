"""Checks of the rendered chart (hack/chart.sh test): one `ok   <check>` or `FAIL <check>: why`
line per check, nothing else. Reads target/chart/{member,hub,both,wired,trusting,observed}.yaml
and the chart's files/ (the alert rules and the dashboard)."""
import json
import os
import sys

import yaml

out = sys.argv[1]


def load(mode):
    with open(f"{out}/{mode}.yaml") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def check(name, ok, why=""):
    print(f"ok   {name}" if ok else f"FAIL {name}: {why}")


member, hub, both, wired, trusting = load("member"), load("hub"), load("both"), load("wired"), load("trusting")
observed = load("observed")
kinds = lambda docs, kind: [d for d in docs if d.get("kind") == kind]
deployments = {d["metadata"]["name"]: d for d in kinds(member, "Deployment")}

check("member mode: Deployments atoll-agent and atoll-dns", sorted(deployments) == ["atoll-agent", "atoll-dns"], sorted(deployments))
check("hub mode: CRDs and no workload", not kinds(hub, "Deployment") and len(kinds(hub, "CustomResourceDefinition")) == 7,
      [d["kind"] for d in hub])
check("both mode: what member renders", sorted(d["kind"] + "/" + d["metadata"]["name"] for d in both)
      == sorted(d["kind"] + "/" + d["metadata"]["name"] for d in member), "differs")

for name, d in deployments.items():
    spec = d["spec"]["template"]["spec"]
    c = spec["containers"][0]
    sc = c.get("securityContext", {})
    check(f"{name}: 2 replicas", d["spec"]["replicas"] == 2, d["spec"]["replicas"])
    check(f"{name}: probes on /healthz and /readyz",
          c.get("livenessProbe", {}).get("httpGet", {}).get("path") == "/healthz"
          and c.get("readinessProbe", {}).get("httpGet", {}).get("path") == "/readyz", c.get("livenessProbe"))
    check(f"{name}: read-only root, no privilege escalation, drop ALL, non-root",
          sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
          and sc.get("capabilities", {}).get("drop") == ["ALL"] and sc.get("runAsNonRoot") is True, sc)
    check(f"{name}: resources set", bool(c.get("resources", {}).get("requests")) and bool(c.get("resources", {}).get("limits")), c.get("resources"))
    check(f"{name}: pods spread over nodes", "podAntiAffinity" in spec.get("affinity", {}), spec.get("affinity"))
    check(f"{name}: JSON logs", "--log-format=json" in c["args"], c["args"])

agent = deployments["atoll-agent"]["spec"]["template"]["spec"]
env = {e["name"]: e for e in agent["containers"][0].get("env", [])}
check("agent: leader election identity and namespace from the downward API",
      env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"
      and env.get("POD_NAMESPACE", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace", env)
check("agent: runs as ServiceAccount atoll-agent", agent["serviceAccountName"] == "atoll-agent", agent["serviceAccountName"])
dns = deployments["atoll-dns"]["spec"]["template"]["spec"]
check("dns: runs as ServiceAccount atoll-dns", dns["serviceAccountName"] == "atoll-dns", dns["serviceAccountName"])
pdbs = kinds(member, "PodDisruptionBudget")
check("dns: PodDisruptionBudget minAvailable 1", len(pdbs) == 1 and pdbs[0]["spec"]["minAvailable"] == 1, pdbs)
services = {s["metadata"]["name"]: s for s in kinds(member, "Service")}
ports = sorted((p["port"], p["protocol"]) for p in services.get("atoll-dns", {}).get("spec", {}).get("ports", []))
check("dns: Service atoll-dns on port 53 UDP and TCP", (53, "TCP") in ports and (53, "UDP") in ports, ports)

crds = kinds(member, "CustomResourceDefinition")
check("CRDs: MCS v1alpha1 and v1beta1 both served",
      all(sorted(v["name"] for v in c["spec"]["versions"] if v["served"]) == ["v1alpha1", "v1beta1"]
          for c in crds if c["metadata"]["name"] in ("serviceexports.multicluster.x-k8s.io", "serviceimports.multicluster.x-k8s.io")), "")
check("CRDs: kept on uninstall (helm.sh/resource-policy: keep)",
      all(c["metadata"].get("annotations", {}).get("helm.sh/resource-policy") == "keep" for c in crds), "")
check("CRDs: mcs-api release label kept", all(
    c["metadata"]["labels"].get("multicluster.x-k8s.io/release-version") == "v0.5.2"
    for c in crds if c["metadata"]["name"].endswith(".multicluster.x-k8s.io") and "clusterprofiles" not in c["metadata"]["name"]), "")
policies = kinds(member, "ValidatingAdmissionPolicy")
check("admission policies: imports are the agent's, the agent only touches Atoll's objects",
      sorted(p["metadata"]["name"] for p in policies) == ["atoll-agent-changes-only-atoll-objects", "atoll-imports-are-controller-owned"],
      [p["metadata"]["name"] for p in policies])
roles = {d["kind"] + "/" + d["metadata"]["name"] for d in member if d["kind"] in ("ClusterRole", "Role", "ClusterRoleBinding", "RoleBinding", "ServiceAccount")}
check("RBAC: the agent's and the DNS server's accounts, roles and bindings",
      roles == {"ServiceAccount/atoll-agent", "ClusterRole/atoll-agent", "ClusterRoleBinding/atoll-agent", "Role/atoll-agent",
                "RoleBinding/atoll-agent", "ServiceAccount/atoll-dns", "ClusterRole/atoll-dns", "ClusterRoleBinding/atoll-dns"}, sorted(roles))
wildcards = [d["metadata"]["name"] for d in member if d["kind"] in ("ClusterRole", "Role")
             for r in d.get("rules", []) if "*" in r.get("verbs", []) + r.get("resources", []) + r.get("apiGroups", [])]
check("RBAC: no wildcard", not wildcards, wildcards)
no_secrets = [d["metadata"]["name"] for d in member if d["kind"] == "ClusterRole"
              for r in d.get("rules", []) if "secrets" in r.get("resources", [])]
check("RBAC: no cluster-wide Secret access", not no_secrets, no_secrets)
check("every namespaced object is in atoll-system", all(d["metadata"].get("namespace", "atoll-system") == "atoll-system" for d in member), "")

jobs = {d["metadata"]["name"]: d for d in kinds(wired, "Job")}
check("CoreDNS wiring is opt-in", not kinds(member, "Job"), [d["metadata"]["name"] for d in kinds(member, "Job")])
check("coredns.wire: a post-install/upgrade wire Job and a pre-delete unwire Job",
      sorted(jobs) == ["atoll-coredns-unwire", "atoll-coredns-wire"]
      and jobs["atoll-coredns-wire"]["metadata"]["annotations"]["helm.sh/hook"] == "post-install,post-upgrade"
      and jobs["atoll-coredns-unwire"]["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete"
      and jobs["atoll-coredns-wire"]["spec"]["template"]["spec"]["containers"][0]["args"][:2] == ["coredns", "wire"], sorted(jobs))
check("coredns.wire: the wire Job passes coredns.cacheSeconds (default 5)",
      "--cache-seconds=5" in jobs["atoll-coredns-wire"]["spec"]["template"]["spec"]["containers"][0]["args"],
      jobs["atoll-coredns-wire"]["spec"]["template"]["spec"]["containers"][0]["args"])
wiring_rules = [r for d in kinds(wired, "Role") if d["metadata"]["name"] == "atoll-coredns-wiring" for r in d["rules"]]
check("coredns.wire: its identity may only get/update the CoreDNS ConfigMap and get the Service atoll-dns",
      sorted((tuple(r["resources"]), tuple(r["resourceNames"]), tuple(r["verbs"])) for r in wiring_rules)
      == [(("configmaps",), ("coredns",), ("get", "update")), (("services",), ("atoll-dns",), ("get",))], wiring_rules)

def variables(docs):
    return {v["name"]: v["expression"] for p in kinds(docs, "ValidatingAdmissionPolicy")
            if p["metadata"]["name"] == "atoll-imports-are-controller-owned" for v in p["spec"]["variables"]}
guard = variables(member)
check("admission policy: every MCS EndpointSlice is guarded, whoever manages it",
      "'multicluster.kubernetes.io/service-name' in object.metadata.labels" in guard.get("mcsSlice", "")
      and guard.get("sliceWriter") == "false", guard)
check("admissionPolicy.trustedSliceWriters: named controllers may write MCS EndpointSlices",
      variables(trusting).get("sliceWriter") == 'request.userInfo.username in ["system:serviceaccount:mcs:controller"]',
      variables(trusting).get("sliceWriter"))
dns_args = lambda docs: [a for d in kinds(docs, "Deployment") if d["metadata"]["name"] == "atoll-dns"
                         for a in d["spec"]["template"]["spec"]["containers"][0]["args"]]
check("dns.trustedSliceManagers: passed as --trusted-slice-manager",
      "--trusted-slice-manager=mcs-controller.example.dev" in dns_args(trusting)
      and not any(a.startswith("--trusted-slice-manager") for a in dns_args(member)), dns_args(trusting))

files = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "charts", "atoll", "files")
monitoring = ("ServiceMonitor", "PrometheusRule")
check("monitoring objects are opt-in", not [d for d in member if d["kind"] in monitoring
                                            or d["metadata"]["name"] == "atoll-dashboard"], "")
with open(os.path.join(files, "alerts.rules.yaml")) as f:
    rules_text = f.read()
expected_groups = yaml.safe_load(rules_text.replace("runbook_url: docs/alerts.md#",
                                                    "runbook_url: https://docs.example.dev/atoll/alerts.md#"))["groups"]
prometheus_rules = kinds(observed, "PrometheusRule")
check("prometheusRule: the PrometheusRule holds files/alerts.rules.yaml's groups, runbooks under runbookBaseURL",
      len(prometheus_rules) == 1 and prometheus_rules[0]["spec"]["groups"] == expected_groups,
      [d["metadata"]["name"] for d in prometheus_rules])
check("prometheusRule.labels: on the PrometheusRule",
      prometheus_rules and prometheus_rules[0]["metadata"]["labels"].get("release") == "prometheus", "")
alert_templates = [r["annotations"]["description"] for g in (prometheus_rules[0]["spec"]["groups"] if prometheus_rules else [])
                   for r in g["rules"]]
check("prometheusRule: the alerts' {{ $labels }} templates reach Prometheus untouched",
      alert_templates and all("{{ $labels." in t for t in alert_templates), alert_templates[:1])
dashboards = [d for d in kinds(observed, "ConfigMap") if d["metadata"]["name"] == "atoll-dashboard"]
with open(os.path.join(files, "dashboard.json")) as f:
    dashboard = json.load(f)
check("grafanaDashboard: a ConfigMap with the sidecar's label, in grafanaDashboard.namespace, holding files/dashboard.json",
      len(dashboards) == 1 and dashboards[0]["metadata"]["labels"].get("grafana_dashboard") == "1"
      and dashboards[0]["metadata"]["namespace"] == "monitoring"
      and json.loads(dashboards[0]["data"]["atoll.json"]) == dashboard, [d["metadata"] for d in dashboards])
