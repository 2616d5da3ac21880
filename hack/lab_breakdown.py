#!/usr/bin/env python3
"""Export -> traffic in the running lab, split into its parts (hack/lab-breakdown.sh runs it).

For each of N services served by an echo pod in c2 it creates the ServiceExport and stamps, on
this host's clock (every process of the lab shares it), when each step became visible:

  export    `kubectl apply` of the ServiceExport in c2 returned
  hub       c2's agent's ExportedService record reached the hub (c1), seen by a watch
  derived   c1's agent's derived Service (its ClusterIP is the ClusterSetIP), seen by a watch
  slice     c1's agent's MCS EndpointSlice for c2's endpoints, seen by a watch
  import    c1's ServiceImport names the ClusterSetIP, seen by a watch
  proxy     c1's kube-proxy finished the first rules sync after derived and slice
            (its metric kubeproxy_sync_proxy_rules_last_timestamp_seconds, polled every 20 ms)
  connect   the first TCP connection from a pod in c1 to the ClusterSetIP answered (stamped in
            the pod by /proc/uptime, 10 ms; the loop starts once the import is seen, so when
            the rules were already there, this is the exec's start-up, not the data plane)

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
    rows = []
    try:
        for i in range(1, N + 1):
            svc = f"svc-{i}"
            t0 = now_ms()
            kubectl("c2", "-n", NS, "apply", "-f", "-", input=(
                "apiVersion: multicluster.x-k8s.io/v1alpha1\nkind: ServiceExport\n"
                f"metadata: {{name: {svc}}}\n"))
            t_import = wait_for("import", svc)
            ip = kubectl("c1", "-n", NS, "get", "serviceimport", svc,
                         "-o", "jsonpath={.spec.ips[0]}").stdout.strip()
            # The pod's `date` has no %N: it stamps with /proc/uptime (10 ms), the same kernel
            # clock (CLOCK_BOOTTIME) as this host's, turned into wall time here.
            script = ("first=$(cut -d' ' -f1 /proc/uptime); "
                      f"until nc -N -w 1 {ip} 80 </dev/null 2>/dev/null | grep -q {svc}; do sleep 0.05; done; "
                      "echo $first $(cut -d' ' -f1 /proc/uptime)")
            out = kubectl("c1", "-n", NS, "exec", "client", "--", "sh", "-c", script).stdout.split()
            offset_ms = now_ms() - time.clock_gettime(time.CLOCK_BOOTTIME) * 1000.0
            t_first_try, t_connect = (float(out[0]) * 1000.0 + offset_ms,
                                      float(out[1]) * 1000.0 + offset_ms)
            t_hub = wait_for("hub", svc)
            t_derived = wait_for("derived", svc)
            t_slice = wait_for("slice", svc)
            ready = max(t_derived, t_slice)
            t_proxy = next((s for s in sorted(syncs) if s >= ready), None)
            row = {
                "service": svc,
                "publish_ms": t_hub - t0,
                "import_side_ms": ready - t_hub,
                "import_ips_ms": t_import - t_hub,
                "kube_proxy_ms": (t_proxy - ready) if t_proxy else None,
                "rules_ready_ms": (t_proxy - t0) if t_proxy else None,
                "import_seen_ms": t_import - t0,
                "first_try_ms": t_first_try - t0,
                "connect_ms": t_connect - t0,
            }
            rows.append(row)
            print(f"{svc}: hub {row['publish_ms']:.0f} ms, derived+slice +{row['import_side_ms']:.0f} ms, "
                  f"kube-proxy +{row['kube_proxy_ms'] or float('nan'):.0f} ms = rules at "
                  f"{row['rules_ready_ms'] or float('nan'):.0f} ms; import seen {row['import_seen_ms']:.0f} ms, "
                  f"first try in the pod {row['first_try_ms']:.0f} ms, connected {row['connect_ms']:.0f} ms",
                  flush=True)
            time.sleep(1.5)  # one change at a time: the next export finds kube-proxy idle
    finally:
        for p in procs:
            p.kill()
    summary = {}
    for key in rows[0]:
        if key == "service":
            continue
        values = [r[key] for r in rows if r[key] is not None]
        if values:
            summary[key] = {"p50": round(pct(values, 50)), "p99": round(pct(values, 99)), "n": len(values)}
    print()
    for key, v in summary.items():
        print(f"{key}: p50 {v['p50']} ms, p99 {v['p99']} ms (n={v['n']})")
    with open(OUT, "w") as f:
        json.dump({"rows": rows, "summary": summary}, f, indent=1)


main()
