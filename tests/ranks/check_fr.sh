#!/usr/bin/env bash
# Runs a multi-rank failure scenario with a fresh flight-recorder directory,
# then gradwire-fr on the dumps, and checks its diagnosis.
#
#   check_fr.sh GRADWIRE_FR PATTERN -- gwlaunch args...
#
# Passes if the launch succeeded (every rank saw the expected error) and
# every line of PATTERN (an extended regex per line, "" = no check) matches
# the diagnosis. Leaves no process behind: gwlaunch kills ranks at its deadline.
set -uo pipefail
fr_tool=$1 patterns=$2
shift 3
dir=$(mktemp -d /tmp/gradwire-fr-test.XXXXXX)
trap 'rm -rf "$dir"' EXIT
export GRADWIRE_FR_DIR=$dir
"$@"
status=$?
if [[ $status -ne 0 ]]; then
  echo "check_fr: the launch failed with status $status"
  exit 1
fi
[[ -z $patterns ]] && exit 0
out=$("$fr_tool" "$dir")
echo "$out"
while IFS= read -r p; do
  [[ -z $p ]] && continue
  if ! grep -Eq -- "$p" <<<"$out"; then
    echo "check_fr: the diagnosis does not match: $p"
    exit 1
  fi
done <<<"$patterns"
echo "check_fr: ok"
