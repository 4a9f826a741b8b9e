#!/usr/bin/env bash
# Network faults under GW_PROVIDER (default net, the provider across hosts): 2 ranks in a fresh network namespace
# (loopback only), packets dropped by nftables on the way.
#  1. fault-free: 200 allreduces, digest of every result;
#  2. 5 % of the data packets (IP length > 1200: the fabric's payload, not
#     the store's small frames) dropped at random: TCP retransmits, and the
#     200 results must be bitwise identical to run 1's;
#  3. 100 % of them dropped: every rank must fail with Timeout within the
#     deadline (GRADWIRE_TIMEOUT_S=5), not hang.
# Delay, jitter and reordering (and loss among them) are netem.sh's, which
# emulates tc netem over NFQUEUE (this kernel lacks sch_netem; nftables can
# only drop). Skips (exit 77) without root, network namespaces or nftables.
#
#   netfault.sh GWLAUNCH WORKLOAD
set -uo pipefail
gwlaunch=$1 workload=$2
ns=gwfault$$
command -v nft > /dev/null || { echo "SKIP: nft (nftables) not installed"; exit 77; }
ip netns add "$ns" 2> /dev/null || { echo "SKIP: cannot create a network namespace (root and CAP_NET_ADMIN needed)"; exit 77; }
trap 'ip netns del "$ns" 2> /dev/null' EXIT
in_ns() { ip netns exec "$ns" "$@"; }
in_ns ip link set lo up
in_ns nft add table inet gwfault || { echo "SKIP: nftables unusable in this kernel"; exit 77; }
in_ns nft add chain inet gwfault out '{ type filter hook output priority 0; }'
export GRADWIRE_OFI_PROVIDER="${GW_PROVIDER:-net}" GRADWIRE_OFI_IFACE=lo
run() {  # iterations -> output
  in_ns timeout 300 "$gwlaunch" -n 2 --timeout 120 -- "$workload" "$1" 2>&1
}
digests() { grep -o 'rank [0-9]: .* digest [0-9a-f]*' <<< "$1" | sort; }

out=$(run 200) || { echo "FAIL: the fault-free run failed:"; echo "$out"; exit 1; }
clean=$(digests "$out")
[[ $(wc -l <<< "$clean") == 2 ]] || { echo "FAIL: no digests:"; echo "$out"; exit 1; }
echo "fault-free:"; echo "$clean"

in_ns nft add rule inet gwfault out meta l4proto tcp ip length '>' 1200 numgen random mod 100 '<' 5 counter drop
out=$(run 200) || { echo "FAIL: the run with 5 % loss failed:"; echo "$out"; exit 1; }
lossy=$(digests "$out")
dropped=$(in_ns nft list chain inet gwfault out | grep -o 'packets [0-9]*' | awk '{print $2}')
echo "5 % loss ($dropped packets dropped):"; echo "$lossy"
(( dropped > 0 )) || { echo "FAIL: nothing was dropped: the test saw no fault"; exit 1; }
[[ "$lossy" == "$clean" ]] || { echo "FAIL: results differ from the fault-free run"; exit 1; }

in_ns nft flush chain inet gwfault out
in_ns nft add rule inet gwfault out meta l4proto tcp ip length '>' 1200 drop
start=$(date +%s)
out=$(GRADWIRE_TIMEOUT_S=5 run 20)
rc=$?
took=$(( $(date +%s) - start ))
echo "100 % loss: exit $rc after ${took} s"
grep -m2 'Timeout' <<< "$out" || true
(( rc != 0 )) || { echo "FAIL: the run with 100 % loss succeeded"; echo "$out"; exit 1; }
n=$(grep -c 'netfault_allreduce: gradwire \(Timeout\|PeerLost\|Aborted\)' <<< "$out" || true)
(( n == 2 )) || { echo "FAIL: expected a Timeout/PeerLost on both ranks:"; echo "$out" | tail -20; exit 1; }
(( took < 60 )) || { echo "FAIL: took ${took} s to fail (deadline 5 s)"; exit 1; }
echo "network faults: identical results under loss, Timeout under total loss"
