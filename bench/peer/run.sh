#!/usr/bin/env bash
# Runs the shared side-by-side harness (../shared/bench/peer/run.sh, read-only
# to this project) with one more target, "redisrate": bench/cmd/rateproxy, a
# bare httputil.ReverseProxy that makes one go-redis/redis_rate Allow per call
# on the same redis-server, so that the edge's Redis CPU per call can be
# compared with one Allow's in the same run; and "httputil-token": the bare
# httputil proxy driven by the edge's wrk script (edge.lua: a bearer token
# per call, made in wrk's Lua), so that the edge can also be compared with a
# bare proxy carrying the very same calls. It copies the harness to a
# scratch directory, adds the target there, runs it from this checkout, and
# summarizes with bench/peer/summary.py (medians of per-round ratios), then
# draws docs/benchmarks-peer.svg.
#
#   ROUNDS=3 DUR=10s bench/peer/run.sh        (knobs: those of the harness)
set -eu
HERE=$(cd "$(dirname "$0")" && pwd); PROJECT=$(cd "$HERE/../.." && pwd)
HARNESS=${HARNESS:-$PROJECT/../shared/bench/peer}
export TARGETS=${TARGETS:-"httputil httputil-h2c nginx edge redisrate httputil-token"}
WORK=${WORKDIR:-${TMPDIR:-/tmp}/peer-bench}; export WORKDIR=$WORK
COPY=$WORK/harness; rm -rf "$COPY"; mkdir -p "$COPY" "$WORK/bin"; cp -r "$HARNESS"/. "$COPY"/
(cd "$PROJECT" && go build -o "$WORK/bin/rateproxy" ./bench/cmd/rateproxy)
python3 - "$COPY/run.sh" "$WORK/bin/rateproxy" <<'PY'
import sys
p, bin = sys.argv[1], sys.argv[2]
s = open(p).read()
def sub(old, new):
    global s
    assert old in s, old
    s = s.replace(old, new, 1)
sub("for p in 18080 18081", "for p in 18086 18080 18081")
sub("nginx -p \"$RUN/nginx/\"",
    bin + " -addr 127.0.0.1:18086 -upstream http://127.0.0.1:18082 -redis 127.0.0.1:16379 >\"$RUN/rateproxy.log\" 2>&1 & RRPID=$!; PIDS+=($RRPID)\n"
    "nginx -p \"$RUN/nginx/\"")
sub("      edge)          url=", "      redisrate)     url=http://127.0.0.1:18086; ppids=$RRPID; script=$B/edge.lua ;;\n"
    "      httputil-token) url=http://127.0.0.1:18083; ppids=$HPID; script=$B/edge.lua ;;\n      edge)          url=")
open(p, "w").write(s)
PY
RES=${RES:-$WORK/results/$(date +%Y%m%d-%H%M%S)}; export RES
(cd "$PROJECT" && PROJECT="$PROJECT" "$COPY/run.sh")
python3 "$HERE/summary.py" "$RES" | tee "$RES/ratios.txt"
(cd "$PROJECT" && go run ./bench/cmd/peerchart -in "$RES/ratios.csv" -out "${CHART:-$PROJECT/docs/benchmarks-peer.svg}")
echo "results in $RES"
