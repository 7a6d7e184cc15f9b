#!/usr/bin/env python3
"""Medians of the load tool's JSON reports and of bench/throughput.sh's TSV.

  summarize.py overhead REPORT.json...   per offered rate: median added
                                         latency (µs) at p50/p90/p99/p99.9
  summarize.py throughput FILE.tsv       per target: median rps and CPU µs
                                         per request; per round: edge/bare
"""
import json
import statistics
import sys
from collections import defaultdict


def overhead(paths):
    by_rate = defaultdict(list)
    for p in paths:
        d = json.load(open(p))
        o = d.get("overhead")
        if not o:
            continue
        by_rate[d["offered_rate_per_s"]].append(o)
    print("rate_total\tper_target\truns\tbackend_p50\tedge_p50\tadded_p50\tadded_p90\tadded_p99\tadded_p99.9\tbackend_p99\tedge_p99\tedge_errors\trefused\tadded_p50_runs\tadded_p99_runs")
    for rate in sorted(by_rate):
        rs = by_rate[rate]
        med = lambda f: int(statistics.median(f(o) for o in rs))
        print("\t".join(str(x) for x in [
            int(rate), int(rate / 2), len(rs),
            med(lambda o: o["backend"]["latency"]["p50_us"]), med(lambda o: o["edge"]["latency"]["p50_us"]),
            med(lambda o: o["added_us"]["p50"]), med(lambda o: o["added_us"]["p90"]),
            med(lambda o: o["added_us"]["p99"]), med(lambda o: o["added_us"]["p99_9"]),
            med(lambda o: o["backend"]["latency"]["p99_us"]), med(lambda o: o["edge"]["latency"]["p99_us"]),
            sum(o["edge"]["errors"] + o["backend"]["errors"] for o in rs), sum(o["edge"]["refused"] for o in rs),
            ",".join(str(o["added_us"]["p50"]) for o in rs), ",".join(str(o["added_us"]["p99"]) for o in rs),
        ]))


def throughput(path):
    rows = [l.rstrip("\n").split("\t") for l in open(path) if l.strip()]
    head, rows = rows[0], [dict(zip(rows[0], r)) for r in rows[1:] if r[0] != "round"]
    targets = []
    for r in rows:
        if r["target"] not in targets:
            targets.append(r["target"])
    print("target\truns\tmedian_rps\tmin_rps\tmax_rps\tmedian_cpu_us_per_req\tmedian_backend_cpu_us_per_req\tnon200")
    for t in targets:
        rs = [r for r in rows if r["target"] == t]
        rps = [float(r["rps"]) for r in rs]
        cpu = [float(r["cpu_us_per_req"]) for r in rs]
        bcpu = [float(r.get("backend_cpu_us_per_req", "nan")) for r in rs]
        print(f"{t}\t{len(rs)}\t{statistics.median(rps):.0f}\t{min(rps):.0f}\t{max(rps):.0f}\t{statistics.median(cpu):.1f}\t{statistics.median(bcpu):.1f}\t{sum(int(r['non200']) for r in rs)}")
    rounds = sorted({r["round"] for r in rows}, key=int)
    ratios = []
    print("\nround\t" + "\t".join(f"{t}_rps" for t in targets) + "\tedge/bare")
    for n in rounds:
        by = {r["target"]: float(r["rps"]) for r in rows if r["round"] == n}
        ratio = by.get("edge", 0) / by["bare"] if by.get("bare") else float("nan")
        ratios.append(ratio)
        print(n + "\t" + "\t".join(f"{by.get(t, 0):.0f}" for t in targets) + f"\t{ratio:.3f}")
    print(f"median edge/bare ratio over rounds: {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})")


if __name__ == "__main__":
    if sys.argv[1] == "overhead":
        overhead(sys.argv[2:])
    else:
        throughput(sys.argv[2])
