// examples/mcp_gateway end to end: the MCP TypeScript SDK's client
// (StreamableHTTPClientTransport, as real clients connect) against the
// gateway running tool_server.mjs, one child per session.
//   node gateway_e2e.mjs <gateway pid> <url> <mode>
//   mode main: the protocol; mode limits: a gateway started with small limits;
//   mode remote: mcp-remote as the client.
// Exits 0 when every check passed; prints what failed otherwise.
import fs from 'node:fs';
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { CreateMessageRequestSchema, ElicitRequestSchema } from '@modelcontextprotocol/sdk/types.js';

const [gwPid, url, mode] = [Number(process.argv[2]), process.argv[3], process.argv[4]];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const textOf = (r) => r.content.map((c) => c.text ?? '').join('');
let failed = 0;
function check(cond, what) {
  console.log(`${cond ? 'ok  ' : 'FAIL'} ${what}`);
  if (!cond) failed++;
}

function alive(pid) {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z' ? 'alive' : 'zombie';
  } catch { return 'gone'; }
}
async function waitGone(pid, ms) {
  const t0 = Date.now();
  while (Date.now() - t0 < ms) {
    if (alive(pid) === 'gone') return Date.now() - t0;
    await sleep(20);
  }
  return null;
}

async function open(opts = {}) {
  const transport = new StreamableHTTPClientTransport(new URL(url), opts.transport);
  const client = new Client({ name: 'shoal-e2e', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } });
  client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    role: 'assistant', model: 'e2e', content: { type: 'text', text: `yes to ${req.params.messages[0].content.text}` },
  }));
  client.setRequestHandler(ElicitRequestSchema, async (req) => ({
    action: 'accept', content: { ok: true, note: `seen: ${req.params.message}` },
  }));
  await client.connect(transport);
  return { client, transport };
}
const call = (s, name, args, opts) => s.client.callTool({ name, arguments: args }, undefined, opts);

async function raw(method, headers = {}, body = undefined) {
  const r = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body,
    signal: AbortSignal.timeout(10000),
  });
  return { status: r.status, headers: r.headers, text: await r.text() };
}
const initBody = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize',
  params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } } });

