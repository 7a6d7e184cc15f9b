#!/bin/bash
# run.sh: starts and stops what docs/benchmarks.md measures, and runs its
# measurements. Run from the repository's root.
#
#   bench/run.sh start        build to $BIN, start Redis, the development stack,
#                             two more edge replicas, the bare proxies, nginx
#   bench/run.sh overhead     measurement 1 (bench/overhead.sh)
#   bench/run.sh throughput   measurement 2 (bench/throughput.sh)
#   bench/run.sh serial       one call at a time through each hop (bench/serial.sh)
#   bench/run.sh replicas     measurement 3 (conformance over three replicas)
#   bench/run.sh roundtrips   measurement 4 (Redis round trips per call kind)
#   bench/run.sh gobench      measurement 5 (Go benchmarks, -count 6, benchstat)
#   bench/run.sh stop         stop everything start started (by PID)
#
# State (PIDs, logs, results) goes to $DIR (default /tmp/bench). Ports:
# edge 8080/admin 9090, issuer 8081, backend 8082 (the development stack);
# edges 18080/19090 and 28080/29090 (bench/edge-*.yaml); bare proxy 18090,
# bare proxy with DisableCompression 18093; nginx 18070; Redis 6399.
set -euo pipefail
DIR=${DIR:-/tmp/bench}
BIN=${BIN:-/tmp/bench/bin}
REDIS_PORT=${REDIS_PORT:-6399}
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$DIR" "$BIN"

wait_for() { # wait_for URL: until it answers 200, at most 30 s
  for _ in $(seq 1 300); do
    curl -sf -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "run.sh: $1 does not answer" >&2
  return 1
}

start() {
  (cd "$root" && go build -o "$BIN/edge" ./cmd/edge && go build -o "$BIN/loadtest" ./loadtest &&
    go build -o "$BIN/bareproxy" ./loadtest/bareproxy && go build -o "$BIN/edgeprof" ./loadtest/edgeprof)
  redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
    --pidfile "$DIR/redis.pid" --logfile "$DIR/redis.log"
  # The development stack on its fixed ports, on this Redis (EDGE_REDIS_ADDR).
  EDGE_REDIS_ADDR=127.0.0.1:$REDIS_PORT setsid "$BIN/edge" -dev > "$DIR/dev.out" 2> "$DIR/dev.err" &
  echo $! > "$DIR/dev.pid"
  for _ in $(seq 1 300); do grep -q 'Ctrl-C stops everything' "$DIR/dev.out" && break; sleep 0.1; done
  for n in 1 2; do
    EDGE_REDIS_ADDR=127.0.0.1:$REDIS_PORT setsid "$BIN/edge" -config "$root/bench/edge-${n}8080.yaml" > "$DIR/edge$n.out" 2> "$DIR/edge$n.err" &
    echo $! > "$DIR/edge$n.pid"
  done
  setsid "$BIN/bareproxy" -listen 127.0.0.1:18090 < /dev/null > "$DIR/bare.out" 2>&1 &
  echo $! > "$DIR/bare.pid"
  setsid "$BIN/bareproxy" -listen 127.0.0.1:18093 -disable-compression < /dev/null > "$DIR/bare-nogzip.out" 2>&1 &
  echo $! > "$DIR/bare-nogzip.pid"
  mkdir -p "$DIR/nginx/tmp"
  nginx -c "$root/bench/nginx.conf" -p "$DIR/nginx/" < /dev/null > /dev/null 2>&1
  wait_for http://127.0.0.1:9090/readyz
  wait_for http://127.0.0.1:19090/readyz
  wait_for http://127.0.0.1:29090/readyz
  echo "run.sh: started; PIDs in $DIR/*.pid, nginx's in $DIR/nginx/nginx.pid"
}

stop() {
  [ -f "$DIR/nginx/nginx.pid" ] && kill "$(cat "$DIR/nginx/nginx.pid")" 2>/dev/null || true
  for f in edge1 edge2 bare bare-nogzip edgeprof dev redis; do
    [ -f "$DIR/$f.pid" ] && kill "$(cat "$DIR/$f.pid")" 2>/dev/null || true
  done
  sleep 1
  echo "run.sh: stopped"
}

