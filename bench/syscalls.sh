#!/bin/bash
# syscalls.sh: the system calls a call costs, by the socket they go to, for
# the edge and the bare httputil proxy (docs/benchmarks.md, "System calls
# per call"). One command, run as root from the repository's root:
#
#   bench/syscalls.sh   (HARNESS=../shared/bench/peer DUR=3s CONNS=32
#                        SUBJECTS=400 DIR=/tmp/bench-syscalls)
#
# In a network namespace of its own: a redis-server, the shared harness's
# backend and bare httputil.ReverseProxy, and `edge -dev` in front of the
# same backend and Redis, as ../shared/bench/peer/run.sh runs them (a bearer
# token per call, edge.lua). For each target, wrk runs CONNS connections for
# DUR while `perf record` takes every read, recvfrom and write the proxy
# makes, with its result; `ss` names the socket behind each descriptor. The
# output counts them per call (a call is one write to a client), split by
# peer (client, backend, redis, log) and by outcome: "again" is a read that
# found nothing yet (EAGAIN): Go's network poller tries a read before it
# parks a goroutine on the socket. It also prints every system call per call
# (and by name: read, write, futex, epoll_pwait, nanosleep, ...)
# and the proxy's CPU per call, from `perf stat` over a second run. Needs
# perf (Debian: linux-perf), wrk, redis-server, jq, curl.
set -euo pipefail
HARNESS=${HARNESS:-../shared/bench/peer}
DUR=${DUR:-3s} CONNS=${CONNS:-32} SUBJECTS=${SUBJECTS:-400}
DIR=${DIR:-/tmp/bench-syscalls}
root=$(cd "$(dirname "$0")/.." && pwd)
B=$(cd "$HARNESS" && pwd)
for bin in perf wrk redis-server jq curl; do
	command -v $bin >/dev/null || { echo "syscalls.sh: $bin is missing" >&2; exit 1; }
done
mkdir -p "$DIR"
W=$(mktemp -d)
NS=syscalls$$
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	sleep 1
	ip netns del $NS 2>/dev/null || true
	[ -f "$W/edge.err" ] && tail -n 20 "$W/edge.err" >"$DIR/edge.err.tail" # its access log: 100 MB
	rm -rf "$W"
}
trap cleanup EXIT
export GOFLAGS=-buildvcs=false
(cd "$B" && go build -o "$W/backend" ./cmd/backend && go build -o "$W/httpproxy" ./cmd/httpproxy)
(cd "$root" && go build -o "$W/edge" ./cmd/edge)
ip netns add $NS
ip netns exec $NS ip link set lo up
X="ip netns exec $NS"
$X redis-server --bind 127.0.0.1 --port 16379 --save '' --appendonly no >"$DIR/redis.log" 2>&1 &
PIDS+=($!)
$X "$W/backend" -addr 127.0.0.1:18082 >"$DIR/backend.log" 2>&1 &
PIDS+=($!)
$X "$W/httpproxy" -addr 127.0.0.1:18083 -upstream http://127.0.0.1:18082 >"$DIR/httputil.log" 2>&1 &
HP=$!
PIDS+=($HP)
EDGE_LISTEN_ADDR=127.0.0.1:18084 EDGE_UPSTREAM_URL=http://127.0.0.1:18082 EDGE_REDIS_ADDR=127.0.0.1:16379 \
	$X "$W/edge" -dev >"$DIR/edge.out" 2>"$W/edge.err" &
EP=$!
PIDS+=($EP)
for _ in $(seq 1 200); do $X curl -sf -o /dev/null http://127.0.0.1:9090/readyz && break; sleep 0.1; done
: >"$W/tokens.txt"
for i in $(seq 1 "$SUBJECTS"); do
	$X curl -sf -d grant_type=password -d client_id=cli -d "username=enterprise-sys$$-$i" -d password=dev \
		http://127.0.0.1:8081/realms/dev/protocol/openid-connect/token | jq -r .access_token >>"$W/tokens.txt"
done
load() { $X env TOKENS="$W/tokens.txt" wrk -t2 -c"$CONNS" -d"$2" -s "$B/edge.lua" "http://127.0.0.1:$1"; }
{ echo "date: $(date -Is)"; echo "commit: $(cd "$root" && git rev-parse --short HEAD)"; echo "host: $(nproc) cores; $(uname -r)"; uptime; } >"$DIR/env.txt"
# The system calls a Go proxy makes, counted by name in the perf stat run.
byname=""
for c in read write recvfrom futex epoll_pwait nanosleep sched_yield madvise tgkill; do
	byname="$byname -e syscalls:sys_enter_$c"
