// Added latency of `loopbrake mcp` per tools/call against a direct connection to the same
// server (server-everything over stdio), in one run, and the proxy's peak memory after
// 10,000 sessions' worth of calls.
// Usage: node scripts/bench/mcp_latency.js NODE_MODULES LOOPBRAKE [CALLS]
const path = require('path');
const [, , nmArg, loopbrakeArg, n = '2000'] = process.argv;
if (!nmArg || !loopbrakeArg) {
  console.error('usage: node scripts/bench/mcp_latency.js NODE_MODULES LOOPBRAKE [CALLS]');
  process.exit(2);
}
// Relative paths are taken from the working directory (require() would read them from here).
const nm = path.resolve(nmArg);
const loopbrake = path.resolve(loopbrakeArg);
const { Client } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/index.js');
const { StdioClientTransport } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/stdio.js');
const fs = require('fs');
const server = nm + '/@modelcontextprotocol/server-everything/dist/index.js';

async function connect(viaProxy) {
  const args = viaProxy ? ['mcp', '--', process.execPath, server] : [server];
  const transport = new StdioClientTransport({ command: viaProxy ? loopbrake : process.execPath, args, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function main() {
  const direct = await connect(false);
  const proxied = await connect(true);
  const times = { direct: [], proxied: [] };
  const calls = Number(n);
  for (let i = 0; i < calls; i++) {
    // Distinct arguments: no verdict but allow, as in ordinary work.
    for (const [name, c] of [['direct', direct], ['proxied', proxied]]) {
      const t0 = process.hrtime.bigint();
      await c.client.callTool({ name: 'echo', arguments: { message: `m${i}` } });
      times[name].push(Number(process.hrtime.bigint() - t0) / 1000);
    }
  }
  const out = {};
  for (const k of ['direct', 'proxied']) out[k] = { p50_us: pct(times[k], 0.5), p99_us: pct(times[k], 0.99) };
  out.ratio_p50 = out.proxied.p50_us / out.direct.p50_us;
  out.added_p50_us = out.proxied.p50_us - out.direct.p50_us;
  out.ratio_p99 = out.proxied.p99_us / out.direct.p99_us;
  // 10,000 sessions: each call names its own conversation in _meta.
  const pid = proxied.transport.pid;
  for (let s = 0; s < 10000; s++) {
    await proxied.client.callTool({ name: 'echo', arguments: { message: 'x' }, _meta: { sessionId: `conv-${s}` } });
  }
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  out.proxy_peak_rss_mib = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  out.proxy_rss_mib = Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
  console.log(JSON.stringify(out, (k, v) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v), 1));
  await direct.client.close();
  await proxied.client.close();
}
main().catch((e) => { console.error(e); process.exit(1); });
