#!/usr/bin/env bash
# Alternate the two builds, one round each time, TIMES times: each run is httputil-tok then edge, interleaved.
set -u
TIMES=${TIMES:-5}
for i in $(seq 1 $TIMES); do
  for b in before after; do
    ip netns add ab$$ && ip netns exec ab$$ ip link set lo up
    (cd /work/ab-$b && ip netns exec ab$$ env ROUNDS=1 DUR=10s TARGETS="httputil-tok edge" RES=/tmp/ab/$b-$i bash /work/shared/bench/peer/run.sh > /tmp/ab/$b-$i.log 2>&1)
    ip netns del ab$$
  done
done
