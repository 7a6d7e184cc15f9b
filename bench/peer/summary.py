#!/usr/bin/env python3
"""Summarize a run of bench/peer/run.sh: per target, the median over rounds of
req/s, p50/p99, CPU per call of the proxy, the backend and Redis, and of each
round's ratios to the bare httputil target of the same round (so that the
machine's drift between rounds cancels out). Writes ratios.csv beside the
results for bench/cmd/peerchart.

    bench/peer/summary.py RESULTS_DIR            one run
    bench/peer/summary.py OUT_DIR RUN_DIR...     several runs pooled: their rounds
                                                 together (each ratio still within
                                                 its round), ratios.csv in OUT_DIR,
                                                 and each run's edge medians"""
import collections, glob, os, re, statistics, sys

d = sys.argv[1]
sources = sys.argv[2:] or [d]
order = ["httputil", "httputil-tok", "httputil-h2c", "nginx", "traefik", "traefik-redis", "traefik-redis-tok", "tyk", "tyk-jwt",
         "edge", "redisrate", "httputil-token", "direct"]

def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s|m)$", v)
    return float(m.group(1)) * {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4}[m.group(2)]

runs = collections.defaultdict(dict)  # target -> round -> metrics
for i, src in enumerate(sources):
    for f in glob.glob(os.path.join(src, "r*-*.txt")):
        m = re.match(r"r(\d+)-(.+)\.txt$", os.path.basename(f))
        rnd, t = (i, int(m.group(1))), m.group(2)
        s = open(f).read()
        reqs = int(re.search(r"(\d+) requests in", s).group(1))
        cpu = re.search(r"cpu_ticks proxy=(\d+) backend=(\d+) redis=(\d+) clk_tck=(\d+)", s)
        tick = 1e6 / int(cpu.group(4))
        non2 = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", s)
        runs[t][rnd] = dict(
            rps=float(re.search(r"Requests/sec:\s+([\d.]+)", s).group(1)),
            p50=ms(re.search(r"^\s+50%\s+(\S+)", s, re.M).group(1)),
            p99=ms(re.search(r"^\s+99%\s+(\S+)", s, re.M).group(1)),
            proxy=int(cpu.group(1)) * tick / reqs, backend=int(cpu.group(2)) * tick / reqs,
            redis=int(cpu.group(3)) * tick / reqs, non2=int(non2.group(1)) if non2 else 0)

med = lambda xs: statistics.median(xs) if xs else float("nan")

def ratio(a, b, k, run=None):
    """The median over rounds of a's k against b's k in the same round
    (only run's rounds when run is given)."""
    return med([r[k] / b[n][k] for n, r in a.items() if (run is None or n[0] == run) and n in b and b[n][k]])

# The bare proxy of the same rounds: httputil, or, in a run of the shared
# harness's token targets, httputil-tok (the same calls as the edge's).
base = runs.get("httputil") or runs.get("httputil-tok", {})
rows = []
for t in order + sorted(k for k in runs if k not in order):
    if t not in runs:
        continue
    rs = runs[t]
    row = {"target": t, "rounds": len(rs)}
    for k in ("rps", "p50", "p99", "proxy", "backend", "redis"):
        row[k] = med([r[k] for r in rs.values()])
    for k in ("rps", "proxy", "backend", "p99"):
        row[k + "_ratio"] = ratio(rs, base, k)
    row["non2"] = sum(r["non2"] for r in rs.values())
    row["each_rps"] = "/".join(f"{rs[n]['rps']:.0f}" for n in sorted(rs))
    rows.append(row)

# Redis CPU per call against one redis_rate Allow, per round, then the median.
edge, rr = runs.get("edge", {}), runs.get("redisrate", {})
redis_ratio = ratio(edge, rr, "redis")

print(f"{'target':14} {'rounds':>6} {'req/s (each)':>22} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} "
      f"{'proxy us/call':>13} {'backend us/call':>15} {'redis us/call':>13} {'x thrpt':>8} {'x proxy CPU':>11} {'x backend CPU':>13}  non-2xx")
for r in rows:
    print(f"{r['target']:14} {r['rounds']:>6} {r['each_rps']:>22} {r['rps']:>7.0f} {r['p50']:>7.2f} {r['p99']:>7.2f} "
          f"{r['proxy']:>13.1f} {r['backend']:>15.1f} {r['redis']:>13.1f} {r['rps_ratio']:>8.2f} {r['proxy_ratio']:>11.2f} "
          f"{r['backend_ratio']:>13.2f}  {r['non2']}")
if rr:
    print(f"edge Redis CPU per call / redisrate's (one redis_rate Allow), median of per-round ratios: {redis_ratio:.2f}")
# The edge against bare httputil carrying the same calls (edge.lua's token).
tok = runs.get("httputil-token", {})
if tok:
    same = {k: ratio(edge, tok, k) for k in ("rps", "proxy", "backend")}
    print(f"edge / httputil-token (bare httputil, the same calls with their tokens), median of per-round ratios: "
          f"throughput {same['rps']:.2f}, proxy CPU {same['proxy']:.2f}, backend CPU {same['backend']:.2f}")
# The edge against each peer that did the same calls (a token per call):
# the median of the per-round ratios, the peer's own rounds only.
for peer in ("tyk-jwt", "traefik-redis-tok"):
    if peer in runs and edge:
        vs = {k: ratio(edge, runs[peer], k) for k in ("rps", "proxy", "p99")}
        print(f"edge / {peer}, median of per-round ratios over {len(runs[peer])} rounds: throughput {vs['rps']:.2f}, "
              f"proxy CPU per call {vs['proxy']:.2f}, p99 {vs['p99']:.2f}")
if len(sources) > 1:
    for i, src in enumerate(sources):
        each = {k: ratio(edge, base, k, i) for k in ("rps", "proxy", "backend")}
        redis = ratio(edge, rr, "redis", i)
        print(f"run {os.path.basename(os.path.normpath(src))}: edge throughput {each['rps']:.3f}, proxy CPU {each['proxy']:.3f}, "
              f"backend CPU {each['backend']:.3f}" + (f", Redis / one Allow {redis:.3f}" if rr else ""))
os.makedirs(d, exist_ok=True)
with open(os.path.join(d, "ratios.csv"), "w") as f:
    f.write("target,rps,proxy_us,backend_us,redis_us,rps_ratio,proxy_ratio,backend_ratio,p50_ms,p99_ms\n")
    for r in rows:
        f.write(f"{r['target']},{r['rps']:.0f},{r['proxy']:.1f},{r['backend']:.1f},{r['redis']:.1f},"
                f"{r['rps_ratio']:.3f},{r['proxy_ratio']:.3f},{r['backend_ratio']:.3f},{r['p50']:.3f},{r['p99']:.3f}\n")
