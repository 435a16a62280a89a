#!/usr/bin/env bash
# Builds the servers meshbridge's tests run against, in parallel, into a cache
# keyed by each module's sources, and prints "NAME=PATH" per server (and, on
# stderr, "tools/build.sh: NAME ready after Ns" for each that was not ready at
# once: a cold CI's build profile).
#
#   tools/build.sh [server ...]     (default: every server below)
#
# Servers: consul (prints consul=PATH), kube (kube-apiserver and etcd, built
# in parallel into one directory laid out as envtest's KUBEBUILDER_ASSETS;
# prints kube=DIR), polaris (a Nacos-protocol server; prints polaris=PATH,
# with Polaris's config template polaris-server.yaml next to the binary),
# zookeeper (Debian's ZooKeeper 3.8, installed with apt-get when missing;
# prints zookeeper=CLASSPATH, the colon-joined jars the server runs from),
# dubbo (the dubbo-go test provider, main package test/dubbo/provider of the
# Go module test/dubbo; prints dubbo=PATH), helm (the helm command the
# chart tests lint and render charts/meshbridge with; prints helm=PATH),
# promtool (Prometheus's, which checks and unit-tests the chart's alerting
# rules; prints promtool=PATH), image (tools/image, the image builder
# make image runs, which test/image runs; prints image=PATH) and istiod (pilot-discovery of the istio.io/istio version test/istio/go.mod
# pins, built from that module, which names it as a tool; prints
# istiod=PATH): test/istio's ambient tests and make bench-istiod run it.
# Java peers, each a Maven project under tools/ built with Maven from Maven
# Central (pinned versions in its pom.xml) and run by the harness with
# java: nacos (the Nacos server, tools/nacos; prints nacos=DIR),
# dubbo-java (the Apache Dubbo test provider, tools/dubbo-java; prints
# dubbo-java=DIR) and grpc-java (the grpc-java proxyless client of the
# cross-language tests, tools/grpc-java; prints grpc-java=DIR),
# spring-cloud (a Spring Cloud web application registering through Nacos,
# Consul, Eureka or ZooKeeper Discovery, tools/spring-cloud; prints
# spring-cloud=DIR) and eureka (Spring Cloud Netflix's Eureka server,
# tools/eureka; prints eureka=DIR).
#
# Cache: ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/<server>-<key>/, key the
# first 12 hex of sha256(go.mod+go.sum) of tools/<server>; for dubbo, of the
# sha256sum listing of test/dubbo's go.mod, go.sum and every *.go file (paths
# relative to test/dubbo, sorted bytewise; test/harness/dubbo_binary.go
# computes the same key); for image, the same of tools/image; for istiod, of the line "istio.io/istio VERSION"
# for the version test/istio/go.mod requires (test/harness/istiod.go
# computes the same key); for a Java peer, of the srckey listing of its
# pom.xml and every file under src/ (test/harness/java.go computes the same
# key). ZooKeeper is not cached: apt-get installs it once. A Java peer's
# directory holds the compiled classes (target/classes) and, written last,
# the file classpath: the JVM's
# classpath, classes first, then the dependencies' jars in Maven's
# resolution order (the order matters: the Nacos server fails to start when
# JRaft's hessian jar comes before the one Nacos needs).
# A cache hit costs nothing; a cold Consul build is ~450 CPU-s and ~3 GB peak,
# a cold kube build ~550 CPU-s, a cold Polaris build ~120 CPU-s and ~0.5 GB peak,
# a cold dubbo-go provider build ~170 CPU-s and ~1 GB peak, a cold helm build
# ~160 CPU-s, a cold promtool build ~225 CPU-s (without Prometheus's service-discovery plugins: tools/promtool/go.mod), a cold istiod build ~520 CPU-s and ~2.3 GB peak,
# a cold Nacos server build ~20 CPU-s and ~230 MB of downloads (Maven Central),
# a cold Eureka server build ~18 CPU-s (12 s) and ~94 MB of downloads.
#
# apt-get runs under the lock $cache/apt.lock, which make deps takes too, so
# that the two never run apt-get at once (apt-get update fails at once on a
# held lock; it does not wait).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}
mkdir -p "$cache"

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(consul kube polaris zookeeper dubbo helm istiod promtool image nacos dubbo-java grpc-java spring-cloud eureka)