async function main() {
  const A = await open();
  check(!!A.transport.sessionId, `initialize gives a session id (${A.transport.sessionId})`);
  const tools = (await A.client.listTools()).tools.map((t) => t.name).sort().join(',');
  check(tools === 'ask,big,confirm,echo,pid,sleep', `tools/list: ${tools}`);
  const t = 'héllo "gateway" \\ ✓\n';
  check(textOf(await call(A, 'echo', { text: t })) === t, 'echo returns the text as sent');
  const big = textOf(await call(A, 'big', { bytes: 1 << 20 }));
  check(big.length === 1 << 20 && big.charCodeAt(1 << 19) === 97 + ((1 << 19) % 26), `a 1 MiB result (${big.length} bytes)`);
  const seen = [];
  const slept = await call(A, 'sleep', { ms: 500 }, { onprogress: (p) => seen.push(p.progress) });
  check(textOf(slept) === 'slept 500' && seen.join() === '1,2,3,4,5,6,7,8,9,10', `progress in order: ${seen.join()}`);
  const asked = textOf(await call(A, 'ask', { question: 'ok?' }));
  check(asked === 'answered: yes to ok?', `a sampling request from the server round-trips through the client: ${asked}`);
  const confirmed = textOf(await call(A, 'confirm', { what: 'the deploy' }));
  check(confirmed === 'accept: ok=true note=seen: Go ahead with the deploy?',
    `an elicitation request from the server round-trips through the client: ${confirmed}`);

  // Two sessions: own ids, own children, progress only on its own call.
  const B = await open();
  const [pa, pb] = [Number(textOf(await call(A, 'pid', {}))), Number(textOf(await call(B, 'pid', {})))];
  check(A.transport.sessionId !== B.transport.sessionId && pa !== pb && alive(pa) === 'alive' && alive(pb) === 'alive',
    `two sessions, two children (${pa}, ${pb})`);
  const [sa, sb] = [[], []];
  await Promise.all([
    call(A, 'sleep', { ms: 250 }, { onprogress: (p) => sa.push(p.progress) }),
    call(B, 'sleep', { ms: 150 }, { onprogress: (p) => sb.push(p.progress) }),
  ]);
  check(sa.join() === '1,2,3,4,5' && sb.join() === '1,2,3', `each session's progress on its own call (A ${sa}, B ${sb})`);

  // DELETE reaps the child within 2 s; the id then answers 404.
  const bid = B.transport.sessionId;
  await B.transport.terminateSession();
  await B.client.close();
  const reaped = await waitGone(pb, 2000);
  check(reaped !== null, `DELETE: the child is reaped (${reaped} ms)`);
  const after = await raw('POST', { 'mcp-session-id': bid, 'mcp-protocol-version': '2025-06-18' },
    JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }));
  check(after.status === 404, `a deleted session answers 404 (${after.status})`);
  const unknown = await raw('POST', { 'mcp-session-id': 'nope', 'mcp-protocol-version': '2025-06-18' },
    JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }));
  check(unknown.status === 404, `an unknown session answers 404 (${unknown.status})`);

  // Malformed bodies: 400 with a JSON-RPC parse error; the others serve on.
  const bad = await raw('POST', {}, '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{');
  check(bad.status === 400 && /-32700/.test(bad.text), `malformed JSON: 400 and a parse error (${bad.status} ${bad.text.slice(0, 80)})`);
  const bad2 = await raw('POST', { 'mcp-session-id': A.transport.sessionId, 'mcp-protocol-version': '2025-06-18' }, '{"id":2');
  check(bad2.status === 400, `malformed JSON in a session: 400 (${bad2.status})`);
  const v = await raw('POST', { 'mcp-session-id': A.transport.sessionId, 'mcp-protocol-version': '1999-01-01' },
    JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/list' }));
  check(v.status === 400 && /MCP-Protocol-Version/.test(v.text), `an unsupported protocol version: 400 (${v.status})`);
  const nov = await raw('POST', { 'mcp-session-id': A.transport.sessionId },
    JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/list' }));
  check(nov.status === 400, `no protocol version on a 2025-06-18 session: 400 (${nov.status})`);
  const origin = await raw('POST', { origin: 'http://evil.example' }, initBody);
  check(origin.status === 403, `a foreign Origin: 403 (${origin.status})`);
  const local = await raw('POST', { origin: 'http://localhost:3000' }, initBody);
  check(local.status === 200 && local.headers.get('mcp-session-id'), `a local Origin is served (${local.status})`);
  if (local.headers.get('mcp-session-id')) {
    const del = await raw('DELETE', { 'mcp-session-id': local.headers.get('mcp-session-id'), 'mcp-protocol-version': '2025-06-18' });
    check(del.status === 200, `DELETE answers 200 (${del.status})`);
  }
  check(textOf(await call(A, 'echo', { text: 'still here' })) === 'still here', 'the first session serves on');

  // A JSON-only client gets the answer as application/json.
  const init = await raw('POST', { accept: 'application/json' }, initBody);
  const jsid = init.headers.get('mcp-session-id');
  check(init.status === 200 && /^application\/json/.test(init.headers.get('content-type') || ''), `initialize answered as JSON (${init.status} ${init.headers.get('content-type')})`);
  const hdr = { accept: 'application/json', 'mcp-session-id': jsid, 'mcp-protocol-version': '2025-06-18' };
  const ack = await raw('POST', hdr, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  check(ack.status === 202 && ack.text === '', `a notification: 202 with no body (${ack.status})`);
  const batch = await raw('POST', hdr, JSON.stringify([{ jsonrpc: '2.0', id: 'a', method: 'ping' }, { jsonrpc: '2.0', id: 'b', method: 'ping' }]));
  let answers = [];
  try { answers = JSON.parse(batch.text).map((m) => m.id).sort(); } catch {}
  check(batch.status === 200 && answers.join() === 'a,b', `a batch gets an array of answers (${batch.status} ${batch.text.slice(0, 80)})`);
  await raw('DELETE', hdr);

  // Resuming: a POST stream dropped mid-call, resumed with GET and
  // Last-Event-ID, loses no message.
  {
    const init = await raw('POST', {}, initBody);
    const rsid = init.headers.get('mcp-session-id');
    const h = { 'mcp-session-id': rsid, 'mcp-protocol-version': '2025-06-18' };
    await raw('POST', h, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
    const ctl = new AbortController();
    const first = await fetch(url, {
      method: 'POST', signal: ctl.signal,
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...h },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'sleep', arguments: { ms: 500 }, _meta: { progressToken: 'p7' } } }),
    });
    const before = await readEvents(first.body, (evs) => evs.length >= 3);
    ctl.abort();
    const lastId = before[before.length - 1].id;
    const again = await fetch(url, { headers: { accept: 'text/event-stream', 'last-event-id': lastId, ...h }, signal: AbortSignal.timeout(10000) });
    const after = await readEvents(again.body, () => false);
    const all = [...before, ...after].map((e) => JSON.parse(e.data));
    const progress = all.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
    const result = all.find((m) => m.id === 7);
    check(again.status === 200 && progress.join() === '1,2,3,4,5,6,7,8,9,10' && result && /slept 500/.test(JSON.stringify(result)),
      `a dropped stream resumed with Last-Event-ID ${lastId}: progress ${progress.join()}, result ${result ? 'yes' : 'no'}`);
    const gone = await raw('GET', { ...h, accept: 'text/event-stream', 'last-event-id': '999999' });
    check(gone.status === 404, `a Last-Event-ID no longer kept: 404 (${gone.status})`);
    await raw('DELETE', h);
  }

  // A client killed without DELETE: its GET stream breaks (the keep-alive
  // write fails; run.sh starts the gateway with --keepalive 1
  // --abandoned-timeout 1), and the session ends.
  const victim = spawn(process.execPath, [fileURLToPath(import.meta.url), String(gwPid), url, 'hold'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  victim.stdout.on('data', (d) => { out += d; });
  for (const t0 = Date.now(); !/ready/.test(out) && Date.now() - t0 < 15000;) await sleep(20);
  const vpid = Number((out.match(/pid=(\d+)/) || [])[1]);
  victim.kill('SIGKILL');
  const vgone = vpid ? await waitGone(vpid, 10000) : null;
  check(vgone !== null, `a client killed without DELETE: its child ${vpid} is reaped (${vgone} ms after)`);

  await A.transport.terminateSession();
  await A.client.close();
  check(await waitGone(pa, 2000) !== null, 'the first session\'s child is reaped after DELETE');
}

// The SSE events of `body` ({id, data}) until done(events) says so or the
// stream ends.
async function readEvents(body, done) {
  const events = [];
  const decoder = new TextDecoder();
  let text = '';
  try {
    for await (const chunk of body) {
      text += decoder.decode(chunk, { stream: true });
      let at;
      while ((at = text.indexOf('\n\n')) >= 0) {
        const block = text.slice(0, at);
        text = text.slice(at + 2);
        const ev = {};
        for (const line of block.split('\n')) {
          if (line.startsWith('id: ')) ev.id = line.slice(4);
          if (line.startsWith('data: ')) ev.data = line.slice(6);
        }
        if (ev.data !== undefined) events.push(ev);
        if (done(events)) return events;
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') throw e;
  }
  return events;
}

async function hold() {
  const s = await open();
  console.log(`pid=${textOf(await call(s, 'pid', {}))}\nready`);
  await sleep(60000);
}

async function limits() {
  // Started with --max-sessions 1 --max-message 2000 --token-file
  // --idle-timeout 1: see run.sh.
  const token = process.env.E2E_TOKEN;
  const auth = { authorization: `Bearer ${token}` };
  const none = await raw('POST', {}, initBody);
  check(none.status === 401 && none.headers.get('www-authenticate') === 'Bearer', `no token: 401 (${none.status})`);
  const A = await open({ transport: { requestInit: { headers: auth } } });
  check(!!A.transport.sessionId, 'with the token: a session');
  const full = await raw('POST', auth, initBody);
  check(full.status === 503 && full.headers.get('retry-after') === '1', `past --max-sessions: 503 with Retry-After (${full.status})`);
  const huge = await raw('POST', { ...auth, 'mcp-session-id': A.transport.sessionId, 'mcp-protocol-version': '2025-06-18' },
    JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x'.repeat(5000) } } }));
  check(huge.status === 413 && /--max-message/.test(huge.text), `past --max-message: 413 (${huge.status} ${huge.text.slice(0, 80)})`);
  check(textOf(await call(A, 'echo', { text: 'fine' })) === 'fine', 'the session serves on');
  await A.transport.terminateSession();
  await A.client.close();
  // The slot is given back once the session's task has reaped the child:
  // 503 until then (bounded: the child exits at its end of input).
  let again = null;
  for (const t0 = Date.now(); !again && Date.now() - t0 < 5000;) {
    try { again = await open({ transport: { requestInit: { headers: auth } } }); } catch (e) {
      if (!/at their limit/.test(String(e))) throw e;
      await sleep(20);
    }
  }
  check(!!again?.transport.sessionId, 'after DELETE the slot is free again');
  await again.transport.terminateSession();
  await again.client.close();

  // A session with no request in flight and no stream open ends after
  // --idle-timeout (a JSON-only client opens no GET stream).
  let idle = null;
  for (const t0 = Date.now(); !idle && Date.now() - t0 < 5000;) {
    const r = await raw('POST', { ...auth, accept: 'application/json' }, initBody);
    if (r.status === 200) idle = r; else await sleep(20);  // 503 until the last session's slot is back
  }
  const ih = { ...auth, accept: 'application/json', 'mcp-session-id': idle.headers.get('mcp-session-id'), 'mcp-protocol-version': '2025-06-18' };
  const pidr = await raw('POST', ih, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'pid', arguments: {} } }));
  const ipid = Number((pidr.text.match(/"text":"(\d+)"/) || [])[1]);
  const t0 = Date.now();
  const gone = ipid ? await waitGone(ipid, 10000) : null;
  const after = await raw('POST', ih, JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'ping' }));
  check(gone !== null && after.status === 404, `an idle session ends after --idle-timeout: child ${ipid} reaped after ${Date.now() - t0} ms, then ${after.status}`);
}

