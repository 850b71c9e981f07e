#!/usr/bin/env bash
# Installs the pinned MCP SDK and reference server (package-lock.json here)
# into WORK_DIR with npm ci, unless that lock is installed there already.
#   bash install.sh <work dir> <name for messages>
set -euo pipefail
work=$1
name=$2
here=$(cd "$(dirname "$0")" && pwd)
command -v node >/dev/null || { echo "$name: node is not installed (Node 20 is expected on the machine)"; exit 1; }
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$work/"
cd "$work"
if [ ! -x node_modules/.bin/mcp-server-everything ] || ! cmp -s package-lock.json node_modules/.package-lock.json.copy; then
  if ! npm ci --no-audit --no-fund >npm.log 2>&1; then
    echo "$name: npm ci failed: the npm registry must be reachable to install the pinned MCP packages. Its log:"
    tail -20 npm.log
    exit 1
  fi
  cp package-lock.json node_modules/.package-lock.json.copy
fi
