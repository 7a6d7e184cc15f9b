#!/bin/bash
# bigsubjects.sh: N distinct subjects, each calling once, through one
# standalone edge with the shipped settings (a token cache of 100,000), beside
# the same rate over 1,000 subjects (docs/benchmarks.md, "Many subjects";
# issue 22, goal 2). One command, run as root from the repository's root:
#
#   bench/bigsubjects.sh    (N=100000 RATE=2000 DIR=/tmp/bench-bigsubjects
#                            FEW_FOR=N/RATE seconds: the 1,000-subject phases)
#
# The development issuer's token endpoint mints about 400 tokens/s and they
# live 10 minutes, which bounds N at about 150,000; past that (or with
# MINT=1) the edge's issuer is bench/cmd/bulkissuer instead: the same
# issuer, whose tokens live 3 hours and come in bulk, each signed once
# (a million take about 10 minutes on 2 cores).
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
export MINT=${MINT:-$((N > 150000 ? 1 : 0))} FEW_FOR=${FEW_FOR:-$((N / RATE))s}
root=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${HARNESS:-$root/../shared/bench/peer}

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/noisy" ./bench/cmd/noisy &&
    go build -o "$DIR/bin/bulkissuer" ./bench/cmd/bulkissuer)
  (cd "$HARNESS" && go build -o "$DIR/bin/backend" ./cmd/backend)
  in_netns bigsubjects 1
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
start_devstack
start_trivial_backend
mint=()
if [ "$MINT" = 1 ]; then
  "$DIR/bin/bulkissuer" -addr 127.0.0.1:8091 -ttl 3h > "$DIR/bulkissuer.log" 2>&1 &
  pids+=($!)
  until curl -sf -o /dev/null http://127.0.0.1:8091/realms/dev/.well-known/openid-configuration; do sleep 0.1; done
  export ISSUER=http://127.0.0.1:8091/realms/dev
  mint=(-issuer "$ISSUER" -mint http://127.0.0.1:8091)
fi
UPSTREAM=http://127.0.0.1:18082 standalone edge 18080 "$DIR/bin/edge" "" "" "  pprof: true   # to force a GC before reading the live heap"
phase=$((N / RATE))s

state() {
  echo "  edge: $(curl -s http://127.0.0.1:19080/metrics | grep -E '^edge_cache_(entries|evictions_total)\{|^edge_token_verifications_total|^go_memstats_heap_inuse_bytes' | tr '\n' ' ')"
  curl -s -o /dev/null "http://127.0.0.1:19080/debug/pprof/heap?gc=1"
  echo "  edge after a GC: $(curl -s http://127.0.0.1:19080/metrics | grep -E '^go_memstats_heap_alloc_bytes' | tr '\n' ' ')"
  echo "  edge RSS $(awk '$1=="VmRSS:"{printf "%.1f MB", $2 / 1024}' "/proc/$pid_edge/status")"
  echo "  redis: $(redis-cli -p 6379 info memory | tr -d '\r' | grep -E '^used_memory:') keys $(redis-cli -p 6379 dbsize)"
}
run() { # name subjects phase
  "$DIR/bin/noisy" -edges edge=http://127.0.0.1:18080 -pids "edge=$pid_edge" -flood 0 -others "$2" "${mint[@]}" \
    -procedure /svc.v1.OrganizationService/GetOrganization -prefix "enterprise-big-$1" -rate "$RATE" -rounds 1 -phase "$3"
  state
}
{
  echo "machine: nproc $(nproc), kernel $(uname -r), $(date -u +%FT%TZ), commit $(git -C "$root" rev-parse --short HEAD), uptime: $(uptime)"
  echo "tokens: $([ "$MINT" = 1 ] && echo "bench/cmd/bulkissuer's /mint" || echo "the development issuer's token endpoint")"
  echo "== 1,000 subjects at $RATE calls/s for $FEW_FOR"; run few1 1000 "$FEW_FOR"
  echo "== $N subjects, each once, at $RATE calls/s"; run many "$N" "$phase"
  echo "== 1,000 subjects again"; run few2 1000 "$FEW_FOR"
  echo "keys without an expiry: $(redis-cli -p 6379 --scan | sed 's/^/TTL /' | redis-cli -p 6379 | grep -c '^-1$' || true) of $(redis-cli -p 6379 dbsize)"
  echo "uptime after: $(uptime)"
} | tee "$DIR/bigsubjects.txt"
