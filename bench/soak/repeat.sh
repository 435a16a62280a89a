#!/usr/bin/env bash
# Runs the short soak (TestSoakConverges: 20 SotW and Delta streams, 5 s of
# changes, every stream must converge) RUNS times, seed 1..RUNS, and prints
# one line per run (seed, result, wall seconds, the load average when it
# started) and a summary; a failing run's log is kept in $OUT.
#
#   bench/soak/repeat.sh [RUNS]      (default 200; RACE=1 builds with -race)
set -euo pipefail
cd "$(dirname "$0")/../.."
runs=${1:-200}
out=${OUT:-$(mktemp -d)}
bin="$out/soak.test"
go test -c ${RACE:+-race} -o "$bin" ./bench/soak/
pass=0 fail=0
for seed in $(seq 1 "$runs"); do
	load=$(cut -d' ' -f1 /proc/loadavg)
	start=$(date +%s.%N)
	if "$bin" -test.run '^TestSoakConverges$' -test.count=1 -test.v -soak.seed "$seed" >"$out/run-$seed.log" 2>&1; then
		result=pass pass=$((pass + 1))
		rm -f "$out/run-$seed.log"
	else
		result=FAIL fail=$((fail + 1))
	fi
	printf 'seed %d %s %.1fs load %s\n' "$seed" "$result" "$(echo "$(date +%s.%N) - $start" | bc)" "$load"
done
echo "runs $runs, passed $pass, failed $fail (logs of failures in $out)"
[ "$fail" -eq 0 ]
