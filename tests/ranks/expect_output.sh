#!/usr/bin/env bash
# Passes if the command exits as expected (ok: 0, fail: non-zero) and its
# output matches every line of PATTERN (extended regexes): a failure is
# detected, and for the right reason; a warning is printed, with the right
# words.
#
#   expect_output.sh ok|fail PATTERN -- command args...
set -uo pipefail
want=$1 patterns=$2
shift 3
out=$("$@" 2>&1)
status=$?
echo "$out"
if [[ $want == ok && $status -ne 0 ]]; then
  echo "expect_output: the command failed with status $status"
  exit 1
fi
if [[ $want == fail && $status -eq 0 ]]; then
  echo "expect_output: the command succeeded"
  exit 1
fi
while IFS= read -r p; do
  [[ -z $p ]] && continue
  if ! grep -Eq -- "$p" <<<"$out"; then
    echo "expect_output: the output does not match: $p"
    exit 1
  fi
done <<<"$patterns"
echo "expect_output: ok (status $status)"
