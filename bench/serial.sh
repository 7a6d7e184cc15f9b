#!/bin/bash
# serial.sh: one connection, one call at a time (wrk -c1), so that no call
# waits for another: the latency each hop adds by itself. Interleaved,
# ROUNDS times. Prints TSV: round target p50_us p90_us p99_us rps, then the
# edge's own breakdown from its metrics (the edge on 18080): mean time in
# the edge outside the backend call, mean Redis round trip.
#   bench/serial.sh [ROUNDS] [SECONDS]    (defaults 3 5)
set -euo pipefail
rounds=${1:-3}; secs=${2:-5}
dir=${PIDS_DIR:-/tmp/bench}
here=$(cd "$(dirname "$0")" && pwd)
"$here/tokens.sh" 20 "enterprise-serial-$$" > "$dir/tokens-serial.txt"
us() { awk '{v = $1; if (v ~ /us$/) {sub(/us$/, "", v); print v} else if (v ~ /ms$/) {sub(/ms$/, "", v); print v * 1000} else {sub(/s$/, "", v); print v * 1e6}}' <<<"$1"; }
m() { curl -s http://127.0.0.1:19090/metrics | awk -v n="$1" 'index($1, n) == 1 {s += $2} END {printf "%.9f\n", s}'; }
printf 'round\ttarget\tp50_us\tp90_us\tp99_us\trps\n'
for r in $(seq 1 "$rounds"); do
  for tg in backend:8082 nginx:18070 bare:18090 bare_nogzip:18093 edge:18080 edge_dev:8080; do
    name=${tg%%:*} port=${tg##*:}
    if [ "$name" = edge ]; then
      rq0=$(m 'edge_request_duration_seconds_sum{method="ListOrganizations",protocol="http"'); n0=$(m 'edge_request_duration_seconds_count{method="ListOrganizations",protocol="http"')
      up0=$(m 'edge_upstream_duration_seconds_sum{method="ListOrganizations",protocol="http"'); rd0=$(m 'edge_redis_duration_seconds_sum{op="evalsha"}'); rn0=$(m 'edge_redis_duration_seconds_count{op="evalsha"}')
    fi
    out=$(TOKENS="$dir/tokens-serial.txt" wrk -t1 -c1 -d"${secs}s" --latency -s "$here/list.lua" "http://127.0.0.1:$port")
    p50=$(us "$(awk '$1 == "50%" {print $2}' <<<"$out")"); p90=$(us "$(awk '$1 == "90%" {print $2}' <<<"$out")"); p99=$(us "$(awk '$1 == "99%" {print $2}' <<<"$out")")
    printf '%s\t%s\t%.0f\t%.0f\t%.0f\t%s\n' "$r" "$name" "$p50" "$p90" "$p99" "$(awk '/^Requests\/sec/ {print $2}' <<<"$out")"
    if [ "$name" = edge ]; then
      rq1=$(m 'edge_request_duration_seconds_sum{method="ListOrganizations",protocol="http"'); n1=$(m 'edge_request_duration_seconds_count{method="ListOrganizations",protocol="http"')
      up1=$(m 'edge_upstream_duration_seconds_sum{method="ListOrganizations",protocol="http"'); rd1=$(m 'edge_redis_duration_seconds_sum{op="evalsha"}'); rn1=$(m 'edge_redis_duration_seconds_count{op="evalsha"}')
      awk -v a="$rq0" -v b="$rq1" -v c="$up0" -v d="$up1" -v n0="$n0" -v n1="$n1" -v e="$rd0" -v f="$rd1" -v g="$rn0" -v h="$rn1" 'BEGIN {
        n = n1 - n0; printf "#\tedge metrics: %d calls, mean in edge %.0f us, mean upstream %.0f us, mean outside upstream %.0f us, mean redis evalsha %.0f us\n",
        n, (b - a) / n * 1e6, (d - c) / n * 1e6, ((b - a) - (d - c)) / n * 1e6, (f - e) / (h - g) * 1e6 }' >&2
    fi
  done
done
