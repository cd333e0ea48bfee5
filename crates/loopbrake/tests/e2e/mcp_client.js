// A real MCP client (the official TypeScript SDK) driving `loopbrake mcp -- <server>`.
// Usage: node mcp_client.js NODE_MODULES LOOPBRAKE CONFIG SCENARIO
// Prints one JSON object with what the client saw.
const [, , nm, loopbrake, config, scenario] = process.argv;
const { Client } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/index.js');
const { StdioClientTransport } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/stdio.js');
const { ElicitRequestSchema } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/types.js');

const server = nm + '/@modelcontextprotocol/server-everything/dist/index.js';
const text = (r) => (r.content || []).filter((b) => b.type === 'text').map((b) => b.text);

async function main() {
  const elicit = scenario.startsWith('ask-');
  // MCP_URL: the proxy talks Streamable HTTP to an already running server.
  const downstream = process.env.MCP_URL ? ['--url', process.env.MCP_URL] : ['--', process.execPath, server];
  const transport = new StdioClientTransport({
    command: loopbrake,
    args: ['--config', config, 'mcp', ...downstream],
    env: { ...process.env },
    stderr: 'inherit',
  });
  const client = new Client({ name: 'loopbrake-test', version: '1.0.0' }, { capabilities: elicit ? { elicitation: {} } : {} });
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
  } else if (scenario === 'parallel') {
    const results = await Promise.all(Array.from({ length: 12 }, () => call('echo', { message: 'together' })));
    out.calls = results;
  }
  await client.close();
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
