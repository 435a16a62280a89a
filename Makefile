# meshbridge — run `make help` for the targets.
SHELL := /bin/bash
GO ?= go
# The version of every build, the binary's and the image's tag
# (tools/version.sh): the release tag vX.Y.Z at one, vX.Y.Z-N-gHASH after
# it, v0.0.0-N-gHASH before the first; -dirty marks uncommitted changes. The
# chart's appVersion is a release of the same scheme.
VERSION ?= $(shell tools/version.sh)
LDFLAGS := -X main.version=$(VERSION)
BIN := bin
# Test servers are built once per version into this cache (see tools/build.sh).
export MESHBRIDGE_CACHE ?= $(HOME)/.cache/meshbridge
# Consul binary path, resolved (and built when missing) on first use.
CONSUL_BIN = $(shell tools/build.sh consul | sed -n 's/^consul=//p')
# The Nacos server's directory (its JVM classpath in the file classpath),
# resolved (and built when missing) on first use.
NACOS_DIR = $(shell tools/build.sh nacos | sed -n 's/^nacos=//p')
# Every test server, built in parallel: NAME=PATH lines from tools/build.sh
# (zookeeper=CLASSPATH: Debian's ZooKeeper, installed by apt-get when missing;
# helm=PATH and promtool=PATH: the helm and promtool the chart tests run;
# istiod=PATH: the istiod test/istio's ambient tests run; image=PATH: the
# image builder make image runs, which test/image runs; nacos=DIR, dubbo-java=DIR, grpc-java=DIR, spring-cloud=DIR, eureka=DIR: the
# Java peers (tools/build.sh's header), built with Maven from Maven Central).
SERVERS = tools/build.sh consul kube polaris zookeeper dubbo helm istiod promtool image nacos dubbo-java grpc-java spring-cloud eureka
# Test files built only without the race detector (//go:build !race): their
# tests drive a data race inside a dependency that the project cannot fix
# and that the race detector would report as the test's. make test runs them
# in a run of their own without -race, each file's tests (-run) in its
# package, so that they run on every CI; everything else, and every line of
# our own code, runs under -race. Today one file: the Nacos tests that take
# the server away (registries/nacos/reconnect_test.go says why), where
# nacos-sdk-go v2.3.5 races with itself as it reconnects
# (nacos-group/nacos-sdk-go#905 and #833); no release the module proxy
# serves fixes it.
NORACE_TEST_FILES = $(shell grep -rlx --include='*_test.go' -e '//go:build !race' . | sort)
# The container image make image builds; charts/meshbridge's default
# image.repository (test/chart checks that they agree), and the tarball it
# writes it to.
IMAGE_REPOSITORY ?= ghcr.io/meshbridge/meshbridge
IMAGE ?= $(IMAGE_REPOSITORY):$(VERSION)
IMAGE_TAR ?= $(BIN)/meshbridge-image.tar

.PHONY: help
help: ## Show this help
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*?## "}; {printf "  %-16s %s\n", $$1, $$2}'

.PHONY: version
version: ## Print the version builds and the image's tag get (tools/version.sh)
	@echo $(VERSION)

.PHONY: build
build: ## Build bin/meshbridge and the example gRPC server and client
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/meshbridge ./cmd/bridge
	$(GO) build -o $(BIN)/echo-server ./examples/grpc/server
	$(GO) build -o $(BIN)/echo-client ./examples/grpc/client
	$(GO) build -o $(BIN)/demo ./examples/demo

.PHONY: servers
servers: ## Build (or reuse from the cache) the test servers: Consul, kube-apiserver and etcd, Polaris (Nacos protocol), ZooKeeper (Debian's, apt-get), the dubbo-go test provider, helm, istiod, promtool, the image builder, the Java peers (Maven: nacos, dubbo-java, grpc-java, spring-cloud, eureka)
	$(SERVERS)

