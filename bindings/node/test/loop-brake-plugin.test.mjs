// loop-brake as a DSH plugin, in a fake host that dispatches like the real one.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import plugin, { LoopBrakeError } from 'toolbrake/loop-brake'

function host({ withExecute = true } = {}) {
  const registry = new Map()
  const disposers = []
  const tools = {
    register(def) {
      registry.set(def.name, def)
      return () => registry.delete(def.name)
    },
  }
  if (withExecute) {
    tools.execute = async (input) => registry.get(input.name).execute(input.arguments, input)
  }
  const ctx = { tools, on: (event, fn) => event === 'dispose' && disposers.push(fn) }
  return { ctx, registry, dispose: () => disposers.forEach((f) => f()) }
}

test('every tool registered afterwards is braked; a call crossing both seams counts once', async () => {
  const h = host()
  const originalRegister = h.ctx.tools.register
  const originalExecute = h.ctx.tools.execute
  const brake = plugin.apply(h.ctx, { maxRepeats: 3 })
  assert.equal(brake.maxRepeats, 3)
  let ran = 0
  h.ctx.tools.register({ name: 'bash', execute: async () => ({ content: [{ type: 'text', text: 'same' }] }) })
  h.ctx.tools.register({ name: 'count', execute: async () => ++ran })
  const agent = { id: 'session-1' }
  const call = (n, args) => h.ctx.tools.execute({ callId: `c${n}`, name: 'count', arguments: args, agent })
  await call(1, { x: 1 })
  await call(2, { x: 1 })
  await assert.rejects(call(3, { x: 1 }), (e) => e instanceof LoopBrakeError && e.count === 3 && e.sessionId === 'session-1')
  assert.equal(ran, 2)
  // Another agent has its own streak.
  await h.ctx.tools.execute({ callId: 'o1', name: 'count', arguments: { x: 1 }, agent: { id: 'session-2' } })
  assert.equal(ran, 3)
  // Dispose restores the registry and forgets every streak.
  h.dispose()
  assert.equal(h.ctx.tools.register, originalRegister)
  assert.equal(h.ctx.tools.execute, originalExecute)
  assert.equal(brake.sessions, 0)
  await call(4, { x: 1 })
  await call(5, { x: 1 })
  await call(6, { x: 1 })
  assert.equal(ran, 6, 'no longer braked after dispose')
})

test('through register alone (the DSH dispatch path), no tool is registered by the plugin', async () => {
  const h = host({ withExecute: false })
  plugin.apply(h.ctx, {})
  assert.equal(h.registry.size, 0)
  h.ctx.tools.register({ name: 'bash', execute: async () => 'ok' })
  const bash = h.registry.get('bash')
  const exec = (n) => ({ callId: `b${n}`, name: 'bash', agent: { id: 'a' } })
  await bash.execute({ command: 'ls' }, exec(1))
  await bash.execute({ command: 'ls' }, exec(2))
  assert.throws(() => bash.execute({ command: 'ls' }, exec(3)), LoopBrakeError)
})

test('an invalid maxRepeats fails when the plugin is applied', () => {
  const h = host()
  assert.throws(() => plugin.apply(h.ctx, { maxRepeats: 0 }), /maxRepeats/)
  assert.throws(() => plugin.apply({}, {}), /ctx\.tools\.register/)
})