key() { cat "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -c1-12; }

# srckey is the key of a Go module outside tools/ whose own sources change
# (test/dubbo): sha256 of the sha256sum listing of its go.mod, go.sum (when
# present) and every regular *.go file below it, paths relative to the
# module, sorted bytewise.
srckey() {
	(cd "$1" && {
		for f in go.mod go.sum; do [ ! -f "$f" ] || echo "$f"; done
		find . -type f -name '*.go' -printf '%P\n'
	} | LC_ALL=C sort | xargs -r -d '\n' sha256sum) | sha256sum | cut -c1-12
}

# javakey is the key of a Java peer's Maven project: as srckey, over its
# pom.xml and every regular file under src/.
javakey() {
	(cd "$1" && {
		echo pom.xml
		find src -type f -printf '%p\n'
	} | LC_ALL=C sort | xargs -r -d '\n' sha256sum) | sha256sum | cut -c1-12
}

# lock serialises builds of one server directory across concurrent runs of
# this script (CI starts one in the background, make test another): the
# second waits, then finds the cache filled.
lock() {
	exec {fd}>"$1.lock"
	flock "$fd"
}

build_consul() {
	local dir="$cache/consul-$(key consul)"
	[ -x "$dir/consul" ] || lock "$dir"
	if [ ! -x "$dir/consul" ]; then
		echo "tools/build.sh: building Consul $(grep -m1 'hashicorp/consul v' "$here/consul/go.mod" | awk '{print $2}') into $dir (first run only: ~450 CPU-seconds)" >&2
		mkdir -p "$dir.tmp"
		# The checksum database lacks some of Consul's sub-modules; go.sum is
		# committed, so verification is against it.
		(cd "$here/consul" && GOFLAGS=-mod=mod GONOSUMDB=github.com/hashicorp/consul \
			go build -trimpath -ldflags='-s -w' -o "$dir.tmp/consul" github.com/hashicorp/consul)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "consul=$dir/consul"
}

build_kube() {
	local dir="$cache/kube-$(key kube)"
	{ [ -x "$dir/kube-apiserver" ] && [ -x "$dir/etcd" ]; } || lock "$dir"
	if [ ! -x "$dir/kube-apiserver" ] || [ ! -x "$dir/etcd" ]; then
		local k8s etcd
		k8s=$(awk '$1 == "k8s.io/kubernetes" {print $2}' "$here/kube/go.mod")
		etcd=$(awk '$1 == "go.etcd.io/etcd/server/v3" {print $2}' "$here/kube/go.mod")
		echo "tools/build.sh: building kube-apiserver $k8s and etcd $etcd into $dir (first run only: ~550 CPU-seconds)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		# The version is stamped as the release build does, so the apiserver
		# reports v1.37.1 and not v0.0.0 (clients compare it).
		local major minor
		major=$(echo "${k8s#v}" | cut -d. -f1)
		minor=$(echo "${k8s#v}" | cut -d. -f2)
		local vflags="-X k8s.io/component-base/version.gitVersion=$k8s -X k8s.io/component-base/version.gitMajor=$major -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
		vflags="$vflags -X k8s.io/client-go/pkg/version.gitVersion=$k8s -X k8s.io/client-go/pkg/version.gitMajor=$major -X k8s.io/client-go/pkg/version.gitMinor=$minor"
		(cd "$here/kube" && GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w $vflags" -o "$dir.tmp/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver) &
		local api=$!
		(cd "$here/kube" && GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$dir.tmp/etcd" go.etcd.io/etcd/server/v3) &
		local et=$!
		local rc=0
		wait $api || rc=1
		wait $et || rc=1
		[ $rc -eq 0 ] || return 1
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "kube=$dir"
}

build_polaris() {
	local dir="$cache/polaris-$(key polaris)"
	{ [ -x "$dir/polaris" ] && [ -f "$dir/polaris-server.yaml" ]; } || lock "$dir"
	if [ ! -x "$dir/polaris" ] || [ ! -f "$dir/polaris-server.yaml" ]; then
		echo "tools/build.sh: building Polaris $(awk '$1 == "require" && $2 == "github.com/polarismesh/polaris" {print $3}' "$here/polaris/go.mod") into $dir (first run only: ~120 CPU-seconds)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		(cd "$here/polaris" && GOFLAGS=-mod=mod go build -trimpath -ldflags='-s -w' -o "$dir.tmp/polaris" github.com/polarismesh/polaris)
		# The harness writes its own config from Polaris's template, read
		# here so that tests need no module cache.
		local src
		src=$(cd "$here/polaris" && GOFLAGS=-mod=mod go list -m -f '{{.Dir}}' github.com/polarismesh/polaris)
		cp "$src/release/conf/polaris-server.yaml" "$dir.tmp/polaris-server.yaml"
		chmod 0644 "$dir.tmp/polaris-server.yaml"
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "polaris=$dir/polaris"
}

# zookeeper_installed tells whether dpkg has every package the ZooKeeper
# server runs from.
zookeeper_installed() {
	local p
	for p in zookeeper libzookeeper-java libslf4j-java; do
		[[ $(dpkg-query -W -f='${Status}' "$p" 2>/dev/null) == *"install ok installed"* ]] || return 1
	done
}

build_zookeeper() {
	zookeeper_installed || lock "$cache/apt"
	if ! zookeeper_installed; then
		echo "tools/build.sh: installing Debian's zookeeper and libslf4j-java with apt-get (first run only)" >&2
		local sudo=
		[ "$(id -u)" = 0 ] || sudo=sudo
		# zookeeper depends on libzookeeper-java (the server's jars) and a JRE.
		{ $sudo apt-get update -qq &&
			$sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zookeeper libslf4j-java; } >&2 || return 1
		zookeeper_installed || { echo "tools/build.sh: apt-get did not install zookeeper and libslf4j-java" >&2; return 1; }
	fi
	command -v java >/dev/null || { echo "tools/build.sh: no java on PATH (Debian's zookeeper depends on default-jre)" >&2; return 1; }
	# zookeeper.jar's manifest Class-Path names the server's other jars
	# (zookeeper-jute, netty, commons-*, slf4j-api, ...); slf4j-simple is the
	# logging backend, to stderr.
	local zk slf4j
	zk=$(dpkg -L libzookeeper-java | grep -m1 '/zookeeper\.jar$') || true
	slf4j=$(dpkg -L libslf4j-java | grep -m1 '/slf4j-simple\.jar$') || true
	{ [ -f "$zk" ] && [ -f "$slf4j" ]; } || {
		echo "tools/build.sh: no zookeeper.jar in libzookeeper-java (${zk:-none}) or no slf4j-simple.jar in libslf4j-java (${slf4j:-none})" >&2
		return 1
	}
	echo "zookeeper=$zk:$slf4j"
}

build_dubbo() {
	local src="$here/../test/dubbo"
	[ -f "$src/go.mod" ] || {
		echo "tools/build.sh: no test/dubbo/go.mod: the dubbo-go test provider's module (test/dubbo, main package test/dubbo/provider) is missing" >&2
		return 1
	}
	local k
	k=$(srckey "$src") || return 1
	local dir="$cache/dubbo-$k"
	[ -x "$dir/dubbo-provider" ] || lock "$dir"
	if [ ! -x "$dir/dubbo-provider" ]; then
		echo "tools/build.sh: building the dubbo-go test provider (test/dubbo) into $dir (once per change of its sources: ~170 CPU-seconds cold)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		(cd "$src" && GOFLAGS=-mod=mod go build -trimpath -o "$dir.tmp/dubbo-provider" ./provider)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "dubbo=$dir/dubbo-provider"
}

build_helm() {
	local dir="$cache/helm-$(key helm)"
	[ -x "$dir/helm" ] || lock "$dir"
	if [ ! -x "$dir/helm" ]; then
		local v k8s major minor
		v=$(awk '$1 == "require" && $2 == "helm.sh/helm/v3" {print $3}' "$here/helm/go.mod")
		echo "tools/build.sh: building helm $v into $dir (first run only: ~160 CPU-seconds)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		# Stamped as Helm's release build does (its Makefile): the version,
		# and the Kubernetes version of its client-go (v0.X.Y is 1.X) as the
		# default for .Capabilities.KubeVersion and lint's deprecation checks.
		k8s=$(cd "$here/helm" && GOFLAGS=-mod=mod go list -m -f '{{.Version}}' k8s.io/client-go)
		major=$(( $(echo "${k8s#v}" | cut -d. -f1) + 1 ))
		minor=$(echo "${k8s#v}" | cut -d. -f2)
		local vflags="-X helm.sh/helm/v3/internal/version.version=$v -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
		local p
		for p in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
			vflags="$vflags -X $p.k8sVersionMajor=$major -X $p.k8sVersionMinor=$minor"
		done
		(cd "$here/helm" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags="-s -w $vflags" -o "$dir.tmp/helm" helm.sh/helm/v3/cmd/helm)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "helm=$dir/helm"
}

build_promtool() {
	local dir="$cache/promtool-$(key promtool)"
	[ -x "$dir/promtool" ] || lock "$dir"
	if [ ! -x "$dir/promtool" ]; then
		local v release
		v=$(awk '$1 == "require" && $2 == "github.com/prometheus/prometheus" {print $3}' "$here/promtool/go.mod")
		# Prometheus 3.x's module versions are v0.3MM.P for release 3.MM.P.
		release=$(echo "${v#v0.}" | awk -F. '{printf "%d.%d.%s", substr($1, 1, 1), substr($1, 2), $2}')
		echo "tools/build.sh: building promtool $release ($v) into $dir (first run only: ~225 CPU-seconds)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		# remove_all_sd: no service-discovery plugin (tools/promtool/go.mod).
		(cd "$here/promtool" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -tags remove_all_sd \
			-ldflags="-s -w -X github.com/prometheus/common/version.Version=$release" \
			-o "$dir.tmp/promtool" github.com/prometheus/prometheus/cmd/promtool)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "promtool=$dir/promtool"
}

build_image() {
	local k
	k=$(srckey "$here/image") || return 1
	local dir="$cache/image-$k"
	[ -x "$dir/image" ] || lock "$dir"
	if [ ! -x "$dir/image" ]; then
		echo "tools/build.sh: building the image builder (tools/image) into $dir (once per change of its sources: ~26 CPU-seconds cold)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		(cd "$here/image" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -o "$dir.tmp/image" .)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "image=$dir/image"
}

build_istiod() {
	local src="$here/../test/istio"
	local v
	v=$(awk '$1 == "istio.io/istio" {print $2; exit} $1 == "require" && $2 == "istio.io/istio" {print $3; exit}' "$src/go.mod")
	[ -n "$v" ] || { echo "tools/build.sh: test/istio/go.mod requires no istio.io/istio" >&2; return 1; }
	local dir="$cache/istiod-$(echo "istio.io/istio $v" | sha256sum | cut -c1-12)"
	[ -x "$dir/pilot-discovery" ] || lock "$dir"
	if [ ! -x "$dir/pilot-discovery" ]; then
		echo "tools/build.sh: building istiod (pilot-discovery) istio.io/istio $v into $dir (first run only: ~520 CPU-seconds)" >&2
		rm -rf "$dir.tmp" && mkdir -p "$dir.tmp"
		# test/istio's go.mod names pilot-discovery as a tool, so its go.sum
		# holds every module the build needs.
		(cd "$src" && CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o "$dir.tmp/pilot-discovery" istio.io/istio/pilot/cmd/pilot-discovery)
		rm -rf "$dir" && mv "$dir.tmp" "$dir"
	fi
	echo "istiod=$dir/pilot-discovery"
}

# build_java NAME builds the Maven project tools/NAME into
# $cache/NAME-<javakey>/ (see the header) and prints NAME=DIR. Its Maven
# local repository, $cache/NAME-m2, is its own (Maven 3.8 does not lock a
# shared one, and the peers build in parallel) and outlives a change of
# sources: what a build downloaded serves the next one, and a classpath
# keeps pointing at jars that stay there.
build_java() {
	local name=$1 src="$here/$1"
	local dir="$cache/$name-$(javakey "$src")" m2="$cache/$name-m2"
	[ -f "$dir/classpath" ] || lock "$dir"
	if [ ! -f "$dir/classpath" ]; then
		command -v mvn >/dev/null || { echo "tools/build.sh: no mvn on PATH to build $name (.ci/run installs Debian's maven)" >&2; return 1; }
		echo "tools/build.sh: building $name (tools/$name) with Maven into $dir (once per change of its pom.xml or sources)" >&2
		mkdir -p "$dir"
		rm -rf "$dir/target"
		lock "$m2"
		mvn -B -q -f "$src/pom.xml" -Dmaven.repo.local="$m2" -Dmeshbridge.build="$dir/target" \
			package dependency:build-classpath -Dmdep.outputFile="$dir/deps" >&2 || return 1
		{ printf '%s' "$dir/target/classes"; [ ! -s "$dir/deps" ] || printf ':%s' "$(cat "$dir/deps")"; echo; } >"$dir/classpath.tmp"
		mv "$dir/classpath.tmp" "$dir/classpath"
	fi
	echo "$name=$dir"
}

# build_one builds server $1, its own function's job.
build_one() {
	case "$1" in
	consul) build_consul ;;
	kube) build_kube ;;
	polaris) build_polaris ;;
	zookeeper) build_zookeeper ;;
	dubbo) build_dubbo ;;
	helm) build_helm ;;
	promtool) build_promtool ;;
	image) build_image ;;
	istiod) build_istiod ;;
	nacos | dubbo-java | grpc-java | spring-cloud | eureka) build_java "$1" ;;
	esac
}