.PHONY: deps
deps: ## Install the e2e client runtimes: Debian's python3-grpcio (apt-get) and test/clients/node's npm modules (npm ci)
	@# Debian's package installs into /usr/bin/python3, the interpreter the
	@# C-core client uses; apt-get runs only when it is missing (root, or sudo),
	@# under the lock tools/build.sh takes for its own apt-get (ZooKeeper).
	@dpkg-query -W -f='$${Status}' python3-grpcio 2>/dev/null | grep -q 'install ok installed' || { \
		sudo=$$([ "$$(id -u)" = 0 ] || echo sudo); \
		mkdir -p "$(MESHBRIDGE_CACHE)" && exec {lock}>"$(MESHBRIDGE_CACHE)/apt.lock" && flock $$lock && \
		$$sudo apt-get update -qq && $$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-grpcio; }
	cd test/clients/node && npm ci --no-audit --no-fund

.PHONY: demo
demo: build ## Run the demo: the file registry, edited live → meshbridge → proxyless gRPC client (nothing else to build)
	$(BIN)/demo --registry file --meshbridge $(BIN)/meshbridge --server $(BIN)/echo-server --client $(BIN)/echo-client

.PHONY: demo-consul
demo-consul: build ## Run the demo with Consul: a real Consul agent → meshbridge → proxyless gRPC client (the first run builds Consul, ~450 CPU-s)
	$(BIN)/demo --registry consul --consul "$(CONSUL_BIN)" --meshbridge $(BIN)/meshbridge --server $(BIN)/echo-server --client $(BIN)/echo-client

.PHONY: demo-nacos
demo-nacos: build ## Run the demo with Nacos: the real Nacos server (3.1.0) → meshbridge → proxyless gRPC client
	$(BIN)/demo --registry nacos --nacos "$(NACOS_DIR)" --meshbridge $(BIN)/meshbridge --server $(BIN)/echo-server --client $(BIN)/echo-client

.PHONY: demo-eureka
demo-eureka: build ## Run the demo with Eureka: the real Eureka server (Spring Cloud Netflix 4.3.0) → meshbridge → proxyless gRPC client
	@# The Eureka server's directory, built with Maven when missing (tools/build.sh
	@# eureka, as NACOS_DIR's tools/build.sh nacos for make demo-nacos).
	@eureka_dir=$$(tools/build.sh eureka | sed -n 's/^eureka=//p'); [ -n "$$eureka_dir" ] || exit 1; \
	echo "$(BIN)/demo --registry eureka --eureka $$eureka_dir --meshbridge $(BIN)/meshbridge --server $(BIN)/echo-server --client $(BIN)/echo-client"; \
	$(BIN)/demo --registry eureka --eureka "$$eureka_dir" --meshbridge $(BIN)/meshbridge --server $(BIN)/echo-server --client $(BIN)/echo-client

.PHONY: demo-dubbo
demo-dubbo: build ## Run the demo with Dubbo: real ZooKeeper and dubbo-go providers → meshbridge → proxyless gRPC client
	@# ZooKeeper's classpath (apt-get installs Debian's when missing) and the
	@# dubbo-go test provider (built when missing), from one tools/build.sh run.
	@servers=$$(tools/build.sh zookeeper dubbo) || exit 1; \
	zookeeper_cp=$$(sed -n 's/^zookeeper=//p' <<<"$$servers"); dubbo_bin=$$(sed -n 's/^dubbo=//p' <<<"$$servers"); \
	echo "$(BIN)/demo --registry zookeeper --zookeeper-classpath $$zookeeper_cp --dubbo-provider $$dubbo_bin --meshbridge $(BIN)/meshbridge --client $(BIN)/echo-client"; \
	$(BIN)/demo --registry zookeeper --zookeeper-classpath "$$zookeeper_cp" --dubbo-provider "$$dubbo_bin" --meshbridge $(BIN)/meshbridge --client $(BIN)/echo-client

