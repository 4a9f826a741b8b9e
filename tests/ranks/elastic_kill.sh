#!/usr/bin/env bash
# In-process recovery (issue 20, gradwire/elastic.h) with the elastic
# Fashion-MNIST example: 3 ranks over a file store, GRADWIRE_TIMEOUT_S=5.
#  1. an uninterrupted run gives the reference test accuracy;
#  2. REPS runs in which one rank (random) SIGKILLs itself after a random
#     step: the two survivors must continue at world size 2 (their first
#     step after the kill within 10 s of it); a replacement told to join
#     once they have recovered must join at a commit; the job must finish at
#     world size 3 with one set of parameters on every member; no process
#     may hang or outlive the run, and nothing may be left in /dev/shm.
#  3. accuracy against the reference, the mean of two uninterrupted runs
#     (at world sizes 3 and 2): the mean over the repetitions within
#     TOLERANCE points (default 0.75), every repetition within 1.5. Why so
#     wide: a recovered run sums its gradients over 2 ranks for a while, in
#     another order, and draws other dropout masks; 250 steps amplify that
#     into a spread of about 0.3 points (standard deviation) around the
#     same mean, which single uninterrupted runs have too (world size 2
#     against 3 is printed as the noise floor), so the reference itself is
#     uncertain by about 0.2. A CI check tighter than about 3 standard
#     deviations of the difference would fail by chance; a wrong state (a
#     lost rollback, a joiner without the model) costs far more. The means
#     this prints are BENCHMARKS.md's figures.
# The replacement of a Python example starts with the others and waits,
# torch imported, for the word to join: starting python3 and importing torch
# took over 3 s on the 2-core CI machine under load, longer than the
# survivors of a kill at step 140 needed to finish (the joiner then fails
# with Aborted, "the job finished before this process could join", as it
# should; the test is about the join, not about a race with process start).
# A compiled example starts in well under a second and starts on the word.
#
# Prints one line per repetition (kill step, rank, seconds from the kill to
# the first step after it, steps lost, accuracy): BENCHMARKS.md's figures.
#
#   elastic_kill.sh EXAMPLE WORKDIR [REPS] [TOLERANCE]
# EXAMPLE: build/examples/train_elastic, or examples/train_elastic.py (run
# with python3; gradwire's package on PYTHONPATH).
set -euo pipefail
source "$(dirname "$0")/shm_leaks.sh"
program=$1 work=$2 reps=${3:-20} tolerance=${4:-0.75}
run=("$program")
if [[ $program == *.py ]]; then
  python3 -c 'import gradwire.torch' 2> /dev/null || { echo "gradwire.torch not importable: skipped"; exit 77; }
  run=(python3 "$program")
