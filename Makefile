# Atoll's front door. `make demo` runs the main job, `make test` everything CI checks.
SHELL := /bin/bash
.DEFAULT_GOAL := help
CARGO ?= cargo

.PHONY: alerts-test dashboard-png simulate help setup demo test lint tools env-up env-down build conformance conformance-report bench bench-scale bench-memory bench-pass bench-deletes bench-dns fuzz image image-test chart-lint chart-template chart-test chart-dry-run lab-up lab-down lab-check lab-test lab-install lab-day2 conformance-full

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup: ## Install what the build, the tests and the demo need (Rust components, dig, openssl); idempotent
	hack/setup.sh

build: ## Build the atoll binary
	$(CARGO) build --locked -p atoll

demo: setup build ## The main job: bring up a local ClusterSet and show Atoll working in it (fails loudly, else ends with "demo: OK")
	hack/demo.sh

test: setup ## fmt check, clippy -D warnings, unit + integration tests (brings the local ClusterSet up and down)
	hack/test.sh

lint: ## fmt check and clippy only
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --workspace --all-targets -- -D warnings

tools: setup ## Build (once, cached in ~/.cache/atoll) kube-apiserver, etcd, kwok, CoreDNS
	hack/build-tools.sh

env-up: setup tools build ## Start the local ClusterSet (3 kwok clusters on 127.0.0.1)
	hack/env-up.sh

env-down: ## Stop exactly what env-up started
	hack/env-down.sh

bench: setup ## Propagation benchmark (release build): latencies, writes per change, idle writes
	hack/bench.sh

bench-scale: setup ## Scale envelope: simulated clusters x services (BENCH_SIZES, default 10x100,50x200,100x200; up to 250 clusters) imported by c2 (converge, latencies, writes, restart, dead cluster, RSS, the hub's footprint)
	hack/bench-scale.sh

bench-memory: ## Heap the agent's stores hold per hub object at 10x100 .. 250x200 (no cluster needed; before and after the compact forms, beside the 2.5 KiB target), then one member at every CRD bound beside the per-member budget (BENCH_BOUNDS=0 skips it)
	cargo build --locked --release -p atoll-bench --bin atoll-bench-memory
	target/release/atoll-bench-memory

bench-pass: ## CPU of one reconcile step (full, heartbeat, endpoint change) of an importer of 10x100 .. 250x200 (no cluster needed; BENCH_SIZES)
	cargo build --locked --release -p atoll-bench --bin atoll-bench-pass
	target/release/atoll-bench-pass

bench-deletes: setup ## How fast a member's apiserver deletes MCS slices by each way the writer can ask (named, 16/32/64 in flight; collections), beside what a regional outage needs (runs on the local ClusterSet: make env-up first)
	cargo build --locked --release -p atoll-bench --bin atoll-bench-deletes
	ATOLL_KUBECONFIG=$${ATOLL_KUBECONFIG:-$$HOME/.cache/atoll/env/kubeconfig} target/release/atoll-bench-deletes

bench-dns: setup ## atoll dns vs CoreDNS: QPS, p50/p99, RSS at 10/1000/10000 services, plus a differential check
	hack/bench-dns.sh

simulate: ## Deterministic fault simulation of the agents (SIM_SCHEDULES, SIM_SEED; SIM_SCHEDULE=<seed> SIM_TRACE=1 reruns one)
	hack/simulate.sh

fuzz: ## Coverage-guided fuzzing of the DNS query path (FUZZ_SECONDS, default 60; needs nightly)
	hack/fuzz.sh

conformance: setup ## The upstream MCS conformance suite (16 API-level specs) on the local ClusterSet with Atoll
	hack/conformance.sh

conformance-report: conformance ## Run the suite and keep its report.yaml in docs/conformance/ (published layout)
	hack/conformance-report.sh

image: setup ## The container image as an OCI archive in target/image/ (static musl binary FROM scratch, built with crane)
	hack/image.sh

image-test: image ## Unpack the image and run atoll --version from its root filesystem; static, small, non-root
	hack/image-test.sh

alerts-test: setup ## The alert rules: promtool check and unit tests (Prometheus from Debian, unpacked into ~/.cache/atoll)
	hack/build-tools.sh prometheus
	hack/alerts.sh

dashboard-png: setup ## Draw docs/dashboard-faults.png from the last alerts e2e run's Prometheus data (target/alerts/run.json; matplotlib in ~/.cache/atoll/venv)
	hack/dashboard-png.sh

chart-lint: setup tools ## helm lint charts/atoll in every mode
	hack/chart.sh lint

chart-template: setup tools ## Render charts/atoll into target/chart/ and count its lines
	hack/chart.sh template

chart-test: setup tools build ## Offline checks of the chart (lint, template, files in sync with atoll, security, RBAC)
	hack/chart.sh test

chart-dry-run: setup ## Server-side dry-run of the chart on the running local ClusterSet, CRD no-downgrade rule
	hack/chart.sh dry-run

lab-up: setup tools build ## The data-plane lab: 3 clusters inside network namespace atoll-lab (no route out; isolation checked first), a real node each (kubelet, containerd, CNI, kube-proxy, CoreDNS); then make lab-install
	hack/lab.sh up

lab-down: ## Stop the lab (by recorded pids) and delete the namespaces it created
	hack/lab.sh down

lab-check: setup ## The lab's isolation checks: no default route, no link out, outside addresses unreachable
	hack/lab.sh check

lab-install: setup tools build image ## helm install Atoll (hub and members, from `make image`) into the lab's real nodes (after make lab-up), atoll join each member
	hack/lab-install.sh

lab-day2: setup ## On the Helm-installed lab: helm upgrade (nothing imported changes), leader Pod deleted (hand-over timed), helm uninstall (unwire hook, CRDs and MCS objects kept)
	hack/lab-day2.sh

lab-test: setup ## Traffic tests in the running lab: ClusterSetIP, clusterset.local through the pod's resolver, dead cluster, unexport
	hack/lab-test.sh

conformance-full: setup tools build image ## All 27 upstream specs, unmodified, in the real-node lab on the Helm-installed Atoll (starts and installs it), report in target/conformance-lab
	hack/conformance-lab.sh all
