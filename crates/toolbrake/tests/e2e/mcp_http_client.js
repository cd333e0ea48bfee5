// Two MCP clients (the official TypeScript SDK's StreamableHTTPClientTransport) on one
// `toolbrake mcp --listen` proxy. Usage: node mcp_http_client.js NODE_MODULES URL [TOKEN]
// Prints one JSON object with what each client saw.
const [, , nm, url, token] = process.argv;
const { Client } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/index.js');
const { StreamableHTTPClientTransport } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/streamableHttp.js');
const { LoggingMessageNotificationSchema } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/types.js');

const text = (r) => (r.content || []).filter((b) => b.type === 'text').map((b) => b.text);

async function connect(name) {
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
  const client = new Client({ name, version: '1.0.0' }, { capabilities: {} });
  const seen = { logs: 0, progress: 0 };
  client.setNotificationHandler(LoggingMessageNotificationSchema, () => {
    seen.logs++;
  });
  await client.connect(transport);
  return { client, transport, seen };
}

async function main() {
  const a = await connect('client-a');
  const b = await connect('client-b');
  const out = { sessions: [a.transport.sessionId, b.transport.sessionId] };
  out.tools = (await a.client.listTools()).tools.map((t) => t.name);
  const call = async (c, args) => {
    const r = await c.client.callTool({ name: 'echo', arguments: args });
    return { isError: !!r.isError, text: text(r) };
  };
  // Interleaved: each client's third identical call is its own third.
  out.a = [];
  out.b = [];
  for (let i = 0; i < 3; i++) {
    out.a.push(await call(a, { message: 'same' }));
    out.b.push(await call(b, { message: 'same' }));
  }
  // Progress reaches the client that asked for it.
  await a.client.setLoggingLevel('debug');
  await a.client.callTool({ name: 'toggle-simulated-logging', arguments: {} });
  const r = await b.client.callTool(
    { name: 'trigger-long-running-operation', arguments: { duration: 1, steps: 3 } },
    undefined,
    { onprogress: () => b.seen.progress++ },
  );
  out.longRun = text(r);
  await new Promise((ok) => setTimeout(ok, 6500));
  out.seen = { a: a.seen, b: b.seen };
  await a.transport.terminateSession();
  out.afterEnd = await a.client.listTools().then(() => 'answered', (e) => String(e.message || e));
  await b.client.close();
  console.log(JSON.stringify(out));
  process.exit(0);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
