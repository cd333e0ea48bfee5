// The breaker plugin in a fake host: the seed's scenarios, asks, advisories, resets.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import breaker, { BreakerConfigError, Config } from 'toolbrake/breaker'
import { fakeHost } from './support/host.mjs'

const ok = (text) => async () => ({ content: [{ type: 'text', text }], value: { exitCode: 0 } })
const fail = (text) => async () => ({ isError: true, content: [{ type: 'text', text }], value: { exitCode: 1 } })

test('the cosmetic curl loop gets advisories at 7 and 11 and is denied at 12', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny' })
  const agent = { id: 'a' }
  const seen = []
  for (let i = 0; i < 13; i++) {
    const host = i % 2 ? 'open.canada.ca' : 'open-data.canada.ca'
    seen.push(
      await h.dispatch({
        agent,
        callId: `c${i}`,
        name: 'bash',
        args: { command: `curl -s --max-time ${10 + i} https://${host}/data?q=fires`, description: ['1st', '2nd', '3rd'][i % 3] },
        run: ok('{"rows": 3}'),
      }),
    )
  }
  assert.deepEqual(
    seen.map((s) => s.verdict),
    [...Array(11).fill('run'), 'deny', 'deny'],
  )
  assert.match(seen[6].advisories[0], /^CONVERGENCE_CHECK: you are repeating yourself/)
  assert.match(seen[10].advisories[0], /summarise your progress/)
  assert.equal(seen[6].sources[0].kind, 'plugin')
  assert.equal(seen[6].sources[0].plugin, 'toolbrake-breaker')
  assert.match(seen[11].text, /^REPEAT_TOOL_BLOCKED: repeated bash \(semantic match\)/)
  assert.deepEqual(seen[11].advisories, [], 'a denied call brings no advisory')
})

test('an ask: declined keeps it blocked, a user message starts afresh, approved exempts', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { limits: { exact: 3, cmd: 3 }, warnAt: 0, summarizeAt: 0, progress: false })
  const agent = { id: 'a' }
  const call = (n, answer) => h.dispatch({ agent, callId: `c${n}`, name: 'bash', args: { command: 'ls /data' }, answer, run: ok('x') })
  await call(1)
  await call(2)
  const third = await call(3, 'decline')
  assert.equal(third.verdict, 'declined')
  assert.match(third.asked, /about to be blocked as a repeat/)
  const fourth = await call(4)
  assert.equal(fourth.verdict, 'deny', 'no second ask after a refusal')
  assert.match(fourth.text, /was NOT granted/)
  await h.userMessage(agent)
  await call(5)
  await call(6)
  const approved = await call(7, 'approve')
  assert.equal(approved.verdict, 'run')
  assert.equal((await call(8)).verdict, 'run', 'exempt for the rest of the turn')
})

test('consecutive failures get an advisory at 3 and a gate after 5; other agents are separate', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny', progress: false })
  const a = { id: 'a' }
  const b = { id: 'b' }
  const seen = []
  for (let i = 0; i < 6; i++) {
    seen.push(await h.dispatch({ agent: a, callId: `f${i}`, name: 'bash', args: { command: 'python3 test.py' }, run: fail('Traceback: ValueError: bad') }))
  }
  assert.match(seen[2].advisories[0], /^CONVERGENCE_CHECK: .* has failed 3 times in a row/)
  assert.equal(seen[5].verdict, 'deny')
  assert.match(seen[5].text, /consecutive failures/)
  const other = await h.dispatch({ agent: b, callId: 'g', name: 'bash', args: { command: 'python3 test.py' }, run: fail('x') })
  assert.equal(other.verdict, 'run')
})

test('calls without an agent are not counted; excluded tools never are', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny', limits: { exact: 2 } })
  for (let i = 0; i < 5; i++) {
    assert.equal((await h.dispatch({ agent: null, callId: `n${i}`, name: 'read', args: { p: 1 }, run: ok('x') })).verdict, 'run')
    assert.equal((await h.dispatch({ agent: { id: 'x' }, callId: `t${i}`, name: 'todo_write', args: { p: 1 }, run: ok('x') })).verdict, 'run')
  }
})

test('the configuration takes the original camelCase keys with toolbrake validation', () => {
  assert.deepEqual(Config({ warnAt: null, limits: { site: null, 'host:a.b': 30 } }), { warnAt: null, limits: { site: null, 'host:a.b': 30 } })
  const cases = [
    [{ window: 3 }, 'window'],
    [{ onLimit: 'maybe' }, 'onLimit'],
    [{ limits: { net: 1 } }, 'limits."net"'],
    [{ warnAt: 2.5 }, 'warnAt'],
    [{ denyAfter: 3 }, 'denyAfter'],
    [{ warnAtt: 3 }, 'warnAtt'],
    [{ tools: { urlPattern: '(' } }, 'tools.urlPattern'],
  ]
  for (const [config, key] of cases) {
    const h = fakeHost()
    assert.throws(
      () => breaker.apply(h.ctx, config),
      (e) => e instanceof BreakerConfigError && e.key === key,
      JSON.stringify(config),
    )
  }
  assert.throws(() => Config({ warnAtt: 3 }), /did you mean `warnAt`\?/)
  assert.throws(() => breaker.apply(fakeHost().ctx, 'x'), BreakerConfigError)
})

test('teardown removes every hook and the guard', async () => {
  const h = fakeHost()
  const dispose = breaker.apply(h.ctx, {})
  assert.equal(h.guards.length, 1)
  dispose()
  assert.equal(h.guards.length, 0)
  for (const list of h.handlers.values()) assert.equal(list.length, 0)
})

