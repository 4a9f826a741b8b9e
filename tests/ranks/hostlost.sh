#!/usr/bin/env bash
# A rank on another host that is lost must fail its peers with PeerLost
# naming it, well before the deadline (Note [a lost rank on another host] in
# src/runtime/watchdog.cpp). Two emulated hosts: network namespaces joined
# by veth; ranks 0 and 1 on host A (rank 0 serves the store), rank 2 on host
# B in its own pid and UTS namespaces, so that no peer can watch its pid (as
# on a real other host). The workload runs allreduces until it fails;
# GRADWIRE_TIMEOUT_S=60 is the deadline a Timeout would take.
#  1. rank 2 is SIGKILLed: ranks 0 and 1 fail with PeerLost naming rank 2
#     within 15 s;
#  2. as 1, with the allreduces on a group of the three ranks in reverse
#     order (NETFAULT_GROUP): PeerLost naming group rank 0, world rank 2;
#  3. host B goes silent (nftables drops every packet on A's veth, both
#     ways; rank 2 stays alive): ranks 0 and 1 fail with PeerLost naming
#     rank 2, and rank 2 with PeerLost naming rank 0 (its store is gone, or
#     ranks 0 and 1 stopped answering its heartbeats), all within 40 s;
#  4. as 3 with GRADWIRE_LIVENESS_S=3 (Note [store liveness]): all within
#     8 s (the default 10 s takes 9-13).
# Skips (exit 77) without root, namespaces, veth, unshare or nftables.
#
#   hostlost.sh WORKLOAD
set -uo pipefail
source "$(dirname "$0")/netns_pair.sh"
workload=$1
command -v nft > /dev/null || { echo "SKIP: nft (nftables) not installed"; exit 77; }
command -v unshare > /dev/null || { echo "SKIP: unshare not installed"; exit 77; }
ns=(gwlostA$$ gwlostB$$) addr=(10.79.0.1 10.79.0.2) dev=gw0 port=29530
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null; done
  for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
netns_pair "${ns[0]}" "${ns[1]}" "${addr[0]}" "${addr[1]}" $dev
unshare --pid --fork --uts true 2> /dev/null || { echo "SKIP: cannot unshare pid/uts namespaces"; exit 77; }
ip netns exec "${ns[0]}" nft add table inet gwlost 2> /dev/null ||
  { echo "SKIP: nftables unusable in this kernel"; exit 77; }

# start PHASE PORT: the three ranks in the background; rank 2's pid (in the
# root pid namespace) in $tmp/PHASE.pid2.
start() {
  local phase=$1 master_port=$2 r h
  pids=()
  for r in 0 1 2; do
    h=$((r / 2))
    local env=(env RANK=$r LOCAL_RANK=$((r % 2)) WORLD_SIZE=3 LOCAL_WORLD_SIZE=$((2 - h))
               MASTER_ADDR="${addr[0]}" MASTER_PORT=$master_port
               GRADWIRE_HOST_ID="emulated-host-$h" GRADWIRE_OFI_IFACE=$dev
               GRADWIRE_TIMEOUT_S=60 GRADWIRE_LOG_LEVEL=warn ${NETFAULT_GROUP:+NETFAULT_GROUP=1}
               ${GRADWIRE_LIVENESS_S:+GRADWIRE_LIVENESS_S=$GRADWIRE_LIVENESS_S})
    if (( r < 2 )); then
      ip netns exec "${ns[0]}" "${env[@]}" timeout 300 "$workload" 1000000 > "$tmp/$phase.$r" 2>&1 &
    else
      ip netns exec "${ns[1]}" unshare --pid --fork --uts --mount-proc sh -c \
        "hostname emulated-host-b; exec ${env[*]} timeout 300 $workload 1000000" > "$tmp/$phase.$r" 2>&1 &
    fi
    pids+=($!)
  done
}

# The workload's pid in the root pid namespace: the child of unshare's
# child (unshare -> sh/exec env -> timeout -> workload).
workload_pid() {
  local p
  local ours
  ours=$(readlink /proc/self/ns/pid)
  p=$(pgrep -f "^timeout 300 $workload 1000000" | while read -r t; do
        [[ "$(readlink /proc/"$t"/ns/pid)" != "$ours" ]] && echo "$t"; done | head -1)
  [[ -n "$p" ]] && pgrep -P "$p" | head -1
}

