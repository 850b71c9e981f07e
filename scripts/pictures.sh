#!/usr/bin/env bash
# Draws the documentation's pictures: docs/pictures/*.svg, from the sources in
# docs/pictures/src/ (matplotlib scripts and Graphviz files) and the data in
# docs/pictures/data/.
#
#   bash scripts/pictures.sh                          redraw from docs/pictures/data/
#   bash scripts/pictures.sh COMPUTE_DIR NET_DIR      take a compare.sh run first
#   bash scripts/pictures.sh - NET_DIR                (- keeps that half's data as it is)
#   PICTURES_PNG=/tmp/pictures bash scripts/pictures.sh   also PNGs there, to look at
#
# COMPUTE_DIR and NET_DIR are result directories of ../shared/peers/compare.sh
# ($PEERS_WORK/results/<stamp>/, or its compute/ or net/ subdirectory). The
# small files the pictures read are copied into docs/pictures/data/
# (compute-raw.jsonl, compute-info.txt, net-results.tsv, net-info.txt), so the
# pictures can be drawn again from the repository alone. The census of an idle
# connection (docs/pictures/data/idle-census.csv) is kept by hand, from
# docs/reactor.md.
#
# Same data, same bytes: the SVGs keep their text as text, carry no date and
# take their ids from a fixed salt. Installs python3-matplotlib and graphviz
# (Debian packages) if they are missing, as scripts/install-deps.sh does.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PIC="$ROOT/docs/pictures"
SRC="$PIC/src"
DATA="$PIC/data"

usage() { sed -n '2,21p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit "${1:-0}"; }
case "${1:-}" in -h|--help) usage 0 ;; esac
[ $# -eq 0 ] || [ $# -eq 2 ] || usage 2

# ---- tools: Debian's matplotlib (for the python3 that has it) and dot -------
has_mpl() { command -v "$1" >/dev/null && "$1" -c 'import matplotlib' 2>/dev/null; }
PY=""
for p in /usr/bin/python3 python3; do
  if has_mpl "$p"; then PY=$p; break; fi
done
need=()
[ -n "$PY" ] || need+=(python3-matplotlib)
command -v dot >/dev/null || need+=(graphviz)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing: ${need[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
fi
if [ -z "$PY" ]; then
  has_mpl /usr/bin/python3 || { echo "pictures.sh: /usr/bin/python3 cannot import matplotlib" >&2; exit 1; }
  PY=/usr/bin/python3
fi

# ---- take a compare.sh run's files ------------------------------------------
first() { for f in "$@"; do [ -f "$f" ] && { echo "$f"; return 0; }; done; return 1; }
# info.txt of a run, with its stamp (the results directory's name) first
take_info() {  # RUN_DIR OUT
  local run=$1 out=$2 info
  info=$(first "$run/info.txt" "$run/../info.txt") || info=""
  local stamp
  if [ -n "$info" ]; then stamp=$(basename "$(dirname "$(readlink -f "$info")")"); else stamp=$(basename "$(readlink -f "$run")"); fi
  { echo "stamp=$stamp"; [ -z "$info" ] || grep -E '^(date_utc|command|shoal_source|host)=' "$info"; } >"$out"
}
if [ $# -eq 2 ]; then
  mkdir -p "$DATA"
  if [ "$1" != - ]; then
    raw=$(first "$1/compute/raw.jsonl" "$1/raw.jsonl") ||
      { echo "pictures.sh: no compute/raw.jsonl in $1 (a compare.sh compute results directory?)" >&2; exit 1; }
    grep -q '"peer":"shoal"' "$raw" || { echo "pictures.sh: $raw has no shoal runs" >&2; exit 1; }
    cp "$raw" "$DATA/compute-raw.jsonl"
    take_info "$(dirname "$raw")" "$DATA/compute-info.txt"
    echo "took $raw"
  fi
  if [ "$2" != - ]; then
    tsv=$(first "$2/net/results.tsv" "$2/results.tsv") ||
      { echo "pictures.sh: no net/results.tsv in $2 (a compare.sh net results directory?)" >&2; exit 1; }
    grep -q $'^shoal[^\t]*\trps_c' "$tsv" || { echo "pictures.sh: $tsv has no wrk rounds of a shoal server" >&2; exit 1; }
    cp "$tsv" "$DATA/net-results.tsv"
    take_info "$(dirname "$tsv")" "$DATA/net-info.txt"
    echo "took $tsv"
  fi
fi
for f in compute-raw.jsonl net-results.tsv idle-census.csv; do
  [ -f "$DATA/$f" ] || { echo "pictures.sh: missing $DATA/$f (give a compare.sh run: see --help)" >&2; exit 1; }
done

# ---- draw ---------------------------------------------------------------------
cd "$SRC"
export PYTHONDONTWRITEBYTECODE=1
"$PY" peers_compute.py "$DATA" "$PIC/peers-compute.svg"
"$PY" peers_net.py "$DATA" "$PIC/peers-net.svg"
"$PY" p99_connections.py "$DATA" "$PIC/p99-connections.svg"
"$PY" idle_bytes.py "$DATA" "$PIC/idle-connection-bytes.svg"
for g in scope_cancel driver_parking; do
  out="$PIC/${g//_/-}.svg"
  dot -Tsvg "$g.dot" -o "$out"
  echo "wrote $out" >&2
  if [ -n "${PICTURES_PNG:-}" ]; then
    mkdir -p "$PICTURES_PNG"
    dot -Tpng -Gdpi=90 "$g.dot" -o "$PICTURES_PNG/${g//_/-}.png"
  fi
done