.PHONY: test
test: ## Build the test servers (apt-get installs ZooKeeper when missing), then run unit, integration and e2e tests with -race (the files of NORACE_TEST_FILES without)
	@# The servers build (or come from the cache) while the race-instrumented
	@# test binaries compile: both are CPU-bound, and overlapping them keeps
	@# both cores busy on a cold machine. test/istio (istiod's MCP client, and
	@# the ambient tests against the istiod built from its istio.io/istio) is
	@# a module of its own, so that istio.io/istio stays out of go.mod. The
	@# packages of NORACE_TEST_FILES compile a second time, without -race,
	@# for the run of those files' tests after the -race run.
	@out=$$(mktemp); $(SERVERS) >"$$out" & pid=$$!; \
	$(GO) test -race -count=1 -run '^$$' ./... >/dev/null 2>&1; \
	(cd test/istio && $(GO) test -race -count=1 -run '^$$' ./... >/dev/null 2>&1); \
	for f in $(NORACE_TEST_FILES); do (cd "$$(dirname "$$f")" && $(GO) test -count=1 -run '^$$' . >/dev/null 2>&1); done; \
	wait $$pid || { echo "make test: building the test servers failed"; exit 1; }; \
	servers=$$(cat "$$out"); rm -f "$$out"; \
	consul_bin=$$(sed -n 's/^consul=//p' <<<"$$servers"); kube_assets=$$(sed -n 's/^kube=//p' <<<"$$servers"); \
	polaris_bin=$$(sed -n 's/^polaris=//p' <<<"$$servers"); \
	zookeeper_cp=$$(sed -n 's/^zookeeper=//p' <<<"$$servers"); dubbo_bin=$$(sed -n 's/^dubbo=//p' <<<"$$servers"); \
	helm_bin=$$(sed -n 's/^helm=//p' <<<"$$servers"); istiod_bin=$$(sed -n 's/^istiod=//p' <<<"$$servers"); \
	promtool_bin=$$(sed -n 's/^promtool=//p' <<<"$$servers"); \
	nacos_dir=$$(sed -n 's/^nacos=//p' <<<"$$servers"); \
	dubbo_java_dir=$$(sed -n 's/^dubbo-java=//p' <<<"$$servers"); \
	grpc_java_dir=$$(sed -n 's/^grpc-java=//p' <<<"$$servers"); \
	spring_dir=$$(sed -n 's/^spring-cloud=//p' <<<"$$servers"); \
	eureka_dir=$$(sed -n 's/^eureka=//p' <<<"$$servers"); \
	test -x "$$consul_bin" && test -x "$$kube_assets/kube-apiserver" && test -x "$$kube_assets/etcd" && test -x "$$polaris_bin" && \
		test -n "$$zookeeper_cp" && test -x "$$dubbo_bin" && test -x "$$helm_bin" && test -x "$$istiod_bin" && test -x "$$promtool_bin" && \
		test -f "$$nacos_dir/classpath" && test -f "$$dubbo_java_dir/classpath" && test -f "$$grpc_java_dir/classpath" && test -f "$$spring_dir/classpath" && test -f "$$eureka_dir/classpath" || \
		{ echo "make test: missing server binaries: $$servers"; exit 1; }; \
	export MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_CONSUL_BIN="$$consul_bin" MESHBRIDGE_KUBE_ASSETS="$$kube_assets" \
		MESHBRIDGE_POLARIS_BIN="$$polaris_bin" MESHBRIDGE_ZOOKEEPER_CLASSPATH="$$zookeeper_cp" \
		MESHBRIDGE_DUBBO_PROVIDER_BIN="$$dubbo_bin" MESHBRIDGE_HELM_BIN="$$helm_bin" MESHBRIDGE_ISTIOD="$$istiod_bin" \
		MESHBRIDGE_PROMTOOL_BIN="$$promtool_bin" MESHBRIDGE_NACOS_DIR="$$nacos_dir" MESHBRIDGE_DUBBO_JAVA_DIR="$$dubbo_java_dir" MESHBRIDGE_GRPC_JAVA_DIR="$$grpc_java_dir" MESHBRIDGE_SPRING_CLOUD_DIR="$$spring_dir" MESHBRIDGE_EUREKA_DIR="$$eureka_dir"; \
	$(GO) test -race -count=1 -timeout 25m ./... && \
	for f in $(NORACE_TEST_FILES); do \
		run=$$(sed -n 's/^func \(Test[A-Za-z0-9_]*\)(t \*testing\.T) {$$/\1/p' "$$f" | paste -sd'|' -); \
		test -n "$$run" || { echo "make test: $$f (//go:build !race) has no test"; exit 1; }; \
		echo "make test: without -race (//go:build !race): $$f"; \
		(cd "$$(dirname "$$f")" && $(GO) test -count=1 -timeout 15m -run "^($$run)$$" .) || exit 1; \
	done && \
	cd test/istio && $(GO) test -race -count=1 -timeout 20m ./...

