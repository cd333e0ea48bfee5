// The streak brake's public API, as the seed README describes it.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import {
  LoopBrake,
  LoopBrakeError,
  InvalidMaxRepeatsError,
  UnjudgeableArgumentsError,
  wrapExecute,
  decorateTool,
  callHash,
  canonicalJson,
  hashPrefix,
  sessionKey,
  normalizeMaxRepeats,
  resolveMaxRepeats,
} from 'toolbrake/loop-brake'
import * as root from 'toolbrake'
import { createHash } from 'node:crypto'

const refused = (fn) => {
  try {
    fn()
  } catch (e) {
    return e
  }
  return null
}

test('search {q: "weather"} is refused at the third call, before the body runs', async () => {
  const brake = new LoopBrake({ maxRepeats: 3 })
  let ran = 0
  const guarded = wrapExecute(async () => ++ran, brake, { tool: 'search', sessionId: 's1' })
  assert.equal(await guarded({ q: 'weather' }), 1)
  assert.equal(await guarded({ q: 'weather' }), 2)
  const e = refused(() => guarded({ q: 'weather' }))
  assert.ok(e instanceof LoopBrakeError, String(e))
  assert.equal(ran, 2, 'the body did not run')
  assert.equal(e.code, 'LOOP_BRAKE')
  assert.equal(e.toolName, 'search')
  assert.equal(e.count, 3)
  assert.equal(e.maxRepeats, 3)
  assert.equal(e.sessionId, 's1')
  assert.equal(e.plugin, 'dsh-loop-brake')
  assert.equal(e.hashPrefix, callHash('search', { q: 'weather' }).slice(0, 12))
  assert.match(e.message, /^loop brake: tool "search" called 3 times in a row with identical arguments \(call [0-9a-f]{12}…, limit 3\); the call was denied before it ran/)
  assert.ok(!e.message.includes('weather') && !JSON.stringify(e).includes('weather'), 'never the arguments')
})

test('key order is irrelevant, a trailing space is a different call', () => {
  assert.equal(callHash('t', { a: 1, b: 2 }), callHash('t', { b: 2, a: 1 }))
  assert.notEqual(callHash('search', { q: 'weather' }), callHash('search', { q: 'weather ' }))
  assert.equal(canonicalJson({ b: 1, a: [1, { d: 2, c: 3 }] }), '{"a":[1,{"c":3,"d":2}],"b":1}')
  const expected = createHash('sha256').update('search\n{"q":"weather"}').digest('hex')
  assert.equal(callHash('search', { q: 'weather' }), expected)
  assert.equal(hashPrefix(expected), expected.slice(0, 12))
  const brake = new LoopBrake()
  brake.check({ tool: 't', args: { a: 1, b: 2 }, sessionId: 'k' })
  brake.check({ tool: 't', args: { b: 2, a: 1 }, sessionId: 'k' })
  assert.ok(refused(() => brake.check({ tool: 't', args: { a: 1, b: 2 }, sessionId: 'k' })) instanceof LoopBrakeError)
})

test('alternation is not caught, and a different call resets the streak', () => {
  const brake = new LoopBrake()
  for (let i = 0; i < 10; i++) brake.check({ tool: i % 2 ? 'a' : 'b', args: {}, sessionId: 's' })
  brake.check({ tool: 'x', args: {}, sessionId: 's' })
  brake.check({ tool: 'x', args: {}, sessionId: 's' })
  brake.check({ tool: 'y', args: {}, sessionId: 's' })
  brake.check({ tool: 'x', args: {}, sessionId: 's' })
  brake.check({ tool: 'x', args: {}, sessionId: 's' })
  assert.ok(refused(() => brake.check({ tool: 'x', args: {}, sessionId: 's' })) instanceof LoopBrakeError)
})

test('sessions are isolated, with one slot each', () => {
  const brake = new LoopBrake()
  for (const s of ['a', 'b']) {
    brake.check({ tool: 'q', args: {}, sessionId: s })
    brake.check({ tool: 'q', args: {}, sessionId: s })
  }
  assert.equal(brake.sessions, 2)
  for (let i = 0; i < 1000; i++) brake.check({ tool: 'q', args: { i }, sessionId: 'a' })
  assert.equal(brake.sessions, 2, 'memory does not grow with the session')
  brake.reset('a')
  assert.equal(brake.sessions, 1)
  brake.reset()
  assert.equal(brake.sessions, 0)
})

