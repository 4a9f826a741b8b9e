#!/usr/bin/env bash
# A member that hangs and comes back (issue 20; Note [elastic generations]):
# rank 2 of 3 is SIGSTOPped mid-training. The two others must continue at
# world size 2 (after the deadline, GRADWIRE_TIMEOUT_S=5, and the settle
# time: rank 2 did not exit), as a majority of generation 0. When rank 2 is
# SIGCONTed its collective fails, it finds generation 1 formed without it,
# and it must neither train apart (it is alone: no majority) nor hang: it
# joins the others at their next commit as a newcomer, receiving their
# state. All three must finish with the same parameters. Then a process
# started after the job finished must fail at once (ElasticGroup::finish),
# and nothing may be left in /dev/shm.
#   elastic_hang.sh EXAMPLE WORKDIR
set -euo pipefail
source "$(dirname "$0")/shm_leaks.sh"
program=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
touch "$work/start"
export GRADWIRE_TIMEOUT_S=5 GRADWIRE_LOG_LEVEL=${GRADWIRE_LOG_LEVEL:-warn}
common=(--epochs 4 --limit 12000 --threads 1)
pids=()
cleanup() { for p in "${pids[@]}"; do kill -CONT "$p" 2> /dev/null || true; kill -9 "$p" 2> /dev/null || true; done; }
trap cleanup EXIT
for r in 0 1 2; do
  GRADWIRE_STORE_DIR="$work/store" RANK=$r WORLD_SIZE=3 "$program" "${common[@]}" > "$work/$r.log" 2>&1 &
  pids+=($!)
done
wait_for() {  # pattern files...: up to 60 s
  local pattern=$1
  shift
  for _ in $(seq 1 600); do cat "$@" | grep -q "$pattern" && return 0; sleep 0.1; done
  echo "FAIL: '$pattern' did not appear"; for f in "$work"/*.log; do echo "== $f"; cat "$f"; done; exit 1
}
wait_for "rank 2: started" "$work/2.log"
sleep 1.5
kill -STOP "${pids[2]}"
echo "rank 2 (pid ${pids[2]}) stopped"
wait_for "recovered: generation 1, world 2" "$work/0.log"
wait_for "recovered: generation 1, world 2" "$work/1.log"
sleep 1
kill -CONT "${pids[2]}"
echo "rank 2 continued"
ok=1
for p in "${pids[@]}"; do timeout 120 tail --pid="$p" -f /dev/null || ok=0; wait "$p" || ok=0; done
((ok)) || { for f in "$work"/*.log; do echo "== $f"; cat "$f"; done; echo "FAIL: a process failed or hung"; exit 1; }
grep -h "generation\|state at step" "$work"/*.log
grep -q "recovered: generation [0-9]*, world 3" "$work/2.log" \
  || { cat "$work/2.log"; echo "FAIL: rank 2 did not rejoin the others"; exit 1; }
digests=$(cat "$work"/[012].log | grep -o "state at step 500: world 3, .* params [0-9a-f]*" | awk '{print $NF}' | sort -u || true)
[[ $(wc -w <<< "$digests") == 1 && $(cat "$work"/[012].log | grep -c "state at step 500: world 3") == 3 ]] \
  || { echo "FAIL: not one set of parameters at world size 3 on every member"; exit 1; }
echo "rank 2 rejoined; all three ended with parameters $digests"
# Too late to join: Aborted at once, not a wait for the join timeout.
start=$SECONDS
if GRADWIRE_STORE_DIR="$work/store" RANK=0 WORLD_SIZE=3 timeout 60 "$program" "${common[@]}" > "$work/late.log" 2>&1; then
  echo "FAIL: a process started after the job finished succeeded"; exit 1
fi
grep -q "the job finished" "$work/late.log" || { cat "$work/late.log"; echo "FAIL: no clear error for a late process"; exit 1; }
echo "a late process failed after $((SECONDS - start)) s: $(grep -o 'elastic: the job finished.*' "$work/late.log" | head -1)"
check_shm_leaks "$work/start"
