#!/usr/bin/env bash
# Elastic training across emulated hosts on etcd (README "Elastic training
# across hosts with etcd"). Network namespaces on a switch (netns_hosts.sh):
# etcd on a host of its own, three training hosts of one rank each, every
# host's programs in pid and UTS namespaces of their own. The job runs
# tests/etcd/elastic_worker (exact integer training, checked against a
# serial run at the end) with min 2, max 3 members. REPS times:
#   a fresh job starts on hosts A, B, C; at a random step a random host
#   dies: its link is cut, then every process on it is SIGKILLed. The two
#   survivors must fail their collective with PeerLost naming the lost rank
#   ("stopped answering heartbeats", Note [heartbeats between hosts]) within
#   DETECT_MS (2000) of the kill, and complete their next step within
#   CONTINUE_MS (3000); a replacement host then starts and must join; the
#   job must finish at world size 3 with the exact parameters on every
#   member; no process may outlive its repetition.
# Prints one line per repetition and the median and maximum of both times
# (BENCHMARKS.md's figures).
#   hosts.sh WORKER [REPS]      (REPS: default $ETCD_HOSTS_REPS, else 2)
set -uo pipefail
here=$(dirname "$0")
source "$here/etcd.sh"
source "$here/netns_hosts.sh"
worker=$1 reps=${2:-${ETCD_HOSTS_REPS:-2}}
detect_ms=${DETECT_MS:-2000} continue_ms=${CONTINUE_MS:-3000}
steps=${STEPS:-200}
etcd_session host_kill switch_down
switch_up "gwe$$"
host_add etcd 10.81.0.100
etcd_start one "$tmp" http://10.81.0.100:2379 http://10.81.0.100:2380 \
  one=http://10.81.0.100:2380 "${SWITCH_PREFIX}etcd"
ETCD_NS=${SWITCH_PREFIX}etcd etcd_wait http://10.81.0.100:2379 || { cat "$tmp/one.log"; exit 1; }
now_ms() { date +%s%3N; }

# start_host NAME ADDR PREFIX LOG: a host with one worker.
start_host() {
  local name=$1 addr=$2 prefix=$3 log=$4
  host_add "$name" "$addr"
  host_run "$name" "$log" env GRADWIRE_ETCD_ENDPOINTS=http://10.81.0.100:2379 \
    GRADWIRE_ETCD_PREFIX="$prefix" GRADWIRE_ELASTIC_MIN_SIZE=2 GRADWIRE_ELASTIC_MAX_SIZE=3 \
    GRADWIRE_OFI_IFACE=gw0 GRADWIRE_HOST_ID="$name" GRADWIRE_TIMEOUT_S=20 \
    GRADWIRE_LOG_LEVEL=warn timeout -s KILL 120 "$worker" --steps "$steps" --step-ms 20
  pids+=("$HOST_PID")
}
wait_for() {  # wait_for SECONDS COMMAND...: until COMMAND succeeds
  local limit=$1 t0=$SECONDS
  shift
  until "$@"; do ((SECONDS - t0 < limit)) || return 1; sleep 0.05; done
}
count_in() { cat "${@:2}" 2> /dev/null | grep -c -- "$1"; }
# at_least N PATTERN FILES...: PATTERN occurs N times in FILES (for
# wait_for, which must count again on every try).
at_least() { (($(count_in "${@:2}") >= $1)); }

