# Workloads of the lab's test scripts (hack/lab-test.sh, hack/lab-bench.sh), sourced after
# lab-env.sh: the client pod, echo services.
# shellcheck shell=bash

lab_namespace() { # cN namespace
  lab_kubectl "$1" create namespace "$2" --dry-run=client -o yaml | lab_kubectl "$1" apply -f - >/dev/null
}

# Pod `client` (netshoot, sleeping: tests run nc and dig in it with kubectl exec).
lab_client_pod() { # cN namespace
  lab_namespace "$1" "$2"
  lab_kubectl "$1" -n "$2" apply -f - >/dev/null <<YAML
apiVersion: v1
kind: Pod
metadata: {name: client}
spec:
  containers:
  - {name: client, image: nicolaka/netshoot:v0.15, args: ["sleep", "infinity"]}
YAML
}

# The YAML of a Deployment of echo pods answering every TCP connection on 8080 with one line
# (REPLY, in which \$HOSTNAME is the pod's name) and of its Service (port 80 -> 8080).
echo_service_yaml() { # name replicas reply
  cat <<YAML
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: $1}
spec:
  replicas: $2
  selector: {matchLabels: {app: $1}}
  template:
    metadata: {labels: {app: $1}}
    spec:
      containers:
      - name: echo
        image: atoll.lab/echo:1
        command: ["socat", "TCP-LISTEN:8080,fork,reuseaddr", "SYSTEM:echo $3"]
        ports: [{name: tcp, containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: $1}
spec:
  selector: {app: $1}
  ports: [{name: tcp, port: 80, targetPort: 8080}]
YAML
}
