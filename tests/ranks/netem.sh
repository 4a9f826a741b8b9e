#!/usr/bin/env bash
# Network faults under GW_PROVIDER (default net, the provider across hosts), netem style: 2 ranks in 2 network
# namespaces joined by a veth pair, each rank's incoming fabric packets held,
# reordered or dropped by nfq_netem (tc netem's behaviour in user space over
# NFQUEUE: this kernel has no sch_netem). One FAULT per ctest entry:
#   delay           5 ms on every packet (nothing reordered, nothing dropped)
#   jitter_reorder  5 ms +- 4 ms: due times cross, packets leave out of order
#   reorder         5 ms, but 25 % of the packets leave at once, overtaking
#   loss_jitter     5 ms +- 4 ms and 2 % of the packets dropped
#  1. fault-free: 200 allreduces, digest of every result;
#  2. the same 200 under FAULT: results must be bitwise identical to run 1's,
#     and nfq_netem's counters must show that the fault happened (a test
#     that injected nothing must not pass).
# Only the fabric's traffic is queued: the rendezvous store's port
# (MASTER_PORT) is left alone. Skips (exit 77) without root, network
# namespaces, veth, iptables or NFQUEUE.
#
#   netem.sh NFQ_NETEM WORKLOAD FAULT
set -uo pipefail
source "$(dirname "$0")/netns_pair.sh"
nfq_netem=$1 workload=$2 fault=$3
case $fault in
  delay)          netem=(--delay-ms 5);                 expect=(delayed);;
  jitter_reorder) netem=(--delay-ms 5 --jitter-ms 4);   expect=(delayed reordered);;
  reorder)        netem=(--delay-ms 5 --reorder-pct 25); expect=(delayed reordered);;
  loss_jitter)    netem=(--delay-ms 5 --jitter-ms 4 --loss-pct 2); expect=(delayed reordered dropped);;
  *) echo "netem.sh: unknown fault '$fault'"; exit 2;;
