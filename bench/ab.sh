#!/usr/bin/env bash
# A/B of two builds of the edge on the shared side-by-side harness
# (../shared/bench/peer/run.sh), interleaved: run i of build A, run i of
# build B, ... Each run measures the edge and the fair baseline
# (httputil-tok: a bare httputil.ReverseProxy carrying the same calls, a
# bearer token per call) in the same rounds, so each build's figures are
# ratios to a baseline measured beside it; the A/B compares those ratios.
#
#   bench/ab.sh A_CHECKOUT B_CHECKOUT [RUNS]     (knobs: DUR, ROUNDS, CONNS of the harness)
#
# Prints, per build, the median over runs of: edge req/s / httputil-tok
# req/s, and edge CPU per call / httputil-tok CPU per call; then B/A.
set -eu
A=$(cd "$1" && pwd); B=$(cd "$2" && pwd); RUNS=${3:-5}
HERE=$(cd "$(dirname "$0")" && pwd)
HARNESS=${HARNESS:-$HERE/../../shared/bench/peer}
OUT=${OUT:-${TMPDIR:-/tmp}/edge-ab/$(date +%Y%m%d-%H%M%S)}; mkdir -p "$OUT"
export DUR=${DUR:-10s} ROUNDS=${ROUNDS:-2} TARGETS="httputil-tok edge"
for i in $(seq 1 "$RUNS"); do
  for side in A B; do
    dir=$A; [ $side = B ] && dir=$B
    echo "== run $i, build $side ($(git -C "$dir" rev-parse --short HEAD))" >&2
    (cd "$dir" && RES="$OUT/$i-$side" PROJECT="$dir" "$HARNESS/run.sh") >"$OUT/$i-$side.log" 2>&1 ||
      { tail -20 "$OUT/$i-$side.log" >&2; exit 1; }
  done
done
python3 - "$OUT" <<'PY'
import glob, os, re, statistics, sys
out = sys.argv[1]
def runs(side):
    rows = []
    for d in sorted(glob.glob(os.path.join(out, f"*-{side}"))):
        if not os.path.isdir(d): continue
        per = {}
        for f in glob.glob(os.path.join(d, "r*-*.txt")):
            r, t = re.match(r"r(\d+)-(.+)\.txt$", os.path.basename(f)).groups()
            s = open(f).read()
            rps = float(re.search(r"Requests/sec:\s+([\d.]+)", s).group(1))
            reqs = int(re.search(r"(\d+) requests in", s).group(1))
            c = re.search(r"cpu_ticks proxy=(\d+) backend=(\d+) redis=(\d+) clk_tck=(\d+)", s)
            per.setdefault(r, {})[t] = (rps, int(c.group(1)) / int(c.group(4)) * 1e6 / reqs)
        for r, v in per.items():
            if "edge" in v and "httputil-tok" in v:
                rows.append((v["edge"][0] / v["httputil-tok"][0], v["edge"][1] / v["httputil-tok"][1], v["edge"][1]))
    return rows
res = {}
for side in "AB":
    rows = runs(side)
    res[side] = [statistics.median(x) for x in zip(*rows)]
    print(f"build {side}: {len(rows)} rounds; median throughput/httputil-tok {res[side][0]:.3f}, CPU per call/httputil-tok {res[side][1]:.3f}, edge CPU per call {res[side][2]:.1f} us")
print(f"B/A: throughput ratio x{res['B'][0]/res['A'][0]:.3f}, CPU-per-call ratio x{res['B'][1]/res['A'][1]:.3f}")
PY
echo "results in $OUT"