done
for t in httputil edge; do
	p=$HP port=18083
	[ $t = edge ] && { p=$EP port=18084; }
	load $port 2s >/dev/null
	perf record -q -e syscalls:sys_enter_read -e syscalls:sys_exit_read -e syscalls:sys_enter_recvfrom \
		-e syscalls:sys_exit_recvfrom -e syscalls:sys_enter_write -p $p -o "$W/$t.data" 2>/dev/null &
	rec=$!
	(sleep 1; ls -l /proc/$p/fd >"$W/$t.fds"; $X ss -tnpe 2>/dev/null >"$W/$t.ss") &
	snap=$!
	load $port "$DUR" >"$DIR/wrk-$t.txt" 2>&1
	kill -INT $rec
	wait $rec $snap || true
	perf script -i "$W/$t.data" 2>/dev/null >"$W/$t.script"
	perf stat $byname -e raw_syscalls:sys_enter -e task-clock -p $p -o "$DIR/perfstat-$t.txt" &
	st=$!
	load $port "$DUR" >"$DIR/wrk-stat-$t.txt" 2>&1
	kill -INT $st
	wait $st || true
	python3 - "$t" "$W/$t.fds" "$W/$t.ss" "$W/$t.script" "$DIR/perfstat-$t.txt" "$DIR/wrk-stat-$t.txt" <<'PY' | tee "$DIR/$t.txt"
import collections, re, sys
target, fds, ss, script, stat, wrk = sys.argv[1:]
ino_kind = {}
for line in open(ss):
    m = re.search(r"\S+:(\d+)\s+\S+:(\d+)\s+users:\(\(\"(?:edge|httpproxy)\".*ino:(\d+)", line)
    if m:
        lport, pport, ino = m.groups()
        ino_kind[ino] = "client" if lport in ("18083", "18084") else {"18082": "backend", "16379": "redis"}.get(pport, "other socket")
fd_kind = {}
for line in open(fds):
    m = re.search(r" (\d+) -> (.*)$", line)
    if m:
        s = re.search(r"socket:\[(\d+)\]", m.group(2))
        fd_kind[int(m.group(1))] = ino_kind.get(s.group(1), "other socket") if s else ("log" if m.group(1) in ("1", "2") else "other")
counts, entered = collections.Counter(), {}
for line in open(script):
    m = re.search(r"\s(\d+)\s+\[\d+\].*?sys_(enter|exit)_(read|recvfrom|write): (.*)", line)
    if not m:
        continue
    tid, phase, call, rest = m.groups()
    if phase == "enter":
        fd = int(re.search(r"fd: (0x[0-9a-f]+)", rest).group(1), 16)
        if call == "write":
            counts[("write", fd_kind.get(fd, "other"), "")] += 1
        else:
            entered[tid] = fd
        continue
    fd = entered.pop(tid, None)
    if fd is None:
        continue
    ret = int(rest.strip(), 16)
    ret = ret - (1 << 64) if ret >= 1 << 63 else ret
    outcome = "again" if ret == -11 else "error" if ret < 0 else "eof" if ret == 0 else "data"
    counts[(call, fd_kind.get(fd, "other"), outcome)] += 1
calls = counts[("write", "client", "")]
print(f"{target}: {calls} calls traced")
for (call, kind, outcome), n in sorted(counts.items(), key=lambda kv: -kv[1]):
    print(f"  {n / calls:5.2f} a call  {call:8s} {kind:12s} {outcome}")
st = open(stat).read()
sc = int(re.search(r"([\d,]+)\s+raw_syscalls:sys_enter", st).group(1).replace(",", ""))
ms = float(re.search(r"([\d,.]+)\s+msec task-clock", st).group(1).replace(",", ""))
reqs = int(re.search(r"(\d+) requests in", open(wrk).read()).group(1))
print(f"  every system call: {sc / reqs:.2f} a call; CPU {ms * 1000 / reqs:.1f} us a call ({reqs} calls, perf stat)")
names = ", ".join(f"{name} {int(n.replace(',', '')) / reqs:.3f}" for n, name in re.findall(r"([\d,]+)\s+syscalls:sys_enter_(\w+)", st))
print(f"  by name, a call: {names}")
PY
done
