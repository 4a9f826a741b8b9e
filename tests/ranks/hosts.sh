#!/usr/bin/env bash
# Emulated hosts for Note [hierarchical allreduce] (src/collectives/hierarchy.cpp):
# two network namespaces joined by a veth pair, each a "host" with its own
# address and host identity (GRADWIRE_HOST_ID), two ranks in each. The world
# runs over the provider chosen across hosts (net; HOSTS_PROVIDER picks
# another) across the veth; each host's ranks talk over shm;
# large allreduces go hierarchical. Runs the multi-rank collective suite
# (every collective, in place and out of place, sizes 0 to past the ring
# threshold) and checks the world saw 2 hosts and went hierarchical.
# Skips (exit 77) without root, network namespaces or veth.
#
#   hosts.sh RANK_TESTS [gtest flags...]
set -uo pipefail
source "$(dirname "$0")/netns_pair.sh"
tests=$1
shift
ns=(gwhostA$$ gwhostB$$) addr=(10.78.0.1 10.78.0.2) dev=gw0 port=29510
tmp=$(mktemp -d)
cleanup() {
  for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
netns_pair "${ns[0]}" "${ns[1]}" "${addr[0]}" "${addr[1]}" $dev

secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
pids=()
for r in 0 1 2 3; do
  h=$((r / 2))
  ip netns exec "${ns[h]}" env RANK=$r LOCAL_RANK=$((r % 2)) WORLD_SIZE=4 LOCAL_WORLD_SIZE=2 \
    MASTER_ADDR="${addr[0]}" MASTER_PORT=$port GRADWIRE_JOB_SECRET="$secret" \
    GRADWIRE_HOST_ID="emulated-host-$h" GRADWIRE_OFI_PROVIDER="${HOSTS_PROVIDER:-}" GRADWIRE_OFI_IFACE=$dev \
    GRADWIRE_TIMEOUT_S=60 GRADWIRE_LOG_LEVEL=info GW_TEST_EXPECT_HOSTS=2 \
    GW_TEST_EXPECT_PROVIDER="${HOSTS_PROVIDER:-net}" \
    timeout 600 "$tests" "$@" > "$tmp/rank$r" 2>&1 &
  pids+=($!)
done
rc=0
# One failing rank: give the others 20 s to fail on their own, then stop them.
wait -n "${pids[@]}" || { rc=1; sleep 20; for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; }
for p in "${pids[@]}"; do wait "$p" || rc=1; done
for r in 0 1 2 3; do
  echo "=== rank $r ($(grep -o 'hierarchical allreduce: .*' "$tmp/rank$r" || echo 'no hierarchy'))"
  grep -E '^\[  (PASSED|FAILED|SKIPPED) |Failure|error' "$tmp/rank$r" | head -20
done
(( rc == 0 )) || { echo "FAIL: a rank failed; rank 0's full output:"; cat "$tmp/rank0"; exit 1; }
for r in 0 1 2 3; do
  grep -q 'hierarchical allreduce: 2 hosts x 2 ranks' "$tmp/rank$r" ||
    { echo "FAIL: rank $r did not set up the hierarchy"; exit 1; }
done
echo "emulated hosts: 2 hosts x 2 ranks, hierarchical, all tests passed"
