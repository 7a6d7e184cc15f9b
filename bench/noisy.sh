#!/bin/bash
# noisy.sh: one flooding subject against 50 others (docs/benchmarks.md,
# "Noisy neighbour"; issue 22, goal 1). One command, run as root from the
# repository's root:
#
#   bench/noisy.sh [ROUNDS]      (default 3; PHASE=10s DIR=/tmp/bench-noisy BASE= BARE= RAW= EARLY=)
#
# In a network namespace of its own (the development ports must be free), it
# starts a redis-server, the development stack on it (edge -dev: the issuer
# and the backend) and standalone edges from this checkout on that backend
# and Redis: "off" with listen.max_early_calls 0 (every early call answered:
# the cost of a refusal itself) and "on" with the default (5; 50 before 2026-11-25). With BASE set
# to another checkout, a third edge "base" built from it (the same settings
# as "on", those it knows). With EARLY=N, an edge "early" from this
# checkout with listen.max_early_calls N instead of the default. With BARE=1, a target "bare": the shared
# harness's trivial net/http server (../shared/bench/peer/cmd/backend), which
# answers these calls 404 at once: what any net/http server spends per
# request on this machine, the floor under a refusal's cost (its "errors" are
# those 404s). With RAW=1, a target "raw": bench/cmd/rawfloor, which answers
# every call with a fixed 429 without parsing it, one read and one write
# system call per call: the floor under any Go server, HTTP or not. Then bench/cmd/noisy alternates, per round and
# edge, 10 s of the others alone and 10 s with the flooder, and reads each
# edge's CPU from /proc. Output: $DIR/noisy.txt.
set -euo pipefail
ROUNDS=${1:-3}
export PHASE=${PHASE:-10s} DIR=${DIR:-/tmp/bench-noisy} BASE=${BASE:-}
root=$(cd "$(dirname "$0")/.." && pwd)
HARNESS=${HARNESS:-$root/../shared/bench/peer}

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/noisy" ./bench/cmd/noisy)
  if [ -n "$BASE" ]; then (cd "$BASE" && go build -o "$DIR/bin/edge-base" ./cmd/edge); fi
  if [ -n "${BARE:-}" ]; then (cd "$HARNESS" && go build -o "$DIR/bin/backend" ./cmd/backend); fi
  if [ -n "${RAW:-}" ]; then (cd "$root" && go build -o "$DIR/bin/rawfloor" ./bench/cmd/rawfloor); fi
  in_netns noisy "$ROUNDS"
fi

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
start_devstack
standalone off 18080 "$DIR/bin/edge" "  max_early_calls: 0" ""
standalone on 28080 "$DIR/bin/edge" "" ""
edges="off=http://127.0.0.1:18080,on=http://127.0.0.1:28080"
procs="off=$pid_off,on=$pid_on"
if [ -n "$BASE" ]; then
  standalone base 30080 "$DIR/bin/edge-base" "" ""
  edges="$edges,base=http://127.0.0.1:30080"
  procs="$procs,base=$pid_base"
fi
if [ -n "${EARLY:-}" ]; then
  standalone early 38080 "$DIR/bin/edge" "  max_early_calls: $EARLY" ""
  edges="$edges,early=http://127.0.0.1:38080"
  procs="$procs,early=$pid_early"
fi
if [ -n "${BARE:-}" ]; then
  start_trivial_backend
  edges="$edges,bare=http://127.0.0.1:18082"
  procs="$procs,bare=$pid_backend"
fi
if [ -n "${RAW:-}" ]; then
  "$DIR/bin/rawfloor" -addr 127.0.0.1:18083 > "$DIR/rawfloor.log" 2>&1 &
  pids+=($!)
  edges="$edges,raw=http://127.0.0.1:18083"
  procs="$procs,raw=$!"
  until curl -s -o /dev/null http://127.0.0.1:18083/; do sleep 0.1; done
fi
{
  echo "machine: nproc $(nproc), kernel $(uname -r), $(date -u +%FT%TZ), uptime: $(uptime)"
  "$DIR/bin/noisy" -edges "$edges" -pids "$procs" -rounds "$ROUNDS" -phase "$PHASE"
  echo "uptime after: $(uptime)"
  for e in 19080 29080 ${EARLY:+39080}; do
    echo "admin :$e: $(curl -s "http://127.0.0.1:$e/metrics" | grep -E '^edge_early_calls_held_total' || true)"
  done
} | tee "$DIR/noisy.txt"
