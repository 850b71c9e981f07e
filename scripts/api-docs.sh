#!/usr/bin/env bash
# Builds the API reference of the public headers (include/shoal, detail
# excluded) with Doxygen and docs/Doxyfile into build/api-docs, or the
# directory given as the first argument (relative to the repository root).
# Fails if Doxygen warns at all: every public declaration must be documented
# and every link must resolve.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v doxygen >/dev/null 2>&1; then
  # A fresh machine may have no package lists yet: update once, then retry.
  apt-get install -y -q doxygen || { apt-get update -q && apt-get install -y -q doxygen; }
fi

out=${1:-build/api-docs}
mkdir -p "$out"
warnings=$(mktemp)
trap 'rm -f "$warnings"' EXIT

# QUIET = YES: stderr carries only the warnings (WARN_LOGFILE is unset).
# Doxygen names files by absolute path: strip the root to include/shoal/...
status=0
SHOAL_API_DOCS_OUT="$out" doxygen docs/Doxyfile 2>"$warnings" || status=$?
sed -i "s|$PWD/||g" "$warnings"
if [[ $status -ne 0 ]]; then
  cat "$warnings" >&2
  echo "api-docs: doxygen failed (exit status $status)" >&2
  exit 1
fi

count=$(grep -cE ': (warning|error): ' "$warnings" || true)
cat "$warnings" >&2
if [[ $count -ne 0 || -s $warnings ]]; then
  [[ $count -ne 0 ]] || count=$(wc -l <"$warnings")
  echo "api-docs: $count Doxygen warnings on the public headers (listed above)" >&2
  exit 1
fi
echo "api-docs: $out/html/index.html"
