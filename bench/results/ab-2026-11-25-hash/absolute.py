import glob, re, statistics, sys
for d in sys.argv[1:]:
    res = {}
    for f in glob.glob(d + "/*/r*-*.txt"):
        side = f.split("/")[-2].split("-")[1]
        tgt = re.search(r"r\d+-(.*)\.txt", f).group(1)
        t = open(f).read()
        m = re.search(r"(\d+) requests in ([\d.]+)s", t)
        if not m: continue
        req, secs = int(m.group(1)), float(m.group(2))
        p = int(re.search(r"proxy=(\d+)", t).group(1)); r = re.search(r"redis=(\d+)", t)
        res.setdefault((side, tgt), []).append((req/secs, p*10000/req, int(r.group(1))*10000/req if r else 0))
    for (side, tgt), v in sorted(res.items()):
        print(d, side, tgt, len(v), "req/s %.0f" % statistics.median(x[0] for x in v), "proxy µs %.1f" % statistics.median(x[1] for x in v), "redis µs %.1f" % statistics.median(x[2] for x in v))