fi
rm -rf "$work"
mkdir -p "$work"
touch "$work/start"
export GRADWIRE_TIMEOUT_S=5 GRADWIRE_LOG_LEVEL=${GRADWIRE_LOG_LEVEL:-warn}
common=(--epochs 2 --limit 12000 --threads 1 ${ELASTIC_ARGS:-})  # ELASTIC_ARGS: e.g. --compression powersgd
steps=250  # 2 epochs of 12000 images in global batches of 96
pids=()
cleanup() { for p in "${pids[@]}"; do kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT

# start LOG RANK ARGS...: one member, in the background, with a deadline.
start() {
  local log=$1 rank=$2
  shift 2
  GRADWIRE_STORE_DIR="$store" RANK=$rank WORLD_SIZE=3 timeout -s KILL 240 \
    "${run[@]}" "${common[@]}" "$@" > "$log" 2>&1 &
  pids+=($!)
}
# start_replacement LOG RANK GO: a member that joins once the file GO exists
# (see above: a Python one is started now and waits there, imports done).
start_replacement() {
  local log=$1 rank=$2 go=$3
  if [[ $program == *.py ]]; then
    GRADWIRE_STORE_DIR="$store" RANK=$rank WORLD_SIZE=3 timeout -s KILL 240 python3 -c '
import os, runpy, sys, time
import torch, gradwire.torch.elastic  # noqa: F401 - the slow part of a start, done before the wait
go, sys.argv = sys.argv[1], sys.argv[2:]
while not os.path.exists(go):
    time.sleep(0.02)
sys.path.insert(0, os.path.dirname(os.path.abspath(sys.argv[0])))
runpy.run_path(sys.argv[0], run_name="__main__")' "$go" "$program" "${common[@]}" > "$log" 2>&1 &
    pids+=($!)
  else
    (  # a subshell that becomes the member once GO exists, so its pid is the member's
      while [[ ! -e $go ]]; do sleep 0.02; done
      GRADWIRE_STORE_DIR="$store" RANK=$rank WORLD_SIZE=3 exec timeout -s KILL 240 \
        "${run[@]}" "${common[@]}" > "$log" 2>&1
    ) &
    pids+=($!)
  fi
}
accuracy() { grep -o 'final test accuracy [0-9.]*' "$1" | awk '{print $4}'; }

store="$work/store.ref"
pids=()
for r in 0 1 2; do start "$work/ref.$r.log" $r; done
for p in "${pids[@]}"; do wait "$p" || { cat "$work"/ref.*.log; echo "FAIL: the reference run failed"; exit 1; }; done
reference=$(accuracy "$work/ref.0.log")
# The noise floor: the same run uninterrupted at world size 2, unless
# ELASTIC_REFERENCE=3 (the reference is then the world-3 run alone: for a
# check of one kill, whose bound of 1.5 points is far wider than either).
w3=$reference w2=""
if [[ ${ELASTIC_REFERENCE:-3+2} == 3+2 ]]; then
  store="$work/store.ref2"
  pids=()
  for r in 0 1; do
    GRADWIRE_STORE_DIR="$store" RANK=$r WORLD_SIZE=2 timeout -s KILL 240 \
      "${run[@]}" "${common[@]}" > "$work/ref2.$r.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || { cat "$work"/ref2.*.log; echo "FAIL: the world-2 run failed"; exit 1; }; done
  w2=$(accuracy "$work/ref2.0.log")
  reference=$(awk -v a="$w3" -v b="$w2" 'BEGIN { printf "%.2f", (a + b) / 2 }')
fi
echo "uninterrupted: final test accuracy $w3% at world size 3${w2:+, $w2% at world size 2}: reference $reference%"

RANDOM=${SEED:-$$}
failures=0
accuracies=()
for rep in $(seq 1 "$reps"); do
  kill_at=$((5 + RANDOM % 140)) victim=$((RANDOM % 3))
  store="$work/store.$rep"
  pids=()
  for r in 0 1 2; do start "$work/$rep.$r.log" $r --kill-at-step "$kill_at" --kill-rank "$victim"; done
  start_replacement "$work/$rep.new.log" "$victim" "$work/$rep.go"
  survivors=()
  for r in 0 1 2; do ((r == victim)) || survivors+=("$work/$rep.$r.log"); done
  # The replacement starts once every survivor has recovered.
  for _ in $(seq 1 300); do
    (( $(cat "${survivors[@]}" | grep -c ': recovered: generation [0-9]*, world 2') == 2 )) && break
    sleep 0.1
  done
  touch "$work/$rep.go"
  ok=1
  for i in "${!pids[@]}"; do
    # The victim ends by SIGKILL (through timeout: 137); every other member
    # (the replacement is the last pid) must succeed.
    if ((i == victim)); then wait "${pids[$i]}" || true; else wait "${pids[$i]}" || ok=0; fi
  done
  logs=("${survivors[@]}" "$work/$rep.new.log")
  why=""
  killed=$(grep -o 'killed at step [0-9]* at [0-9]*' "$work/$rep.$victim.log" | awk '{print $6}' || true)
  first=$(cat "${survivors[@]}" | grep -o 'first step after recovery done at [0-9]*' | awk '{print $7}' | sort -n | tail -1 || true)
  resumed=$(cat "${survivors[@]}" | grep -o 'recovered: generation [0-9]*, world 2, at step [0-9]*' | awk '{print $8}' | sort -u || true)
  digests=$(cat "${logs[@]}" | grep -o "state at step $steps: world 3, .* params [0-9a-f]*" | awk '{print $NF}' | sort -u || true)
  got=$(cat "${logs[@]}" | grep -o 'final test accuracy [0-9.]*' | awk '{print $4}' || true)
  if ((ok == 0)); then why="a process failed or hung"
  elif [[ -z $killed ]]; then why="rank $victim was not killed"
  elif [[ -z $first || $(wc -w <<< "$resumed") != 1 ]]; then why="the survivors did not continue at world size 2 from one commit"
  elif ! grep -q ': joined: generation' "$work/$rep.new.log"; then why="the replacement did not join"
  elif [[ $(wc -w <<< "$digests") != 1 || $(cat "${logs[@]}" | grep -c "state at step $steps: world 3") != 3 ]]; then
    why="the job did not finish at world size 3 with one set of parameters"
  elif [[ -z $got ]]; then why="no final accuracy"
  fi
  recovery_ms=$(( ${first:-0} - ${killed:-0} ))
  lost=$(( kill_at + 1 - ${resumed:-0} ))  # the steps done again: from the commit to the step that failed
  if [[ -z $why ]] && (( recovery_ms > 10000 )); then why="the survivors needed ${recovery_ms} ms (limit 10000)"; fi
  if [[ -z $why ]] && awk -v a="$got" -v b="$reference" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 1.5) }'; then
    why="final accuracy $got% is more than 1.5 points from $reference%"
  fi
  [[ -n $got ]] && accuracies+=("$got")
  printf 'rep %2d: kill rank %d after step %3d; first step after it %5d ms later; %d step(s) redone; accuracy %s%% (uninterrupted %s%%)%s\n' \
    "$rep" "$victim" "$kill_at" "$recovery_ms" "$lost" "${got:-?}" "$w3" "${why:+: FAIL: $why}"
  if [[ -n $why ]]; then
    failures=$((failures + 1))
    for f in "$work/$rep".*.log; do echo "== $f"; tail -20 "$f"; done
  fi
done

check_shm_leaks "$work/start"
((failures == 0)) || { echo "FAIL: $failures of $reps repetitions"; exit 1; }
mean=$(printf '%s\n' "${accuracies[@]}" | awk '{ s += $1 } END { printf "%.2f", s / NR }')
echo "mean final accuracy over $reps recovered runs: $mean% (uninterrupted: $w3% at world size 3${w2:+, $w2% at 2}, reference $reference%)"
awk -v a="$mean" -v b="$reference" -v t="$tolerance" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' \
  || { echo "FAIL: the mean is more than $tolerance points from the uninterrupted run"; exit 1; }
echo "all $reps repetitions recovered"
