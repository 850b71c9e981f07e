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
flags=(-std=c++20 -O1 -DSHOAL_RELACY)
includes=(-I tests/relacy -I include -I src -I .)
# What relacy_test compiles besides the test sources (tests/CMakeLists.txt).
shared=(tests/relacy/harness.cpp src/scope/cancel_protocol.cpp src/scope/join_case.cpp src/sync/wait_queue.cpp
  src/runtime/raise.cpp)
mkdir -p "$work/base"
for cpp in "${shared[@]}"; do
  "$cxx" "${flags[@]}" "${includes[@]}" -c "$cpp" -o "$work/base/$(basename "$cpp").o"
done
trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }
caught=0
total=0
gaps=0
while IFS='|' read -r test file edit what; do
  [[ -z ${test// } || $test == \#* ]] && continue
  test=$(trim "$test") file=$(trim "$file") edit=$(trim "$edit") what=$(trim "$what")
  gap=0
  if [[ $test == \?* ]]; then  # a known gap: run and reported, not required
    gap=1
    test=$(trim "${test#\?}")
  fi
  total=$((total + 1))
  dir="$work/m$total"
  mkdir -p "$dir/$(dirname "$file")"
  sed "$edit" "src/$file" > "$dir/$file"
  if cmp -s "src/$file" "$dir/$file"; then
    echo "relacy-mutants: '$edit' no longer changes src/$file ($what): update tests/relacy/mutants.txt" >&2
    exit 1
  fi
  start=$SECONDS
  # A mutated .cpp replaces its original; a mutated header shadows it (-I
  # first) in every translation unit that includes it, which is rebuilt.
  objects=()
  for cpp in "tests/relacy/$test" "${shared[@]}"; do
    src=$cpp
    [[ $cpp == "src/$file" ]] && src="$dir/$file"
    if [[ $cpp == "tests/relacy/$test" || $src != "$cpp" ]] ||
        "$cxx" "${flags[@]}" "${includes[@]}" -MM "$cpp" | tr -d '\\\n' | grep -qw "src/$file"; then
      "$cxx" "${flags[@]}" -I "$dir" "${includes[@]}" -c "$src" -o "$dir/$(basename "$cpp").o"
      objects+=("$dir/$(basename "$cpp").o")
    else
      objects+=("$work/base/$(basename "$cpp").o")
    fi
  done
  "$cxx" "${objects[@]}" -lgtest -lgtest_main -pthread -o "$dir/test"
  if "$dir/test" > "$dir/log" 2>&1; then
    if [[ $gap -eq 1 ]]; then
      gaps=$((gaps + 1))
      echo "known gap   $file: $what ($test: not caught yet)"
    else
      echo "NOT CAUGHT  $file: $what ($test)"
    fi
  else
    [[ $gap -eq 1 ]] && echo "relacy-mutants: a known gap is caught now: drop its '?' in tests/relacy/mutants.txt"
    caught=$((caught + 1))
    failed=$(grep '^\[  FAILED  \] [A-Za-z]*\.[A-Za-z]* (' "$dir/log" | wc -l)
    echo "caught      $file: $what ($test: $failed failing, $((SECONDS - start)) s)"
  fi
done < tests/relacy/mutants.txt
echo "relacy-mutants: $caught of $total weakened orderings caught ($gaps known gaps, listed with '?')"
[[ $((caught + gaps)) -eq $total ]]
