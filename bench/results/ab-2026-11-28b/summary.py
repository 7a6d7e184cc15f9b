#!/usr/bin/env python3
"""Per-run and median ratios of ab.sh's output: edge against httputil-tok, req/s and proxy CPU per call."""
import re, statistics, sys, pathlib
out = pathlib.Path(sys.argv[1])
def one(f):
    s = f.read_text()
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", s).group(1))
    n = int(re.search(r"(\d+) requests in", s).group(1))
    cpu = re.search(r"cpu_ticks proxy=(\d+) backend=\d+ redis=\d+ clk_tck=(\d+)", s)
    p99 = re.search(r"99%\s+([\d.]+\w+)", s).group(1)
    return rps, int(cpu.group(1)) / int(cpu.group(2)) / n * 1e6, p99
res = {}
for b in ("before", "after"):
    for d in sorted(out.glob(f"{b}-*/")):
        if not d.is_dir():
            continue
        r = list(d.glob("*/r1-edge.txt")) or list(d.glob("r1-edge.txt"))
        h = list(d.glob("*/r1-httputil-tok.txt")) or list(d.glob("r1-httputil-tok.txt"))
        if not r or not h:
            continue
        try:
            e, hu = one(r[0]), one(h[0])
        except AttributeError:
            print(f"{d.name}: incomplete")
            continue
        res.setdefault(b, []).append((e[0] / hu[0], e[1] / hu[1], e[0], e[1]))
        print(f"{d.name}: httputil-tok {hu[0]:.0f} req/s {hu[1]:.0f} us/call p99 {hu[2]}; edge {e[0]:.0f} req/s {e[1]:.0f} us/call p99 {e[2]}; "
              f"edge/httputil req/s x{e[0]/hu[0]:.3f} CPU/call x{e[1]/hu[1]:.3f}")
for b, v in res.items():
    print(f"{b} medians of {len(v)}: req/s ratio x{statistics.median(x[0] for x in v):.3f}, CPU per call ratio "
          f"x{statistics.median(x[1] for x in v):.3f}; edge {statistics.median(x[2] for x in v):.0f} req/s, {statistics.median(x[3] for x in v):.0f} us per call")
