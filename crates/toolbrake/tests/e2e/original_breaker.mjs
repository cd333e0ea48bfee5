// Drives the original JavaScript breaker (the npm package dsh-repeat-tool-breaker) through
// its real DSH hooks, the way the DeepSeek Harness pipeline calls them: tools/pre-execute
// (which may ask), the synchronous guard (which may deny), the tool "runs", then
// tools/post-execute with the recorded result. An ask is unattended (declined), as in a
// replay. Reads toolbrake protocol events (call / result / end) on stdin and prints one
// line per call: {"id", "verdict": "run" | "ask" | "deny"}.
//
// Usage: node original_breaker.mjs <node_modules> < events.jsonl
import { createInterface } from 'node:readline'
import { pathToFileURL } from 'node:url'
import { join } from 'node:path'

const nodeModules = process.argv[2]
const plugin = await import(
  pathToFileURL(join(nodeModules, 'dsh-repeat-tool-breaker', 'index.js')).href
)

const handlers = new Map()
let guard = null
const ctx = {
  on(event, fn) {
    handlers.set(event, fn)
    return () => handlers.delete(event)
  },
  tools: {
    guard(fn) {
      guard = fn
      return () => {
        guard = null
      }
    },
  },
}
plugin.apply(ctx, {})

const agents = new Map()
const agentOf = (session) => {
  if (!agents.has(session)) agents.set(session, { id: session })
  return agents.get(session)
}
// call id -> { exec, verdict }
const open = new Map()

const passThrough = async () => ({ kind: 'accept' })

/** The DSH result shape for a recorded toolbrake outcome. */
function resultOf(outcome) {
  const value = {}
  if (typeof outcome.exit_code === 'number') value.exitCode = outcome.exit_code
  if (typeof outcome.status_code === 'number') value.statusCode = outcome.status_code
  if (outcome.timed_out === true) value.timedOut = true
  if (typeof outcome.signal === 'string') value.signal = outcome.signal
  const result = {
    content: typeof outcome.text === 'string' ? [{ type: 'text', text: outcome.text }] : [],
    value,
  }
  if (outcome.is_error === true) result.isError = true
  return result
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity })
for await (const line of lines) {
  if (!line.trim()) continue
  const ev = JSON.parse(line)
  if (ev.event === 'call') {
    const exec = { callId: ev.id, name: ev.tool, arguments: ev.args ?? {}, agent: agentOf(ev.session) }
    let verdict = 'run'
    const pre = handlers.get('tools/pre-execute')
    const decision = pre ? await pre(exec, async () => ({ kind: 'allow' })) : { kind: 'allow' }
    if (decision?.kind === 'ask') {
      verdict = 'ask' // unattended: declined, the guard is never reached
    } else if (decision?.kind === 'deny') {
      verdict = 'deny'
    } else if (guard && typeof guard(exec) === 'string') {
      verdict = 'deny'
    }
    open.set(ev.id, { exec, verdict })
    process.stdout.write(JSON.stringify({ id: ev.id, verdict }) + '\n')
  } else if (ev.event === 'result') {
    const entry = open.get(ev.id)
    if (!entry) continue
    open.delete(ev.id)
    const post = handlers.get('tools/post-execute')
    // A denied or declined call reaches post-execute too (the pipeline's rule); its
    // "result" is the denial, which the breaker ignores for calls it stopped.
    const result = entry.verdict === 'run' ? resultOf(ev.outcome ?? {}) : { isError: true, content: [] }
    if (post) await post(entry.exec, result, passThrough)
  } else if (ev.event === 'end') {
    agents.delete(ev.session)
  }
}
