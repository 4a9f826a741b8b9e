#!/usr/bin/env bash
# An elastic job on a 3-member etcd cluster that loses its leader while the
# job trains: the job must not notice (no failed collective, no recovery,
# the same generation), and a process that joins afterwards must still get
# in through the two members left. The members run on this host's loopback
# and are started and stopped here; the workers (tests/etcd/elastic_worker)
# are given all three client URLs (Note [etcd over its JSON gateway]: calls
# fail over between members).
#   cluster.sh WORKER
set -uo pipefail
here=$(dirname "$0")
source "$here/etcd.sh"
worker=$1
etcd_session
names=(m0 m1 m2) clients=() peers=() cluster=""
for n in "${names[@]}"; do
  clients+=("http://127.0.0.1:$(etcd_free_port)")
  peers+=("http://127.0.0.1:$(etcd_free_port)")
  cluster+="${cluster:+,}$n=${peers[-1]}"
done
for i in 0 1 2; do etcd_start "${names[i]}" "$tmp" "${clients[i]}" "${peers[i]}" "$cluster"; done
for i in 0 1 2; do etcd_wait "${clients[i]}" || { cat "$tmp"/m*.log; fail "the cluster did not start"; }; done
endpoints=$(IFS=,; echo "${clients[*]}")

start() {  # start LOG: one worker in the background
  GRADWIRE_ETCD_ENDPOINTS=$endpoints GRADWIRE_ETCD_PREFIX=/gwcluster-$$/ \
    GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_ELASTIC_MAX_SIZE=3 GRADWIRE_TIMEOUT_S=30 \
    GRADWIRE_LOG_LEVEL=warn timeout -s KILL 120 "$worker" --steps 240 --step-ms 20 > "$1" 2>&1 &
  pids+=($!)
}
wait_for() {
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do ((SECONDS - t0 < limit)) || return 1; sleep 0.05; done
}
start "$tmp/w0"
start "$tmp/w1"
wait_for 60 grep -q '^step 40 done' "$tmp/w0" || { cat "$tmp"/w*; fail "the job did not get to step 40"; }
# The leader: the member whose id is the leader's in its own status.
leader=""
for i in 0 1 2; do
  st=$(etcdctl_at "${clients[i]}" endpoint status -w json 2> /dev/null)
  python3 -c 'import json,sys; s=json.loads(sys.argv[1])[0]["Status"]; sys.exit(s["header"]["member_id"] != s["leader"])' "$st" 2> /dev/null && leader=$i
done
[[ -n $leader ]] || fail "no leader found"
echo "killing the leader ${names[leader]} (${clients[leader]}) at step $(grep -c '^step ' "$tmp/w0")"
etcd_kill "${names[leader]}"
wait_for 60 grep -q '^step 120 done' "$tmp/w0" || { cat "$tmp"/w*; fail "the job stalled after the member was lost"; }
start "$tmp/w2"  # joins through the two members left
for p in "${pids[@]}"; do wait "$p" || { tail -n 20 "$tmp"/w*; fail "a worker failed"; }; done
pids=()
if grep -h 'failed at\|recovered' "$tmp"/w*; then fail "the job noticed the lost member"; fi
grep -q '^joined: generation' "$tmp/w2" || fail "the late process did not join"
for w in w0 w1; do
  grep -q '^final: step 240, world 3, generation 1, recoveries 0' "$tmp/$w" ||
    { grep '^final' "$tmp/$w"; fail "$w did not finish in generation 1 (the join) without a recovery"; }
done
grep -h '^final' "$tmp"/w*
echo "a 3-member etcd cluster lost its leader: the job went on, and a process joined afterwards"
