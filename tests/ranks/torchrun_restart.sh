#!/usr/bin/env bash
# The launcher's restart as the fallback for a lost rank (issue 20): the
# Fashion-MNIST example on 3 ranks under `torchrun --max-restarts 2`.
#  1. an uninterrupted torchrun run of N steps prints every rank's state
#     digests (parameters, optimizer state, compression state);
#  2. a run that checkpoints every C steps, where rank 1 SIGKILLs itself
#     after step K in the first generation only: the survivors' collectives
#     fail (PeerLost/Timeout), torchrun tears the generation down and starts
#     the next, which resumes from the newest checkpoint; it must finish
#     (exit 0) with every rank's digests equal to run 1's: nothing lost but
#     the steps since the checkpoint, which are recomputed bit for bit;
#  3. nothing is left in /dev/shm by the processes of either run, and the
#     restarted generation bound gradwire's store again on the same port.
#
#   torchrun_restart.sh EXAMPLE WORKDIR [example args...]
set -euo pipefail
example=$1 work=$2
shift 2
command -v torchrun > /dev/null || { echo "torchrun not found: skipped"; exit 77; }
steps=30 every=10 kill=17
common=(--model mlp --limit 2048 --batch 64 --epochs 3 --max-steps "$steps" --threads 1
        --compression onebit-adam --freeze-step 5 "$@")
rm -rf "$work"
mkdir -p "$work"
touch "$work/start"
export GRADWIRE_TIMEOUT_S=${GRADWIRE_TIMEOUT_S:-10}
run() {  # log, torchrun args..., --, example args...
  local log=$1
  shift
  local launcher=()
  while [[ $1 != -- ]]; do launcher+=("$1"); shift; done
  shift
  timeout 600 torchrun --standalone --no-python --nproc_per_node 3 "${launcher[@]}" \
    "$example" "${common[@]}" "$@" > "$log" 2>&1
}
digests() { grep -o 'rank [0-9] state at step [0-9]*: .*' "$1" | sort; }

run "$work/full.log" -- --checkpoint '' || { cat "$work/full.log"; exit 1; }
expected=$(digests "$work/full.log")
[[ $(wc -l <<< "$expected") == 3 ]] || { echo "no digests from the full run"; cat "$work/full.log"; exit 1; }

run "$work/restarted.log" --max-restarts 2 -- --checkpoint "$work/ckpt" --checkpoint-every "$every" \
    --resume --kill-at-step "$kill" --kill-rank 1 \
  || { echo "FAIL: the restarted job did not finish"; cat "$work/restarted.log"; exit 1; }
grep -q "rank 1: killed at step $kill" "$work/restarted.log" \
  || { echo "FAIL: rank 1 was never killed"; cat "$work/restarted.log"; exit 1; }
grep -q "resumed from .*step-0*11 " "$work/restarted.log" \
  || { echo "FAIL: the second generation did not resume from step 11 (the end of epoch 1)"; cat "$work/restarted.log"; exit 1; }
got=$(digests "$work/restarted.log")
if [[ "$got" != "$expected" ]]; then
  echo "FAIL: the restarted job ended in another state than the uninterrupted one"
  echo "uninterrupted:"; echo "$expected"; echo "restarted:"; echo "$got"; exit 1
fi
echo "the restarted job equals the uninterrupted one:"; echo "$got"

# Shared memory of processes that are gone (SIGKILLed or torn down) and that
# this test started: a leak. Other tests may run beside this one, so only
# regions newer than the start whose owner pid is dead count.
leaked=()
for f in $(find /dev/shm -maxdepth 1 -name 'gw_*' -newer "$work/start" 2>/dev/null); do
  pid=$(basename "$f" | cut -d_ -f2)
  kill -0 "$pid" 2> /dev/null || leaked+=("$f")
done
if (( ${#leaked[@]} )); then echo "FAIL: left in /dev/shm: ${leaked[*]}"; exit 1; fi
echo "nothing left in /dev/shm"