test('maxRepeats 1 refuses every call; invalid values are refused when applied', () => {
  const one = new LoopBrake({ maxRepeats: 1 })
  assert.ok(refused(() => one.check({ tool: 't', args: {} })) instanceof LoopBrakeError)
  for (const bad of [0, -1, 2.5, NaN, Infinity, '3', null, 2 ** 40]) {
    assert.ok(refused(() => new LoopBrake({ maxRepeats: bad })) instanceof InvalidMaxRepeatsError, String(bad))
    assert.ok(refused(() => normalizeMaxRepeats(bad)) instanceof InvalidMaxRepeatsError, String(bad))
  }
  assert.equal(normalizeMaxRepeats(5), 5)
})

test('resolveMaxRepeats: the config wins, then the environment (digits only), then 3', () => {
  assert.equal(resolveMaxRepeats({ maxRepeats: 4 }, { DSH_LOOP_BRAKE_MAX_REPEATS: '7' }), 4)
  assert.equal(resolveMaxRepeats({}, { DSH_LOOP_BRAKE_MAX_REPEATS: '7' }), 7)
  assert.equal(resolveMaxRepeats({}, { TOOLBRAKE_MAX_REPEATS: '6', DSH_LOOP_BRAKE_MAX_REPEATS: '7' }), 6)
  assert.equal(resolveMaxRepeats({}, {}), 3)
  for (const bad of [' 3', '3\n', '0', '', 'many', '2.5']) {
    const e = refused(() => resolveMaxRepeats({}, { DSH_LOOP_BRAKE_MAX_REPEATS: bad }))
    assert.ok(e instanceof InvalidMaxRepeatsError, JSON.stringify(bad))
    assert.equal(e.source, 'DSH_LOOP_BRAKE_MAX_REPEATS')
  }
})

test('sessionKey: explicit, else the agent id, else default', () => {
  assert.equal(sessionKey('s1', { agent: { id: 'a1' } }), 's1')
  assert.equal(sessionKey(undefined, { agent: { id: 'a1' } }), 'a1')
  assert.equal(sessionKey(undefined, {}), 'default')
  assert.equal(sessionKey('', undefined), 'default')
})

test('decorateTool returns a braked copy and leaves the definition alone', async () => {
  const brake = new LoopBrake({ maxRepeats: 2 })
  const def = { name: 'search', description: 'd', execute: async (args) => `found ${args.q}` }
  const braked = decorateTool(def, brake)
  assert.notEqual(braked, def)
  assert.equal(braked.description, 'd')
  assert.equal(await braked.execute({ q: 'x' }, { agent: { id: 'ag' } }), 'found x')
  assert.ok(refused(() => braked.execute({ q: 'x' }, { agent: { id: 'ag' } })) instanceof LoopBrakeError)
  assert.equal(await def.execute({ q: 'x' }), 'found x', 'the original is not braked')
})

test('a poll whose result keeps changing is not a loop (progress), unless progress is off', async () => {
  for (const progress of [true, false]) {
    const brake = new LoopBrake({ progress })
    let n = 0
    const poll = wrapExecute(() => ({ content: [{ type: 'text', text: `job at ${(n += 17)} percent, step ${n}` }] }), brake, { tool: 'status', sessionId: 'p' })
    let stopped = null
    for (let i = 0; i < 6 && stopped === null; i++) {
      try {
        poll({ job: 1 })
      } catch (e) {
        stopped = i + 1
      }
    }
    assert.equal(stopped, progress ? null : 3, `progress ${progress}`)
  }
})

test('arguments JSON cannot hold get a clear error and count nothing', () => {
  const brake = new LoopBrake()
  const cyclic = {}
  cyclic.self = cyclic
  const deep = []
  let cur = deep
  for (let i = 0; i < 100000; i++) cur = cur[0] = []
  for (const args of [cyclic, { n: 10n }, { f() {} }, { s: Symbol('x') }, deep]) {
    const e = refused(() => brake.check({ tool: 't', args, sessionId: 'bad' }))
    assert.ok(e instanceof Error && !(e instanceof LoopBrakeError), String(e))
    assert.match(e.message, /toolbrake/)
  }
  const nested = JSON.parse('['.repeat(200) + ']'.repeat(200))
  const e = refused(() => brake.check({ tool: 't', args: nested, sessionId: 'bad' }))
  assert.match(String(e?.message), /nest|deep/i)
  assert.equal(brake.sessions, 0)
})

