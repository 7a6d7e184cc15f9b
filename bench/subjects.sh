#!/bin/bash
# subjects.sh: CPU per admitted call and p99 as the subjects outgrow the
# edge's token cache (docs/benchmarks.md, "Many subjects"; issue 22, goal 2).
# One command, run as root from the repository's root:
#
#   bench/subjects.sh [ROUNDS]   (default 3; N=1000 RATE=500 PHASE=15s SMALL=250 DIR=/tmp/bench-subjects)
#
# In a network namespace of its own it starts a redis-server, the development
# stack on it (edge -dev: the issuer and the backend) and two standalone
# edges from this checkout: "fits" (oidc.token_cache_size at its default,
# 100,000: every one of the N subjects' tokens stays cached) and "misses"
# (token_cache_size SMALL, below N: a call finds its token evicted by the
# other subjects' calls and verifies its signature again, as every call does
# when more subjects call within a token's life than the cache holds, e.g. a
# million subjects against the default bound). bench/cmd/noisy then sends
# RATE calls/s round-robin over N enterprise subjects, alternating the two
# edges each round, and reads each edge's CPU from /proc.
set -euo pipefail
ROUNDS=${1:-3}
export N=${N:-1000} RATE=${RATE:-500} PHASE=${PHASE:-15s} SMALL=${SMALL:-250} DIR=${DIR:-/tmp/bench-subjects}
root=$(cd "$(dirname "$0")/.." && pwd)

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/noisy" ./bench/cmd/noisy)
  in_netns subjects "$ROUNDS"
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
start_devstack
standalone fits 18080 "$DIR/bin/edge" "" ""
standalone misses 28080 "$DIR/bin/edge" "" "  token_cache_size: $SMALL"
{
  echo "machine: nproc $(nproc), kernel $(uname -r), $(date -u +%FT%TZ), uptime: $(uptime)"
  "$DIR/bin/noisy" -edges "fits=http://127.0.0.1:18080,misses=http://127.0.0.1:28080" -pids "fits=$pid_fits,misses=$pid_misses" \
    -flood 0 -others "$N" -prefix enterprise-many -rate "$RATE" -rounds "$ROUNDS" -phase "$PHASE"
  echo "uptime after: $(uptime)"
  for e in 19080 29080; do
    echo "admin :$e:"
    curl -s "http://127.0.0.1:$e/metrics" | grep -E '^edge_(cache_(entries|evictions_total)\{cache="token"\}|token_verifications_total|token_cache_hits_total)|^go_memstats_heap_inuse_bytes' || true
  done
  echo "redis: $(redis-cli -p 6379 info memory | grep -E '^used_memory:') keys $(redis-cli -p 6379 dbsize)"
} | tee "$DIR/subjects.txt"