# metric ADMIN NAME: the sum of a counter over its labels.
metric() {
  curl -s "http://$1/metrics" | awk -v n="$2" '$1 == n || index($1, n "{") == 1 {s += $2} END {printf "%d\n", s}'
}

token() { # token USER: a development-issuer access token
  curl -sf -d grant_type=password -d client_id=cli -d "username=$1" -d password=dev \
    http://127.0.0.1:8081/realms/dev/protocol/openid-connect/token | sed -E 's/.*"access_token":"([^"]+)".*/\1/'
}

svc_token() { # svc_token CLIENT: a client-credentials token
  curl -sf -d grant_type=client_credentials -d "client_id=$1" -d client_secret=dev-secret \
    http://127.0.0.1:8081/realms/dev/protocol/openid-connect/token | sed -E 's/.*"access_token":"([^"]+)".*/\1/'
}

post() { # post PROCEDURE TOKEN BODY [HEADER…]: HTTP/JSON to the edge on 18080; prints the status
  local proc=$1 tok=$2 body=$3
  shift 3
  local h=()
  for x in "$@"; do h+=(-H "$x"); done
  curl -s -o "$DIR/last-answer.json" -w '%{http_code}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' \
    "${h[@]}" -d "$body" "http://127.0.0.1:18080/svc.v1.$proc"
}

# trips LABEL N COMMAND…: runs COMMAND (which makes N calls to the edge on
# 18080) and prints the edge's Redis round trips per call.
trips() {
  local label=$1 n=$2
  shift 2
  local b a
  b=$(metric 127.0.0.1:19090 edge_redis_round_trips_total)
  "$@"
  a=$(metric 127.0.0.1:19090 edge_redis_round_trips_total)
  printf '%-58s calls %5d  round trips %6d  per call %.3f  (last status %s)\n' "$label" "$n" $((a - b)) \
    "$(awk -v d=$((a - b)) -v n="$n" 'BEGIN {print d / n}')" "$(cat "$DIR/last-status" 2>/dev/null)"
}

