#!/bin/bash
# throughput.sh: closed-model throughput of the same call (ListOrganizations,
# HTTP/1.1 JSON, wrk) straight to the backend, through nginx, through the
# bare ReverseProxy (the edge's transport settings, and with
# DisableCompression) and through the edge (every policy on), interleaved in
# rounds, with each proxy's CPU time per request from /proc/<pid>/stat.
# docs/benchmarks.md explains the method; bench/run.sh starts what it needs.
#
#   bench/throughput.sh [ROUNDS] [CONNECTIONS] [SECONDS]   (defaults 5 32 10)
#
# Environment: PIDS_DIR (default /tmp/bench) holds dev.pid (the development
# stack: backend, issuer, idle dev edge), edge1.pid (the measured edge),
# bare.pid, bare-nogzip.pid, nginx/nginx.pid. TARGETS (default "backend nginx
# bare edge bare_nogzip") picks and orders the targets; the order rotates
# each round. Output: one TSV line per run on stdout:
#   round target rps requests non200 cpu_ticks cpu_us_per_req
#   backend_cpu_us_per_req redis_cpu_us_per_req p50 p99 loadavg
# (cpu_* of the target's process(es); backend_cpu_* of the development
# stack's process, which holds the backend; for the target "backend" the
# two are the same process.)
set -euo pipefail
rounds=${1:-5}; conns=${2:-32}; secs=${3:-10}
dir=${PIDS_DIR:-/tmp/bench}
here=$(cd "$(dirname "$0")" && pwd)
tck=$(getconf CLK_TCK)

declare -A url=(
  [backend]=http://127.0.0.1:8082
  [nginx]=http://127.0.0.1:18070
  [bare]=http://127.0.0.1:18090
  [bare_nogzip]=http://127.0.0.1:18093
  [edge]=http://127.0.0.1:18080
)
pids_of() {
  case $1 in
    backend) cat "$dir/dev.pid" ;;
    nginx) m=$(cat "$dir/nginx/nginx.pid"); echo "$m" $(pgrep -P "$m") ;;
    bare) cat "$dir/bare.pid" ;;
    bare_nogzip) cat "$dir/bare-nogzip.pid" ;;
    edge) cat "$dir/edge1.pid" ;;
  esac
}
# ticks PID…: user+sys clock ticks (fields 14 and 15 of /proc/PID/stat).
ticks() {
  local t=0 p
  for p in "$@"; do
    t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
  done
  echo "$t"
}

printf 'round\ttarget\trps\trequests\tnon200\tcpu_ticks\tcpu_us_per_req\tbackend_cpu_us_per_req\tredis_cpu_us_per_req\tp50\tp99\tloadavg\n'
for r in $(seq 1 "$rounds"); do
  # Fresh subjects each round: enterprise users, 200 of them, so that no
  # subject nears its plan (burst 2000, 1000/min) whatever the rate.
  "$here/tokens.sh" 200 "enterprise-r$r-$$" > "$dir/tokens-$r.txt"
  # Rotate the order so that no target always runs first or last.
  order=(${TARGETS:-backend nginx bare edge bare_nogzip})
  shift_by=$(( (r - 1) % ${#order[@]} ))
  order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
  for tg in "${order[@]}"; do
    # Warm-up (uncounted): connections, the token cache.
    TOKENS="$dir/tokens-$r.txt" wrk -t2 -c"$conns" -d2s -s "$here/list.lua" "${url[$tg]}" > /dev/null
    pids=$(pids_of "$tg")
    load=$(cut -d' ' -f1 /proc/loadavg)
    before=$(ticks $pids); bbefore=$(ticks "$(cat "$dir/dev.pid")"); rbefore=$(ticks "$(cat "$dir/redis.pid")")
    out=$(TOKENS="$dir/tokens-$r.txt" wrk -t2 -c"$conns" -d"${secs}s" --latency -s "$here/list.lua" "${url[$tg]}")
    after=$(ticks $pids); bafter=$(ticks "$(cat "$dir/dev.pid")"); rafter=$(ticks "$(cat "$dir/redis.pid")")
    echo "$out" > "$dir/wrk-$r-$tg.txt"
    reqs=$(awk '/requests in/ {print $1}' <<<"$out")
    rps=$(awk '/^Requests\/sec/ {print $2}' <<<"$out")
    non=$(awk '/^non-200 answers/ {print $3}' <<<"$out")
    p50=$(awk '$1 == "50%" {print $2}' <<<"$out")
    p99=$(awk '$1 == "99%" {print $2}' <<<"$out")
    d=$((after - before))
    us=$(awk -v d="$d" -v t="$tck" -v n="$reqs" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')
    bus=$(awk -v d=$((bafter - bbefore)) -v t="$tck" -v n="$reqs" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')
    rus=$(awk -v d=$((rafter - rbefore)) -v t="$tck" -v n="$reqs" 'BEGIN {printf "%.1f", d / t * 1e6 / n}')
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$r" "$tg" "$rps" "$reqs" "$non" "$d" "$us" "$bus" "$rus" "$p50" "$p99" "$load"
  done
done
