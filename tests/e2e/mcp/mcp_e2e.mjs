// MCP end to end through examples/stdio_proxy: the MCP TypeScript SDK's
// client, over TCP, against @modelcontextprotocol/server-everything run by
// the proxy (through npx, so each session is a process tree).
//   node mcp_e2e.mjs <proxy pid> <host> <port>
// Exits 0 when every check passed; prints what failed otherwise.
import fs from 'node:fs';
import net from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';

const [proxyPid, host, port] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4])];
const SESSIONS = 20;
const KILLED = 5;

/// MCP's stdio framing (one JSON-RPC message per line) over a TCP socket:
/// what a client of the proxy speaks.
class TcpTransport {
  constructor() { this.buffer = new ReadBuffer(); }
  start() {
    return new Promise((resolve, reject) => {
      this.socket = net.connect(port, host, resolve);
      this.socket.once('error', reject);
      this.socket.on('data', (chunk) => {
        this.buffer.append(chunk);
        for (let m; (m = this.buffer.readMessage()) !== null;) this.onmessage?.(m);
      });
      this.socket.on('close', () => this.onclose?.());
    });
  }
  send(message) { return new Promise((resolve) => this.socket.write(serializeMessage(message), resolve)); }
  async close() { this.socket.destroy(); }
}

function check(cond, what) { if (!cond) throw new Error(what); }
const text = (result) => result.content.map((c) => c.text ?? '').join('');
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function connect(name) {
  const client = new Client({ name, version: '1.0.0' });
  const transport = new TcpTransport();
  await client.connect(transport);
  return { client, transport };
}

/// One whole session: initialize, tools, resources, prompts, a 64 KiB echo.
async function session(i) {
  const { client } = await connect(`e2e-${i}`);
  try {
    const tools = (await client.listTools()).tools.map((t) => t.name);
    check(tools.includes('echo') && tools.includes('get-sum'), `session ${i}: tools/list lacks echo or get-sum: ${tools}`);
    check(text(await client.callTool({ name: 'echo', arguments: { message: `hello ${i}` } })).includes(`hello ${i}`),
          `session ${i}: echo`);
    check(text(await client.callTool({ name: 'get-sum', arguments: { a: i, b: 1000 } })).includes(String(i + 1000)),
          `session ${i}: get-sum`);
    const resources = (await client.listResources()).resources;
    check(resources.length > 0, `session ${i}: no resources`);
    const read = await client.readResource({ uri: resources[0].uri });
    check(read.contents.length > 0 && (read.contents[0].text ?? read.contents[0].blob ?? '').length > 0,
          `session ${i}: resources/read ${resources[0].uri} is empty`);
    const prompts = (await client.listPrompts()).prompts.map((p) => p.name);
    check(prompts.includes('simple-prompt'), `session ${i}: prompts/list lacks simple-prompt: ${prompts}`);
    check((await client.getPrompt({ name: 'simple-prompt' })).messages.length > 0, `session ${i}: prompts/get`);
    const big = `${i}:` + 'x'.repeat(64 * 1024);
    check(text(await client.callTool({ name: 'echo', arguments: { message: big } })).includes(big),
          `session ${i}: the 64 KiB echo came back different`);
  } finally {
    await client.close();
  }
}

const children = () => {
  const out = [];
  for (const task of fs.readdirSync(`/proc/${proxyPid}/task`)) {
    const list = fs.readFileSync(`/proc/${proxyPid}/task/${task}/children`, 'utf8').trim();
    if (list) out.push(...list.split(/\s+/).map(Number));
  }
  return out;
};
const fds = () => fs.readdirSync(`/proc/${proxyPid}/fd`).length;
// The server processes (the proxy's own command line names the server too).
const servers = () => fs.readdirSync('/proc').filter((p) => /^\d+$/.test(p) && Number(p) !== proxyPid).filter((p) => {
  try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').includes('mcp-server-everything'); } catch { return false; }
});

/// Waits until the proxy has no child and no server process is left.
async function settled(what) {
  for (let waited = 0; waited < 20000; waited += 100) {
    if (children().length === 0 && servers().length === 0) return;
    await sleep(100);
  }
  throw new Error(`${what}: still running after 20 s: children ${children()}, servers ${servers()}`);
}

const fdsBefore = fds();
let t0 = Date.now();
await Promise.all(Array.from({ length: SESSIONS }, (_, i) => session(i)));
console.log(`mcp e2e: ${SESSIONS} concurrent sessions passed (${Date.now() - t0} ms)`);
await settled('after the sessions');

// Clients killed mid-call: their sessions must end and leave nothing behind.
t0 = Date.now();
const doomed = await Promise.all(Array.from({ length: KILLED }, (_, i) => connect(`doomed-${i}`)));
const calls = doomed.map(({ client }) =>
  client.callTool({ name: 'trigger-long-running-operation', arguments: { duration: 60, steps: 60 } }).catch(() => {}));
await sleep(1000);
for (const { transport } of doomed) transport.socket.destroy();
await Promise.all(calls);
await settled('after killing clients mid-call');
console.log(`mcp e2e: ${KILLED} clients killed mid-call; every process gone (${Date.now() - t0} ms)`);
check(fds() === fdsBefore, `the proxy holds ${fds()} fds, ${fdsBefore} before the sessions`);

// And it still serves.
await session(SESSIONS);
await settled('after the last session');
console.log('mcp e2e: a new session after the kills passed; no child, zombie or fd left');