roundtrips() {
  local n=${1:-200} u=rt$$ tok adm org proj
  tok=$(token "enterprise-$u")
  adm=$(svc_token svc-admin)
  # Warm the token cache and the Redis connection pool (not counted).
  post OrganizationService/ListOrganizations "$tok" '{}' > /dev/null
  post OrganizationService/ListOrganizations "$adm" '{}' > /dev/null

  unary() { for _ in $(seq 1 "$n"); do post OrganizationService/ListOrganizations "$tok" '{}' > "$DIR/last-status"; done; }
  trips "ListOrganizations (plain unary, HTTP/JSON)" "$n" unary

  grpcish() { for _ in $(seq 1 "$n"); do
    curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $tok" -H 'Content-Type: application/json' -H 'Connect-Protocol-Version: 1' \
      -d '{}' http://127.0.0.1:18080/svc.v1.OrganizationService/ListOrganizations > "$DIR/last-status"; done; }
  trips "ListOrganizations (Connect unary JSON)" "$n" grpcish

  # An organization and a project for the keyed calls.
  post OrganizationService/CreateOrganization "$tok" "{\"name\":\"rt-$u\",\"billingEmail\":\"b@example.com\"}" > /dev/null
  cat "$DIR/last-answer.json" >&2; echo >&2
  org=$(sed -E 's/.*"id":"([^"]+)".*/\1/' "$DIR/last-answer.json")
  post OrganizationService/CreateProject "$tok" "{\"organizationId\":\"$org\",\"name\":\"p\"}" > /dev/null
  cat "$DIR/last-answer.json" >&2; echo >&2
  proj=$(sed -E 's/.*"id":"([^"]+)".*/\1/' "$DIR/last-answer.json")
  echo "organization $org project $proj" >&2

  keyed() { for i in $(seq 1 "$n"); do post OrganizationService/UpdateOrganization "$tok" \
    "{\"organizationId\":\"$org\",\"displayName\":\"rt $i\"}" "Idempotency-Key: rt-$u-$i" > "$DIR/last-status"; done; }
  trips "UpdateOrganization with a new Idempotency-Key" "$n" keyed
  replay() { for i in $(seq 1 "$n"); do post OrganizationService/UpdateOrganization "$tok" \
    "{\"organizationId\":\"$org\",\"displayName\":\"rt $i\"}" "Idempotency-Key: rt-$u-$i" > "$DIR/last-status"; done; }
  trips "UpdateOrganization, the same keys again (replays)" "$n" replay
  unkeyed() { for i in $(seq 1 "$n"); do post OrganizationService/UpdateOrganization "$tok" \
    "{\"organizationId\":\"$org\",\"displayName\":\"rt x$i\"}" > "$DIR/last-status"; done; }
  trips "UpdateOrganization without a key" "$n" unkeyed

  # CreateEnvironment: quota reservation, then confirmation. Its operation
  # limit is 10/min per subject (burst 10): 8 + 2 calls fit.
  envs() { for i in $(seq 1 8); do post EnvironmentService/CreateEnvironment "$tok" \
    "{\"projectId\":\"$proj\",\"name\":\"e$i\",\"blueprintId\":\"redis-7\"}" > "$DIR/last-status"; done; }
  trips "CreateEnvironment (no key: reserve + confirm)" 8 envs
  envk() { for i in $(seq 1 2); do post EnvironmentService/CreateEnvironment "$tok" \
    "{\"projectId\":\"$proj\",\"name\":\"k$i\",\"blueprintId\":\"redis-7\"}" "Idempotency-Key: env-$u-$i" > "$DIR/last-status"; done; }
  trips "CreateEnvironment with an Idempotency-Key" 2 envk

  # A subject over its limit: refused from the edge's cache until the
  # refusal's retry time (1 s for free), then Redis is asked again.
  local small
  small=$(token "free-$u")
  burst() { for _ in $(seq 1 100); do post OrganizationService/ListOrganizations "$small" '{}' > "$DIR/last-status"; done; }
  trips "free subject: its burst of 100 (admitted)" 100 burst
  refused() { for _ in $(seq 1 "$n"); do post OrganizationService/ListOrganizations "$small" '{}' > "$DIR/last-status"; done; }
  trips "free subject past its burst (refused)" "$n" refused
}

case ${1:-} in
  start) start ;;
  stop) stop ;;
  overhead) edge=${2:-http://127.0.0.1:8080}
    LOADTEST=$BIN/loadtest "$root/bench/overhead.sh" "$edge" "$DIR/overhead-${edge##*:}" "${RUNS:-5}" 20s 200 500 1000 2000 ;;
  throughput) PIDS_DIR=$DIR "$root/bench/throughput.sh" "${ROUNDS:-5}" "${CONNS:-32}" 10 | tee "$DIR/throughput.tsv"
    python3 "$root/bench/summarize.py" throughput "$DIR/throughput.tsv" ;;
  serial) PIDS_DIR=$DIR "$root/bench/serial.sh" 3 5 ;;
  replicas) "$BIN/loadtest" -scenario conformance -edge http://127.0.0.1:8080,http://127.0.0.1:18080,http://127.0.0.1:28080 -duration 30s ;;
  roundtrips) shift; roundtrips "$@" ;;
  gobench) cd "$root" && TEST_REDIS_ADDR=${TEST_REDIS_ADDR:-127.0.0.1:56379} go test -run '^$' -bench . -count 6 \
      ./edge/wire ./edge/authn ./edge/ratelimit ./edge/apierror ./edge/idempotency ./edge ./edge/proxy | tee "$DIR/gobench.txt"
    "$(go env GOPATH)/bin/benchstat" "$DIR/gobench.txt" ;;
  *) sed -n '2,19p' "$0"; exit 2 ;;
esac
