# Sourced by the kill and restart tests: fails the test if a gradwire
# process that is gone left its region in /dev/shm. Only regions newer than
# the file $1 (the test's start) whose owner pid is dead count: other tests
# may run beside this one.
check_shm_leaks() {
  local leaked=() f pid
  for f in $(find /dev/shm -maxdepth 1 -name 'gw_*' -newer "$1" 2> /dev/null); do
    pid=$(basename "$f" | cut -d_ -f2)
    kill -0 "$pid" 2> /dev/null || leaked+=("$f")
  done
  if (( ${#leaked[@]} )); then echo "FAIL: left in /dev/shm: ${leaked[*]}"; exit 1; fi
  echo "nothing left in /dev/shm"
}