.PHONY: test-unit
test-unit: ## Run the tests that need no server (servers absent: skipped)
	env -u MESHBRIDGE_REQUIRE_SERVERS -u MESHBRIDGE_CONSUL_BIN -u MESHBRIDGE_KUBE_ASSETS -u MESHBRIDGE_POLARIS_BIN \
		-u MESHBRIDGE_ZOOKEEPER_CLASSPATH -u MESHBRIDGE_DUBBO_PROVIDER_BIN -u MESHBRIDGE_HELM_BIN -u MESHBRIDGE_ISTIOD -u MESHBRIDGE_PROMTOOL_BIN \
		-u MESHBRIDGE_NACOS_DIR -u MESHBRIDGE_DUBBO_JAVA_DIR -u MESHBRIDGE_GRPC_JAVA_DIR -u MESHBRIDGE_SPRING_CLOUD_DIR -u MESHBRIDGE_EUREKA_DIR \
		MESHBRIDGE_CACHE=/nonexistent $(GO) test -race -count=1 ./...

.PHONY: test-e2e
test-e2e: ## Run the end-to-end tests only (real Consul, Nacos, Polaris, ZooKeeper and kube-apiserver, meshbridge binary, grpc-go xDS client) and the Helm chart's (test/chart)
	@servers=$$($(SERVERS)) || exit 1; \
	helm_bin=$$(sed -n 's/^helm=//p' <<<"$$servers"); promtool_bin=$$(sed -n 's/^promtool=//p' <<<"$$servers"); \
	test -x "$$helm_bin" && test -x "$$promtool_bin" || { echo "make test-e2e: missing helm or promtool: $$servers"; exit 1; }; \
	MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_HELM_BIN="$$helm_bin" MESHBRIDGE_PROMTOOL_BIN="$$promtool_bin" MESHBRIDGE_CONSUL_BIN=$$(sed -n 's/^consul=//p' <<<"$$servers") \
		MESHBRIDGE_KUBE_ASSETS=$$(sed -n 's/^kube=//p' <<<"$$servers") \
		MESHBRIDGE_POLARIS_BIN=$$(sed -n 's/^polaris=//p' <<<"$$servers") \
		MESHBRIDGE_NACOS_DIR=$$(sed -n 's/^nacos=//p' <<<"$$servers") \
		MESHBRIDGE_DUBBO_JAVA_DIR=$$(sed -n 's/^dubbo-java=//p' <<<"$$servers") \
		MESHBRIDGE_GRPC_JAVA_DIR=$$(sed -n 's/^grpc-java=//p' <<<"$$servers") \
		MESHBRIDGE_SPRING_CLOUD_DIR=$$(sed -n 's/^spring-cloud=//p' <<<"$$servers") \
		MESHBRIDGE_EUREKA_DIR=$$(sed -n 's/^eureka=//p' <<<"$$servers") \
		MESHBRIDGE_ZOOKEEPER_CLASSPATH=$$(sed -n 's/^zookeeper=//p' <<<"$$servers") \
		MESHBRIDGE_DUBBO_PROVIDER_BIN=$$(sed -n 's/^dubbo=//p' <<<"$$servers") $(GO) test -race -count=1 -timeout 20m ./test/e2e/... ./test/chart/...

