// toolbrake/breaker with `progress: false` against the original it ports, the npm
// package dsh-repeat-tool-breaker@0.5.2: both driven through the same fake host with the
// same generated event streams, every verdict, ask and advisory compared. Advisories and
// denials are compared by their first line (the anchor naming the fingerprint, the count
// and the failure): toolbrake words the guidance below it in its own text.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import breaker from 'toolbrake/breaker'
import { fakeHost } from './support/host.mjs'

const modules = process.env.TOOLBRAKE_E2E_NODE_MODULES ?? join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '../../../target/e2e-npm/node_modules')
const originalPath = join(modules, 'dsh-repeat-tool-breaker', 'index.js')

/** A small deterministic PRNG (mulberry32). */
function rng(seed) {
  return () => {
    seed |= 0
    seed = (seed + 0x6d2b79f5) | 0
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

// Non-HTTP commands carry no `-s`/`-m`-style flags: the original strips those "volatile"
// flags from any command, toolbrake only from HTTP clients' (docs/decisions.md, "Shell and
// URL primitives"), a deliberate difference this comparison does not exercise.
const POOL = [
  () => ({ name: 'bash', args: { command: 'curl -s https://api.example.com/v1/items?page=1', description: '1st' } }),
  (r) => ({ name: 'bash', args: { command: `curl -s --max-time ${5 + Math.floor(r() * 20)} https://api.example.com/v1/items?page=1` } }),
  (r) => ({ name: 'bash', args: { command: `curl -s https://api.example.com/v1/search?q=${Math.floor(r() * 50)}` } }),
  () => ({ name: 'bash', args: { command: 'python3 tests/test_api.py --verbose' } }),
  () => ({ name: 'bash', args: { command: 'ls -la /data' } }),
  () => ({ name: 'read', args: { file_path: '/work/src/app.py' } }),
  () => ({ name: 'web_fetch', args: { url: 'https://docs.example.com/guide' } }),
  (r) => ({ name: 'web_fetch', args: { url: `https://docs.example.com/page/${Math.floor(r() * 3)}` } }),
  () => ({ name: 'search', args: { q: 'weather' } }),
]

const RESULTS = [
  () => ({ content: [{ type: 'text', text: '{"rows": 3}' }], value: { exitCode: 0 } }),
  () => ({ isError: true, content: [{ type: 'text', text: 'Traceback (most recent call last):\nValueError: bad input' }], value: { exitCode: 1 } }),
  () => ({ content: [{ type: 'text', text: 'curl: (6) Could not resolve host: api.example.com' }], value: { exitCode: 6 } }),
  () => ({ content: [{ type: 'text', text: '<html>ok</html>' }], value: { statusCode: 200 } }),
  () => ({ content: [{ type: 'text', text: 'Not Found' }], value: { statusCode: 404 } }),
]

function stream(seed, length) {
  const r = rng(seed)
  const events = []
  for (let i = 0; i < length; i++) {
    const x = r()
    const agent = r() < 0.85 ? 'a' : 'b'
    if (x < 0.03) {
      events.push({ kind: 'user', agent })
      continue
    }
    // Loops: a call repeated in runs, as stuck agents do.
    const call = POOL[Math.floor(r() * (r() < 0.6 ? 3 : POOL.length))](r)
    const result = Math.floor(r() * (r() < 0.5 ? 1 : RESULTS.length))
    // Asks are declined: an approval exempts fingerprints, and toolbrake deliberately stops
    // advising about exempted ones (docs/decisions.md), where the original still does.
    const answer = 'decline'
    const times = 1 + Math.floor(r() * 6)
    for (let k = 0; k < times; k++) events.push({ kind: 'call', agent, ...call, result, answer })
  }
  return events
}

async function drive(plugin, config, events) {
  const h = fakeHost()
  plugin.apply(h.ctx, config)
  const agents = { a: { id: 'agent-a' }, b: { id: 'agent-b' } }
  const out = []
  let n = 0
  for (const ev of events) {
    if (ev.kind === 'user') {
      await h.userMessage(agents[ev.agent])
      continue
    }
    const seen = await h.dispatch({
      agent: agents[ev.agent],
      callId: `c${++n}`,
      name: ev.name,
      args: structuredClone(ev.args),
      answer: ev.answer,
      run: async () => RESULTS[ev.result](),
    })
    const head = (t) => String(t).replace(/^Error: /, '').split('\n')[0]
    out.push({
      n,
      verdict: seen.verdict,
      asked: seen.asked !== null,
      denial: seen.text === undefined ? null : head(seen.text),
      advisories: seen.advisories.map(head),
    })
  }
  return out
}

// The original comes from npm: ./scripts/test installs it (and names where, so there the
// comparison always runs); a bare `npm test` without it skips this test and says why.
const missing = !existsSync(originalPath) && process.env.TOOLBRAKE_E2E_NODE_MODULES === undefined
test('seed mode agrees with the original breaker, call for call', {
  skip: missing && `${originalPath} is missing: run ./scripts/test once (it installs dsh-repeat-tool-breaker@0.5.2 from npm), or set TOOLBRAKE_E2E_NODE_MODULES to a node_modules holding it`,
}, async () => {
  assert.ok(existsSync(originalPath), `${originalPath} is missing: run ./scripts/test (it installs the original from npm)`)
  const original = await import(pathToFileURL(originalPath).href)
  let compared = 0
  let stops = 0
  let advised = 0
  for (const config of [{}, { onLimit: 'deny' }, { onLimit: 'deny', limits: { exact: 4, cmd: 4, net: 5, host: 6 }, warnAt: 2, summarizeAt: 3 }, { failWarnAt: 2, failLimit: 3 }]) {
    for (let seed = 1; seed <= 25; seed++) {
      const events = stream(seed * 7919 + JSON.stringify(config).length, 60)
      const theirs = await drive(original, config, events)
      const ours = await drive(breaker, { ...config, progress: false }, events)
      assert.equal(ours.length, theirs.length)
      for (let i = 0; i < ours.length; i++) {
        const where = `config ${JSON.stringify(config)}, seed ${seed}, call ${ours[i].n}`
        assert.equal(ours[i].verdict, theirs[i].verdict, where)
        assert.equal(ours[i].asked, theirs[i].asked, where)
        assert.equal(ours[i].denial, theirs[i].denial, where)
        assert.deepEqual(ours[i].advisories, theirs[i].advisories, where)
        compared++
        if (ours[i].verdict !== 'run') stops++
        advised += ours[i].advisories.length
      }
    }
  }
  assert.ok(compared > 5000 && stops > 100 && advised > 100, `${compared} calls, ${stops} stops, ${advised} advisories`)
})