esac
ns=(gwnetem$$a gwnetem$$b) addr=(10.77.0.1 10.77.0.2) dev=gw0 port=29500 queue=7
tmp=$(mktemp -d)
nfq_pids=()
cleanup() {
  for p in "${nfq_pids[@]}"; do kill "$p" 2> /dev/null; done
  for n in "${ns[@]}"; do ip netns del "$n" 2> /dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT
iptables=
for c in iptables iptables-legacy; do command -v $c > /dev/null && { iptables=$c; break; }; done
[[ -n $iptables ]] || { echo "SKIP: iptables not installed"; exit 77; }
netns_pair "${ns[0]}" "${ns[1]}" "${addr[0]}" "${addr[1]}" $dev
# The fabric's TCP connections on gw0, not the store's (either direction).
# Note [queue on the way in]: packets are held where they arrive (INPUT),
# not where they leave (OUTPUT). A packet held on OUTPUT still belongs to
# its sending socket, and TCP Small Queues lets a socket keep only about a
# millisecond's worth of data below it: a 5 ms hold there cut throughput
# ~50x (13 allreduces took 12 s, not 1 s), a slowdown no real network
# causes. The veth crossing detaches a packet from its sender, so INPUT
# delays it the way a distant link would.
rule=(INPUT -i $dev -p tcp '!' --sport $port '!' --dport $port -j NFQUEUE --queue-num $queue)
# Probe while the namespace is idle: a rule without a listener drops.
ip netns exec "${ns[0]}" $iptables -A "${rule[@]}" 2> "$tmp/probe" ||
  { echo "SKIP: $iptables cannot add an NFQUEUE rule: $(cat "$tmp/probe")"; exit 77; }
ip netns exec "${ns[0]}" $iptables -D "${rule[@]}"

export GRADWIRE_OFI_PROVIDER="${GW_PROVIDER:-net}" GRADWIRE_OFI_IFACE=$dev GRADWIRE_TIMEOUT_S=30
secret=$(od -An -tx1 -N32 /dev/urandom | tr -d ' \n')
# gwlaunch cannot start ranks in two namespaces: this does its job here,
# with its rule that a failed rank's peer gets a grace period, not forever.
run() {  # iterations -> output of both ranks; fails if either rank did
  local pids=() rc=0 p
  for r in 0 1; do
    ip netns exec "${ns[r]}" env RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
      MASTER_ADDR="${addr[0]}" MASTER_PORT=$port GRADWIRE_JOB_SECRET="$secret" \
      timeout 120 "$workload" "$1" > "$tmp/rank$r" 2>&1 &
    pids+=($!)
  done
  wait -n "${pids[@]}" || { rc=1; sleep 10; for p in "${pids[@]}"; do kill "$p" 2> /dev/null; done; }
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  cat "$tmp/rank0" "$tmp/rank1"
  return $rc
}
digests() { grep -o 'rank [0-9]: .* digest [0-9a-f]*' <<< "$1" | sort; }

since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.1f", b - a }'; }
start=$EPOCHREALTIME
out=$(run 200) || { echo "FAIL: the fault-free run failed:"; echo "$out"; exit 1; }
clean=$(digests "$out")
[[ $(wc -l <<< "$clean") == 2 ]] || { echo "FAIL: no digests:"; echo "$out"; exit 1; }
printf 'fault-free (%s s):\n%s\n' "$(since "$start")" "$clean"

# nfq_netem must be bound before its rule exists, in each namespace (NFQUEUE
# queues belong to one network namespace).
for r in 0 1; do
  ip netns exec "${ns[r]}" "$nfq_netem" --queue $queue "${netem[@]}" 2> "$tmp/nfq$r" &
  nfq_pids+=($!)
done
for r in 0 1; do
  for _ in $(seq 100); do grep -q bound "$tmp/nfq$r" && break; sleep 0.05; done
  if ! grep -q bound "$tmp/nfq$r"; then
    # Exit 3: the kernel refused the queue (no nfnetlink_queue); anything
    # else is nfq_netem's own failure.
    kill "${nfq_pids[r]}" 2> /dev/null; wait "${nfq_pids[r]}"; status=$?
    (( status == 3 )) && { echo "SKIP: nfq_netem cannot bind an NFQUEUE queue:"; cat "$tmp/nfq$r"; exit 77; }
    echo "FAIL: nfq_netem did not start (exit $status):"; cat "$tmp/nfq$r"; exit 1
  fi
  ip netns exec "${ns[r]}" $iptables -A "${rule[@]}" || exit 1
done
start=$EPOCHREALTIME
out=$(run 200)
rc=$?
took=$(since "$start")
# Rules out before the queues go: a queued packet with no listener is lost.
for r in 0 1; do ip netns exec "${ns[r]}" $iptables -D "${rule[@]}"; done
for p in "${nfq_pids[@]}"; do kill -TERM "$p"; wait "$p"; done
nfq_pids=()
declare -A total=([packets]=0 [delayed]=0 [reordered]=0 [dropped]=0)
for r in 0 1; do
  line=$(grep 'packets=' "$tmp/nfq$r") || { echo "FAIL: nfq_netem in ${ns[r]} reported nothing:"; cat "$tmp/nfq$r"; exit 1; }
  echo "rank $r's ${line}"
  for k in "${!total[@]}"; do (( total[$k] += $(grep -o " $k=[0-9]*" <<< "$line" | cut -d= -f2) )); done
done
(( rc == 0 )) || { echo "FAIL: the run under $fault failed:"; echo "$out"; exit 1; }
faulty=$(digests "$out")
printf '%s (%s, %s s): packets=%d delayed=%d reordered=%d dropped=%d\n%s\n' "$fault" "${netem[*]}" \
  "$took" "${total[packets]}" "${total[delayed]}" "${total[reordered]}" "${total[dropped]}" "$faulty"
for k in delayed reordered dropped; do
  if [[ " ${expect[*]} " == *" $k "* ]]; then
    (( total[$k] > 0 )) || { echo "FAIL: no packet $k: the test saw no fault"; exit 1; }
  else
    (( total[$k] == 0 )) || { echo "FAIL: $((total[$k])) packets $k, but $fault should not do that"; exit 1; }
  fi
done
[[ "$faulty" == "$clean" ]] || { echo "FAIL: results differ from the fault-free run"; exit 1; }
echo "network faults: identical results under $fault"
