# KEP-5939 locality in the data-plane lab, with real packets; sourced by hack/lab-test.sh after
# its own checks (it uses k, eventually, check, CONNECTIONS and PROPAGATION from there).
# c1 and c2 are in region a, c3 in region b; `local` is exported from all three with
# [{propertySelector: {matchLabels: {region: "@SameAsImporter@"}}}]. Importers in region a use
# c1 and c2 while one of them has a ready endpoint, c3 otherwise; c3 uses c3. The failover time
# (from the moment c1's and c2's last local endpoint is seen not ready to the first connection
# from c1's client answered by c3) is measured over LAB_FAILOVER_RUNS runs (default 10) and
# written, with the return times, to target/lab/locality.json.
# shellcheck shell=bash

LOC_NS=lab-locality
LOC_SVC=local
LOC_RUNS=${LAB_FAILOVER_RUNS:-10}
LOC_SELECTORS='[{"propertySelector":{"matchLabels":{"region":"@SameAsImporter@"}}}]'
LOC_OUT=$REPO_DIR/target/lab/locality.json

loc_region() { # cN value
  k "$1" apply -f - >/dev/null <<EOF
apiVersion: about.k8s.io/v1beta1
kind: ClusterProperty
metadata: {name: region}
spec: {value: $2}
EOF
}

loc_workload() { # cN: one echo pod answering "<cluster> <pod>", exported with the selectors
  lab_namespace "$1" "$LOC_NS"
  {
    echo_service_yaml "$LOC_SVC" 1 "$1 \$HOSTNAME"
    cat <<EOF
---
apiVersion: multicluster.x-k8s.io/v1alpha1
kind: ServiceExport
metadata:
  name: $LOC_SVC
  annotations:
    atoll.dev/cluster-selectors: '$LOC_SELECTORS'
EOF
  } | k "$1" -n "$LOC_NS" apply -f - >/dev/null
}

loc_pod() { local c=$1 pod=$2; shift 2; "$HACK/lab.sh" pod-exec "$c" "$LOC_NS" "$pod" "$@"; }
loc_ready() { loc_pod "$1" client true 2>/dev/null; }
loc_has_ip() { [ -n "$(loc_ip "$1")" ]; }
loc_ip() { k "$1" -n "$LOC_NS" get serviceimport "$LOC_SVC" -o jsonpath='{.spec.ips[0]}' 2>/dev/null; }

# CONNECTIONS connections from cN's client to the ClusterSetIP; "<cluster> <count>" per line.
loc_spread() { # cN address
  loc_pod "$1" client sh -c "for i in \$(seq $CONNECTIONS); do nc -w 2 $2 80 </dev/null; done" \
    2>/dev/null | awk '{print $1}' | sort | uniq -c | awk '{print $2, $1}'
}
loc_count() { awk -v c="$1" '$1 == c {print $2}' <<<"$2"; }

# Every connection from cN answered by exactly the clusters named (each at least once).
loc_only() { # cN address cluster...
  local from=$1 address=$2 out total=0 c n; shift 2
  out=$(loc_spread "$from" "$address")
  for c in "$@"; do
    n=$(loc_count "$c" "$out"); [ "${n:-0}" -gt 0 ] || { echo "  $from: $(tr '\n' ' ' <<<"$out")" >&2; return 1; }
    total=$((total + n))
  done
  [ "$total" -eq "$CONNECTIONS" ] || { echo "  $from: $(tr '\n' ' ' <<<"$out")" >&2; return 1; }
  echo "  $CONNECTIONS connections from $from's client: $(tr '\n' ' ' <<<"$out")"
}

now() { date +%s.%N; }

# Whether cN's own EndpointSlices of the service hold no ready endpoint.
loc_none_ready() { # cN
  ! k "$1" -n "$LOC_NS" get endpointslices -l "kubernetes.io/service-name=$LOC_SVC" \
    -o jsonpath='{range .items[*].endpoints[*]}{.conditions.ready}{"\n"}{end}' 2>/dev/null | grep -qx true
}