RANDOM=${SEED:-$$}
detections=() continues=()
for rep in $(seq 1 "$reps"); do
  prefix=/gwhosts-$$-$rep/ names=("a$rep" "b$rep" "c$rep") logs=()
  pids=()
  for i in 0 1 2; do
    logs+=("$tmp/$rep.${names[i]}")
    start_host "${names[i]}" "10.81.$rep.$((i + 1))" "$prefix" "${logs[i]}"
  done
  wait_for 30 at_least 3 '^step 1 done' "${logs[@]}" ||
    { tail -n 5 "${logs[@]}"; fail "rep $rep: the job did not start on 3 hosts"; }
  kill_step=$((10 + RANDOM % (steps - 80))) victim=$((RANDOM % 3))
  wait_for 60 grep -q "^step $kill_step done" "${logs[$(((victim + 1) % 3))]}" ||
    fail "rep $rep: step $kill_step never came"
  rank=$(grep -o 'joined: generation 0, world 3, rank [0-9]*' "${logs[victim]}" | awk '{print $NF}')
  t0=$(now_ms)
  host_cut "${names[victim]}"
  host_kill "${pids[victim]}"
  survivors=()
  for i in 0 1 2; do ((i == victim)) || survivors+=("${logs[i]}"); done
  wait_for 30 at_least 2 '^first step after recovery' "${survivors[@]}" ||
    { tail -n 20 "${survivors[@]}"; fail "rep $rep: the survivors did not continue"; }
  new="r$rep"
  start_host "$new" "10.81.$rep.4" "$prefix" "$tmp/$rep.$new"
  ok=1
  for i in 0 1 2 3; do
    ((i == victim)) && { wait "${pids[i]}" 2> /dev/null; continue; }
    wait "${pids[i]}" || ok=0
  done
  all=("${survivors[@]}" "$tmp/$rep.$new")
  why=""
  det=() cont=()
  for log in "${survivors[@]}"; do
    line=$(grep -m1 '^generation [0-9]* failed at' "$log")
    t1=$(awk '{print $5}' <<< "${line%%:*}")
    t2=$(grep -m1 '^first step after recovery done at' "$log" | awk '{print $NF}')
    det+=($((t1 - t0)))
    cont+=($((t2 - t0)))
    grep -q "PeerLost.*rank $rank .*stopped answering heartbeats" <<< "$line" ||
      why="a survivor's error does not name rank $rank as lost: ${line:0:300}"
  done
  if ((ok == 0)); then why="a process failed or hung"
  elif ! grep -q '^joined: generation' "$tmp/$rep.$new"; then why="the replacement did not join"
  elif (( $(count_in '^final: step .*, world 3,' "${all[@]}") != 3 )); then
    why="the job did not finish at world size 3 on every member"
  fi
  for v in "${det[@]}"; do ((v <= detect_ms)) || why="${why:-detection took $v ms (limit $detect_ms)}"; done
  for v in "${cont[@]}"; do ((v <= continue_ms)) || why="${why:-the next step came $v ms after the kill (limit $continue_ms)}"; done
  left=$(pgrep -f "^timeout -s KILL 120 $worker" | wc -l)
  ((left == 0)) || why="${why:-$left worker(s) left running}"
  printf 'rep %2d: host %s (rank %s) lost after step %3d: PeerLost after %s ms, next step after %s ms; replacement joined%s\n' \
    "$rep" "${names[victim]}" "$rank" "$kill_step" "${det[*]}" "${cont[*]}" "${why:+: FAIL: $why}"
  if [[ -n $why ]]; then
    for f in "${logs[@]}" "$tmp/$rep.$new"; do echo "== $f"; grep -v '^step ' "$f" | tail -15; done
    exit 1
  fi
  detections+=("${det[@]}")
  continues+=("$(printf '%s\n' "${cont[@]}" | sort -n | tail -1)")
  for n in "${names[@]}" "$new"; do host_del "$n"; done
done
stats() { sort -n | awk '{ v[NR] = $1 } END { printf "median %d ms, max %d ms", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2, v[NR] }'; }
echo "lost host to PeerLost on each survivor ($((${#detections[@]})) survivors): $(printf '%s\n' "${detections[@]}" | stats)"
echo "lost host to the survivors' next step ($reps kills): $(printf '%s\n' "${continues[@]}" | stats)"
echo "all $reps repetitions: survivors continued, a replacement joined, nothing left running"
