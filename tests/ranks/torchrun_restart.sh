#!/usr/bin/env bash
# The launcher's restart as the fallback for a lost rank (issue 20): 3 ranks
# under `torchrun --max-restarts 2`, either the C++ Fashion-MNIST example
# (cpp) or the Python DDP example on backend "gradwire" (python).
#  1. an uninterrupted torchrun run prints every rank's state digests
#     (parameters and optimizer state; compression state in the C++ run);
#  2. a run that checkpoints every C steps, where rank 1 SIGKILLs itself
#     after step K in the first generation only: the survivors' collectives
#     fail (or torchrun stops them first), torchrun tears the generation down
#     and starts the next, which resumes from the newest checkpoint; it must
#     finish (exit 0) after exactly one restart, with every rank's digests
#     equal to run 1's: nothing lost but the steps since the checkpoint,
#     which are recomputed bit for bit;
#  3. nothing is left in /dev/shm by the processes of either run.
#
#   torchrun_restart.sh cpp EXAMPLE WORKDIR
#   torchrun_restart.sh python SCRIPT WORKDIR   (gradwire's python package on PYTHONPATH)
# KILL_AT=K kills after step K instead (1-29 for cpp, 1-39 for python); the
# check is then that exactly one generation resumed, from whichever
# checkpoint was the newest.
set -euo pipefail
source "$(dirname "$0")/shm_leaks.sh"
mode=$1 program=$2 work=$3
command -v torchrun > /dev/null || { echo "torchrun not found: skipped"; exit 77; }
every=10
if [[ $mode == cpp ]]; then
  launcher=(--no-python)
  kill=${KILL_AT:-17} resumed="resumed from .*step-0*11 "  # 11 steps per epoch: the end of epoch 1
  common=(--model mlp --limit 2048 --batch 64 --epochs 3 --max-steps 30 --threads 1
          --compression onebit-adam --freeze-step 5)
  none=(--checkpoint '')
  resume=(--checkpoint "$work/ckpt" --checkpoint-every "$every" --resume)
else
  launcher=()
  kill=${KILL_AT:-25} resumed="resumed at step 20"
  common=(--steps 40 --warmup 0 --log-every 1000 --batch 32)
  none=()
  resume=(--checkpoint "$work/ckpt" --checkpoint-every "$every" --resume)
fi
# Every generation says where it starts: the first "no checkpoint", the
# one restart the newest checkpoint (or "no checkpoint" again when the kill
# came before the first one).
starts=1
if [[ -n ${KILL_AT:-} ]]; then resumed="resumed from\|resumed at step\|no checkpoint"; starts=2; fi
rm -rf "$work"
mkdir -p "$work"
touch "$work/start"
export GRADWIRE_TIMEOUT_S=${GRADWIRE_TIMEOUT_S:-10}
run() {  # log, extra torchrun args..., --, example args...
  local log=$1
  shift
  local extra=()
  while [[ $1 != -- ]]; do extra+=("$1"); shift; done
  shift
  timeout 600 torchrun --standalone "${launcher[@]}" --nproc_per_node 3 "${extra[@]}" \
    "$program" "${common[@]}" "$@" > "$log" 2>&1
}
digests() { grep -o 'rank [0-9] state at step [0-9]*: .*' "$1" | sort; }

run "$work/full.log" -- "${none[@]}" || { cat "$work/full.log"; exit 1; }
expected=$(digests "$work/full.log")
[[ $(wc -l <<< "$expected") == 3 ]] || { echo "no digests from the full run"; cat "$work/full.log"; exit 1; }

run "$work/restarted.log" --max-restarts 2 -- "${resume[@]}" --kill-at-step "$kill" --kill-rank 1 \
  || { echo "FAIL: the restarted job did not finish"; cat "$work/restarted.log"; exit 1; }
[[ $(grep -c "rank 1: killed at step $kill" "$work/restarted.log") == 1 ]] \
  || { echo "FAIL: rank 1 was not killed once"; cat "$work/restarted.log"; exit 1; }
[[ $(grep -c "$resumed" "$work/restarted.log") == "$starts" ]] \
  || { echo "FAIL: not exactly one generation resumed as expected ($resumed)"; cat "$work/restarted.log"; exit 1; }
got=$(digests "$work/restarted.log")
if [[ "$got" != "$expected" ]]; then
  echo "FAIL: the restarted job ended in another state than the uninterrupted one"
  echo "uninterrupted:"; echo "$expected"; echo "restarted:"; echo "$got"; exit 1
fi
echo "the restarted job equals the uninterrupted one:"; echo "$got"

check_shm_leaks "$work/start"
