// Values cross into Rust as JSON text. What JSON cannot hold is refused here with a
// clear error, before anything is counted: a cycle, a BigInt, a function or a symbol in
// the arguments is the caller's bug, not a call toolbrake can judge.

/** Thrown when a value cannot be judged because JSON cannot represent it. */
export class UnjudgeableArgumentsError extends TypeError {
  constructor(message, options) {
    super(message, options)
    this.name = 'UnjudgeableArgumentsError'
    this.code = 'TOOLBRAKE_UNJUDGEABLE_ARGUMENTS'
  }
}

const LONE_SURROGATE = 'holds a lone surrogate (half of a UTF-16 pair), which is not text toolbrake can judge'

/**
 * A tool name as it crosses into Rust: text, or an UnjudgeableArgumentsError (a lone
 * surrogate has no UTF-8 form; two different names must never become the same one).
 * @param {unknown} tool
 * @returns {string}
 */
export function toolName(tool) {
  const name = String(tool ?? '')
  if (!name.isWellFormed()) throw new UnjudgeableArgumentsError(`toolbrake: the tool name ${LONE_SURROGATE}`)
  return name
}

/**
 * The JSON text of `value` (`undefined` and `null` read as `{}`).
 * @param {unknown} value
 * @param {string} what - what the value is, for messages ("the arguments of search").
 * @returns {string}
 */
export function toJson(value, what) {
  if (value === undefined || value === null) return '{}'
  // "the arguments of search" takes a plural verb, "the value" a singular one.
  const plural = /^the arguments\b/.test(what)
  let text
  try {
    text = JSON.stringify(value, (key, v) => {
      const where = key === '' ? what : `the value of key ${JSON.stringify(key)} in ${what}`
      const holds = key === '' && plural ? 'hold' : 'holds'
      if (!key.isWellFormed()) throw new UnjudgeableArgumentsError(`toolbrake: ${what} ${plural ? 'have' : 'has'} a key that ${LONE_SURROGATE}`)
      if (typeof v === 'string' && !v.isWellFormed()) throw new UnjudgeableArgumentsError(`toolbrake: ${where} ${holds} a string that ${LONE_SURROGATE}`)
      const kind = { bigint: 'a BigInt', function: 'a function', symbol: 'a symbol' }[typeof v]
      if (kind) throw new UnjudgeableArgumentsError(`toolbrake: ${where} ${holds} ${kind}, which JSON cannot represent`)
      return v
    })
  } catch (e) {
    if (e instanceof UnjudgeableArgumentsError) throw e
    const cycle = plural ? 'refer back to themselves (a cycle)' : 'refers back to itself (a cycle)'
    const why = /circular/i.test(String(e?.message)) ? cycle : `cannot be written as JSON (${e?.message ?? e})`
    throw new UnjudgeableArgumentsError(`toolbrake: ${what} ${why}, which toolbrake cannot judge`, { cause: e })
  }
  return text === undefined ? '{}' : text
}

/** What the addon says of JSON nested deeper than the core reads (128 levels). */
const TOO_DEEP = /nest deeper than toolbrake reads \((\d+) levels\)/

/**
 * Calls into the addon, turning its errors into the caller's error class: arguments nested
 * deeper than toolbrake reads are an UnjudgeableArgumentsError (JSON.stringify writes any
 * depth; the addon's reader stops at the core's limit), anything else a ToolBrakeError.
 * @template T
 * @param {() => T} fn
 * @param {string} [what] - the value `fn` passes the addon, for messages ("the arguments of search").
 * @returns {T}
 */
export function call(fn, what = 'the arguments') {
  try {
    return fn()
  } catch (e) {
    if (e instanceof UnjudgeableArgumentsError) throw e
    const deep = TOO_DEEP.exec(String(e?.message ?? ''))
    if (deep) {
      const verb = /^the arguments\b/.test(what) ? 'nest' : 'nests'
      throw new UnjudgeableArgumentsError(`toolbrake: ${what} ${verb} deeper than toolbrake reads (${deep[1]} levels), which toolbrake cannot judge`, { cause: e })
    }
    const err = new Error(String(e?.message ?? e), { cause: e })
    err.name = 'ToolBrakeError'
    throw err
  }
}

/**
 * The toolbrake outcome of a DSH tool result (`{content, value, isError}`). Never throws:
 * a getter that throws ends the reading, and what was read so far is the outcome (recording
 * must never replace what the tool returned).
 * @param {any} result
 */
export function outcomeOf(result) {
  const outcome = {}
  try {
    if (result?.isError === true) outcome.is_error = true
    const value = result?.value
    if (value && typeof value === 'object') {
      if (Number.isInteger(value.exitCode)) outcome.exit_code = value.exitCode
      if (Number.isInteger(value.statusCode)) outcome.status_code = value.statusCode
      if (value.timedOut === true) outcome.timed_out = true
      if (typeof value.signal === 'string') outcome.signal = value.signal
    }
    const text = renderResult(result)
    if (text) outcome.text = text
  } catch {
    // A hostile or broken result object: keep what was read.
  }
  return outcome
}

/**
 * The toolbrake outcome of a tool that threw `error`. Never throws: an error object whose
 * `message` getter (or `toString`) throws is recorded as a failure without its text, and
 * the tool's own error is what its caller sees.
 * @param {unknown} error
 */
export function errorOutcome(error) {
  const outcome = { is_error: true }
  try {
    const text = String(error?.message ?? error)
    if (text) outcome.text = text
  } catch {
    // Nothing readable: a failure all the same.
  }
  return outcome
}

/** The text blocks of a result, non-empty ones joined with newlines. */
export function renderResult(result) {
  const content = result?.content
  if (typeof result === 'string') return result
  if (!Array.isArray(content)) return ''
  return content
    .map((block) => (block && typeof block.text === 'string' ? block.text : ''))
    .filter(Boolean)
    .join('\n')
}