test('a lone surrogate in a tool name or an argument is an UnjudgeableArgumentsError and counts nothing', () => {
  const brake = new LoopBrake()
  for (const [tool, args] of [
    ['search\ud800', { q: 'weather' }],
    ['search', { q: 'weather \udc00' }],
    ['search', { ['\ud83d']: 1 }],
    ['search', [{ deep: ['\ud83d'] }]],
  ]) {
    const e = refused(() => brake.check({ tool, args, sessionId: 'bad' }))
    assert.ok(e instanceof UnjudgeableArgumentsError, String(e))
    assert.equal(e.code, 'TOOLBRAKE_UNJUDGEABLE_ARGUMENTS')
    assert.match(e.message, /lone surrogate/)
    const h = refused(() => callHash(tool, args))
    assert.ok(h instanceof UnjudgeableArgumentsError, String(h))
  }
  assert.equal(brake.sessions, 0)
  // A surrogate pair is ordinary text.
  assert.equal(typeof brake.check({ tool: 'search\ud83d\ude00', args: { q: '\ud83d\ude00' }, sessionId: 'ok' }), 'string')
})

test('arguments nested deeper than toolbrake reads are an UnjudgeableArgumentsError and count nothing', () => {
  const brake = new LoopBrake()
  const nested = (depth) => JSON.parse('['.repeat(depth) + ']'.repeat(depth))
  for (const depth of [129, 500, 1000]) {
    const args = { q: nested(depth) }
    const e = refused(() => brake.check({ tool: 'search', args, sessionId: 'deep' }))
    assert.ok(e instanceof UnjudgeableArgumentsError, `${depth}: ${e}`)
    assert.equal(e.code, 'TOOLBRAKE_UNJUDGEABLE_ARGUMENTS')
    assert.equal(e.message, 'toolbrake: the arguments of search nest deeper than toolbrake reads (128 levels), which toolbrake cannot judge')
    const h = refused(() => callHash('search', args))
    assert.ok(h instanceof UnjudgeableArgumentsError, `${depth}: ${h}`)
    const c = refused(() => canonicalJson(nested(depth)))
    assert.ok(c instanceof UnjudgeableArgumentsError, `${depth}: ${c}`)
    assert.match(c.message, /^toolbrake: the value nests deeper than toolbrake reads/)
  }
  assert.equal(brake.sessions, 0)
})

test('what cannot be judged is named in a grammatical sentence', () => {
  const brake = new LoopBrake()
  const cyclic = { q: 'weather' }
  cyclic.self = cyclic
  const says = (args) => refused(() => brake.check({ tool: 'search', args, sessionId: 's' }))?.message
  assert.equal(says(cyclic), 'toolbrake: the arguments of search refer back to themselves (a cycle), which toolbrake cannot judge')
  assert.equal(says({ n: 1n }), 'toolbrake: the value of key "n" in the arguments of search holds a BigInt, which JSON cannot represent')
  assert.match(refused(() => canonicalJson(10n)).message, /^toolbrake: the value holds a BigInt/)
  assert.equal(brake.sessions, 0)
})

test("a tool's error whose message getter throws is what the caller gets", async () => {
  const brake = new LoopBrake({ maxRepeats: 2, progress: true })
  const hostile = {
    get message() {
      throw new Error('getter')
    },
    toString() {
      throw new Error('toString')
    },
  }
  const sync = wrapExecute(() => {
    throw hostile
  }, brake, { tool: 'flaky', sessionId: 's' })
  assert.equal(refused(() => sync({ n: 1 })), hostile)
  const later = wrapExecute(async () => {
    throw hostile
  }, brake, { tool: 'flaky', sessionId: 'a' })
  await assert.rejects(later({ n: 1 }), (e) => e === hostile)
  // A result whose getters throw is still returned as the tool's result.
  const odd = {
    get content() {
      throw new Error('getter')
    },
  }
  const returns = wrapExecute(() => odd, brake, { tool: 'odd', sessionId: 'r' })
  assert.equal(returns({}), odd)
  // The brake keeps counting: the second identical call is refused at maxRepeats 2.
  assert.ok(refused(() => sync({ n: 1 })) instanceof LoopBrakeError)
})

test('the root export re-exports both subpaths', () => {
  assert.equal(root.LoopBrake, LoopBrake)
  assert.equal(typeof root.breaker.apply, 'function')
  assert.equal(typeof root.loopBrake.apply, 'function')
  assert.equal(root.breaker.name, 'toolbrake-breaker')
})
