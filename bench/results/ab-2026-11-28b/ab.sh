#!/usr/bin/env bash
# Alternate two builds (checkouts BEFORE and AFTER), one round of each at a time, TIMES times; each
# run is the shared harness's httputil-tok then edge, interleaved, in a network namespace of its own.
# Usage: BEFORE=dir AFTER=dir OUT=dir TIMES=5 ab.sh ; then summary.py OUT
set -u
TIMES=${TIMES:-5}
for i in $(seq 1 "$TIMES"); do
  for b in before after; do
    dir=$BEFORE; [ $b = after ] && dir=$AFTER
    ip netns add ab$$ && ip netns exec ab$$ ip link set lo up
    (cd "$dir" && ip netns exec ab$$ env ROUNDS=1 DUR=10s TARGETS="httputil-tok edge" RES="$OUT/$b-$i" bash /work/shared/bench/peer/run.sh > "$OUT/$b-$i.log" 2>&1)
    ip netns del ab$$
  done
done
