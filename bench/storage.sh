#!/bin/bash
# storage.sh: what the edge keeps in Redis (docs/benchmarks.md, "Storage per
# subject and per stored answer"). One command, run as root from the
# repository's root:
#
#   bench/storage.sh [RUNS]      (default 3; N=300 K=3000 DIR=/tmp/bench-storage)
#
# Each run starts, in a network namespace of its own (so that the development
# ports 8080, 8081, 8082, 9090 are free), a fresh redis-server and the
# development stack on it (edge -dev with EDGE_REDIS_ADDR), then measures
# (bench/cmd/storage): bytes per active subject (K free subjects calling once
# each), and bytes per stored idempotent answer for five answer sizes (N keyed
# CreateProject calls each). Results go to $DIR/run-<i>.txt.
set -euo pipefail
RUNS=${1:-3}
export N=${N:-300} K=${K:-3000} DIR=${DIR:-/tmp/bench-storage}
root=$(cd "$(dirname "$0")/.." && pwd)

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/storage" ./bench/cmd/storage)
  in_netns storage "$RUNS"
fi

# Inside the namespace: every process below is this shell's child.
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
echo "machine: nproc $(nproc), kernel $(uname -r), $(redis-server --version)" | tee "$DIR/machine.txt"
for i in $(seq 1 "$RUNS"); do
  redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no > "$DIR/redis-$i.log" 2>&1 &
  redis=$!
  pids+=("$redis")
  until redis-cli -p 6379 ping > /dev/null 2>&1; do sleep 0.1; done
  EDGE_REDIS_ADDR=127.0.0.1:6379 "$DIR/bin/edge" -dev > "$DIR/dev-$i.out" 2> "$DIR/dev-$i.err" &
  dev=$!
  pids+=("$dev")
  until curl -sf -o /dev/null http://127.0.0.1:9090/readyz; do sleep 0.2; done
  {
    echo "== run $i: subjects (K=$K)"
    "$DIR/bin/storage" -redis 127.0.0.1:6379 -mode subjects -n "$K" -run "r$i-$$"
    echo "== run $i: answers (N=$N keyed calls per size)"
    "$DIR/bin/storage" -redis 127.0.0.1:6379 -mode answers -n "$N" -run "r$i-$$"
  } | tee "$DIR/run-$i.txt"
  kill "$dev" "$redis"
  wait "$dev" "$redis" || true
  pids=()
done
