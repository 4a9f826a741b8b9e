#!/usr/bin/env bash
# 1-bit Adam / LAMB under elastic generations (Note [1-bit optimizers under
# elastic generations] in src/compress/onebit_optimizers.cpp): three members
# of tests/torch/elastic_onebit_worker.cpp over a file store; one SIGKILLs
# itself mid-training, the two survivors roll back to their last commit and
# continue at world size 2 (the worker checks the optimizer's step, stage
# and state against the committed ones), a replacement started once they
# have recovered joins at a commit, and all three finish with the same
# parameters. Seconds.
#
#   elastic_onebit.sh WORKER WORKDIR adam|lamb FREEZE_STEP
# WORKER: build/tests/torch/elastic_onebit_worker, or
# tests/python/elastic_onebit_worker.py (its Python twin, run with python3;
# gradwire's package on PYTHONPATH).
set -euo pipefail
source "$(dirname "$0")/../ranks/shm_leaks.sh"
worker=$1 work=$2 optimizer=$3 freeze=$4
run=("$worker")
if [[ $worker == *.py ]]; then
  python3 -c 'import gradwire.torch' 2> /dev/null || { echo "gradwire.torch not importable: skipped"; exit 77; }
  run=(python3 "$worker")
fi
victim=1 kill_at=7 after_join=6
limit=${MEMBER_TIMEOUT_S:-100}  # seconds per member process
rm -rf "$work"
mkdir -p "$work/store"
touch "$work/start"
export GRADWIRE_STORE_DIR="$work/store" WORLD_SIZE=3 GRADWIRE_TIMEOUT_S=${GRADWIRE_TIMEOUT_S:-5}
export GRADWIRE_ELASTIC_SETTLE_S=${GRADWIRE_ELASTIC_SETTLE_S:-1} OMP_NUM_THREADS=1
export GRADWIRE_LOG_LEVEL=${GRADWIRE_LOG_LEVEL:-warn}
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
args=("$optimizer" "$after_join" "$freeze" "$victim" "$kill_at")
for r in 0 1 2; do
  RANK=$r timeout -s KILL "$limit" "${run[@]}" "${args[@]}" > "$work/$r.log" 2>&1 &
  pids+=($!)
done
survivors=("$work/0.log" "$work/2.log")
for _ in $(seq 1 600); do
  (( $(cat "${survivors[@]}" 2> /dev/null | grep -c ': recovered: generation [0-9]*, world 2' || true) == 2 )) && break
  sleep 0.05
done
RANK=$victim timeout -s KILL "$limit" "${run[@]}" "${args[@]}" > "$work/new.log" 2>&1 &
pids+=($!)

why=""
for i in "${!pids[@]}"; do
  rc=0
  wait "${pids[$i]}" || rc=$?
  if ((i == victim)); then
    ((rc == 137)) || why+=" the victim exited with $rc, not by SIGKILL;"
  elif ((rc != 0)); then
    why+=" member $i exited with $rc;"
    # Without the survivors the replacement would wait out its join timeout.
    kill -9 "${pids[3]}" 2> /dev/null || true
  fi
done
logs=("${survivors[@]}" "$work/new.log")
grep -q "killed after step $kill_at" "$work/$victim.log" || why+=" rank $victim was not killed;"
grep -q ': joined: generation' "$work/new.log" || why+=" the replacement did not join;"
if [[ $worker == *.py ]]; then  # the Python twin's refusal scenario, on every first member
  for r in 0 1 2; do
    grep -q "refused a 1-bit optimizer over another communicator" "$work/$r.log" ||
      why+=" rank $r did not refuse a 1-bit optimizer over another communicator;"
  done
fi
digests=$(cat "${logs[@]}" | grep -o 'done at step [0-9]*, world 3, params [0-9a-f]*' | sort -u || true)
[[ $(wc -l <<< "$digests") == 1 && -n $digests ]] || why+=" the members did not finish together at world 3 with one set of parameters;"
for f in "$work"/*.log; do echo "== $f"; cat "$f"; done
[[ -z $why ]] || { echo "FAIL:$why"; exit 1; }
check_shm_leaks "$work/start"
echo "OK: $optimizer survived the loss of rank $victim after step $kill_at and took in a replacement"