# Waits for ranks 0..2 to end (at most `limit` s after the fault); prints
# how long each took.
finish() {
  local phase=$1 t0=$2 limit=$3 r
  for r in 0 1 2; do
    while kill -0 "${pids[r]}" 2> /dev/null && (( $(date +%s) - t0 < limit + 30 )); do sleep 0.2; done
    echo "rank $r ended $(( $(date +%s) - t0 )) s after the fault" > "$tmp/$phase.$r.took"
  done
}

check() {  # phase rank pattern limit
  local phase=$1 r=$2 pattern=$3 limit=$4 took
  took=$(grep -o '[0-9]* s after' "$tmp/$phase.$r.took" | awk '{print $1}')
  echo "  rank $r: $(grep -m1 -o 'gradwire [A-Za-z]*:.*' "$tmp/$phase.$r" | cut -c1-300) [$took s]"
  grep -q "$pattern" "$tmp/$phase.$r" ||
    { echo "FAIL ($phase): rank $r did not report '$pattern':"; cat "$tmp/$phase.$r"; exit 1; }
  (( took <= limit )) || { echo "FAIL ($phase): rank $r took $took s (limit $limit s)"; exit 1; }
}

# Waits until every rank has started its allreduces (the start-up barrier
# done: the workload prints nothing before failing, so give it time).
running() { sleep 6; for p in "${pids[@]}"; do kill -0 "$p" 2> /dev/null || return 1; done; }

# kill_rank2 PHASE PORT PATTERN: the three ranks run, rank 2 is SIGKILLed,
# ranks 0 and 1 must report PATTERN within 15 s.
kill_rank2() {
  local phase=$1 master_port=$2 pattern=$3 victim t0 r
  start "$phase" "$master_port"
  running || { echo "FAIL: a rank ended before the fault:"; cat "$tmp/$phase".*; exit 1; }
  victim=$(workload_pid)
  [[ -n "$victim" ]] || { echo "FAIL: rank 2's process not found"; exit 1; }
  t0=$(date +%s)
  kill -9 "$victim"
  finish "$phase" "$t0" 15
  for r in 0 1; do check "$phase" $r "$pattern" 15; done
}

echo "1. rank 2 (host B) is killed"
kill_rank2 kill $port 'PeerLost.*rank 2 (pid [0-9]* on host emulated-host-b) lost its connection'

echo "2. rank 2 is killed while a group's allreduces run"
NETFAULT_GROUP=1 kill_rank2 group $((port + 2)) \
  'PeerLost.*rank 0 of group [0-9]* \[2, 1, 0\] (world rank 2) (pid [0-9]* on host emulated-host-b) lost its connection'
# A silent host is named by the heartbeats (Note [heartbeats between hosts],
# within about 1.5 s) or, should they be slower, by the store's will.
lost_b='PeerLost.*rank 2 (pid [0-9]* on host emulated-host-b) \(lost its connection\|stopped answering heartbeats\)'
# silence PHASE PORT LIMIT: the three ranks run, host B goes silent
# (nftables drops every packet on A's veth, both ways); every rank must
# report PeerLost within LIMIT s; then the link is opened again.
silence() {
  local phase=$1 master_port=$2 limit=$3 t0 r
  start "$phase" "$master_port"
  running || { echo "FAIL: a rank ended before the fault:"; cat "$tmp/$phase".*; exit 1; }
  t0=$(date +%s)
  ip netns exec "${ns[0]}" nft add chain inet gwlost in '{ type filter hook input priority 0; }'
  ip netns exec "${ns[0]}" nft add chain inet gwlost out '{ type filter hook output priority 0; }'
  ip netns exec "${ns[0]}" nft add rule inet gwlost in iifname "$dev" drop
  ip netns exec "${ns[0]}" nft add rule inet gwlost out oifname "$dev" drop
  finish "$phase" "$t0" "$limit"
  for r in 0 1; do
    check "$phase" $r "$lost_b" "$limit"
  done
  check "$phase" 2 'PeerLost.*ranks\? 0' "$limit"
  ip netns exec "${ns[0]}" nft delete table inet gwlost
  ip netns exec "${ns[0]}" nft add table inet gwlost
}

echo "3. host B goes silent (rank 2 alive)"
silence silent $((port + 1)) 40
echo "4. host B goes silent, GRADWIRE_LIVENESS_S=3"
GRADWIRE_LIVENESS_S=3 silence silent3 $((port + 3)) 8

echo "a lost rank on another host: PeerLost naming it on every survivor, before the deadline"
