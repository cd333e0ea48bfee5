// toolbrake/breaker: the breaker (the seed's dsh-repeat-tool-breaker) as a DeepSeek
// Harness plugin with the original's shape and hooks, over toolbrake's Rust core:
//
// - `tools/pre-execute` judges a call first and asks the operator at a gate
//   (`onLimit: 'ask'`); a declined ask never reaches the guard;
// - the synchronous `ctx.tools.guard` judges the calls pre-execute did not (and settles
//   an approved ask): a returned string is the denial the model reads;
// - `tools/post-execute` records what the call did (failures, progress) and delivers the
//   advisories as `additionalContexts` stamped with this plugin as their source;
// - `agent/pre-step` starts an agent afresh on a real user message.
//
// State is per agent object (a sub-agent has its own budget). The configuration takes
// the original's camelCase keys, validated by toolbrake's rules when applied.
import { native } from './lib/native.js'
import { call, outcomeOf, toJson, toolName, UnjudgeableArgumentsError } from './lib/json.js'

export { UnjudgeableArgumentsError }

/** The plugin's name (the source stamped on its advisories). */
export const name = 'toolbrake-breaker'
/** Cordis services the plugin needs before `apply`. */
export const inject = ['tools']

/** A configuration that cannot be used: the key (as written), the value and the rule. */
export class BreakerConfigError extends TypeError {
  constructor({ key, value, rule: raw }) {
    // Name other settings as the caller writes them (`warnAt`, not `breaker.warn_at`).
    const rule = String(raw).replace(/`breaker\.([a-z_]+)`/g, (_, k) => `\`${camel(k)}\``)
    super(`toolbrake breaker: \`${key}\`${value === '(set)' ? ` ${rule}` : ` = ${value} is not valid: it ${rule}`}${/[.?)]$/.test(rule) ? '' : '.'}`)
    this.name = 'BreakerConfigError'
    this.code = 'TOOLBRAKE_CONFIG'
    this.key = key
    this.value = value
    this.rule = rule
  }
}

/** Keys whose `null` means "off" (the original's spelling of a disabled stage or gate). */
const NULLABLE = new Set(['warnAt', 'summarizeAt', 'failWarnAt', 'failLimit', 'struggleWarnAt', 'struggleAskAt', 'cycleLimit', 'unchangedLimit', 'sameOutputLimit'])
/** Tables whose keys are names (fingerprints, tools, hosts), never renamed. */
const NAMED = new Set(['limits', 'ignoreArgs', 'hostAliases'])

const snake = (k) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)
const camel = (k) => k.replace(/_([a-z])/g, (_, c) => c.toUpperCase())

/**
 * The original's camelCase configuration as toolbrake's `[breaker]` section.
 * @param {Record<string, unknown>} config
 */
function toSection(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new BreakerConfigError({ key: '(config)', value: JSON.stringify(config) ?? String(config), rule: 'must be an object' })
  }
  const out = {}
  for (const [key, value] of Object.entries(config)) {
    if (value === undefined) continue
    let v = value
    if (value === null && NULLABLE.has(key)) v = 'off'
    else if (NAMED.has(key) && value && typeof value === 'object' && !Array.isArray(value)) {
      v = Object.fromEntries(Object.entries(value).map(([k, x]) => [k, x === null && key === 'limits' ? 'off' : x]))
    } else if (key === 'tools' && value && typeof value === 'object' && !Array.isArray(value)) {
      v = Object.fromEntries(Object.entries(value).map(([k, x]) => [snake(k), x]))
    }
    out[snake(key)] = v
  }
  return out
}

/** `breaker.warn_at` → `warnAt`; `breaker.limits."x"` → `limits."x"`. */
function keyAsWritten(key) {
  const rest = key.replace(/^breaker\./, '')
  const [head, ...tail] = rest.split('.')
  return [camel(head), ...tail.map((t) => (t.startsWith('"') ? t : camel(t)))].join('.')
}

/**
 * Validates a configuration the way `apply` does, without applying it: returns it, or
 * throws a BreakerConfigError. It is also a Standard Schema (`Config['~standard']`), which
 * is how cordis validates a profile row's config before the plugin starts.
 * @param {Record<string, unknown>} [config]
 */
export function Config(config = {}) {
  parse(withoutFetch(config ?? {}))
  return config ?? {}
}

/** The engine's part of a configuration: `webFetchFile` configures the tool, not the breaker. */
function withoutFetch(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) return config
  const { webFetchFile: _, ...rest } = config
  return rest
}