.PHONY: image
image: ## Build the image IMAGE (ghcr.io/meshbridge/meshbridge:VERSION) without a container engine into bin/meshbridge-image.tar (docker load -i, kind load image-archive)
	@# The static binary (no libc: an empty base), then tools/image adds CA
	@# certificates (Debian's) and passwd/group entries for 65532, as
	@# distroless/static does, and writes a docker-archive tarball; times are
	@# the commit's, so one commit gives one image digest.
	@builder=$$(tools/build.sh image | sed -n 's/^image=//p'); \
	test -x "$$builder" || { echo "make image: building the image builder (tools/image) failed"; exit 1; }; \
	mkdir -p $(BIN)/image && \
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags '-s -w $(LDFLAGS)' -o $(BIN)/image/meshbridge ./cmd/bridge && \
	"$$builder" --binary $(BIN)/image/meshbridge --tag $(IMAGE) --version $(VERSION) --arch "$$($(GO) env GOARCH)" \
		--revision "$$(git rev-parse HEAD 2>/dev/null)" --created "$$(git log -1 --format=%ct 2>/dev/null || echo 0)" --out $(IMAGE_TAR) && \
	echo "make image: $(IMAGE_TAR) holds $(IMAGE): docker load -i $(IMAGE_TAR), or kind load image-archive $(IMAGE_TAR); helm install ... --set image.tag=$(VERSION)"

.PHONY: bench
bench: ## Run the micro benchmarks (with istiod's EDS builder side by side, test/istio), the Consul churn benchmark (a real agent, 10 rounds of 60 s) and the scale suite in bench/; regenerates docs/benchmarks.md
	@mkdir -p $(BIN)
	set -o pipefail; $(GO) test -run '^$$' -bench . -benchmem ./translate/... ./serviceentry/... ./syncer/... ./xds/... | tee $(BIN)/micro-bench.txt
	@# P6 against istiod's own endpoint builder: its own module, like make test's.
	set -o pipefail; cd test/istio && $(GO) test -run '^$$' -bench IstiodEDS -benchmem . | tee -a $(abspath $(BIN))/micro-bench.txt
	@# Registry churn → every xDS stream, on a real Consul agent (built when missing).
	set -o pipefail; consul_bin="$(CONSUL_BIN)"; test -x "$$consul_bin" || { echo "make bench: no consul binary (tools/build.sh consul)"; exit 1; }; \
	MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_CONSUL_BIN="$$consul_bin" \
		$(GO) test -run '^$$' -bench ConsulChurn -benchtime 1x -timeout 60m -v ./registries/consul/ | tee -a $(BIN)/micro-bench.txt
	$(GO) run ./bench -micro $(BIN)/micro-bench.txt -out docs/benchmarks.md

.PHONY: bench-kube
bench-kube: ## Write 1,000 ServiceEntries to a real kube-apiserver, then resync with no change (writes/s, writes)
	@servers=$$(tools/build.sh kube) || exit 1; \
	MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_KUBE_ASSETS=$$(sed -n 's/^kube=//p' <<<"$$servers") \
		$(GO) test -run '^$$' -bench KubeWrites -benchtime 3x ./kube/

.PHONY: bench-ambient
bench-ambient: ## Registry change → ztunnel's WDS view through istiod in ambient mode (Kubernetes output), 20 changes per endpoint mode: median and max
	@servers=$$(tools/build.sh istiod kube) || exit 1; \
	cd test/istio && MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_ISTIOD=$$(sed -n 's/^istiod=//p' <<<"$$servers") \
		MESHBRIDGE_KUBE_ASSETS=$$(sed -n 's/^kube=//p' <<<"$$servers") \
		$(GO) test -run '^$$' -bench AmbientRegistryChangeToWDS -benchtime 20x .

