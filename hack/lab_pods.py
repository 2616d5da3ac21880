"""The pod runner's view of a cluster (hack/lab-pods.sh): reads `kubectl get pods -o json` on
stdin and prints one line "uid ip namespace name" per Running pod that has an IP. For a pod not
seen before (no DIR/<uid>), it writes DIR/<uid>.new/<container>.sh: the container's command,
arguments and environment as a shell script, for the images whose programs the lab has on the
host (socat, sh, echo). Other images (clients such as netshoot) get no process: tests run
commands inside their network namespace instead.

Usage: kubectl get pods -o json ... | python3 hack/lab_pods.py DIR
"""

import json
import os
import shlex
import sys

# Images whose command the lab runs: the upstream suite's listener and the lab's own.
RUNNABLE = ("alpine/socat", "docker.io/alpine/socat", "atoll.lab/")


def field_value(pod, path):
    """The downward API's value for a fieldRef (the few paths these images use)."""
    status = pod.get("status", {})
    meta = pod.get("metadata", {})
    values = {
        "status.podIP": status.get("podIP", ""),
        "status.podIPs": ",".join(p.get("ip", "") for p in status.get("podIPs", [])),
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "spec.nodeName": pod.get("spec", {}).get("nodeName", ""),
    }
    return values.get(path, "")


def container_script(pod, container):
    argv = list(container.get("command") or []) + list(container.get("args") or [])
    if not argv:
        return None
    lines = ["#!/bin/sh", f"export HOSTNAME={shlex.quote(pod['metadata']['name'])}"]
    for env in container.get("env") or []:
        if "value" in env:
            value = env["value"]
        else:
            ref = (env.get("valueFrom") or {}).get("fieldRef") or {}
            value = field_value(pod, ref.get("fieldPath", ""))
        lines.append(f"export {env['name']}={shlex.quote(value)}")
    lines.append("exec " + " ".join(shlex.quote(a) for a in argv))
    return "\n".join(lines) + "\n"


def main():
    state = sys.argv[1]
    pods = json.load(sys.stdin).get("items", [])
    for pod in pods:
        meta, status = pod["metadata"], pod.get("status", {})
        ip = status.get("podIP")
        if status.get("phase") != "Running" or not ip or pod["metadata"].get("deletionTimestamp"):
            continue
        uid = meta["uid"]
        if not os.path.exists(os.path.join(state, uid)):
            new = os.path.join(state, uid + ".new")
            os.makedirs(new, exist_ok=True)
            for container in pod["spec"].get("containers", []):
                if not container.get("image", "").startswith(RUNNABLE):
                    continue
                script = container_script(pod, container)
                if script:
                    with open(os.path.join(new, container["name"] + ".sh"), "w") as f:
                        f.write(script)
        print(uid, ip, meta["namespace"], meta["name"])


if __name__ == "__main__":
    main()
