// A small stdio MCP server for the gateway's end-to-end test, on the MCP
// SDK's own server: tools echo, sleep (a progress notification every
// 50 ms), big (a result of N bytes), ask (a sampling request to the
// client, whose answer it returns), confirm (an elicitation request: the
// form the user filled in), pid (its process id).
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { z } from 'zod';

const server = new McpServer({ name: 'shoal-e2e-tools', version: '1.0.0' });
const text = (t) => ({ content: [{ type: 'text', text: t }] });

server.registerTool('echo', { inputSchema: { text: z.string() } }, async ({ text: t }) => text(t));
server.registerTool('pid', {}, async () => text(String(process.pid)));
server.registerTool('big', { inputSchema: { bytes: z.number() } }, async ({ bytes }) => {
  let s = '';
  for (let i = 0; i < bytes; i++) s += String.fromCharCode(97 + (i % 26));
  return text(s);
});
server.registerTool('sleep', { inputSchema: { ms: z.number() } }, async ({ ms }, extra) => {
  const token = extra._meta?.progressToken;
  const steps = Math.floor(ms / 50);
  for (let i = 1; i <= steps; i++) {
    await new Promise((r) => setTimeout(r, 50));
    if (token !== undefined) {
      await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: i, total: steps } });
    }
  }
  return text(`slept ${ms}`);
});
server.registerTool('ask', { inputSchema: { question: z.string() } }, async ({ question }) => {
  const r = await server.server.createMessage({
    messages: [{ role: 'user', content: { type: 'text', text: question } }],
    maxTokens: 10,
  });
  return text(`answered: ${r.content.text}`);
});

server.registerTool('confirm', { inputSchema: { what: z.string() } }, async ({ what }) => {
  const r = await server.server.elicitInput({
    message: `Go ahead with ${what}?`,
    requestedSchema: { type: 'object', properties: { ok: { type: 'boolean' }, note: { type: 'string' } }, required: ['ok'] },
  });
  return text(`${r.action}: ok=${r.content?.ok} note=${r.content?.note}`);
});

await server.connect(new StdioServerTransport());
