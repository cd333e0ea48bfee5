// A real MCP client (the official TypeScript SDK) driving `toolbrake mcp -- <server>`.
// Usage: node mcp_client.js NODE_MODULES TOOLBRAKE CONFIG SCENARIO
// Prints one JSON object with what the client saw.
const [, , nm, toolbrake, config, scenario] = process.argv;
const { Client } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/index.js');
const { StdioClientTransport } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/stdio.js');
const { ElicitRequestSchema } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/types.js');

const server = nm + '/@modelcontextprotocol/server-everything/dist/index.js';
const text = (r) => (r.content || []).filter((b) => b.type === 'text').map((b) => b.text);

async function main() {
  const elicit = scenario.startsWith('ask-');
  // MCP_URL: the proxy talks Streamable HTTP to an already running server.
  let downstream = process.env.MCP_URL ? ['--url', process.env.MCP_URL] : ['--', process.execPath, server];
  // fetch-*: the proxy offers web_fetch_file (fetch-only: with no server behind it),
  // fetching from a small HTTP server of this script's own, writing under FETCH_CWD.
  let web;
  if (scenario.startsWith('fetch-')) {
    const http = require('http');
    web = http.createServer((req, res) => {
      if (req.url === '/data.json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ rows: [1, 2, 3] }));
      } else {
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('no such page');
      }
    });
    await new Promise((ok) => web.listen(0, '127.0.0.1', ok));
    downstream = scenario === 'fetch-only' ? ['--fetch-tool'] : ['--fetch-tool', ...downstream];
  }
  const transport = new StdioClientTransport({
    command: toolbrake,
    args: ['--config', config, 'mcp', ...downstream],
    env: { ...process.env },
    cwd: process.env.FETCH_CWD || process.cwd(),
    stderr: 'inherit',
  });
  const client = new Client({ name: 'toolbrake-test', version: '1.0.0' }, { capabilities: elicit ? { elicitation: {} } : {} });
  const asked = [];
  if (elicit) {
    client.setRequestHandler(ElicitRequestSchema, async (req) => {
      asked.push(req.params.message);
      return scenario === 'ask-approve' ? { action: 'accept', content: { approve: true } } : { action: 'decline' };
    });
  }
  await client.connect(transport);
  const out = { serverInfo: client.getServerVersion(), asked };
  const call = async (name, args) => {
    const r = await client.callTool({ name, arguments: args });
    return { isError: !!r.isError, text: text(r) };
  };
  if (scenario === 'passthrough') {
    out.tools = (await client.listTools()).tools.map((t) => t.name);
    const resources = (await client.listResources()).resources;
    out.resources = resources.length;
    out.read = (await client.readResource({ uri: resources[0].uri })).contents.length;
    const prompts = (await client.listPrompts()).prompts;
    out.prompts = prompts.map((p) => p.name);
    const simple = prompts.find((p) => !(p.arguments || []).some((a) => a.required));
    out.prompt = (await client.getPrompt({ name: simple.name, arguments: {} })).messages.length;
    out.ping = await client.ping();
    out.echo = await call('echo', { message: 'hello' });
  } else if (scenario === 'repeat' || scenario.startsWith('ask-')) {
    out.calls = [];
    for (let i = 0; i < 13; i++) out.calls.push(await call('echo', { message: 'same' }));
  } else if (scenario === 'failing') {
    out.calls = [];
    for (let i = 0; i < 7; i++) out.calls.push(await call('get-sum', { a: 'not a number', b: 2 }));
  } else if (scenario.startsWith('fetch-')) {
    const base = `http://127.0.0.1:${web.address().port}`;
    const tools = (await client.listTools()).tools;
    out.tools = tools.map((t) => t.name);
    out.fetchSchema = tools.find((t) => t.name === 'web_fetch_file').inputSchema;
    const r = await client.callTool({ name: 'web_fetch_file', arguments: { url: `${base}/data.json` } });
    out.fetched = { isError: !!r.isError, structured: r.structuredContent, text: text(r) };
    out.missing = [];
    for (let i = 0; i < 3; i++) {
      out.missing.push(await call('web_fetch_file', { url: `${base}/missing`, path: `missing-${i}.txt` }));
    }
    out.escape = await call('web_fetch_file', { url: `${base}/data.json`, path: '../escape.json' });
    if (scenario === 'fetch-proxy') out.echo = await call('echo', { message: 'still here' });
  } else if (scenario === 'parallel') {
    const results = await Promise.all(Array.from({ length: 12 }, () => call('echo', { message: 'together' })));
    out.calls = results;
  }
  await client.close();
  if (web) web.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