# One failover and return; appends "<failover s> <from scale s> <return s>" to $1.
loc_run() { # file
  local scaled seen answered back probe pid
  probe=$(mktemp)
  scaled=$(now)
  for c in c1 c2; do k "$c" -n "$LOC_NS" scale deployment "$LOC_SVC" --replicas=0 >/dev/null; done
  # c1's client connects until c3 answers, and prints when.
  loc_pod c1 client sh -c "while :; do out=\$(timeout 0.3 nc -w 1 $ip_c1 80 </dev/null 2>/dev/null); case \$out in c3\\ *) date +%s.%N; exit 0;; esac; done" \
    >"$probe" 2>/dev/null &
  pid=$!
  until loc_none_ready c1 && loc_none_ready c2; do sleep 0.1; done
  seen=$(now)
  local deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.1; done
  kill "$pid" 2>/dev/null || true
  answered=$(cat "$probe"); rm -f "$probe"
  [ -n "$answered" ] || { echo "  run: c3 never answered within 60 s" >&2; return 1; }
  for c in c1 c2; do k "$c" -n "$LOC_NS" scale deployment "$LOC_SVC" --replicas=1 >/dev/null; done
  local returning; returning=$(now)
  eventually 60 loc_only c1 "$ip_c1" c1 c2 >/dev/null 2>&1 || { echo "  run: traffic did not return to region a" >&2; return 1; }
  back=$(now)
  awk -v a="$answered" -v s="$seen" -v sc="$scaled" -v r="$returning" -v b="$back" \
    'BEGIN { f = a - s; if (f < 0) f = 0; printf "%.3f %.3f %.3f\n", f, a - sc, b - r }' >>"$1"
}

loc_failover() {
  local runs; runs=$(mktemp)
  for _ in $(seq "$LOC_RUNS"); do loc_run "$runs" || { rm -f "$runs"; return 1; }; done
  mkdir -p "$(dirname "$LOC_OUT")"
  python3 - "$runs" "$LOC_OUT" <<'PY'
import json, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
def pct(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s) + 0.5) - 1))]
out = {"runs": len(rows)}
for i, key in enumerate(["failover_seconds", "failover_from_scale_seconds", "return_seconds"]):
    values = [r[i] for r in rows]
    out[key] = {"p50": pct(values, 50), "p99": pct(values, 99), "all": values}
json.dump(out, open(sys.argv[2], "w"), indent=1)
f, s, r = out["failover_seconds"], out["failover_from_scale_seconds"], out["return_seconds"]
print(f"  failover over {len(rows)} runs: p50 {f['p50']:.2f} s, p99 {f['p99']:.2f} s from the last local endpoint seen not ready "
      f"(p50 {s['p50']:.2f} s, p99 {s['p99']:.2f} s from the scale-down); back to region a: p50 {r['p50']:.2f} s, p99 {r['p99']:.2f} s")
PY
  rm -f "$runs"
}

log "locality (KEP-5939): c1 and c2 in region a, c3 in region b, '$LOC_SVC' exported from all three"
loc_region c1 a; loc_region c2 a; loc_region c3 b
for c in c1 c2 c3; do loc_workload "$c"; done
lab_client_pod c1 "$LOC_NS"; lab_client_pod c3 "$LOC_NS"
eventually 60 loc_ready c1 && eventually 60 loc_ready c3 || true
eventually 60 loc_has_ip c1 && eventually 60 loc_has_ip c3 || true
ip_c1=$(loc_ip c1); ip_c3=$(loc_ip c3)
check "locality: from c1 (region a), $CONNECTIONS connections reach only c1 and c2" \
  eventually "$PROPAGATION" loc_only c1 "$ip_c1" c1 c2
check "locality: from c3 (region b), $CONNECTIONS connections reach only c3" \
  eventually "$PROPAGATION" loc_only c3 "$ip_c3" c3
check "locality: region a scaled to zero, c1's connections reach c3, and return to c1 and c2 when it is back ($LOC_RUNS runs, times in target/lab/locality.json)" \
  loc_failover
check "locality: from c3, only c3 while it has endpoints (after the failovers)" \
  eventually "$PROPAGATION" loc_only c3 "$ip_c3" c3
for c in c1 c2 c3; do
  k "$c" delete clusterproperty region --ignore-not-found >/dev/null 2>&1 || true
  k "$c" delete namespace "$LOC_NS" --wait=false >/dev/null 2>&1 || true
done
