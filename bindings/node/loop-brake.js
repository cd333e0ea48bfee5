// toolbrake/loop-brake: the streak brake (the seeds' dsh-loop-brake) as a library and as a
// DeepSeek Harness plugin. The Nth consecutive identical call of a session is refused
// (default 3) by throwing a LoopBrakeError before the tool body runs. Every decision, hash
// and message comes from toolbrake's Rust core through the native addon.
import { native } from './lib/native.js'
import { call, errorOutcome, outcomeOf, toJson, toolName, UnjudgeableArgumentsError } from './lib/json.js'

export { UnjudgeableArgumentsError }

/** The plugin's name. */
export const name = 'loop-brake'
/** Cordis services the plugin needs before `apply`. */
export const inject = ['tools']
/** What every refusal names as its source. */
export const PLUGIN = 'dsh-loop-brake'
/** The default streak length at which a call is refused. */
export const DEFAULT_MAX_REPEATS = 3
/** Environment variables read when the configuration has no `maxRepeats`, in order. */
export const ENV_VARS = ['TOOLBRAKE_MAX_REPEATS', 'DSH_LOOP_BRAKE_MAX_REPEATS']

/** A call refused by the brake: thrown, never returned. Never carries the arguments. */
export class LoopBrakeError extends Error {
  constructor(refusal, message) {
    super(message)
    this.name = 'LoopBrakeError'
    this.code = 'LOOP_BRAKE'
    this.toolName = refusal.tool
    this.count = refusal.count
    this.maxRepeats = refusal.max_repeats
    this.hashPrefix = refusal.hash_prefix
    this.sessionId = refusal.session
    this.plugin = PLUGIN
  }
}

/** A `maxRepeats` that cannot be used (not an integer of at least 1). */
export class InvalidMaxRepeatsError extends RangeError {
  constructor(value, source, rule) {
    super(`loop brake: maxRepeats ${source === 'maxRepeats' ? '' : `from ${source} `}= ${describe(value)} is not valid: it ${rule}.`)
    this.name = 'InvalidMaxRepeatsError'
    this.code = 'INVALID_MAX_REPEATS'
    this.value = value
    this.source = source
  }
}

