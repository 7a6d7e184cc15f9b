#!/bin/bash
# capacity.sh: what one edge replica and its Redis spend per 1,000 calls/s
# (docs/operations.md, "Capacity plan"; issue 22, goal 5). One command, run
# as root from the repository's root:
#
#   bench/capacity.sh [ROUNDS]   (default 3; RATES="1000 2000 4000" N=1000 PHASE=20s IDLE=10s DIR=/tmp/bench-capacity)
#
# In a network namespace of its own it starts a redis-server, the development
# stack on it (edge -dev: the issuer), the shared harness's trivial backend
# (../shared/bench/peer/cmd/backend, a fixed 70-byte answer to
# GetOrganization, so that the backend is never what limits the rate) and a
# standalone edge from this checkout with the shipped settings in front of it
# (edge -config, so that its process's CPU is the edge's alone). Each round
# measures IDLE with no calls, then, for each rate of RATES,
# bench/cmd/noisy sends that many calls/s (GetOrganization, HTTP/JSON, an
# open model, round-robin over N enterprise subjects) for PHASE, and the
# script reads around it the edge's CPU
# (/proc/PID/stat, via noisy), Redis's CPU (/proc/PID/stat of redis-server),
# the edge's resident memory (VmRSS) and Go heap in use (/metrics), and
# Redis's used_memory. One line per round and rate; medians at the end.
set -euo pipefail
ROUNDS=${1:-3}
export RATES=${RATES:-1000 2000 4000} N=${N:-1000} PHASE=${PHASE:-20s} IDLE=${IDLE:-10s} DIR=${DIR:-/tmp/bench-capacity}
root=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${HARNESS:-$root/../shared/bench/peer}

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/noisy" ./bench/cmd/noisy)
  (cd "$HARNESS" && go build -o "$DIR/bin/backend" ./cmd/backend)
  in_netns capacity "$ROUNDS"
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
start_devstack
start_trivial_backend
UPSTREAM=http://127.0.0.1:18082 standalone edge 18080 "$DIR/bin/edge" "" ""
redis_pid=$(redis-cli -p 6379 info server | tr -d '\r' | awk -F: '$1=="process_id"{print $2}')
tck=$(getconf CLK_TCK)

# cpu PID: the process's user and system time, in seconds.
cpu() { awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$1/stat"; }
rss_mb() { awk '$1=="VmRSS:"{printf "%.1f", $2 / 1024}' "/proc/$1/status"; }
heap_mb() { curl -s http://127.0.0.1:19080/metrics | awk '$1=="go_memstats_heap_inuse_bytes"{printf "%.1f", $2 / 1048576}'; }
redis_mb() { redis-cli -p 6379 info memory | tr -d '\r' | awk -F: '$1=="used_memory"{printf "%.1f", $2 / 1048576}'; }
secs() { local d=$1; case $d in *ms) echo "${d%ms} / 1000" | bc -l ;; *s) echo "${d%s}" ;; *m) echo "${d%m} * 60" | bc ;; esac; }

out=$DIR/capacity.txt
{
  echo "machine: nproc $(nproc), kernel $(uname -r), $(date -u +%FT%TZ), $(redis-server --version | cut -d' ' -f1-3), uptime: $(uptime)"
  printf '%-5s %6s %9s %7s %9s %9s %10s %11s %11s %12s %9s %9s %9s\n' round rate "calls/s" errors p50 p99 "edge cpu/s" "edge µs/call" "redis cpu/s" "redis µs/call" "edge RSS" "Go heap" "redis mem"
} | tee "$out"
for r in $(seq 1 "$ROUNDS"); do
  e0=$(cpu "$pid_edge") r0=$(cpu "$redis_pid")
  sleep "$(secs "$IDLE")"
  e1=$(cpu "$pid_edge") r1=$(cpu "$redis_pid")
  idle=$(secs "$IDLE")
  printf '%-5s %6s %9s %7s %9s %9s %10.4f %11s %11.4f %12s %8sM %8sM %8sM\n' "$r" idle 0 0 - - \
    "$(echo "($e1 - $e0) / $idle" | bc -l)" - "$(echo "($r1 - $r0) / $idle" | bc -l)" - \
    "$(rss_mb "$pid_edge")" "$(heap_mb)" "$(redis_mb)" | tee -a "$out"
  for rate in $RATES; do
    r0=$(cpu "$redis_pid") t0=$(date +%s.%N)
    "$DIR/bin/noisy" -edges edge=http://127.0.0.1:18080 -pids "edge=$pid_edge" -flood 0 -others "$N" \
      -procedure /svc.v1.OrganizationService/GetOrganization \
      -prefix enterprise-capacity -run "r$r" -rate "$rate" -rounds 1 -phase "$PHASE" > "$DIR/noisy-$r-$rate.txt"
    line=$(awk '$3=="quiet"{print; exit}' "$DIR/noisy-$r-$rate.txt")
    r1=$(cpu "$redis_pid") t1=$(date +%s.%N)
    # noisy's quiet line: round edge phase calls errors p50 p99 flood/s cpu/s µs/call ...
    read -r _ _ _ calls errors p50 p99 _ ecpu eus _ <<< "$line"
    phase=$(secs "$PHASE")
    cps=$(echo "$calls / $phase" | bc -l)
    # Redis's CPU over the whole invocation (the tokens' logins too, which
    # do not touch Redis) per phase second: the phase is most of it.
    rcpu=$(echo "($r1 - $r0) / $phase" | bc -l)
    printf '%-5s %6s %9.0f %7s %9s %9s %10.4f %11s %11.4f %12.1f %8sM %8sM %8sM\n' "$r" "$rate" "$cps" "$errors" "$p50" "$p99" \
      "$(secs "$ecpu")" "$eus" "$rcpu" "$(echo "$rcpu / $cps * 1000000" | bc -l)" \
      "$(rss_mb "$pid_edge")" "$(heap_mb)" "$(redis_mb)" | tee -a "$out"
  done
done
echo "uptime after: $(uptime)" | tee -a "$out"
python3 - "$out" <<'PY' | tee -a "$out"
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) < 13 or not f[0].isdigit():
        continue
    rows.setdefault(f[1], []).append(f)
print("\nmedians over the rounds")
print(f"{'rate':>6} {'calls/s':>9} {'edge cpu/s':>11} {'edge µs/call':>13} {'redis cpu/s':>12} {'redis µs/call':>14} {'edge RSS':>9} {'Go heap':>8}")
num = lambda s: float(s.rstrip('sM')) if s not in ('-',) else float('nan')
for rate, rs in rows.items():
    med = lambda i: statistics.median(num(r[i]) for r in rs)
    print(f"{rate:>6} {med(2):9.0f} {med(6):11.4f} {med(7):13.1f} {med(8):12.4f} {med(9):14.1f} {med(10):8.1f}M {med(11):7.1f}M")
PY
