#!/usr/bin/env bash
# One etcd, started here and stopped at the end (nothing left running):
#  1. the store's semantics against it (store_test: watches, set_if_absent
#     races, leases, failover, servers that are not etcd);
#  2. a fixed world of 2 ranks over etcd (RANK, WORLD_SIZE set);
#  3. an elastic job of 2 on this host over etcd (min 2, max 2); then one
#     with a third process that waits as a spare (max 2) until a member is
#     killed, and then comes in;
#  4. bad input, each a clear error naming what to fix within 30 s, never
#     a hang: malformed variables, an unreachable etcd, a prefix holding a
#     finished job, a dead job, another program's keys, or a job with
#     other sizes.
#   store.sh STORE_TEST WORKER
set -uo pipefail
here=$(dirname "$0")
source "$here/etcd.sh"
store_test=$1 worker=$2
etcd_session
cport=$(etcd_free_port) pport=$(etcd_free_port)
url=http://127.0.0.1:$cport
etcd_start one "$tmp" "$url" "http://127.0.0.1:$pport" "one=http://127.0.0.1:$pport"
etcd_wait "$url" || { cat "$tmp/one.log"; exit 1; }
export GRADWIRE_LOG_LEVEL=warn GRADWIRE_TIMEOUT_S=20 GRADWIRE_ETCD_TTL_S=2

echo "1. the store against etcd"
GW_ETCD=$url "$store_test" || fail "store_test"

echo "2. a fixed world of 2 ranks over etcd"
for r in 0 1; do
  GRADWIRE_ETCD_ENDPOINTS=$url GRADWIRE_ETCD_PREFIX=/fixed-$$/ RANK=$r WORLD_SIZE=2 \
    timeout 60 "$worker" --fixed --steps 20 > "$tmp/fixed.$r" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/fixed.*; fail "the fixed world"; }; done
pids=()
grep -h 'fixed world' "$tmp"/fixed.*

echo "3. an elastic job of 2 over etcd"
elastic() {  # elastic PREFIX LOG [extra env...]: one worker in the background
  local prefix=$1 log=$2
  shift 2
  env GRADWIRE_ETCD_ENDPOINTS="$url" GRADWIRE_ETCD_PREFIX="$prefix" GRADWIRE_ELASTIC_MIN_SIZE=2 \
    GRADWIRE_ELASTIC_MAX_SIZE=2 "$@" timeout 60 "$worker" ${WORKER_ARGS:---steps 40 --step-ms 0} \
    > "$log" 2>&1 &
  pids+=($!)
}
elastic /done-$$/ "$tmp/e.0"
elastic /done-$$/ "$tmp/e.1"
for p in "${pids[@]}"; do wait "$p" || { cat "$tmp"/e.*; fail "the elastic job"; }; done
pids=()
grep -h '^final' "$tmp"/e.*

echo "3b. max size 2: a third process waits as a spare, and comes in when a member is lost"
WORKER_ARGS="--steps 150 --step-ms 20" elastic /max-$$/ "$tmp/m.0"
WORKER_ARGS="--steps 150 --step-ms 20" elastic /max-$$/ "$tmp/m.1"
members=("${pids[@]}")
for _ in $(seq 200); do grep -q '^step 5 ' "$tmp/m.0" && break; sleep 0.05; done
WORKER_ARGS="--steps 150 --step-ms 20" elastic /max-$$/ "$tmp/m.2"
sleep 1.5
grep -q '^joined' "$tmp/m.2" && { cat "$tmp/m.2"; fail "the spare came in beyond max_size"; }
grep -q 'world 3' "$tmp"/m.* && fail "a generation of 3 formed beyond max_size 2"
kill_tree "${members[1]}"
wait "${members[1]}" 2> /dev/null
for p in "${members[0]}" "${pids[2]}"; do
  wait "$p" || { tail -n 20 "$tmp"/m.*; fail "the job with a spare"; }
done
pids=()
grep -q '^joined: generation 1, world 2' "$tmp/m.2" || { cat "$tmp/m.2"; fail "the spare did not come in"; }
grep -h '^recovered\|^joined: generation 1\|^final' "$tmp/m.0" "$tmp/m.2"