test('unserialisable arguments are an error for the host, not a crash', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny' })
  const cyclic = {}
  cyclic.me = cyclic
  await assert.rejects(
    h.dispatch({ agent: { id: 'a' }, callId: 'x', name: 'bash', args: cyclic, run: ok('x') }),
    /cycle/,
  )
})

test('a lone surrogate in a tool name or an argument is refused as unjudgeable', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny' })
  for (const [name, args] of [
    ['bash\udc00', { command: 'ls' }],
    ['bash', { command: 'ls \ud800' }],
  ]) {
    await assert.rejects(
      h.dispatch({ agent: { id: 'a' }, callId: 'x', name, args, run: ok('x') }),
      (e) => e.name === 'UnjudgeableArgumentsError' && /lone surrogate/.test(e.message),
    )
  }
})

test('arguments nested deeper than toolbrake reads are refused as unjudgeable', async () => {
  const h = fakeHost()
  breaker.apply(h.ctx, { onLimit: 'deny' })
  for (const depth of [129, 500, 1000]) {
    const args = { command: 'ls', extra: JSON.parse('['.repeat(depth) + ']'.repeat(depth)) }
    await assert.rejects(
      h.dispatch({ agent: { id: 'a' }, callId: `x${depth}`, name: 'bash', args, run: ok('x') }),
      (e) => e.name === 'UnjudgeableArgumentsError' && e instanceof TypeError && /the arguments of bash nest deeper than toolbrake reads/.test(e.message),
    )
  }
})

test('Config is a Standard Schema, as cordis validates a row', () => {
  const std = Config['~standard']
  assert.equal(std.version, 1)
  assert.deepEqual(std.validate({ warnAt: 5 }), { value: { warnAt: 5 } })
  const r = std.validate({ window: 2 })
  assert.equal(r.issues.length, 1)
  assert.deepEqual(r.issues[0].path, ['window'])
  assert.match(r.issues[0].message, /must be an integer from 4 to 4096/)
})

test('webFetchFile: the tool is registered, fetches to a file, and shell fetches are sent to it', async () => {
  const { createServer } = await import('node:http')
  const { mkdtempSync, readFileSync } = await import('node:fs')
  const { tmpdir } = await import('node:os')
  const { join } = await import('node:path')
  const server = createServer((req, res) => {
    res.writeHead(req.url === '/data.json' ? 200 : 404, { 'content-type': 'application/json' })
    res.end(req.url === '/data.json' ? '{"rows":[1,2]}' : '{"error":"missing"}')
  })
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok))
  const base = `http://127.0.0.1:${server.address().port}`
  try {
    const root = mkdtempSync(join(tmpdir(), 'toolbrake-fetch-'))
    const h = fakeHost()
    // The failure track's advisory on the third 404 (the same-output track, which stops an
    // identical call that came back the same at its third, is off).
    const dispose = breaker.apply(h.ctx, { onLimit: 'deny', sameOutputLimit: null, webFetchFile: { root, maxBytes: 1000 } })
    const tool = h.registry.get('web_fetch_file')
    assert.ok(tool, 'registered')
    const agent = { id: 'a' }
    const fetchRun = (url) => async () => {
      const value = await tool.execute({ url }, { agent })
      return { content: tool.output.render({ url }, value), value }
    }
    const got = await h.dispatch({ agent, callId: 'f1', name: 'web_fetch_file', args: { url: `${base}/data.json` }, run: fetchRun(`${base}/data.json`) })
    assert.equal(got.verdict, 'run')
    const value = await tool.execute({ url: `${base}/data.json`, path: 'out/data.json' }, { agent })
    assert.equal(value.statusCode, 200)
    assert.equal(readFileSync(join(root, 'out/data.json'), 'utf8'), '{"rows":[1,2]}')
    await assert.rejects(tool.execute({ url: `${base}/x`, path: '../escape' }, { agent }), /refusing to write outside the workspace root/)
    // 404s are failures: the third in a row is advised about.
    const missing = []
    for (let i = 0; i < 3; i++) {
      missing.push(await h.dispatch({ agent, callId: `m${i}`, name: 'web_fetch_file', args: { url: `${base}/missing` }, run: fetchRun(`${base}/missing`) }))
    }
    assert.match(missing[2].advisories[0] ?? '', /has failed 3 times in a row/)
    // A shell fetch is refused on its first call and sent to the tool.
    const curl = await h.dispatch({ agent, callId: 's1', name: 'bash', args: { command: 'curl -s https://api.example.com/v1' }, run: async () => ({}) })
    assert.equal(curl.verdict, 'deny')
    assert.match(curl.text, /^SHELL_HTTP_BLOCKED: this bash call fetches over HTTP \(curl\)/)
    assert.match(curl.text, /web_fetch_file\(url: "https:\/\/api\.example\.com\/v1"\)/)
    dispose()
    assert.equal(h.registry.has('web_fetch_file'), false)
    // Without the tool, shell fetches run.
    const h2 = fakeHost()
    breaker.apply(h2.ctx, {})
    const ran = await h2.dispatch({ agent, callId: 's2', name: 'bash', args: { command: 'curl -s https://api.example.com/v1' }, run: async () => ({}) })
    assert.equal(ran.verdict, 'run')
    assert.throws(() => breaker.apply(fakeHost().ctx, { webFetchFile: { maxBytes: 0 } }), (e) => e.key === 'webFetchFile.maxBytes')
  } finally {
    server.close()
  }
})

test('Config accepts webFetchFile, which configures the tool rather than the breaker', () => {
  assert.deepEqual(Config['~standard'].validate({ webFetchFile: true, warnAt: 3 }), { value: { webFetchFile: true, warnAt: 3 } })
})
