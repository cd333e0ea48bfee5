// Added latency of `toolbrake mcp` per message against its floors, in one run: the TypeScript
// SDK client talks to server-everything over stdio directly, through a bare byte relay
// (scripts/bench/relay.c: the same two extra process hops, no parsing) and through the proxy,
// the connections taking turns call by call (the order rotating), each timing a `tools/call`
// of `echo` (judged) and a `ping` (forwarded unjudged). Then the proxy's peak memory after
// 10,000 sessions' worth of calls.
// Usage: node scripts/bench/mcp_latency.js NODE_MODULES TOOLBRAKE [CALLS] [--relay RELAY]
//          [--also NAME=TOOLBRAKE]...
// --also adds another proxy binary to the same loop (a build from before a change, to measure
// it side by side). scripts/bench/mcp.sh builds the binary and the relay and runs this.
const path = require('path');
const fs = require('fs');

const positional = [];
const others = [];
let relayArg = null;
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i];
  if (a === '--relay') relayArg = process.argv[++i];
  else if (a === '--also') {
    const spec = process.argv[++i] || '';
    const eq = spec.indexOf('=');
    if (eq <= 0) {
      console.error(`--also takes NAME=TOOLBRAKE, not ${JSON.stringify(spec)}`);
      process.exit(2);
    }
    others.push([spec.slice(0, eq), path.resolve(spec.slice(eq + 1))]);
  } else positional.push(a);
}
const [nmArg, toolbrakeArg, n = '2000'] = positional;
if (!nmArg || !toolbrakeArg || (relayArg === undefined)) {
  console.error('usage: node scripts/bench/mcp_latency.js NODE_MODULES TOOLBRAKE [CALLS] [--relay RELAY] [--also NAME=TOOLBRAKE]...');
  process.exit(2);
}
// Relative paths are taken from the working directory (require() would read them from here).
const nm = path.resolve(nmArg);
const toolbrake = path.resolve(toolbrakeArg);
const { Client } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/index.js');
const { StdioClientTransport } = require(nm + '/@modelcontextprotocol/sdk/dist/cjs/client/stdio.js');
const server = nm + '/@modelcontextprotocol/server-everything/dist/index.js';

// name → [command, args]
const routes = [['direct', [process.execPath, [server]]]];
if (relayArg) routes.push(['relay', [path.resolve(relayArg), ['--', process.execPath, server]]]);
routes.push(['proxy', [toolbrake, ['mcp', '--', process.execPath, server]]]);
for (const [name, bin] of others) routes.push([name, [bin, ['mcp', '--', process.execPath, server]]]);

async function connect([command, args]) {
  const transport = new StdioClientTransport({ command, args, stderr: 'ignore' });
  const client = new Client({ name: 'bench', version: '1' }, { capabilities: {} });
  await client.connect(transport);
  return { client, transport };
}

// CPU time (ns) and context switches of a process, all its threads, from /proc: what the
// process in the middle (relay or proxy) spends per message, whatever the wall clock says.
function usage(pid) {
  let ns = 0, switches = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`)) {
    ns += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
    const st = fs.readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
    switches += Number(/^voluntary_ctxt_switches:\s+(\d+)/m.exec(st)[1]);
    switches += Number(/^nonvoluntary_ctxt_switches:\s+(\d+)/m.exec(st)[1]);
  }
  return { ns, switches };
}

const pct = (xs, p) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))];

async function main() {
  const conns = [];
  for (const [name, cmd] of routes) conns.push([name, await connect(cmd)]);
  const times = {};
  for (const [name] of conns) times[name] = { call: [], ping: [] };
  const calls = Number(n);
  const warmup = Math.min(200, Math.floor(calls / 10));
  const used = {};
  const snapshot = () => { for (const [name, c] of conns) used[name] = usage(c.transport.pid); };
  if (warmup === 0) snapshot();
  for (let i = 0; i < warmup + calls; i++) {
    for (let j = 0; j < conns.length; j++) {
      // The order rotates, so no connection always follows the same one.
      const [name, c] = conns[(i + j) % conns.length];
      // Distinct arguments: no verdict but allow, as in ordinary work.
      let t0 = process.hrtime.bigint();
      await c.client.callTool({ name: 'echo', arguments: { message: `m${i}` } });
      const call = Number(process.hrtime.bigint() - t0) / 1000;
      t0 = process.hrtime.bigint();
      await c.client.ping();
      const ping = Number(process.hrtime.bigint() - t0) / 1000;
      if (i >= warmup) {
        times[name].call.push(call);
        times[name].ping.push(ping);
      }
    }
    if (i === warmup - 1) snapshot();
  }
  for (const [name, c] of conns) {
    const now = usage(c.transport.pid);
    used[name] = { ns: now.ns - used[name].ns, switches: now.switches - used[name].switches };
  }
  const out = { calls };
  for (const [name] of conns) {
    out[name] = {};
    for (const k of ['call', 'ping']) {
      out[name][k] = { p50_us: pct(times[name][k], 0.5), p99_us: pct(times[name][k], 0.99) };
    }
  }
  // Per message (a call or a ping) of the timed loop, in the process the client started
  // (for direct, the server itself).
  for (const [name] of conns) {
    const msgs = 2 * times[name].call.length;
    out[name].cpu_us_per_msg = used[name].ns / 1000 / msgs;
    out[name].switches_per_msg = used[name].switches / msgs;
  }
  // Added over direct, and each proxy's added time against the relay's.
  for (const [name] of conns) {
    if (name === 'direct') continue;
    for (const k of ['call', 'ping']) {
      out[name][k].added_p50_us = out[name][k].p50_us - out.direct[k].p50_us;
      out[name][k].ratio_to_direct = out[name][k].p50_us / out.direct[k].p50_us;
      if (out.relay && name !== 'relay') {
        out[name][k].added_over_relay_added = out[name][k].added_p50_us / out.relay[k].added_p50_us;
      }
    }
  }
  // 10,000 sessions: each call names its own conversation in _meta.
  const proxied = conns.find(([name]) => name === 'proxy')[1];
  const pid = proxied.transport.pid;
  for (let s = 0; s < 10000; s++) {
    await proxied.client.callTool({ name: 'echo', arguments: { message: 'x' }, _meta: { sessionId: `conv-${s}` } });
  }
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  out.proxy_peak_rss_mib = Number(/VmHWM:\s+(\d+)/.exec(status)[1]) / 1024;
  out.proxy_rss_mib = Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
  console.log(JSON.stringify(out, (k, v) => (typeof v === 'number' ? Math.round(v * 100) / 100 : v), 1));
  for (const [, c] of conns) await c.client.close();
}
main().catch((e) => { console.error(e); process.exit(1); });