# Extra flags for make bench-istiod, e.g. -istiod.inline-services 2000
# -istiod.we-services 500 -istiod.clients 200 -istiod.cap 2m (go test -args).
BENCH_ISTIOD_FLAGS ?=
.PHONY: bench-istiod
bench-istiod: ## meshbridge direct vs istiod fed by meshbridge over MCP, same mesh and clients: cold sync, memory, CPU and fan-out per change, bytes; regenerates docs/benchmarks-istiod.md (first run builds istiod)
	@servers=$$(tools/build.sh istiod kube) || exit 1; \
	istiod_bin=$$(sed -n 's/^istiod=//p' <<<"$$servers"); kube_assets=$$(sed -n 's/^kube=//p' <<<"$$servers"); \
	test -x "$$istiod_bin" && test -x "$$kube_assets/kube-apiserver" || { echo "make bench-istiod: missing server binaries: $$servers"; exit 1; }; \
	cd bench/istiod && MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_ISTIOD="$$istiod_bin" MESHBRIDGE_KUBE_ASSETS="$$kube_assets" \
		$(GO) test -run '^$$' -bench '^BenchmarkIstiod$$' -benchtime 1x -timeout 90m . \
		-args -istiod.out ../../docs/benchmarks-istiod.md $(BENCH_ISTIOD_FLAGS)

.PHONY: bench-eureka
bench-eureka: ## Eureka: cold sync of 1,000 applications × 3 instances from the real server; cold sync and one delta round (requests per interval) at 10,000 applications × 3 on a recorded server
	@servers=$$(tools/build.sh eureka) || exit 1; \
	export MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_EUREKA_DIR=$$(sed -n 's/^eureka=//p' <<<"$$servers"); \
	$(GO) test -run '^$$' -bench 'RealColdSync1k' -benchtime 5x -benchmem ./registries/eureka/ && \
	$(GO) test -run '^$$' -bench 'ColdSync10k|DeltaRound10k' -benchtime 5x -benchmem ./registries/eureka/

.PHONY: bench-nacos
bench-nacos: ## Nacos: cold sync of 1,000 services × 5 instances on Polaris (time, memory), registration → first call on the real Nacos server (20 runs)
	@servers=$$(tools/build.sh polaris nacos) || exit 1; \
	export MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_POLARIS_BIN=$$(sed -n 's/^polaris=//p' <<<"$$servers") \
		MESHBRIDGE_NACOS_DIR=$$(sed -n 's/^nacos=//p' <<<"$$servers"); \
	$(GO) test -run '^$$' -bench ColdSync -benchtime 1x ./registries/nacos/ && \
	$(GO) test -run '^$$' -bench 'RegistrationToFirstCall/nacos' -benchtime 20x ./test/e2e/

.PHONY: bench-zookeeper
bench-zookeeper: ## Dubbo in a real ZooKeeper: cold sync of 1,000 interfaces × 5 providers (time, memory), registration → first call (20 runs)
	@servers=$$(tools/build.sh zookeeper) || exit 1; \
	export MESHBRIDGE_REQUIRE_SERVERS=1 MESHBRIDGE_ZOOKEEPER_CLASSPATH=$$(sed -n 's/^zookeeper=//p' <<<"$$servers"); \
	$(GO) test -run '^$$' -bench ColdSync -benchtime 1x ./registries/zookeeper/ && \
	$(GO) test -run '^$$' -bench 'RegistrationToFirstCall/zookeeper' -benchtime 20x ./test/e2e/

.PHONY: soak
soak: ## Soak: 200 xDS streams (SotW+Delta), 100 registry changes/s through the pipeline for 10 minutes; prints goroutines and RSS per minute
	$(GO) run ./bench/soak -duration 10m -warmup 1m

.PHONY: refresh-golden
refresh-golden: ## Regenerate translate/testdata/*.golden.yaml
	REFRESH_GOLDEN=true $(GO) test ./translate/...

