#!/usr/bin/env python3
"""Self instructions per call, by function, from a callgrind output file.

callgrind_annotate's inclusive figures mean little for a Go program: a
goroutine switch looks to callgrind like a call that never returns, so the
work of every goroutine run after it is charged to the one that parked
(`net.(*TCPAddr).String`, called 3 times, shows 11,000 instructions a call).
Self costs, the instructions executed in a function's own code, and the
counted calls between two functions are not affected. This script reads
both straight from the file.

Usage:
  bench/callgrind-self.py FILE CALLS [TOP]
      the TOP functions by self instructions, per call, with how many
      times a call enters each
  bench/callgrind-self.py FILE CALLS --callers F1,F2,...
      who calls F1, F2, ... and how many times a call

FILE is a dump of `icount.sh` run with KEEP=1 (it prints the directory);
CALLS is the N it ran with.
"""
import collections
import re
import sys


def parse(path, targets=None):
    names = {}
    self_cost = collections.Counter()
    entered = collections.Counter()
    callers = collections.Counter()
    fn = cfn = None
    pending = None

    def name(s):
        m = re.match(r"\((\d+)\)(?: (.*))?", s)
        if not m:
            return s
        if m.group(2):
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), m.group(1))

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith("cfn="):
                cfn = name(line[4:])
            elif line.startswith("calls="):
                pending = int(line[6:].split()[0])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                if pending is not None:
                    # The cost line after calls= is the callee's inclusive
                    # cost: not this function's own.
                    entered[cfn] += pending
                    if targets is not None and cfn in targets:
                        callers[(fn, cfn)] += pending
                    pending = None
                    continue
                parts = line.split()
                if len(parts) > 1:
                    self_cost[fn] += int(parts[1])
    return self_cost, entered, callers


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    path, calls = sys.argv[1], int(sys.argv[2])
    if len(sys.argv) > 4 and sys.argv[3] == "--callers":
        targets = set(sys.argv[4].split(","))
        _, _, callers = parse(path, targets)
        for (caller, callee), n in callers.most_common():
            if n / calls >= 0.05:
                print(f"{n / calls:7.2f}  {callee[:40]:40s} <- {caller[:110]}")
        return
    top = int(sys.argv[3]) if len(sys.argv) > 3 else 40
    self_cost, entered, _ = parse(path)
    print(f"{sum(self_cost.values()) // calls:,} instructions a call")
    print("  self  entered  function")
    for fn, cost in self_cost.most_common(top):
        print(f"{cost // calls:6d} {entered[fn] / calls:8.2f}  {fn[:140]}")


if __name__ == "__main__":
    main()