function describe(value) {
  if (typeof value === 'string') return JSON.stringify(value)
  if (typeof value === 'bigint') return `${value}n`
  try {
    return JSON.stringify(value) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * The canonical JSON of a value: object keys sorted at every level, nothing else changed.
 * @param {unknown} value
 */
export function canonicalJson(value) {
  return call(() => native.canonicalJson(toJson(value, 'the value')), 'the value')
}

/**
 * The call hash: sha256(toolName + "\n" + canonicalJson(args)), in hex.
 * @param {string} tool
 * @param {unknown} args
 */
export function callHash(tool, args) {
  const name = toolName(tool)
  const what = `the arguments of ${name}`
  return call(() => native.callHash(name, toJson(args, what)), what)
}

/** The first 12 hex characters of a call hash, and no more. */
export function hashPrefix(hash) {
  return String(hash).slice(0, 12)
}

/**
 * The session a call counts in: the explicit `sessionId`, else the calling agent's id
 * from the execution input, else `default`.
 * @param {string | undefined} sessionId
 * @param {any} [exec] - the host's execution input (`{agent: {id}}`).
 */
export function sessionKey(sessionId, exec) {
  const agent = exec?.agent?.id ?? exec?.exec?.agent?.id
  return native.sessionKey(
    typeof sessionId === 'string' ? sessionId : undefined,
    typeof agent === 'string' ? agent : undefined,
  )
}

/**
 * A validated `maxRepeats`: an integer of at least 1, else an InvalidMaxRepeatsError.
 * @param {unknown} value
 * @param {string} [source] - where it came from, for the message.
 * @returns {number}
 */
export function normalizeMaxRepeats(value, source = 'maxRepeats') {
  if (typeof value !== 'number') {
    throw new InvalidMaxRepeatsError(value, source, 'must be a number: a whole number of at least 1')
  }
  try {
    native.checkConfig(JSON.stringify({ streak: { max_repeats: value } }))
  } catch (e) {
    let rule = 'must be a whole number of at least 1'
    try {
      rule = JSON.parse(e.message).rule
    } catch {
      /* the addon's message was not a configuration error */
    }
    throw new InvalidMaxRepeatsError(value, source, rule)
  }
  return value
}

/**
 * `maxRepeats` from the configuration, else from the environment (digits only), else 3;
 * validated here, when the configuration is applied, never at the first call.
 * @param {{maxRepeats?: unknown}} [config]
 * @param {Record<string, string | undefined>} [env]
 */
export function resolveMaxRepeats(config = {}, env = process.env) {
  if (config && config.maxRepeats !== undefined) return normalizeMaxRepeats(config.maxRepeats)
  for (const key of ENV_VARS) {
    const raw = env?.[key]
    if (raw === undefined) continue
    if (!/^[0-9]+$/.test(raw)) throw new InvalidMaxRepeatsError(raw, key, 'must be digits only: a whole number of at least 1')
    return normalizeMaxRepeats(Number(raw), key)
  }
  return DEFAULT_MAX_REPEATS
}

let nextId = 0
const freshId = () => `loop-brake-${process.pid}-${++nextId}`

/**
 * The streak brake. One slot per session: the current call's hash and its count.
 * With `progress` (default on), an identical call whose previous identical call returned
 * something new starts the streak again (polling is not looping); `progress: false` is
 * the seeds' exact rule.
 */
export class LoopBrake {
  /**
   * @param {{maxRepeats?: number, progress?: boolean}} [options]
   */
  constructor(options = {}) {
    const maxRepeats = options.maxRepeats === undefined ? DEFAULT_MAX_REPEATS : normalizeMaxRepeats(options.maxRepeats)
    if (options.progress !== undefined && typeof options.progress !== 'boolean') {
      throw new TypeError(`loop brake: progress = ${describe(options.progress)} is not valid: it must be a boolean`)
    }
    this.#engine = new native.NativeEngine(
      JSON.stringify({ streak: { max_repeats: maxRepeats, progress: options.progress ?? true }, breaker: { enabled: false } }),
    )
    this.maxRepeats = maxRepeats
  }

  #engine

  /**
   * Judges a call before it runs: returns its call id, or throws a LoopBrakeError.
   * The same `callId` seen twice (two seams of one host call) counts once.
   * @param {{tool: string, args?: unknown, sessionId?: string, callId?: string}} call
   * @returns {string} the call id, for {@link LoopBrake#record}
   */
  check({ tool, args, sessionId, callId }) {
    const session = typeof sessionId === 'string' && sessionId !== '' ? sessionId : 'default'
    const id = typeof callId === 'string' && callId !== '' ? callId : freshId()
    const name = toolName(tool)
    const what = `the arguments of ${name}`
    const json = toJson(args, what)
    const d = JSON.parse(call(() => this.#engine.pre(session, id, name, json), what))
    if (d.verdict === 'deny' && d.streak) throw new LoopBrakeError(d.streak, d.message)
    return id
  }

  /**
   * What a checked call returned (a DSH result, a string, or anything with `content`),
   * or `{error}` when it threw. Feeds the progress signal; unknown ids are ignored.
   */
  record({ sessionId, callId, result, error }) {
    const session = typeof sessionId === 'string' && sessionId !== '' ? sessionId : 'default'
    // Never throws: recording must not replace what the tool returned or threw.
    const outcome = error !== undefined ? errorOutcome(error) : outcomeOf(result)
    try {
      this.#engine.post(session, callId, JSON.stringify(outcome))
    } catch {
      // Already recorded through another seam, or never checked: nothing to count.
    }
  }

  /** Forgets one session's streak, or every session's. */
  reset(sessionId) {
    if (sessionId === undefined) this.#engine.forgetAll()
    else this.#engine.end(String(sessionId))
  }

  /** Sessions currently remembered (one slot each). */
  get sessions() {
    return this.#engine.sessionCount()
  }
}

/**
 * Wraps one `execute(args, exec)`: each call is judged first (a refusal is thrown before
 * the body runs), and what it returned is recorded.
 * @param {(args: any, exec?: any) => any} execute
 * @param {LoopBrake} brake
 * @param {{tool: string, sessionId?: string}} options
 */
export function wrapExecute(execute, brake, { tool, sessionId } = {}) {
  if (typeof execute !== 'function') throw new TypeError('wrapExecute: execute must be a function')
  if (!(brake instanceof LoopBrake)) throw new TypeError('wrapExecute: brake must be a LoopBrake')
  return function braked(args, exec, ...rest) {
    const session = sessionKey(sessionId, exec)
    const callId = brake.check({
      tool: tool ?? exec?.name ?? '',
      args,
      sessionId: session,
      callId: typeof exec?.callId === 'string' ? exec.callId : undefined,
    })
    const done = (result, error) => brake.record({ sessionId: session, callId, result, error })
    let out
    try {
      out = execute.call(this, args, exec, ...rest)
    } catch (error) {
      done(undefined, error)
      throw error
    }
    if (out && typeof out.then === 'function') {
      return out.then(
        (result) => {
          done(result)
          return result
        },
        (error) => {
          done(undefined, error)
          throw error
        },
      )
    }
    done(out)
    return out
  }
}

/**
 * A copy of a tool definition whose `execute` is braked; the original is unchanged.
 * @template {{name: string, execute: Function}} T
 * @param {T} definition
 * @param {LoopBrake} brake
 * @param {{sessionId?: string}} [options]
 * @returns {T}
 */
export function decorateTool(definition, brake, { sessionId } = {}) {
  if (!definition || typeof definition.execute !== 'function') {
    throw new TypeError('decorateTool: the definition has no execute function')
  }
  return { ...definition, execute: wrapExecute(definition.execute, brake, { tool: definition.name, sessionId }) }
}

/**
 * The DeepSeek Harness plugin: every tool registered after it is braked (`ctx.tools.register`
 * is patched), and so is `ctx.tools.execute` when the host exposes it (tools registered
 * earlier). A call crossing both seams counts once. No tool is registered. Disposing
 * restores both and forgets every streak.
 * @param {any} ctx
 * @param {{maxRepeats?: number, sessionId?: string, progress?: boolean}} [config]
 * @returns {LoopBrake & {dispose(): void}}
 */
export function apply(ctx, config = {}) {
  const brake = new LoopBrake({ maxRepeats: resolveMaxRepeats(config ?? {}), progress: config?.progress })
  const tools = ctx?.tools
  if (!tools || typeof tools.register !== 'function') {
    throw new TypeError('loop-brake: ctx.tools.register is missing (inject ["tools"])')
  }
  let active = true
  const sessionId = config?.sessionId
  const restore = []
  const patch = (key, replacement) => {
    const own = Object.prototype.hasOwnProperty.call(tools, key)
    const before = tools[key]
    tools[key] = replacement
    restore.push(() => {
      if (own) tools[key] = before
      else delete tools[key]
    })
  }

  const register = tools.register
  patch('register', function (definition, ...rest) {
    if (!definition || typeof definition.execute !== 'function') return register.call(this, definition, ...rest)
    const braked = wrapExecute(definition.execute, brake, { tool: definition.name, sessionId })
    const original = definition.execute
    const execute = function (args, exec, ...more) {
      return active ? braked.call(this, args, exec, ...more) : original.call(this, args, exec, ...more)
    }
    return register.call(this, { ...definition, execute }, ...rest)
  })

  if (typeof tools.execute === 'function') {
    const execute = tools.execute
    patch('execute', function (input, ...rest) {
      if (!active || !input) return execute.call(this, input, ...rest)
      const session = sessionKey(sessionId, input)
      let callId
      try {
        callId = brake.check({
          tool: input.name ?? '',
          args: input.arguments,
          sessionId: session,
          callId: typeof input.callId === 'string' ? input.callId : undefined,
        })
      } catch (refusal) {
        // execute answers with a promise: a refusal is its rejection.
        return Promise.reject(refusal)
      }
      const result = execute.call(this, input, ...rest)
      return Promise.resolve(result).then(
        (value) => {
          brake.record({ sessionId: session, callId, result: value })
          return value
        },
        (error) => {
          brake.record({ sessionId: session, callId, error })
          throw error
        },
      )
    })
  }

  const dispose = () => {
    if (!active) return
    active = false
    for (const undo of restore.reverse()) undo()
    brake.reset()
  }
  if (typeof ctx.on === 'function') ctx.on('dispose', dispose)
  brake.dispose = dispose
  return brake
}

export default { name, inject, apply }
