#!/usr/bin/env bash
# Python's ElasticDDP (gradwire.torch.elastic) over etcd, no shared
# directory: examples/train_elastic.py with PowerSGD (from step 3, so that
# its state is live when a member is lost), 3 ranks, min 2; rank 2 SIGKILLs
# itself at step 6. The survivors must recover into generation 1 at world
# size 2 (each generation's torch process group over a TCPStore served by
# its rank 0, Note [a torch store per generation]), resume PowerSGD's
# committed state, finish every step, end with the same parameters, and
# leave nothing running.
#   python.sh EXAMPLE_DIR
set -uo pipefail
here=$(dirname "$0")
source "$here/etcd.sh"
examples=$1
python3 -c 'import gradwire.torch' 2> /dev/null || { echo "SKIP: gradwire.torch not importable"; exit 77; }
[[ -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]] ||
  { echo "SKIP: no Fashion-MNIST (scripts/install-deps)"; exit 77; }
etcd_session
cport=$(etcd_free_port) pport=$(etcd_free_port)
url=http://127.0.0.1:$cport
etcd_start one "$tmp" "$url" "http://127.0.0.1:$pport" "one=http://127.0.0.1:$pport"
etcd_wait "$url" || { cat "$tmp/one.log"; exit 1; }

for r in 0 1 2; do
  GRADWIRE_ETCD_ENDPOINTS=$url GRADWIRE_ETCD_PREFIX=/py-$$/ RANK=$r WORLD_SIZE=3 \
    GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_TIMEOUT_S=10 GRADWIRE_LOG_LEVEL=warn \
    timeout -s KILL 150 python3 "$examples/train_elastic.py" --epochs 1 --limit 1920 \
    --threads 1 --kill-at-step 6 --kill-rank 2 \
    --compression powersgd --powersgd-rank 2 --powersgd-start 3 > "$tmp/r.$r" 2>&1 &
  pids+=($!)
done
wait "${pids[2]}"
rc=$?
((rc == 137)) || { cat "$tmp"/r.*; fail "rank 2 ended with $rc, not by its own SIGKILL"; }
for r in 0 1; do wait "${pids[r]}" || { cat "$tmp"/r.*; fail "survivor $r failed"; }; done
pids=()
for r in 0 1; do
  grep -q 'recovered: generation 1, world 2' "$tmp/r.$r" || { cat "$tmp/r.$r"; fail "rank $r did not recover at world size 2"; }
done
digests=$(grep -ho 'state at step 20: world 2, generation 1, recoveries 1, params [0-9a-f]*' "$tmp"/r.[01] |
  awk '{print $NF}' | sort -u)
(($(grep -c . <<< "$digests") == 1)) || { cat "$tmp"/r.*; fail "the survivors end with different parameters (or not at step 20)"; }
for r in 0 1; do
  # The hook counts the steps it ran: 20 only if the rollback to the commit
  # restored its state (a lost restore leaves the failed step counted).
  grep -q "rank $r powersgd: iter 20," "$tmp/r.$r" || { cat "$tmp/r.$r"; fail "rank $r: PowerSGD's committed state was not restored"; }
done
grep -h 'recovered\|first step after\|state at step\|powersgd:\|final test' "$tmp"/r.[01]
echo "ElasticDDP over etcd: the survivors recovered and ended alike"
