#!/usr/bin/env bash
# Builds and runs each reproducer with g++ and clang++ (ASan), and says what
# each compiler did.   bash docs/compilers/run.sh
set -uo pipefail
cd "$(dirname "$0")"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for src in defarg.cpp braced.cpp aggregate.cpp; do
  for cxx in g++ clang++; do
    bin=$out/${src%.cpp}.$cxx
    if ! err=$("$cxx" -std=c++20 -O1 -g -fsanitize=address "$src" -o "$bin" 2>&1); then
      echo "$src, $cxx: does not compile: $(grep -m1 'error' <<<"$err")"
    elif run=$("$bin" 2>&1); then
      echo "$src, $cxx: ran correctly, printed $run"
    else
      echo "$src, $cxx: failed at run time: $(grep -m1 'ERROR' <<<"$run")"
    fi
  done
done
