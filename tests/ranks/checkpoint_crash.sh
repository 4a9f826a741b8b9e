#!/usr/bin/env bash
# Kill during a checkpoint write at 20 random points: 2 ranks save
# checkpoints back to back (tests/ranks/checkpoint_writer.cpp), each round
# continuing after the newest one; after a random delay every process of the
# job gets SIGKILL; a fresh job must then load the last complete checkpoint:
# every byte checked, its step the last one reported committed or the one
# after it (killed between its manifest's rename and the report). Then a
# 3-rank job must refuse the 2-rank checkpoint.
#
#   checkpoint_crash.sh GWLAUNCH WRITER WORKDIR [ROUNDS]
set -euo pipefail
gwlaunch=$1 writer=$2 work=$3 rounds=${4:-20}
rm -rf "$work"
mkdir -p "$work"
previous=0  # the step loaded after the last round
for round in $(seq 1 "$rounds"); do
  log="$work/write-$round.log"
  # Its own session, so that one kill reaches the launcher and both ranks.
  setsid "$gwlaunch" -n 2 --timeout 120 -- "$writer" write "$work/ckpt" 4 > "$log" 2>&1 &
  pid=$!
  # Random points across several saves (each a few tens of ms here).
  sleep "$(awk -v s="$RANDOM" 'BEGIN { srand(s); printf "%.3f", 0.3 + rand() * 1.2 }')"
  kill -KILL -- "-$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  committed=$( (grep -o 'committed [0-9]*' "$log" || true) | tail -1 | awk '{print $2}')
  committed=${committed:-$previous}
  out=$("$gwlaunch" -n 2 --timeout 120 -- "$writer" verify "$work/ckpt" 2>&1) || {
    echo "round $round: verify failed after a kill (last committed $committed):"; echo "$out"; exit 1; }
  loaded=$(grep -o 'loaded [0-9a-z]*' <<< "$out" | awk '{print $2}' || true)
  [[ -n $loaded ]] || { echo "round $round: verify printed no 'loaded' line:"; echo "$out"; exit 1; }
  if [[ $loaded == none ]]; then
    [[ $committed == 0 ]] || { echo "round $round: nothing loaded, $committed was committed"; exit 1; }
    loaded=0
  elif (( loaded != committed && loaded != committed + 1 )); then
    echo "round $round: loaded step $loaded, but the last committed was $committed"; exit 1
  fi
  previous=$loaded
  echo "round $round: killed after commit $committed, loaded ${loaded}"
done
echo "every restart loaded the last complete checkpoint"
# A job of another size is refused, on every rank, with the reason.
if out=$("$gwlaunch" -n 3 --timeout 120 -- "$writer" verify "$work/ckpt" 2>&1); then
  echo "a 3-rank job loaded a 2-rank checkpoint:"; echo "$out"; exit 1
fi
n=$(grep -c "written by 2 ranks and this job has 3" <<< "$out" || true)
[[ $n -ge 3 ]] || { echo "expected the world-size error on 3 ranks:"; echo "$out"; exit 1; }
echo "a 3-rank job is refused: $(grep -m1 -o 'written by 2 ranks.*' <<< "$out")"
