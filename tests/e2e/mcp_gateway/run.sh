#!/usr/bin/env bash
# examples/mcp_gateway end to end (ctest label e2e): the MCP SDK's client
# against the gateway running tool_server.mjs (one child per session), the
# same through mcp-remote, and
# curl over h2c; the limits on a second gateway; backpressure against a
# child whose writes block; server-everything as the child; curl over TLS
# (h2 by ALPN); a gateway killed with SIGKILL. Each gateway but the last is
# SIGTERMed and must reap every child and exit 0. Uses the pinned packages
# that tests/e2e/mcp installs.
#   run.sh <mcp_gateway binary> <work dir>
set -euo pipefail
gateway_bin=$1
work=$2
here=$(cd "$(dirname "$0")" && pwd)

bash "$here/../mcp/install.sh" "$work" "mcp gateway e2e"
cp "$here/tool_server.mjs" "$here/flood_server.py" "$here/gateway_e2e.mjs" "$work/"
cd "$work"

status=0
: >gw.err
# Starts `mcp_gateway "$@"` and waits for its "serving" line; sets gw and
# url. gw.out is removed here, not truncated by the background job's
# redirection: that happens in the child, after the parent may already have
# read the last gateway's line.
launch() {
  rm -f gw.out
  # SHOAL_TEST_EMULATOR: the emulator's words, unquoted (the aarch64 preset).
  ${SHOAL_TEST_EMULATOR:-} "$gateway_bin" "$@" >gw.out 2>>gw.err &
  gw=$!
  for _ in $(seq 100); do
    grep -q "^mcp_gateway: serving" gw.out 2>/dev/null && break
    kill -0 "$gw" 2>/dev/null || break
    sleep 0.1
  done
  url=$(sed -n 's/^mcp_gateway: serving \([^ ,]*\),.*/\1/p' gw.out 2>/dev/null)
  [ -n "$url" ] || { echo "mcp gateway e2e: the gateway did not start:"; cat gw.err; kill -KILL "$gw" 2>/dev/null; exit 1; }
}
# A gateway with "$@" before the address, running tool_server.mjs.
start() { launch "$@" 127.0.0.1:0 -- node tool_server.mjs; }
# SIGTERMs the gateway: it must exit 0 within 10 s, leaving no child.
stop() {
  local kids
  kids=$(pgrep -P "$gw" || true)
  kill -TERM "$gw"
  for _ in $(seq 100); do kill -0 "$gw" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$gw" 2>/dev/null; then
    echo "FAIL the gateway did not exit within 10 s of SIGTERM"; kill -KILL "$gw"; status=1
  elif ! wait "$gw"; then
    echo "FAIL the gateway exited with $? after SIGTERM"; status=1
  else
    echo "ok   SIGTERM: the gateway exited 0"
  fi
  for k in $kids; do
    if kill -0 "$k" 2>/dev/null; then echo "FAIL child $k outlived the gateway: $(ps -o pid,ppid,stat,args -p "$k" | tail -1)"; status=1; fi
  done
}
trap 'kill -KILL "${gw:-}" 2>/dev/null || true' EXIT

