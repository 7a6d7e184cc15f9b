#!/bin/bash
# bigsubjects.sh: N distinct subjects, each calling once, through one
# standalone edge with the shipped settings (a token cache of 100,000), beside
# the same rate over 1,000 subjects (docs/benchmarks.md, "Many subjects";
# issue 22, goal 2). One command, run as root from the repository's root:
#
#   bench/bigsubjects.sh    (N=100000 RATE=2000 DIR=/tmp/bench-bigsubjects; the issuer
#                            mints ~400 tokens/s and they live 10 minutes, so N
#                            is bounded by about 150,000 here)
#
# In a network namespace of its own: a redis-server, the development stack
# on it (edge -dev: its issuer), the shared harness's trivial backend (which
# answers GetOrganization at once, so that the backend is not what is
# measured) and a standalone edge in front of it. bench/cmd/noisy then sends
# RATE calls/s: over 1,000 subjects for N/RATE seconds (few, every token
# cached), over N subjects, each once (past the token cache's bound: each
# call verifies its token, and each subject is new to Redis and to every
# in-process table), then over 1,000 again. After each: the edge's cache
# sizes and evictions, its heap, Redis's memory and keys; at the end, every
# key's TTL (none may be without one).
set -euo pipefail
export N=${N:-100000} RATE=${RATE:-2000} DIR=${DIR:-/tmp/bench-bigsubjects}
root=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${HARNESS:-$root/../shared/bench/peer}

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/noisy" ./bench/cmd/noisy)
  (cd "$HARNESS" && go build -o "$DIR/bin/backend" ./cmd/backend)
  in_netns bigsubjects 1
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
start_devstack
start_trivial_backend
UPSTREAM=http://127.0.0.1:18082 standalone edge 18080 "$DIR/bin/edge" "" "" "  pprof: true   # to force a GC before reading the live heap"
phase=$((N / RATE))s

state() {
  echo "  edge: $(curl -s http://127.0.0.1:19080/metrics | grep -E '^edge_cache_(entries|evictions_total)\{|^edge_token_verifications_total|^go_memstats_heap_inuse_bytes' | tr '\n' ' ')"
  curl -s -o /dev/null "http://127.0.0.1:19080/debug/pprof/heap?gc=1"
  echo "  edge after a GC: $(curl -s http://127.0.0.1:19080/metrics | grep -E '^go_memstats_heap_alloc_bytes' | tr '\n' ' ')"
  echo "  edge RSS $(awk '$1=="VmRSS:"{printf "%.1f MB", $2 / 1024}' "/proc/$pid_edge/status")"
  echo "  redis: $(redis-cli -p 6379 info memory | tr -d '\r' | grep -E '^used_memory:') keys $(redis-cli -p 6379 dbsize)"
}
run() { # name subjects
  "$DIR/bin/noisy" -edges edge=http://127.0.0.1:18080 -pids "edge=$pid_edge" -flood 0 -others "$2" \
    -procedure /svc.v1.OrganizationService/GetOrganization -prefix "enterprise-big-$1" -rate "$RATE" -rounds 1 -phase "$phase"
  state
}
{
  echo "machine: nproc $(nproc), kernel $(uname -r), $(date -u +%FT%TZ), commit $(git -C "$root" rev-parse --short HEAD), uptime: $(uptime)"
  echo "== 1,000 subjects at $RATE calls/s for $phase"; run few1 1000
  echo "== $N subjects, each once, at $RATE calls/s"; run many "$N"
  echo "== 1,000 subjects again"; run few2 1000
  echo "keys without an expiry: $(redis-cli -p 6379 --scan | sed 's/^/TTL /' | redis-cli -p 6379 | grep -c '^-1$' || true) of $(redis-cli -p 6379 dbsize)"
  echo "uptime after: $(uptime)"
} | tee "$DIR/bigsubjects.txt"
