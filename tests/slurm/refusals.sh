#!/usr/bin/env bash
# Launches that gradwire must refuse under a real Slurm, each with a clear
# error and never a wait (Note [launching under Slurm], Note [same job] in
# src/bootstrap/slurm.cpp), and two that must work; run by slurm.sh:
#
#   slurm.sh [--nodes 2] -- refusals.sh HEALTHCHECK
#
#  1. a program run in a batch script of 2 tasks without srun: refused;
#  2. a task whose SLURM_PROCID is missing: refused, naming it;
#  3. two steps of one job at once: each its own store port, both pass;
#  4. (1 node) a step whose store port another job's store holds
#     (GRADWIRE_STORE_PORT forced alike): its rank 0 cannot bind, its rank 1
#     is refused by the other job's store, and that other job goes on
#     unharmed;
#  5. (2 nodes) a step of one task in a job of two nodes: refused.
set -uo pipefail
hc=$1
out=$(mktemp -d /tmp/gw-slurm-refusals.XXXXXX)
trap 'rm -rf "$out"' EXIT
export GRADWIRE_TIMEOUT_S=20 GRADWIRE_LOG_LEVEL=warn
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
errors() { grep -hiE 'error|fail' "$@" | sort -u | head -5; }

# expect_refused NAME FILE STATUS NEEDLE...: the launch failed, quickly, and
# FILE says every NEEDLE.
expect_refused() {
  local name=$1 file=$2 status=$3 needle
  shift 3
  ((status != 0)) || fail "$name: the launch succeeded"
  for needle in "$@"; do
    grep -qF -- "$needle" "$file" || fail "$name: no '$needle' in its output"
  done
  echo "--- $name (exit $status):"
  grep -m 2 -F -- "$1" "$file" | cut -c 1-400
}

# 1. Not a task: the batch script itself.
t0=$SECONDS
sbatch -n 2 -W -o "$out/batch.out" --wrap "$hc" > /dev/null
expect_refused "batch script of 2 tasks" "$out/batch.out" $? \
  "SLURM_NTASKS=2 is set but SLURM_STEP_ID is not" "launch it with srun"

# 2. A variable srun always sets, missing.
srun -n 2 --kill-on-bad-exit=1 env -u SLURM_PROCID "$hc" > "$out/procid.out" 2>&1
expect_refused "task without SLURM_PROCID" "$out/procid.out" $? \
  "SLURM_PROCID is not set" "a task that srun started (SLURM_STEP_ID="
((SECONDS - t0 < 60)) || fail "the refusals took $((SECONDS - t0)) s: something waited"

# 3. Two steps of one job at once, each with its own store (across both
# nodes when there are two).
nodes=${GW_SLURM_NODES:-1}
cat > "$out/two_steps.sh" << EOF
#!/bin/bash
srun -N $nodes -n 2 --exact "$hc" > "$out/step_a.out" 2>&1 &
srun -N $nodes -n 2 --exact "$hc" > "$out/step_b.out" 2>&1 &
wait -n && wait -n
EOF
sbatch -N "$nodes" -n 4 -W -o "$out/two_steps.log" "$out/two_steps.sh" > /dev/null ||
  fail "two concurrent steps of one job: $(errors "$out"/step_*.out "$out/two_steps.log")"
for s in a b; do
  grep -q '"ok": true' "$out/step_$s.out" || fail "step $s did not pass: $(errors "$out/step_$s.out")"
done
echo "--- two concurrent steps of one job: both passed"

# 4. Another job's store on this step's port (one node: ss sees its ports).
if ((nodes == 1)); then
  port=$((16001 + RANDOM % 8000 * 2))  # odd: never a derived store port
  # Job A's rank 1 arrives only once job B is done, so that job A's store
  # (its rank 0, waiting for rank 1) listens all through job B's launch.
  GRADWIRE_STORE_PORT=$port srun -n 2 bash -c \
    'if [ "$SLURM_PROCID" = 1 ]; then for _ in $(seq 150); do [ -e "$1" ] && break; sleep 0.1; done; fi
     exec "$0"' "$hc" "$out/job_b.done" > "$out/job_a.out" 2>&1 &
  job_a=$!
  for _ in $(seq 100); do ss -Htln "sport = :$port" | grep -q . && break; sleep 0.1; done
  ss -Htln "sport = :$port" | grep -q . || fail "job A's store never listened on port $port"
  GRADWIRE_STORE_PORT=$port srun -n 2 "$hc" > "$out/job_b.out" 2>&1
  status=$?
  touch "$out/job_b.done"
  expect_refused "a step on another job's store port" "$out/job_b.out" $status \
    "reached the store" "of another job: rank 0 there is of Slurm job" \
    "GRADWIRE_STORE_PORT picks another port"
  wait $job_a || fail "job A was harmed by job B: $(errors "$out/job_a.out")"
  grep -q '"ok": true' "$out/job_a.out" || fail "job A did not pass: $(errors "$out/job_a.out")"
  echo "--- job A passed despite job B"
fi

# 5. One task in a job of two nodes.
if ((nodes >= 2)); then
  sbatch -N 2 -W -o "$out/one_task.out" --wrap "srun -N 1 -n 1 $hc" > /dev/null
  expect_refused "one task in a job of 2 nodes" "$out/one_task.out" $? \
    "SLURM_STEP_NUM_TASKS=1" "SLURM_JOB_NUM_NODES=2"
fi

((fails == 0)) || { echo "$fails failure(s)"; exit 1; }
echo "refusals: all passed"