Config['~standard'] = Object.freeze({
  version: 1,
  vendor: 'toolbrake',
  validate(value) {
    try {
      parse(withoutFetch(value ?? {}))
      return { value: value ?? {} }
    } catch (e) {
      if (!(e instanceof BreakerConfigError)) throw e
      return { issues: [{ message: e.message, path: e.key.startsWith('(') ? undefined : e.key.split('.') }] }
    }
  },
})

function parse(config) {
  const section = toSection(config)
  let json
  try {
    json = JSON.stringify({ streak: { enabled: false }, breaker: section })
  } catch (e) {
    throw new BreakerConfigError({ key: '(config)', value: '(unserialisable)', rule: `must be JSON (${e.message})` })
  }
  try {
    return { json, effective: JSON.parse(native.checkConfig(json)) }
  } catch (e) {
    let err
    try {
      err = JSON.parse(e.message)
    } catch {
      throw e
    }
    throw new BreakerConfigError({ ...err, key: keyAsWritten(err.key) })
  }
}

const parts = (exec) => ({
  tool: exec?.name ?? exec?.toolName ?? exec?.tool?.name ?? '',
  args: exec?.arguments ?? exec?.args ?? {},
  agent: exec?.agent ?? exec?.exec?.agent ?? null,
})

function messageId() {
  const uuid = globalThis.crypto?.randomUUID?.()
  return `${name}-${uuid ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`}`
}

/** An advisory as an `additionalContexts` entry: user-role content, this plugin as source. */
function notice(advisory) {
  return Object.freeze({
    id: messageId(),
    role: 'user',
    content: Object.freeze([Object.freeze({ type: 'text', text: advisory.text })]),
    source: Object.freeze({ kind: 'plugin', plugin: name, form: 'notice', summary: `${advisory.fingerprint} × ${advisory.count}` }),
  })
}

/** The fetch-to-file tool's name. */
export const FETCH_TOOL = 'web_fetch_file'

/**
 * The fetcher for `webFetchFile: true | {root?, outputDir?, maxBytes?, timeout?,
 * maxRedirects?, userAgent?, allowPrivateHosts?, cookieJar?}` (`timeout`: "30s", or
 * milliseconds; `root`: the workspace, default the working directory).
 */
function newFetcher(option) {
  const { root = process.cwd(), ...settings } = option === true ? {} : option
  if (typeof option !== 'boolean' && (option === null || typeof option !== 'object' || Array.isArray(option))) {
    throw new BreakerConfigError({ key: 'webFetchFile', value: JSON.stringify(option), rule: 'must be true or an object of fetch settings' })
  }
  const table = {}
  for (const [k, v] of Object.entries(settings)) table[snake(k)] = k === 'timeout' && typeof v === 'number' ? `${v}ms` : v
  try {
    return new native.NativeFetcher(String(root), JSON.stringify(table))
  } catch (e) {
    let err
    try {
      err = JSON.parse(e.message)
    } catch {
      throw new BreakerConfigError({ key: 'webFetchFile.root', value: JSON.stringify(root), rule: String(e.message) })
    }
    throw new BreakerConfigError({ ...err, key: `webFetchFile.${camel(err.key.replace(/^fetch\./, ''))}` })
  }
}

/** The DSH tool definition of web_fetch_file over a fetcher. */
function fetchToolDefinition(fetcher, sessionOf) {
  return {
    name: FETCH_TOOL,
    description:
      'Fetches an http(s) URL and saves the response body to a file in the workspace. Returns the path, the HTTP status code, the size, the content type and the final URL, never the body: read the file with your usual tools (jq, grep, python3). Use it instead of curl or wget in a shell.',
    parameters: {
      type: 'object',
      properties: {
        url: { type: 'string', description: 'The http:// or https:// URL to fetch.' },
        path: { type: 'string', description: 'Where to save the body, relative to the workspace root (optional).' },
      },
      required: ['url'],
    },
    output: {
      schema: { type: 'object' },
      render: (_args, value) => [{ type: 'text', text: JSON.stringify(value) }],
    },
    async execute(args, exec) {
      const r = JSON.parse(await fetcher.fetch(sessionOf(exec), toJson(args, `the arguments of ${FETCH_TOOL}`)))
      if (r.error !== undefined) throw new Error(r.error)
      return r.ok
    },
  }
}

export const hasUserMessage = (messages) => Array.isArray(messages) && messages.some((m) => m?.source?.kind === 'user')

/**
 * Installs the breaker.
 * @param {any} ctx - the plugin context (`ctx.tools`, `ctx.on`).
 * @param {Record<string, unknown>} [config] - the original's camelCase keys.
 * @returns {() => void} teardown
 */
export function apply(ctx, config = {}) {
  const { webFetchFile, ...rest } = config ?? {}
  const { json, effective } = parse(rest)
  const fetcher = webFetchFile ? newFetcher(webFetchFile) : null
  // With the tool offered here, the shell-HTTP block sends shell fetches to it.
  const engine = new native.NativeEngine(json, fetcher ? FETCH_TOOL : undefined)
  // Only an ask needs judging before the guard; otherwise the guard is the one counter
  // (a call another plugin's pre-execute denies is never counted).
  const asks = effective.breaker.on_limit === 'ask'

  // One session per agent object; its state is dropped when the agent is collected.
  const keys = new WeakMap()
  let nextAgent = 0
  const ended = new FinalizationRegistry((key) => {
    try {
      engine.end(key)
    } catch {
      /* already gone */
    }
  })
  const keyOf = (agent) => {
    let key = keys.get(agent)
    if (key === undefined) {
      key = `agent-${++nextAgent}${typeof agent?.id === 'string' ? `:${agent.id}` : ''}`
      keys.set(agent, key)
      ended.register(agent, key)
    }
    return key
  }
  const callIds = new WeakMap()
  let nextCall = 0
  const callIdOf = (exec) => {
    let id = callIds.get(exec)
    if (id === undefined) {
      id = `${typeof exec?.callId === 'string' ? exec.callId : 'call'}#${++nextCall}`
      callIds.set(exec, id)
    }
    return id
  }

  /** exec → the decision taken on it. */
  const decided = new WeakMap()
  /** exec → true while its ask waits for the operator. */
  const asking = new WeakMap()

  const judge = (exec, tool, args, agent) => {
    const name = toolName(tool)
    const what = `the arguments of ${name}`
    const d = JSON.parse(call(() => engine.pre(keyOf(agent), callIdOf(exec), name, toJson(args, what)), what))
    decided.set(exec, d)
    return d
  }

  const teardown = []
  const on = (event, fn) => {
    const off = ctx.on(event, fn)
    if (typeof off === 'function') teardown.push(off)
  }

  on('tools/pre-execute', async (exec, next) => {
    const { tool, args, agent } = parts(exec)
    if (!asks || agent === null || decided.has(exec)) return next()
    const d = judge(exec, tool, args, agent)
    if (d.verdict === 'ask') {
      asking.set(exec, true)
      return { kind: 'ask', reason: d.message }
    }
    return next()
  })

  const guard = (exec) => {
    const { tool, args, agent } = parts(exec)
    if (agent === null) return undefined
    let d = decided.get(exec)
    if (asking.get(exec) === true) {
      // Reaching the guard with an ask pending: the operator approved it.
      asking.delete(exec)
      d = JSON.parse(call(() => engine.answer(keyOf(agent), callIdOf(exec), true)))
      decided.set(exec, d)
    } else if (d === undefined) {
      d = judge(exec, tool, args, agent)
    }
    return d.verdict === 'deny' ? d.message : undefined
  }
  const offGuard = ctx.tools.guard(guard)
  if (typeof offGuard === 'function') teardown.push(offGuard)

  on('tools/post-execute', async (exec, result, next) => {
    const { agent } = parts(exec)
    const owed = []
    const d = decided.get(exec)
    if (agent !== null && d !== undefined) {
      const key = keyOf(agent)
      const id = callIdOf(exec)
      if (asking.get(exec) === true) {
        // An ask still pending after the call: the operator declined (it never ran).
        asking.delete(exec)
        call(() => engine.answer(key, id, false))
      } else {
        const p = JSON.parse(call(() => engine.post(key, id, JSON.stringify(outcomeOf(result)))))
        if (d.verdict !== 'deny') owed.push(...p.advisories, ...d.advisories)
      }
      decided.delete(exec)
    }
    const downstream = await next()
    if (owed.length === 0) return downstream
    const existing = Array.isArray(downstream?.additionalContexts) ? downstream.additionalContexts : []
    return { ...downstream, additionalContexts: [...owed.map(notice), ...existing] }
  })

  if (fetcher) {
    const off = ctx.tools.register(fetchToolDefinition(fetcher, (exec) => (exec?.agent ? keyOf(exec.agent) : 'default')))
    if (typeof off === 'function') teardown.push(off)
  }

  on('agent/pre-step', (input, next) => {
    const agent = input?.agent ?? null
    if (agent !== null && hasUserMessage(input?.messages)) engine.userMessage(keyOf(agent))
    return next()
  })

  return () => {
    for (const fn of teardown.splice(0)) {
      try {
        fn()
      } catch {
        /* best-effort teardown */
      }
    }
    engine.forgetAll()
  }
}

export default { name, inject, apply, Config }
