#!/usr/bin/env python3
"""Export -> traffic in the running lab, split into its parts (hack/lab-breakdown.sh runs it).

For each of N services served by an echo pod in c2 it creates the ServiceExport and stamps, on
this host's clock (every process of the lab shares it), when each step became visible:

  export    `kubectl apply` of the ServiceExport in c2 returned
  hub       c2's agent's ExportedService record reached the hub (c1), seen by a watch
  derived   c1's agent's derived Service (its ClusterIP is the ClusterSetIP), seen by a watch
  slice     c1's agent's MCS EndpointSlice for c2's endpoints, seen by a watch
  import    c1's ServiceImport names the ClusterSetIP, seen by a watch
  proxy     c1's kube-proxy finished the rules sync that let the connection through: its last
            sync before the pod connected (its metric
            kubeproxy_sync_proxy_rules_last_timestamp_seconds, polled every 20 ms); the first
            sync after derived and slice is stamped too (often it ran before kube-proxy had
            seen both, and the next one waits for minSyncPeriod)
  atoll_dns c1's atoll dns first answered the name with an address (asked directly from a pod
            in c1, every 20 ms from the export on)
  coredns   the pod's own resolver (c1's CoreDNS, forwarding clusterset.local to atoll dns)
            first answered the name (asked every 20 ms from the export on, as a client waiting
            for the service would)
  connect   the first TCP connection from that pod to the address atoll dns gave answered with
            c2's reply line (tried every 20 ms once atoll dns answered)

The pod's probe is started (kubectl exec) before the export and waits for a line on its stdin,
so the exec's start-up is not on the path; it stamps by /proc/uptime (10 ms), the same kernel
clock (CLOCK_BOOTTIME) as this host's, turned into wall time here, and stamps a connection when
the reply line is read, not when nc exits.
Watches stamp an event when kubectl prints it (tens of ms after the write at most). Prints each
service's line and p50 / p99 of every part, then the same as JSON (target/lab/breakdown.json).
"""

import json
import os
import queue
import subprocess
import sys
import threading
import time

NS = "lab-breakdown"
NETNS = os.environ["LAB_NETNS"]
KUBECONFIG = os.path.join(os.environ["ATOLL_ENV_DIR"], "kubeconfig")
N = int(os.environ.get("LAB_BENCH_SERVICES", "20"))
OUT = sys.argv[1]
PROXY_NETNS = f"{NETNS}-c1"


def now_ms():
    return time.time() * 1000.0


def kubectl(cluster, *args, **kw):
    return subprocess.run(
        ["ip", "netns", "exec", NETNS, "kubectl", "--kubeconfig", KUBECONFIG,
         "--context", f"kwok-{cluster}", *args],
        check=True, capture_output=True, text=True, **kw)


events = queue.Queue()


