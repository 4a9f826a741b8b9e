#!/usr/bin/env bash
# Note [reclaiming dead regions], under mpirun (which, unlike gwlaunch, does
# not clean up after a killed rank): the 3 ranks of a job SIGKILL themselves
# (none survives to close its transport, whose sweep would reclaim the
# regions: Note [a dead peer on this host] makes survivors close cleanly)
# and leave their shm regions in /dev/shm; the next gradwire process on the
# host removes rank 1's.
#   shm_reclaim.sh MPIRUN FAULT_TEST PERF
set -uo pipefail
mpirun=$1 fault_test=$2 perf=$3
pidfile=$(mktemp /tmp/gw-victim.XXXXXX)
trap 'rm -f "$pidfile"' EXIT
export GRADWIRE_OFI_PROVIDER=shm GRADWIRE_LOG_LEVEL=warn
GW_TEST_VICTIM_PID_FILE=$pidfile timeout 60 "$mpirun" --allow-run-as-root --oversubscribe -np 3 \
  -x GRADWIRE_OFI_PROVIDER -x GRADWIRE_TIMEOUT_S -x GRADWIRE_LOG_LEVEL -x GW_TEST_VICTIM_PID_FILE \
  "$fault_test" all-killed >/dev/null 2>&1
victim=$(cat "$pidfile")
if [[ -z $victim ]]; then
  echo "shm_reclaim: rank 1 did not record its pid"; exit 1
fi
left=$(ls /dev/shm | grep -c "^gw_${victim}_")
echo "shm_reclaim: the SIGKILLed rank (pid $victim) left $left region(s) in /dev/shm"
if [[ $left -eq 0 ]]; then
  echo "shm_reclaim: nothing was left behind, so this run shows nothing"; exit 1
fi
# Any gradwire process that opens the shm provider sweeps once at start; it
# leaves regions younger than 2 s alone (Note [reclaiming dead regions]).
sleep 2.5
GRADWIRE_LOG_LEVEL=info timeout 60 "$mpirun" --allow-run-as-root -np 1 -x GRADWIRE_OFI_PROVIDER \
  -x GRADWIRE_LOG_LEVEL "$perf" -b 1K -e 1K -n 1 -w 0 2>&1 | grep -i "reclaimed" || true
left=$(ls /dev/shm | grep -c "^gw_${victim}_")
if [[ $left -ne 0 ]]; then
  echo "shm_reclaim: FAIL: the next gradwire process left the dead rank's region(s) in place"
  exit 1
fi
echo "shm_reclaim: ok: the next gradwire process reclaimed them"
