#!/usr/bin/env bash
# Instructions redis-server spends on one call's limit script (allow.lua),
# counted by valgrind's callgrind on redis-server itself: the edge's Redis
# cost, which its own instruction count (../shared/bench/peer/icount.sh)
# leaves out, and which the one Redis that every replica shares pays. Drives
# BenchmarkAllowRealRedis (an admitted call with two limits and the daily
# cap) at 1,000 and at 5,000 calls; the difference over 4,000 is a call's
# cost, without what loading the script and connecting cost. Redis runs no
# collector: runs agree within 0.6%, two counts running at once included.
# Usage: bench/redis-icount.sh [CHECKOUT]   env: PORT=26400 RUNS=3
set -u
D=${1:-$PWD}; PORT=${PORT:-26400}; RUNS=${RUNS:-3}; W=$(mktemp -d /tmp/ricount.XXXX)
command -v valgrind >/dev/null || { echo "FAIL: valgrind missing (apt-get install valgrind)"; exit 1; }
(cd $D && go test -c -o $W/rl.test ./edge/ratelimit/) || exit 1
valgrind --tool=callgrind --callgrind-out-file=$W/redis.out redis-server --port $PORT --bind 127.0.0.1 --save '' --appendonly no >$W/redis.log 2>&1 & RP=$!
for _ in $(seq 1 100); do redis-cli -p $PORT ping >/dev/null 2>&1 && break; sleep 0.3; done
run() { callgrind_control -z $RP >/dev/null 2>&1; (cd $D/edge/ratelimit && TEST_REDIS_ADDR=127.0.0.1:$PORT $W/rl.test -test.run XXX -test.bench AllowRealRedis -test.benchtime ${1}x >/dev/null); callgrind_control -d $RP >/dev/null 2>&1; sleep 0.5; f=$(ls -t $W/redis.out.* | head -1); awk '/^totals:/{print $2}' $f; }
for r in $(seq 1 "$RUNS"); do a=$(run 1000); b=$(run 5000); echo "run $r: $(( (b - a) / 4000 )) instructions a call in redis-server"; done
kill $RP; wait $RP 2>/dev/null; rm -rf $W