// A short pass with the reference server (@modelcontextprotocol/server-everything, through npx).
async function everything() {
  const s = await open();
  const tools = (await s.client.listTools()).tools.map((t) => t.name);
  check(tools.includes('echo'), `server-everything: ${tools.length} tools, echo among them`);
  const r = textOf(await call(s, 'echo', { message: 'hello everything' }));
  check(/hello everything/.test(r), `server-everything: echo (${r})`);
  await s.transport.terminateSession();
  await s.client.close();
}

// mcp-remote (npm), the stdio bridge desktop clients run to reach a remote
// server, as a second client: the SDK's client speaks stdio to it, it
// speaks Streamable HTTP to the gateway. It does not DELETE its sessions
// (the probe one it opens first included): each ends when its stream
// breaks (--abandoned-timeout).
async function remote() {
  const { StdioClientTransport } = await import('@modelcontextprotocol/sdk/client/stdio.js');
  let log = '';
  const transport = new StdioClientTransport({
    command: 'node_modules/.bin/mcp-remote',
    args: [url, '--transport', 'http-only', '--allow-http'],
    env: { ...process.env, MCP_REMOTE_CONFIG_DIR: `${process.cwd()}/mcp-remote-auth` },  // not the home directory
    stderr: 'pipe',
  });
  transport.stderr?.on('data', (d) => { log += d; });
  const s = { client: null, transport };
  s.client = new Client({ name: 'shoal-e2e-remote', version: '1.0.0' }, { capabilities: { sampling: {}, elicitation: {} } });
  s.client.setRequestHandler(CreateMessageRequestSchema, async (req) => ({
    role: 'assistant', model: 'e2e', content: { type: 'text', text: `yes to ${req.params.messages[0].content.text}` },
  }));
  s.client.setRequestHandler(ElicitRequestSchema, async () => ({ action: 'accept', content: { ok: true, note: 'remote' } }));
  try {
    await s.client.connect(transport);
  } catch (e) {
    check(false, `mcp-remote connects: ${e}; its log: ${log.slice(-1500)}`);
    return;
  }
  const tools = (await s.client.listTools()).tools.map((t) => t.name).sort().join(',');
  check(tools === 'ask,big,confirm,echo,pid,sleep', `mcp-remote: tools/list: ${tools}`);
  check(textOf(await call(s, 'echo', { text: 'via mcp-remote' })) === 'via mcp-remote', 'mcp-remote: echo');
  // In order, but not necessarily all: mcp-remote relays each message on
  // its own, so the last notification can reach the client after the
  // result, which ends the call's progress (seen in CI: 1,2,3,4). That
  // the gateway loses nothing is checked without it (mode main).
  const seen = [];
  const slept = await call(s, 'sleep', { ms: 250 }, { onprogress: (p) => seen.push(p.progress) });
  const inOrder = seen.length >= 1 && seen.every((p, i) => p === i + 1);
  check(textOf(slept) === 'slept 250' && inOrder, `mcp-remote: progress in order: ${seen.join()}`);
  const asked = textOf(await call(s, 'ask', { question: 'ok?' }));
  const confirmed = textOf(await call(s, 'confirm', { what: 'it' }));
  check(asked === 'answered: yes to ok?' && confirmed === 'accept: ok=true note=remote',
    `mcp-remote: sampling and elicitation round-trip (${asked}; ${confirmed})`);
  const pid = Number(textOf(await call(s, 'pid', {})));
  await s.client.close();  // mcp-remote exits with its stdin
  const gone = await waitGone(pid, 15000);
  check(gone !== null, `mcp-remote gone without DELETE: its session's child ${pid} reaped (${gone} ms after)`);
}