def watch(name, cluster, args, template):
    """Streams one watch; puts (name, object-line, arrival ms) for every event."""
    p = subprocess.Popen(
        ["ip", "netns", "exec", NETNS, "kubectl", "--kubeconfig", KUBECONFIG,
         "--context", f"kwok-{cluster}", "get", "--watch", "-o", f"jsonpath={template}\n", *args],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    def pump():
        for line in p.stdout:
            events.put((name, line.strip(), now_ms()))
    threading.Thread(target=pump, daemon=True).start()
    return p


# The kube-proxy of c1's node: its last sync's wall time, polled inside the node's namespace.
POLLER = r"""
import time, urllib.request, sys
last = None
while True:
    try:
        body = urllib.request.urlopen("http://127.0.0.1:10249/metrics", timeout=1).read().decode()
        for line in body.splitlines():
            if line.startswith("kubeproxy_sync_proxy_rules_last_timestamp_seconds"):
                value = float(line.split()[-1])
                if value != last:
                    last = value
                    print(f"{value*1000.0:.1f}", flush=True)
    except Exception:
        pass
    time.sleep(0.02)
"""
syncs = []


def poll_proxy():
    p = subprocess.Popen(["ip", "netns", "exec", PROXY_NETNS, "python3", "-u", "-c", POLLER],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
    def pump():
        for line in p.stdout:
            syncs.append(float(line))
    threading.Thread(target=pump, daemon=True).start()
    return p


# The pod's side, one service: waits for "go", then, for an export (MODE=mcs), asks atoll dns
# (directly) and the pod's resolver (CoreDNS) for the name every 20 ms and connects to the
# address atoll dns gave until c2's reply line is read; for a plain Service of c1 (MODE=local),
# reads its ClusterIP on the next line and connects to it. Prints "<part> <uptime>" lines, then
# "done".
PROBE = r"""
stamp() { echo "$1 $(cut -d' ' -f1 /proc/uptime)"; }
echo ready
read -r _
stamp go
deadline=$(( $(cut -d. -f1 /proc/uptime) + 30 ))
alive() { [ "$(cut -d. -f1 /proc/uptime)" -lt "$deadline" ]; }
ask() { dig +short +tries=1 +time=1 "$@" "$NAME" A 2>/dev/null | grep -m1 -E '^[0-9.]+$'; }
connect() { # address, text the reply line holds
  # A new attempt every 20 ms, each in the background: one whose SYN went out before the rules
  # existed waits for its retransmission (1 s), and must not hold up the next.
  got=/tmp/connected.$$.$1
  rm -f "$got"
  while alive && [ ! -s "$got" ]; do
    (nc -w 2 "$1" 80 </dev/null 2>/dev/null |
     { IFS= read -r line && case "$line" in *"$2"*) cut -d' ' -f1 /proc/uptime >>"$got" ;; esac; }) &
    sleep 0.02
  done
  wait
  [ -s "$got" ] && echo "connect $(sort -n "$got" | head -1)"
  rm -f "$got"
}
if [ "$MODE" = local ]; then
  read -r ip
  connect "$ip" "c1 local"
else
  (
    while alive; do ip=$(ask "@$ATOLL_DNS") && [ -n "$ip" ] && break; sleep 0.02; done
    [ -n "$ip" ] && stamp atoll_dns && connect "$ip" "$SVC"
  ) &
  (
    while alive; do ip=$(ask) && [ -n "$ip" ] && break; sleep 0.02; done
    [ -n "$ip" ] && stamp coredns
  ) &
  wait
fi
echo done
"""


def start_probe(svc, atoll_dns, mode="mcs"):
    """Starts the pod's probe for svc and returns once it waits for "go" on its stdin."""
    name = f"{svc}.{NS}.svc.clusterset.local."
    p = subprocess.Popen(
        ["ip", "netns", "exec", NETNS, "kubectl", "--kubeconfig", KUBECONFIG,
         "--context", "kwok-c1", "-n", NS, "exec", "-i", "client", "--", "env",
         f"MODE={mode}", f"NAME={name}", f"SVC={svc}", f"ATOLL_DNS={atoll_dns}", "sh", "-c", PROBE],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        bufsize=1)
    line = p.stdout.readline().strip()
    if line != "ready":
        raise SystemExit(f"{svc}: the pod's probe did not start (said {line!r})")
    return p


def tell(probe, line):
    """Sends the probe one line (it waits for "go", then, for a plain Service, its ClusterIP)."""
    probe.stdin.write(line + "\n")
    probe.stdin.flush()


def probe_stamps(p, svc, parts=("go", "atoll_dns", "coredns", "connect")):
    """The probe's stamps for svc as wall-clock ms (every part must have answered in 30 s)."""
    offset_ms = now_ms() - time.clock_gettime(time.CLOCK_BOOTTIME) * 1000.0
    stamps = {}
    for line in p.stdout:
        words = line.split()
        if words == ["done"]:
            break
        if len(words) == 2:
            stamps[words[0]] = float(words[1]) * 1000.0 + offset_ms
    p.wait()
    missing = set(parts) - stamps.keys()
    if missing:
        raise SystemExit(f"{svc}: no {', '.join(sorted(missing))} from the pod within 30 s")
    return stamps


def programmed_by(t_connect):
    """kube-proxy's last sync before a connection (the pod's stamp is 10 ms coarse)."""
    return max((s for s in syncs if s <= t_connect + 10.0), default=None)


seen = {}  # (part, service) -> first ms


def drain(until_ms):
    while True:
        timeout = max(0.0, (until_ms - now_ms()) / 1000.0)
        try:
            name, line, at = events.get(timeout=timeout)
        except queue.Empty:
            return
        parts = line.split(" ")
        svc = parts[0]
        if name == "import" and (len(parts) < 2 or not parts[1]):
            continue
        if name == "derived" and (len(parts) < 2 or parts[1] in ("", "None")):
            continue
        seen.setdefault((name, svc), at)
        if until_ms <= now_ms():
            return


def wait_for(part, svc, limit_ms=60000):
    start = now_ms()
    while (part, svc) not in seen:
        if now_ms() - start > limit_ms:
            raise SystemExit(f"{svc}: no {part} after {limit_ms} ms")
        drain(now_ms() + 50)
    return seen[(part, svc)]


def pct(values, p):
    s = sorted(values)
    i = min(len(s) - 1, max(0, int(round(p / 100.0 * len(s) + 0.499)) - 1))
    return s[i]


def main():
    procs = [
        watch("hub", "c1", ["exportedservices.hub.atoll.dev", "-n", "atoll-c2"],
              "{.spec.name}"),
        watch("derived", "c1", ["services", "-n", NS, "-l", "multicluster.kubernetes.io/service-name"],
              "{.metadata.labels.multicluster\\.kubernetes\\.io/service-name} {.spec.clusterIP}"),
        watch("slice", "c1", ["endpointslices", "-n", NS, "-l",
                              "multicluster.kubernetes.io/source-cluster=c2"],
              "{.metadata.labels.multicluster\\.kubernetes\\.io/service-name}"),
        watch("import", "c1", ["serviceimports.multicluster.x-k8s.io", "-n", NS],
              "{.metadata.name} {.spec.ips[0]}"),
        poll_proxy(),
    ]
    drain(now_ms() + 2000)  # the watches' initial lists
    atoll_dns = kubectl("c1", "-n", "atoll-system", "get", "service", "atoll-dns",
                        "-o", "jsonpath={.spec.clusterIP}").stdout.strip()
    rows = []
    local_rows = []
    try:
        for i in range(1, N + 1):
            svc = f"svc-{i}"
            probe = start_probe(svc, atoll_dns)
            t0 = now_ms()
            tell(probe, "go")
            kubectl("c2", "-n", NS, "apply", "-f", "-", input=(
                "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\n"
                f"metadata: {{name: {svc}}}\n"))
            t_import = wait_for("import", svc)
            stamps = probe_stamps(probe, svc)
            t_hub = wait_for("hub", svc)
            t_derived = wait_for("derived", svc)
            t_slice = wait_for("slice", svc)
            ready = max(t_derived, t_slice)
            time.sleep(0.2)  # the poller's latest syncs (every 20 ms, then a pipe)
            t_first_sync = next((s for s in sorted(syncs) if s >= ready), None)
            t_proxy = programmed_by(stamps["connect"])
            row = {
                "service": svc,
                "publish_ms": t_hub - t0,
                "import_side_ms": ready - t_hub,
                "import_ips_ms": t_import - t_hub,
                "first_sync_ms": (t_first_sync - ready) if t_first_sync else None,
                "kube_proxy_ms": (t_proxy - ready) if t_proxy else None,
                "rules_ready_ms": (t_proxy - t0) if t_proxy else None,
                "import_seen_ms": t_import - t0,
                "probe_start_ms": stamps["go"] - t0,
                "atoll_dns_ms": stamps["atoll_dns"] - t0,
                "coredns_ms": stamps["coredns"] - t0,
                "connect_ms": stamps["connect"] - t0,
            }
            rows.append(row)
            print(f"{svc}: hub {row['publish_ms']:.0f} ms, derived+slice +{row['import_side_ms']:.0f} ms, "
                  f"kube-proxy's first sync +{row['first_sync_ms'] or float('nan'):.0f} ms, the one that "
                  f"programmed it +{row['kube_proxy_ms'] or float('nan'):.0f} ms = rules at "
                  f"{row['rules_ready_ms'] or float('nan'):.0f} ms; import seen {row['import_seen_ms']:.0f} ms, "
                  f"atoll dns answers {row['atoll_dns_ms']:.0f} ms, CoreDNS {row['coredns_ms']:.0f} ms, "
                  f"connected {row['connect_ms']:.0f} ms",
                  flush=True)
            time.sleep(1.5)  # one change at a time: the next export finds kube-proxy idle
        # The same path inside one cluster, for comparison: a plain Service of c1 created over a
        # running echo pod (label app=local), the pod connecting to its ClusterIP.
        for i in range(1, N + 1):
            svc = f"local-{i}"
            probe = start_probe(svc, atoll_dns, mode="local")
            t0 = now_ms()
            tell(probe, "go")
            ip = kubectl("c1", "-n", NS, "create", "-f", "-", "-o", "jsonpath={.spec.clusterIP}", input=(
                "apiVersion: v1\nkind: Service\n"
                f"metadata: {{name: {svc}}}\n"
                "spec: {selector: {app: local}, ports: [{port: 80, targetPort: 8080}]}\n")).stdout.strip()
            tell(probe, ip)
            stamps = probe_stamps(probe, svc, parts=("go", "connect"))
            time.sleep(0.2)
            t_proxy = programmed_by(stamps["connect"])
            local_rows.append({"service": svc,
                               "plain_rules_ready_ms": (t_proxy - t0) if t_proxy else None,
                               "plain_connect_ms": stamps["connect"] - t0})
            print(f"{svc} (a plain Service of c1): kube-proxy's rules at "
                  f"{(t_proxy - t0) if t_proxy else float('nan'):.0f} ms, "
                  f"connected {stamps['connect'] - t0:.0f} ms", flush=True)
            time.sleep(1.5)
    finally:
        for p in procs:
            p.kill()
    summary = {}
    for key in [*rows[0], *local_rows[0]]:
        if key == "service":
            continue
        values = [r[key] for r in rows + local_rows if r.get(key) is not None]
        if values:
            summary[key] = {"p50": round(pct(values, 50)), "p99": round(pct(values, 99)), "n": len(values)}
    print()
    for key, v in summary.items():
        print(f"{key}: p50 {v['p50']} ms, p99 {v['p99']} ms (n={v['n']})")
    with open(OUT, "w") as f:
        json.dump({"rows": rows, "plain_service_rows": local_rows, "summary": summary}, f, indent=1)


main()
