# devstack.sh: sourced by the bench scripts that use the development
# stack's fixed ports (capacity, noisy, storage, streams, subjects).
# in_netns runs the calling script again in a network namespace of its own,
# so that those ports are free; inside it, start_devstack starts a fresh
# redis-server on :6379 and the development stack on it (edge -dev: the
# issuer :8081 and the backend :8082), and standalone starts an edge -config
# on that backend, issuer and Redis. Every process goes into the caller's
# pids array; $DIR holds logs.

# in_netns NAME ARGS...: runs this script again with ARGS, and BENCH_NS set,
# in a fresh network namespace edge-NAME-PID (loopback up, deleted when
# this shell exits), then exits with that run's status.
in_netns() {
  local ns=edge-$1-$$
  shift
  ip netns add "$ns"
  trap "ip netns delete $ns" EXIT
  ip netns exec "$ns" ip link set lo up
  BENCH_NS=$ns ip netns exec "$ns" "$0" "$@"
  exit
}

start_devstack() {
  redis-server --port 6379 --bind 127.0.0.1 --save '' --appendonly no > "$DIR/redis.log" 2>&1 &
  pids+=($!)
  until redis-cli -p 6379 ping > /dev/null 2>&1; do sleep 0.1; done
  EDGE_REDIS_ADDR=127.0.0.1:6379 "$DIR/bin/edge" -dev > "$DIR/dev.out" 2> "$DIR/dev.err" &
  pids+=($!)
  until curl -sf -o /dev/null http://127.0.0.1:9090/readyz; do sleep 0.2; done
}

# standalone NAME PORT BINARY LISTEN_YAML OIDC_YAML [ADMIN_YAML]: an edge on 127.0.0.1:PORT,
# its admin listener on PORT+1000 (keep both below the ephemeral range,
# 32768), extra lines under listen: and oidc:; its PID in pid_NAME. Its
# backend is the development one (:8082) unless UPSTREAM names another, its
# issuer the development one unless ISSUER names another.
standalone() {
  cat > "$DIR/$1.yaml" <<YAML
listen:
  addr: 127.0.0.1:$2
  # Real clients would come from many addresses; here all from loopback.
  connection_bound_exempt: [127.0.0.0/8]
$4
admin:
  addr: 127.0.0.1:$(($2 + 1000))
${6:-}
upstream:
  url: ${UPSTREAM:-http://127.0.0.1:8082}
oidc:
  issuer_url: ${ISSUER:-http://127.0.0.1:8081/realms/dev}
  audience: api
$5
redis:
  addr: 127.0.0.1:6379
log:
  format: json
YAML
  "$3" -config "$DIR/$1.yaml" > /dev/null 2> "$DIR/$1.err" &
  pids+=($!)
  eval "pid_$1=$!"
  until curl -sf -o /dev/null "http://127.0.0.1:$(($2 + 1000))/readyz"; do sleep 0.2; done
}

# start_trivial_backend: the shared harness's trivial net/http backend
# ($DIR/bin/backend, built from ../shared/bench/peer/cmd/backend) on
# 127.0.0.1:18082, which answers GetOrganization at once and other calls
# 404; its PID in pid_backend.
start_trivial_backend() {
  "$DIR/bin/backend" -addr 127.0.0.1:18082 > "$DIR/backend.log" 2>&1 &
  pids+=($!)
  pid_backend=$!
  until curl -s -o /dev/null http://127.0.0.1:18082/; do sleep 0.1; done
}
