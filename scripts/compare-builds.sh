#!/usr/bin/env bash
# Same-run A/B of this checkout against older commits, with the peers:
# the compute harness runs every build's shoal-peer in ONE run.sh invocation
# (each reported as its own peer), and `compare.sh net` adds each older
# build's http_server through ADD_SERVERS. Needs the peers built once
# (`../shared/peers/compare.sh compute --quick` does it) and nothing else
# running while it measures.
#
#   scripts/compare-builds.sh COMMIT...            compute (REPS=5) and net
#   REPS=11 BENCHES="chan_throughput" NET=0 scripts/compare-builds.sh bb0ff66
#
# Worktrees go to $WORK/tree-<commit>, results to $WORK/results-<UTC time>.
# This checkout is measured as it is in build/release (built here first).
set -euo pipefail
cd "$(dirname "$0")/.."
[[ $# -ge 1 ]] || { echo "usage: $0 COMMIT..." >&2; exit 2; }
PEERS_WORK=${PEERS_WORK:-${TMPDIR:-/tmp}/shoal-peers}
WORK=${WORK:-${TMPDIR:-/tmp}/shoal-ab}
COMPUTE=$PEERS_WORK/compute
[[ -x $COMPUTE/run.sh && -f $COMPUTE/shoal/main.cpp ]] ||
  { echo "$0: no compute harness in $COMPUTE: run ../shared/peers/compare.sh compute --quick first" >&2; exit 1; }
mkdir -p "$WORK"
res=$WORK/results-$(date -u +%Y%m%dT%H%M%SZ)
mkdir -p "$res"

# build NAME TREE: the library and servers, installed, and a shoal-peer
# built as compute/build.sh builds it, reported as peer "shoal_NAME".
build() {
  local name=$1 tree=$2 prefix=$WORK/prefix-$1
  (cd "$tree" && cmake --preset release >/dev/null &&
    cmake --build --preset release --target shoal http_server net_idle_server >/dev/null &&
    cmake --install build/release --prefix "$prefix" >/dev/null)
  g++ -std=c++20 -O2 -DNDEBUG -pthread -I"$prefix/include" -o "$WORK/peer-$name" "$COMPUTE/shoal/main.cpp" \
    -L"$prefix/lib" -lshoal
  printf '#!/bin/bash\nset -o pipefail\n"%s" "$@" | sed '\''s/"peer": *"shoal"/"peer":"shoal_%s"/'\''\n' \
    "$WORK/peer-$name" "$name" >"$WORK/as-$name"
  chmod +x "$WORK/as-$name"
}

echo "building this checkout and $*" >&2
build this .
extra=("$WORK/as-this") servers=""
for c in "$@"; do
  sha=$(git rev-parse --short "$c")
  [[ -d $WORK/tree-$sha ]] || git worktree add -f -q "$WORK/tree-$sha" "$sha"
  build "$sha" "$WORK/tree-$sha"
  extra+=("$WORK/as-$sha")
  servers+="shoal_$sha|env SHOAL_THREADS=2 $WORK/tree-$sha/build/release/examples/http_server 127.0.0.1:{port} 1000000"$'\n'
done

echo "compute: one run.sh, REPS=${REPS:-5}" >&2
env SHOAL_THREADS=2 REPS="${REPS:-5}" EXTRA_PEERS="${extra[*]}" RAW="$res/raw.jsonl" "$COMPUTE/run.sh" \
  >"$res/report.md" 2>"$res/progress.log"
# ratios.py knows one shoal: one table per build, from the same raw lines.
for a in "${extra[@]}"; do
  name=${a##*/as-}
  { grep -v '"peer":"shoal_' "$res/raw.jsonl" || true; } >"$res/raw-$name.jsonl"
  grep "\"peer\":\"shoal_$name\"" "$res/raw.jsonl" | sed "s/\"peer\":\"shoal_$name\"/\"peer\":\"shoal\"/" \
    >>"$res/raw-$name.jsonl"
  python3 "$COMPUTE/ratios.py" "$res/raw-$name.jsonl" >"$res/ratios-$name.md"
done
echo "compute ratios: $res/ratios-*.md (this = the checkout)" >&2

if [[ ${NET:-1} != 0 ]]; then
  echo "net: compare.sh net with the older servers added" >&2
  ADD_SERVERS="${servers%$'\n'}" ../shared/peers/compare.sh net --build build/release >"$res/net.log" 2>&1
  echo "net ratios: $(grep -o '/[^ ]*/ratios.md' "$res/net.log" | tail -1)" >&2
fi
