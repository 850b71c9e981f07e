#!/usr/bin/env bash
# Teeth for the Relacy tests: each line of tests/relacy/mutants.txt weakens
# one ordering in a copy of a protocol's file; the tests of that line's test
# source, built against the copy, must fail. A mutant that passes means the
# ordering is stronger than the test can tell (relax it, or strengthen the
# test); a line whose edit no longer applies means the code moved and the
# list must follow.
#   scripts/relacy-mutants.sh [PATTERN]   (only the lines that contain PATTERN)
# Needs relacy-dev and GoogleTest. SHOAL_RELACY_JOBS mutants run at a time
# (default: the number of cores).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pattern=${1:-}
jobs=${SHOAL_RELACY_JOBS:-$(nproc)}
cxx=${CXX:-g++}
# -flifetime-dse=0: g++ otherwise drops the stores by which Relacy's
# destructors mark an object dead, and a touch of freed memory goes unseen.
flags=(-std=c++20 -O1 -flifetime-dse=0 -DSHOAL_RELACY)
includes=(-I tests/relacy -I include -I src -I .)
mapfile -t sources < <(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' tests/relacy/sources.txt)
mapfile -t shared < <(printf '%s\n' "${sources[@]}" | grep -v '_relacy_test\.cpp$')
obj() { echo "$(echo "${1%.cpp}" | tr / _).o"; }

# Relacy and GoogleTest are most of what each source parses: precompiled
# once and included first. They never change: a mutant's file may not be
# among what the header includes (checked below).
mkdir -p "$work/pch" "$work/base"
printf '#include <gtest/gtest.h>\n#include "shoal_relacy_shim.hpp"\n' > "$work/pch/relacy_pch.hpp"
"$cxx" "${flags[@]}" "${includes[@]}" -MD -MF "$work/pch/relacy_pch.d" -x c++-header "$work/pch/relacy_pch.hpp" \
  -o "$work/pch/relacy_pch.hpp.gch"
flags+=(-include "$work/pch/relacy_pch.hpp" -Winvalid-pch)

# Every source once, with the headers it includes (-MD), as make would.
build_base() {
  local o
  o=$(obj "$1")
  "$cxx" "${flags[@]}" "${includes[@]}" -MD -MF "$work/base/${o%.o}.d" -c "$1" -o "$work/base/$o"
}
for src in "${sources[@]}"; do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n; done
  build_base "$src" &
done
wait
for src in "${sources[@]}"; do
  [[ -f $work/base/$(obj "$src") ]] || { echo "relacy-mutants: $src does not build" >&2; exit 1; }
done
# What each test links of the shared sources: they go in an archive, and the
# linker's map says which members a test pulls in. A mutant rebuilds only
# those (the rest are not in its binary).
shared_objects=()
for src in "${shared[@]}"; do shared_objects+=("$work/base/$(obj "$src")"); done
ar rcs "$work/base/shared.a" "${shared_objects[@]}"
members() {  # members <test source>: the shared sources its binary holds
  local o map
  o=$(obj "tests/relacy/$1")
  map="$work/base/${o%.o}.map"
  "$cxx" "$work/base/$o" "$work/base/shared.a" -lgtest -lgtest_main -pthread -o /dev/null -Wl,-Map,"$map"
  for src in "${shared[@]}"; do
    if sed -n '1,/^Merging/p' "$map" | grep -q "^$work/base/shared.a($(obj "$src"))"; then echo "$src"; fi
  done > "$work/base/${o%.o}.members"
}
for test in $(cut -d'|' -f1 tests/relacy/mutants.txt | sed -e 's/#.*//' -e 's/[?[:space:]]//g' | sort -u); do
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n; done
  members "$test" &
done
wait

trim() { local s=$1; s=${s#"${s%%[![:space:]]*}"}; echo "${s%"${s##*[![:space:]]}"}"; }

# One mutant: $1 its number, then test source, file (from the root, or under
# src/), sed edit, what.
run_mutant() {
  local n=$1 test=$2 path=$3 edit=$4 what=$5 gap=0 dir="$work/m$1" start=$SECONDS file
  [[ $path == src/* || $path == include/* ]] || path="src/$path"
  file=${path#*/}  # where the copy goes: first on the include path
  if [[ $test == \?* ]]; then  # a known gap: run and reported, not required
    gap=1
    test=$(trim "${test#\?}")
  fi
  mkdir -p "$dir/$(dirname "$file")" "$dir/$(dirname "$path")"
  sed "$edit" "$path" > "$dir/$file"
  cp "$dir/$file" "$dir/$path"  # for an include spelled from the root ("src/runtime/...")
  if grep -q "$path\b" "$work/pch/relacy_pch.d"; then
    echo broken > "$dir/result"
    echo "relacy-mutants: $path is in the precompiled header, which a mutant cannot change ($what)"
    return
  fi
  if cmp -s "$path" "$dir/$file"; then
    echo "stale" > "$dir/result"
    echo "relacy-mutants: '$edit' no longer changes $path ($what): update tests/relacy/mutants.txt"
    return
  fi
  # The binary is the line's test source and the shared sources it pulls in
  # (not the other tests: an inline function left unmutated in one of them
  # could be the copy the linker keeps). A mutated .cpp replaces its
  # original; a mutated header shadows it (-I first) in every source that
  # includes it, which is rebuilt. The archive last: what a mutant newly
  # needs (none does yet) still links.
  local objects=() src o built=1 test_o linked
  test_o=$(obj "tests/relacy/$test")
  mapfile -t linked < "$work/base/${test_o%.o}.members"
  if [[ $path == *.cpp ]] && ! printf '%s\n' "${linked[@]}" | grep -qx "$path"; then
    echo broken > "$dir/result"
    echo "relacy-mutants: $test does not link $path ($what): name a test that runs it in tests/relacy/mutants.txt"
    return
  fi
  for src in "tests/relacy/$test" "${linked[@]}"; do
    o=$(obj "$src")
    if [[ $src == "$path" ]]; then
      "$cxx" "${flags[@]}" "${includes[@]}" -c "$dir/$file" -o "$dir/$o" || built=0
      objects+=("$dir/$o")
    elif grep -q "$path\b" "$work/base/${o%.o}.d"; then
      "$cxx" "${flags[@]}" -I "$dir" "${includes[@]}" -c "$src" -o "$dir/$o" || built=0
      objects+=("$dir/$o")
    else
      objects+=("$work/base/$o")
    fi
  done
  objects+=("$work/base/shared.a")
  # A mutant that does not build tests nothing: it is an error, never "caught".
  if [[ $built -eq 0 ]] || ! "$cxx" "${objects[@]}" -lgtest -lgtest_main -pthread -o "$dir/test"; then
    echo broken > "$dir/result"
    echo "relacy-mutants: '$edit' on $path does not build ($what): update tests/relacy/mutants.txt"
    return
  fi
  if "$dir/test" --gtest_fail_fast > "$dir/log" 2>&1; then
    if [[ $gap -eq 1 ]]; then
      echo gap > "$dir/result"
      echo "known gap   $file: $what ($test: not caught yet)"
    else
      echo missed > "$dir/result"
      echo "NOT CAUGHT  $file: $what ($test)"
    fi
  else
    echo caught > "$dir/result"
    [[ $gap -eq 1 ]] && echo "relacy-mutants: a known gap is caught now: drop its '?' in tests/relacy/mutants.txt"
    local failed
    failed=$(grep -c '^\[  FAILED  \] [A-Za-z]*\.[A-Za-z]* (' "$dir/log" || true)
    echo "caught      $file: $what ($test: $failed failing, $((SECONDS - start)) s)"
  fi
}

total=0
while IFS='|' read -r test file edit what; do
  [[ -z ${test// } || $test == \#* ]] && continue
  [[ -n $pattern && "$test|$file|$edit|$what" != *"$pattern"* ]] && continue
  total=$((total + 1))
  while [[ $(jobs -rp | wc -l) -ge $jobs ]]; do wait -n || true; done
  run_mutant "$total" "$(trim "$test")" "$(trim "$file")" "$(trim "$edit")" "$(trim "$what")" &
done < tests/relacy/mutants.txt
wait
count() { cat "$work"/m*/result 2>/dev/null | grep -cx "$1" || true; }
caught=$(count caught) gaps=$(count gap) missed=$(count missed) stale=$(count stale) broken=$(count broken)
echo "relacy-mutants: $caught of $total weakened orderings caught ($gaps known gaps, listed with '?')"
[[ $caught -eq $((total - gaps)) && $missed -eq 0 && $stale -eq 0 && $broken -eq 0 ]]
