#!/bin/bash
# streams.sh: ten thousand WatchEnvironment streams on one edge replica
# (docs/benchmarks.md, "Ten thousand streams"). One command, run as root
# from the repository's root:
#
#   bench/streams.sh [RUNS]   (default 3; N=10000 SUBJECTS=100 HOLD=60s
#                              CHURN_RATE=1000 CHURN_FOR=20s WATCH_POLL=30s
#                              DIR=/tmp/bench-streams BARE= BARE_BUFFER=)
#
# Each run starts, in a network namespace of its own (so that the development
# ports 8080, 8081, 8082, 9090 are free), a fresh redis-server on 6399, the
# development stack on it (edge -dev: its issuer), a backend of its own
# (orgsvc on 8083, re-reading each watched environment every WATCH_POLL
# rather than the default 2 s: at 2 s, 10,000 streams are 5,000 SQLite
# reads a second, which on these two cores starve the edge under test) and
# a standalone edge in front of it with bench/edge-streams.yaml (200
# streams per subject, a 15 s lease), then bench/cmd/streams: N streams held across SUBJECTS
# subjects for HOLD (memory per stream, renewals counted, Redis commands and
# CPU), then CHURN_RATE streams opened and closed a second for CHURN_FOR on
# 100 other subjects. Results go to $DIR/run-<i>.txt, with `uptime` before
# and after. With BARE=1, each run first opens the N streams through a bare
# httputil.ReverseProxy (loadtest/bareproxy, h2c both legs, in front of the
# same backend) and measures it the same way: the floor a Go proxy puts under
# the edge's memory per stream.
set -euo pipefail
RUNS=${1:-3}
export N=${N:-10000} SUBJECTS=${SUBJECTS:-100} HOLD=${HOLD:-60s} CHURN_RATE=${CHURN_RATE:-1000} CHURN_FOR=${CHURN_FOR:-20s} WATCH_POLL=${WATCH_POLL:-30s}
export DIR=${DIR:-/tmp/bench-streams}
root=$(cd "$(dirname "$0")/.." && pwd)

source "$root/bench/devstack.sh"
if [ -z "${BENCH_NS:-}" ]; then
  mkdir -p "$DIR/bin"
  (cd "$root" && go build -o "$DIR/bin/edge" ./cmd/edge && go build -o "$DIR/bin/orgsvc" ./cmd/orgsvc && go build -o "$DIR/bin/streams" ./bench/cmd/streams \
    && go build -o "$DIR/bin/bareproxy" ./loadtest/bareproxy)
  in_netns streams "$RUNS"
fi

# Inside the namespace: every process below is this shell's child.
cpu_seconds() { awk -v t="$(getconf CLK_TCK)" '{printf "%.1f s", ($14 + $15) / t}' "/proc/$1/stat"; }
ulimit -n "$(ulimit -Hn)" # HTTP/2 multiplexes streams on few connections; this is headroom
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait' EXIT
echo "machine: nproc $(nproc), kernel $(uname -r), $(redis-server --version), commit $(git -C "$root" rev-parse --short HEAD)" | tee "$DIR/machine.txt"
for i in $(seq 1 "$RUNS"); do
  redis-server --port 6399 --bind 127.0.0.1 --save '' --appendonly no > "$DIR/redis-$i.log" 2>&1 &
  redis=$!
  pids+=("$redis")
  until redis-cli -p 6399 ping > /dev/null 2>&1; do sleep 0.1; done
  EDGE_REDIS_ADDR=127.0.0.1:6399 "$DIR/bin/edge" -dev > "$DIR/dev-$i.out" 2> "$DIR/dev-$i.err" &
  dev=$!
  pids+=("$dev")
  until curl -sf -o /dev/null http://127.0.0.1:9090/readyz; do sleep 0.2; done
  rm -f "$DIR/orgsvc-$i.db"
  "$DIR/bin/orgsvc" -addr 127.0.0.1:8083 -admin-addr 127.0.0.1:9093 -issuer http://127.0.0.1:8081/realms/dev -audience api \
    -database "$DIR/orgsvc-$i.db" -watch-poll "$WATCH_POLL" > "$DIR/orgsvc-$i.out" 2> "$DIR/orgsvc-$i.err" &
  backend=$!
  pids+=("$backend")
  until curl -sf -o /dev/null http://127.0.0.1:9093/readyz; do sleep 0.2; done
  EDGE_UPSTREAM_URL=http://127.0.0.1:8083 "$DIR/bin/edge" -config "$root/bench/edge-streams.yaml" > "$DIR/edge-$i.out" 2> "$DIR/edge-$i.err" &
  edge=$!
  pids+=("$edge")
  until curl -sf -o /dev/null http://127.0.0.1:19190/readyz; do sleep 0.2; done
  bare=() barepid=
  if [ -n "${BARE:-}" ]; then
    "$DIR/bin/bareproxy" -listen 127.0.0.1:18290 -upstream http://127.0.0.1:8083 -pprof 127.0.0.1:19290 \
      -buffer-size "${BARE_BUFFER:-0}" > "$DIR/bareproxy-$i.log" 2>&1 &
    barepid=$!
    pids+=("$barepid")
    until curl -s -o /dev/null http://127.0.0.1:19290/debug/pprof/; do sleep 0.2; done
    bare=(-bare http://127.0.0.1:18290 -bare-pprof http://127.0.0.1:19290)
  fi
  {
    echo "== run $i: N=$N SUBJECTS=$SUBJECTS HOLD=$HOLD CHURN_RATE=$CHURN_RATE CHURN_FOR=$CHURN_FOR WATCH_POLL=$WATCH_POLL"
    echo "uptime before: $(uptime)"
    "$DIR/bin/streams" -n "$N" -subjects "$SUBJECTS" -hold "$HOLD" -churn-rate "$CHURN_RATE" -churn-for "$CHURN_FOR" -run "r$i-$$" \
      -heap-profile "$DIR/heap-$i.pprof" "${bare[@]}"
    echo "edge RSS at the end: $(ps -o rss= -p "$edge") KiB; CPU (utime+stime) of the edge $(cpu_seconds "$edge"), the backend $(cpu_seconds "$backend"); uptime after: $(uptime)"
  } | tee "$DIR/run-$i.txt"
  kill "$edge" "$backend" "$dev" "$redis" $barepid
  wait "$edge" "$backend" "$dev" "$redis" $barepid || true
  pids=()
done