echo "4. bad input"
# refused NAME PATTERN ENV...: the worker must fail within 30 s (not by the
# timeout) printing PATTERN.
refused() {
  local name=$1 pattern=$2 t0=$SECONDS rc
  shift 2
  env "$@" timeout 30 "$worker" --steps 5 --step-ms 0 > "$tmp/bad.$name" 2>&1
  rc=$?
  ((rc != 0 && rc != 124)) || { cat "$tmp/bad.$name"; fail "$name: exit status $rc (expected an error)"; }
  grep -q -- "$pattern" "$tmp/bad.$name" || { cat "$tmp/bad.$name"; fail "$name: no '$pattern'"; }
  echo "  $name ($((SECONDS - t0)) s): $(grep -m1 -o 'elastic_worker: .*' "$tmp/bad.$name" | cut -c1-240)"
}
base=(GRADWIRE_ETCD_ENDPOINTS="$url" GRADWIRE_ETCD_PREFIX=/bad-$$/)
refused no-port 'endpoint .10.0.0.1. has no port' GRADWIRE_ETCD_ENDPOINTS=10.0.0.1 GRADWIRE_ETCD_PREFIX=/p/
refused https 'TLS' GRADWIRE_ETCD_ENDPOINTS=https://127.0.0.1:$cport GRADWIRE_ETCD_PREFIX=/p/
refused no-prefix 'GRADWIRE_ETCD_PREFIX is not' GRADWIRE_ETCD_ENDPOINTS="$url"
refused bad-prefix 'GRADWIRE_ETCD_PREFIX=.a b. holds a space' GRADWIRE_ETCD_ENDPOINTS="$url" "GRADWIRE_ETCD_PREFIX=a b"
refused rank-alone 'with RANK but not WORLD_SIZE' "${base[@]}" RANK=0
refused min-zero 'GRADWIRE_ELASTIC_MIN_SIZE=.0. is not a whole number' "${base[@]}" GRADWIRE_ELASTIC_MIN_SIZE=0
refused max-below-min 'is below min_size=3' "${base[@]}" GRADWIRE_ELASTIC_MIN_SIZE=3 GRADWIRE_ELASTIC_MAX_SIZE=2
refused ttl 'GRADWIRE_ETCD_TTL_S=.x. is not a whole number' "${base[@]}" GRADWIRE_ETCD_TTL_S=x
refused unreachable 'no member of the cluster answered' GRADWIRE_TIMEOUT_S=3 \
  GRADWIRE_ETCD_ENDPOINTS=http://127.0.0.1:1,http://192.0.2.1:2379 GRADWIRE_ETCD_PREFIX=/p/
refused finished-job 'the job finished' "${base[@]}" GRADWIRE_ETCD_PREFIX=/done-$$/ \
  GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_ELASTIC_MAX_SIZE=2
# A job whose members were all killed: once their leases expired (TTL 2 s),
# a process that comes with the same prefix is told, not left waiting.
# (a long run, killed at step 3: it must not finish first)
WORKER_ARGS="--steps 100000 --step-ms 20" elastic /dead-$$/ "$tmp/dead.0" \
  GRADWIRE_ELASTIC_MIN_SIZE=1 GRADWIRE_ELASTIC_MAX_SIZE=1
for _ in $(seq 100); do grep -q '^step 3 ' "$tmp/dead.0" && break; sleep 0.1; done
for p in "${pids[@]}"; do kill_tree "$p"; wait "$p" 2> /dev/null; done
pids=()
sleep 4
refused dead-job 'no longer running' "${base[@]}" GRADWIRE_ETCD_PREFIX=/dead-$$/ \
  GRADWIRE_ELASTIC_MIN_SIZE=1 GRADWIRE_ELASTIC_MAX_SIZE=1
etcdctl_at "$url" put /foreign-$$/elastic/job 'torchelastic rendezvous state' > /dev/null
refused foreign-keys 'not a gradwire elastic job' "${base[@]}" GRADWIRE_ETCD_PREFIX=/foreign-$$/
etcdctl_at "$url" put /sizes-$$/elastic/job 'gradwire elastic 1 min 2 max 4' > /dev/null
refused other-sizes 'needs the same GRADWIRE_ELASTIC_MIN_SIZE' "${base[@]}" \
  GRADWIRE_ETCD_PREFIX=/sizes-$$/ GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_ELASTIC_MAX_SIZE=3
echo "etcd store, fixed and elastic worlds over it, and every bad input refused"
