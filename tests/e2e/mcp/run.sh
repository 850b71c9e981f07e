#!/usr/bin/env bash
# MCP end to end (ctest label e2e): installs the pinned MCP SDK and reference
# server with npm into WORK_DIR, starts the stdio proxy in front of the server
# (through npx), and runs mcp_e2e.mjs against it; then SIGTERMs the proxy,
# which must reap everything and exit 0.
#   run.sh <stdio_proxy binary> <work dir>
set -euo pipefail
proxy_bin=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)

bash "$here/install.sh" "$work" "mcp e2e"
cp "$here/mcp_e2e.mjs" "$work/"
cd "$work"

rm -f proxy.out  # not a stale line from an earlier run in this directory
# SHOAL_TEST_EMULATOR: the emulator's words, unquoted (the aarch64 preset).
${SHOAL_TEST_EMULATOR:-} "$proxy_bin" --linger 500 --grace 500 127.0.0.1:0 npx --no-install mcp-server-everything stdio >proxy.out 2>proxy.err &
proxy=$!
cleanup() { kill -KILL "$proxy" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 100); do
  grep -q "^proxying" proxy.out 2>/dev/null && break
  sleep 0.1
done
addr=$(sed -n 's/^proxying \([^ ]*\) to.*/\1/p' proxy.out)
[ -n "$addr" ] || { echo "mcp e2e: the proxy did not start:"; cat proxy.err; exit 1; }

status=0
timeout 240 node mcp_e2e.mjs "$proxy" "${addr%:*}" "${addr##*:}" || status=$?

kill -TERM "$proxy"
for _ in $(seq 100); do kill -0 "$proxy" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$proxy" 2>/dev/null; then
  echo "mcp e2e: the proxy did not exit within 10 s of SIGTERM"
  status=1
else
  wait "$proxy" || { echo "mcp e2e: the proxy exited with $?"; status=1; }
fi
echo "mcp e2e: $(grep -c '^stdio_proxy: session' proxy.err) session log lines, e.g.:"
grep -m2 '^stdio_proxy: session' proxy.err || true
[ "$status" -eq 0 ] || { echo "mcp e2e: FAILED; the proxy's log:"; tail -40 proxy.err; }
exit "$status"
