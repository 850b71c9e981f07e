#!/usr/bin/env bash
# Teeth for the Relacy tests: each line of tests/relacy/mutants.txt weakens
# one ordering in a copy of a protocol's file; the test built against that
# copy must fail. A mutant that passes means the ordering is stronger than
# the test can tell (relax it, or strengthen the test); a line whose edit no
# longer applies means the code moved and the list must follow.
#   scripts/relacy-mutants.sh            (needs relacy-dev and GoogleTest)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cxx=${CXX:-g++}
caught=0
total=0
while IFS='|' read -r test file edit what; do
  [[ -z ${test// } || $test == \#* ]] && continue
  test=$(echo "$test" | xargs) file=$(echo "$file" | xargs) edit=$(echo "$edit" | xargs) what=$(echo "$what" | xargs)
  total=$((total + 1))
  dir="$work/m$total"
  mkdir -p "$dir/$(dirname "$file")"
  sed "$edit" "src/$file" > "$dir/$file"
  if cmp -s "src/$file" "$dir/$file"; then
    echo "relacy-mutants: '$edit' no longer changes src/$file ($what): update tests/relacy/mutants.txt" >&2
    exit 1
  fi
  start=$SECONDS
  "$cxx" -std=c++20 -O2 -DSHOAL_RELACY -I "$dir" -I tests/relacy -I include -I src -I . \
    "tests/relacy/$test" -lgtest -lgtest_main -pthread -o "$dir/test"
  if "$dir/test" > "$dir/log" 2>&1; then
    echo "NOT CAUGHT  $file: $what ($test)"
  else
    caught=$((caught + 1))
    failed=$(grep '^\[  FAILED  \] [A-Za-z]*\.[A-Za-z]* (' "$dir/log" | wc -l)
    echo "caught      $file: $what ($test: $failed failing, $((SECONDS - start)) s)"
  fi
done < tests/relacy/mutants.txt
echo "relacy-mutants: $caught of $total weakened orderings caught"
[[ $caught -eq $total ]]