// Against flood_server.py (run.sh): a client that stops reading its SSE
// stream stops the child (blocked writing to its stdout), and the gateway's
// memory stays bounded; everything arrives once the client reads again.
async function backpressure() {
  const init = await raw('POST', {}, initBody);
  const h = { 'mcp-session-id': init.headers.get('mcp-session-id'), 'mcp-protocol-version': '2025-06-18' };
  await raw('POST', h, JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }));
  const pidAnswer = await raw('POST', h, JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'pid', arguments: {} } }));
  const child = Number((pidAnswer.text.match(/"text": ?"(\d+)"/) || [])[1]);
  const rss = () => Number(fs.readFileSync(`/proc/${gwPid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]);
  const before = rss();
  const count = 2000, size = 32 * 1024;  // 64 MiB in all
  fs.rmSync('flood.sent', { force: true });  // a file of an earlier run
  const flood = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...h },
    body: JSON.stringify({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'flood', arguments: { count, size, sent_file: 'flood.sent' }, _meta: { progressToken: 'f' } } }),
  });
  // Not reading: the child must end up blocked on its stdout pipe.
  let blocked = false, sent = 0;
  for (const t0 = Date.now(); !blocked && Date.now() - t0 < 20000; await sleep(20)) {
    try { blocked = /pipe_write$/.test(fs.readFileSync(`/proc/${child}/wchan`, 'utf8')); } catch { break; }
    if (blocked) {
      try { sent = Number(fs.readFileSync('flood.sent', 'utf8')); } catch { blocked = false; }  // not yet written: not the flood's block
    }
  }
  // What the child got out before it blocked bounds what the gateway and
  // the sockets hold (RSS would not: a sanitizer's allocator keeps freed
  // memory).
  check(blocked && sent * size < 16 << 20,
    `a client that stops reading stops its child (blocked: ${blocked}) after ${sent} of ${count} messages (${(sent * size) >> 20} of 64 MiB); gateway RSS +${rss() - before} KiB`);
  const events = await readEvents(flood.body, () => false);
  const msgs = events.map((e) => JSON.parse(e.data));
  const progress = msgs.filter((m) => m.method === 'notifications/progress').map((m) => m.params.progress);
  let inOrder = progress.length === count;
  for (let i = 0; inOrder && i < count; i++) inOrder = progress[i] === i + 1;
  check(inOrder && msgs.some((m) => m.id === 3), `then everything arrives, in order (${progress.length} notifications, result ${msgs.some((m) => m.id === 3)})`);
  // A child that takes no more input (its stdin closed, its stdout open):
  // the next request is answered 502, naming it, and the session ends.
  const closed = await raw('POST', h, JSON.stringify({ jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'close_stdin', arguments: {} } }));
  const next = await raw('POST', h, JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'ping' }));
  check(/closed/.test(closed.text) && next.status === 502 && /takes no more input/.test(next.text),
    `a child that closed its stdin: the next request answered ${next.status} (${next.text.slice(0, 100)})`);
  await raw('DELETE', h);
}

const modes = { main, limits, hold, backpressure, everything, remote };
const guard = setTimeout(() => { console.log('FAIL the test took over 90 s'); process.exit(1); }, 90000);
modes[mode]().then(() => {
  clearTimeout(guard);
  console.log(failed ? `${failed} check(s) failed` : 'every check passed');
  process.exit(failed ? 1 : 0);
}, (e) => { console.log(`FAIL ${e.stack || e}`); process.exit(1); });
void gwPid;