pids=()
outs=()
began=$(date +%s)
for s in "${servers[@]}"; do
	case "$s" in
	consul | kube | polaris | zookeeper | dubbo | helm | promtool | image | istiod | nacos | dubbo-java | grpc-java | spring-cloud | eureka) ;;
	*) echo "tools/build.sh: unknown server $s" >&2; exit 2 ;;
	esac
	out=$(mktemp)
	outs+=("$out")
	# The job notes when it ended, for the line below.
	(
		trap 'date +%s >"$out.end"' EXIT
		build_one "$s"
	) >"$out" 2>"$out.err" &
	pids+=($!)
done
rc=0
for i in "${!pids[@]}"; do
	if ! wait "${pids[$i]}"; then
		echo "tools/build.sh: building ${servers[$i]} failed:" >&2
		cat "${outs[$i]}.err" >&2
		rc=1
	fi
	cat "${outs[$i]}"
	# When it was ready, from the start, unless at once (a cache hit; a
	# server another tools/build.sh builds is waited for under its lock).
	took=$(($(cat "${outs[$i]}.end" 2>/dev/null || date +%s) - began))
	[ "$took" -lt 1 ] || echo "tools/build.sh: ${servers[$i]} ready after ${took}s" >&2
	rm -f "${outs[$i]}" "${outs[$i]}.err" "${outs[$i]}.end"
done
exit $rc
