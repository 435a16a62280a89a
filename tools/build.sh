#!/usr/bin/env bash
# Builds the servers meshbridge's tests run against, in parallel, into a cache
# keyed by each tools module's go.sum, and prints "NAME=PATH" per server.
#
#   tools/build.sh [server ...]     (default: every server below)
#
# Cache: ${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}/<server>-<12 hex of sha256(go.mod+go.sum)>/
# A cache hit costs nothing; a cold Consul build is ~450 CPU-s and ~3 GB peak.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cache=${MESHBRIDGE_CACHE:-$HOME/.cache/meshbridge}
mkdir -p "$cache"

servers=("$@")
[ ${#servers[@]} -gt 0 ] || servers=(consul)

key() { cat "$here/$1/go.mod" "$here/$1/go.sum" | sha256sum | cut -c1-12; }

build_consul() {
	local dir="$cache/consul-$(key consul)"
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

pids=()
outs=()
for s in "${servers[@]}"; do
	out=$(mktemp)
	outs+=("$out")
	case "$s" in
	consul) build_consul >"$out" 2>"$out.err" & pids+=($!) ;;
	*) echo "tools/build.sh: unknown server $s" >&2; exit 2 ;;
	esac
done
rc=0
for i in "${!pids[@]}"; do
	if ! wait "${pids[$i]}"; then
		echo "tools/build.sh: building ${servers[$i]} failed:" >&2
		cat "${outs[$i]}.err" >&2
		rc=1
	fi
	cat "${outs[$i]}"
	rm -f "${outs[$i]}" "${outs[$i]}.err"
done
exit $rc
