#!/bin/bash
# overhead.sh: the load tool's overhead scenario (ListOrganizations straight
# to the backend and through the edge, alternating, open model), RUNS times
# at each rate, one JSON report per run in OUT, then the medians
# (bench/summarize.py). See docs/benchmarks.md.
#
#   bench/overhead.sh EDGE_URL OUT RUNS DURATION RATE...
#   bench/overhead.sh http://127.0.0.1:8080 /tmp/bench/ovh-dev 5 20s 200 500 1000 2000
#
# -rate is calls per second over BOTH targets: -rate 2000 is 1,000/s
# through the edge and 1,000/s to the backend. LOADTEST (default: go run
# ./loadtest) is the load tool's command.
set -euo pipefail
edge=$1 out=$2 runs=$3 dur=$4; shift 4
here=$(cd "$(dirname "$0")" && pwd)
lt=${LOADTEST:-go run $here/../loadtest}
mkdir -p "$out"
for i in $(seq 1 "$runs"); do
  for rate in "$@"; do
    f="$out/rate$rate-run$i.json"
    echo "$(date -u +%T) run $i rate $rate loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >&2
    $lt -scenario overhead -edge "$edge" -backend http://127.0.0.1:8082 -rate "$rate" -duration "$dur" -out "$f" > "${f%.json}.txt" 2>/dev/null || true
    sed -n '/^TARGET/,/^edge \//p' "${f%.json}.txt" >&2
  done
done
python3 "$here/summarize.py" overhead "$out"/*.json