init='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'
# One session with curl over the given HTTP version flags: initialize,
# initialized, an echo, DELETE; and /metrics. Checks each answer.
curl_session() {  # curl_session <name> <curl flags...>
  local name=$1 sid
  shift
  local post=(curl -s "$@" -D head.txt -o body.txt -H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
  "${post[@]}" --data "$init" "$url"
  sid=$(tr -d '\r' <head.txt | sed -n 's/^mcp-session-id: //Ip')
  if ! grep -q '^HTTP/2 200' head.txt || [ -z "$sid" ] || ! grep -q protocolVersion body.txt; then
    echo "FAIL $name: initialize: $(head -1 head.txt) $(head -c 200 body.txt)"; status=1; return
  fi
  local h=(-H "mcp-session-id: $sid" -H 'mcp-protocol-version: 2025-06-18')
  "${post[@]}" "${h[@]}" --data '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$url"
  grep -q '^HTTP/2 202' head.txt || { echo "FAIL $name: initialized: $(head -1 head.txt)"; status=1; }
  "${post[@]}" "${h[@]}" --data '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"text":"over h2"}}}' "$url"
  grep -q 'over h2' body.txt || { echo "FAIL $name: echo: $(head -c 200 body.txt)"; status=1; }
  curl -s "$@" -o /dev/null -w '%{http_code} %{http_version}' -X DELETE "${h[@]}" "$url" >code.txt
  [ "$(cat code.txt)" = "200 2" ] || { echo "FAIL $name: DELETE: $(cat code.txt)"; status=1; }
  curl -s "$@" "${url%/mcp}/metrics" >metrics.txt
  grep -q '^mcp_gateway_sessions_total [1-9]' metrics.txt || { echo "FAIL $name: /metrics: $(head -c 200 metrics.txt)"; status=1; }
  echo "ok   $name: initialize, a notification (202), a call, DELETE and /metrics"
}

# SHOAL_E2E_HTTP2 / SHOAL_E2E_TLS (ctest sets them): 0 where the gateway was
# built without shoal::http2 / shoal::tls (no nghttp2 or OpenSSL for the target).
start --keepalive 1 --abandoned-timeout 1 --metrics
if [ "${SHOAL_E2E_HTTP2:-1}" = 1 ]; then
  curl_session "HTTP/2 (h2c, curl)" --http2-prior-knowledge
else
  echo "skip HTTP/2 (h2c, curl): the gateway was built without shoal::http2"
fi
open_at_exit() {  # a session left open: SIGTERM must end it too
  node -e "
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const c = new Client({ name: 'left-open', version: '1' });
    await c.connect(new StreamableHTTPClientTransport(new URL('$url')));
    console.log('left open');
    process.exit(0);" --input-type=module
}
timeout 120 node gateway_e2e.mjs "$gw" "$url" main || status=1
timeout 120 node gateway_e2e.mjs "$gw" "$url" remote || status=1
open_at_exit || status=1
stop

echo "e2e-token-$$" >token
start --max-sessions 1 --max-message 2000 --token-file token --idle-timeout 1
E2E_TOKEN="e2e-token-$$" timeout 120 node gateway_e2e.mjs "$gw" "$url" limits || status=1
stop

# Backpressure, against a child whose writes block.
launch 127.0.0.1:0 -- python3 flood_server.py
timeout 120 node gateway_e2e.mjs "$gw" "$url" backpressure || status=1
stop

# The reference server as the child (npx: a process tree per session).
launch 127.0.0.1:0 -- npx --no-install mcp-server-everything stdio
timeout 120 node gateway_e2e.mjs "$gw" "$url" everything || status=1
stop

# TLS: h2 by ALPN.
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout key.pem -out cert.pem -days 2 \
  -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 >/dev/null 2>&1
if [ "${SHOAL_E2E_TLS:-1}" = 1 ] && [ "${SHOAL_E2E_HTTP2:-1}" = 1 ]; then
  start --tls cert.pem key.pem --metrics
  curl_session "TLS (h2 by ALPN, curl)" --http2 --cacert cert.pem
  stop
else
  echo "skip TLS (h2 by ALPN, curl): the gateway was built without shoal::tls or shoal::http2"
fi

# A gateway killed with SIGKILL: its children die with it.
start
rm -f hold.out
node gateway_e2e.mjs "$gw" "$url" hold >hold.out &
holder=$!
for _ in $(seq 150); do grep -q '^ready' hold.out 2>/dev/null && break; sleep 0.1; done
kid=$(sed -n 's/^pid=//p' hold.out)
kill -USR1 "$gw"  # the task dump names each session's task
for _ in $(seq 50); do grep -q "MCP session [0-9a-f]* (pid $kid)" gw.err && break; sleep 0.1; done
if grep -q "MCP session [0-9a-f]* (pid $kid)" gw.err; then
  echo "ok   the task dump (SIGUSR1) names the session's task and its child"
else
  echo "FAIL the task dump does not name the session (pid $kid)"; status=1
fi
kill -KILL "$gw"
wait "$gw" 2>/dev/null || true
for _ in $(seq 50); do [ -n "$kid" ] && kill -0 "$kid" 2>/dev/null || break; sleep 0.1; done
if [ -z "$kid" ]; then
  echo "FAIL the held session did not report its child"; status=1
elif kill -0 "$kid" 2>/dev/null; then
  echo "FAIL child $kid outlived the gateway killed with SIGKILL"; status=1
else
  echo "ok   a gateway killed with SIGKILL: its child $kid died with it"
fi
kill -KILL "$holder" 2>/dev/null || true

if grep -q '^mcp_gateway: session [0-9a-f]* from 127\.0\.0\.1:[0-9]*: pid [0-9]*, [0-9]* ms, [0-9]* messages in, [0-9]* out, ended by ' gw.err; then
  echo "ok   each session's log line names its client, child, duration, messages and end"
else
  echo "FAIL no session log line names its client"; status=1
fi
echo "mcp gateway e2e: $(grep -c '^mcp_gateway: session' gw.err) session log lines, e.g.:"
grep -m2 '^mcp_gateway: session' gw.err || true
[ "$status" -eq 0 ] || { echo "mcp gateway e2e: FAILED; the gateway's log:"; tail -40 gw.err; }
exit "$status"
