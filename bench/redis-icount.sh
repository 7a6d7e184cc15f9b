#!/usr/bin/env bash
# Instructions redis-server spends on one call's limit script (allow.lua),
# counted by valgrind's callgrind on redis-server itself: the edge's Redis
# cost, which its own instruction count (../shared/bench/peer/icount.sh)
# leaves out, and which the one Redis that every replica shares pays. Drives
# BenchmarkAllowRealRedis (an admitted call with two limits and the daily
# cap) at 1,000 and at 5,000 calls; the difference over 4,000 is a call's
# cost, without what loading the script and connecting cost. Redis runs no
# collector: runs agree within 0.6%, two counts running at once included.
# Usage: bench/redis-icount.sh [CHECKOUT]   env: PORT=26400 RUNS=3 KEEP=
# KEEP=1 keeps callgrind's output and prints where it is: the last dump
# (redis.out.<2*RUNS>) is the 5,000 calls of the last run, for
# `callgrind_annotate --inclusive=yes` or `--tree=caller` (Redis's own
# symbols are partly stripped: Lua's internals show as addresses, the C
# library's and Redis's exported functions by name).
set -u
D=${1:-$PWD}; PORT=${PORT:-26400}; RUNS=${RUNS:-3}; W=$(mktemp -d /tmp/ricount.XXXX)
command -v valgrind >/dev/null || { echo "FAIL: valgrind missing (apt-get install valgrind)"; exit 1; }
cleanup() {
  [ -n "${RP:-}" ] && kill "$RP" 2>/dev/null && wait "$RP" 2>/dev/null
  if [ -n "${KEEP:-}" ]; then echo "callgrind's output kept in $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT
(cd "$D" && go test -c -o $W/rl.test ./edge/ratelimit/) || { echo "FAIL: build"; exit 1; }
valgrind --tool=callgrind --callgrind-out-file=$W/redis.out redis-server --port $PORT --bind 127.0.0.1 --save '' --appendonly no >$W/redis.log 2>&1 & RP=$!
for _ in $(seq 1 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.3; done
redis-cli -p $PORT ping >/dev/null 2>&1 || { echo "FAIL: redis-server under callgrind never answered on :$PORT"; exit 1; }
# run CALLS K: the instructions redis-server spent while the benchmark made
# CALLS calls, read from callgrind's K-th dump (redis.out.K), which
# callgrind_control has written when it returns.
run() {
  callgrind_control -z $RP >/dev/null 2>&1
  (cd "$D/edge/ratelimit" && TEST_REDIS_ADDR=127.0.0.1:$PORT $W/rl.test -test.run XXX -test.bench AllowRealRedis -test.benchtime ${1}x >$W/bench.log 2>&1) ||
    { echo "FAIL: the benchmark failed:" >&2; cat $W/bench.log >&2; return 1; }
  callgrind_control -d $RP >/dev/null 2>&1 || { echo "FAIL: callgrind_control -d" >&2; return 1; }
  awk '/^totals:/{print $2; found=1} END{exit !found}' $W/redis.out.$2 || { echo "FAIL: no totals in dump $2" >&2; return 1; }
}
k=0
for r in $(seq 1 "$RUNS"); do
  k=$((k + 1)); a=$(run 1000 $k) || exit 1
  k=$((k + 1)); b=$(run 5000 $k) || exit 1
  echo "run $r: $(( (b - a) / 4000 )) instructions a call in redis-server"
done