.PHONY: refresh-crds
refresh-crds: ## Copy the ServiceEntry, WorkloadEntry, DestinationRule and VirtualService CRDs of go.mod's istio.io/api into kube/testdata/crds/
	@$(GO) mod download istio.io/api
	@v=$$($(GO) list -m -f '{{.Version}}' istio.io/api) && d=$$($(GO) list -m -f '{{.Dir}}' istio.io/api) && \
	out=kube/testdata/crds/istio-networking.yaml && \
	{ echo "# ServiceEntry, WorkloadEntry, DestinationRule and VirtualService CRDs, verbatim from istio.io/api $$v kubernetes/customresourcedefinitions.gen.yaml."; \
	  echo "# Do not edit: after changing istio.io/api in go.mod run make refresh-crds (kube/crds_test.go checks this copy)."; \
	  awk '/^---$$/ { if (keep) printf "---\n%s", doc; doc = ""; keep = 0; next } \
	       { doc = doc $$0 "\n" } \
	       /^  name: (serviceentries|workloadentries|destinationrules|virtualservices)\.networking\.istio\.io$$/ { keep = 1 } \
	       END { if (keep) printf "---\n%s", doc }' "$$d/kubernetes/customresourcedefinitions.gen.yaml"; \
	} >"$$out.tmp" && \
	test "$$(grep -cE '^  name: (serviceentries|workloadentries|destinationrules|virtualservices)\.networking\.istio\.io$$' "$$out.tmp")" = 4 && \
	mv "$$out.tmp" "$$out" && echo "refresh-crds: $$out from istio.io/api $$v" || { rm -f "$$out.tmp"; exit 1; }

# Fuzzing time per target; go test fuzzes one target per run, so the
# targets run one after another. DIFFERENTIAL_SEEDS is how many seeds the
# pipeline's randomized differential runs (make test runs 200).
FUZZTIME ?= 30s
DIFFERENTIAL_SEEDS ?= 100000
.PHONY: fuzz
fuzz: ## Fuzz each target for 30 s (FUZZTIME), one after another, then the pipeline's differential over 100,000 seeds (DIFFERENTIAL_SEEDS); seed corpora and 200 seeds run in make test
	$(GO) test -run '^$$' -fuzz '^FuzzTranslate$$' -fuzztime $(FUZZTIME) ./translate/
	$(GO) test -run '^$$' -fuzz '^FuzzInstancesFrom$$' -fuzztime $(FUZZTIME) ./registries/consul/
	$(GO) test -run '^$$' -fuzz '^FuzzParseConfig$$' -fuzztime $(FUZZTIME) ./cmd/bridge/
	$(GO) test -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME) ./registries/file/
	$(GO) test -run '^$$' -fuzz '^FuzzConvert$$' -fuzztime $(FUZZTIME) ./registries/nacos/
	$(GO) test -run '^$$' -fuzz '^FuzzBuilder$$' -fuzztime $(FUZZTIME) ./registries/dubbo/
	$(GO) test -run '^TestDifferential$$' -timeout 0 ./pipeline/ -differential.seeds $(DIFFERENTIAL_SEEDS)

.PHONY: lint
lint: ## go vet (the product and the modules of test/istio, bench/istiod and tools/image) and gofmt check
	@# With -race where make test compiles with -race: vet then compiles the
	@# dependencies as the tests do, so the test build reuses them (a cold
	@# CI compiles them once, not twice). The files make test runs without
	@# -race (//go:build !race) are vetted without it.
	$(GO) vet -race ./...
	@for d in $(sort $(dir $(NORACE_TEST_FILES))); do echo "(cd $$d && $(GO) vet .)"; (cd $$d && $(GO) vet .) || exit 1; done
	cd test/istio && $(GO) vet -race ./...
	cd bench/istiod && $(GO) vet ./...
	cd tools/image && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: clean
clean: ## Remove build outputs (not the server cache)
	rm -rf $(BIN)
