// toolbrake/claude-agent-sdk: toolbrake as programmatic hooks of the Claude Agent SDK
// (`@anthropic-ai/claude-agent-sdk`): pass what `toolbrakeHooks()` returns as the `hooks`
// option of `query()`.
//
// The SDK runs Claude Code underneath and hands each hook callback the payload a Claude
// Code command hook reads on stdin; the callback answers with the JSON such a hook prints.
// So the callbacks answer exactly as `toolbrake hook claude` does (the same Rust adapter,
// through the native addon): a refused call gets `permissionDecision: "deny"` with the
// text the model reads, an ask `permissionDecision: "ask"` (the SDK's `canUseTool`
// decides), an advisory `additionalContext`; `PostToolUse` / `PostToolUseFailure` record
// the outcome; `UserPromptSubmit` starts the session afresh; `Stop`, `PostToolBatch` and
// `SubagentStop` close calls that never got an outcome; `SessionEnd` forgets the session.
// Sessions are the SDK's `session_id` (plus `agent_id` for a sub-agent), in memory.
import { engineFor, ToolBrakeConfigError } from './lib/config.js'

export { ToolBrakeConfigError }

/** The hook events toolbrake listens to. */
export const HOOK_EVENTS = Object.freeze([
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'UserPromptSubmit',
  'Stop',
  'PostToolBatch',
  'SubagentStop',
  'SessionEnd',
])

function writeWarning(text) {
  process.stderr.write(`toolbrake: ${text}\n`)
}

/**
 * The `hooks` option of the Claude Agent SDK's `query()`, with toolbrake's callbacks.
 *
 * @param {object} [options]
 * @param {{streak?: object, breaker?: object}} [options.config] - the `[streak]` and
 *   `[breaker]` tables of `toolbrake.toml` as an object (snake_case keys, validated here:
 *   an invalid value throws a ToolBrakeConfigError naming the key).
 * @param {boolean} [options.failClosed] - refuse a tool call toolbrake cannot judge (and
 *   set `onFailure: 'block'` on the `PreToolUse` matcher, so a callback that fails blocks
 *   the call too); default false: such a call runs, with a warning.
 * @param {string | ((input: any) => string)} [options.session] - count every call in this
 *   session (or the one the function names for a hook input) instead of the SDK's
 *   `session_id`.
 * @param {number} [options.timeout] - the matchers' timeout in seconds (the SDK's default
 *   otherwise).
 * @param {(warning: string) => void} [options.onWarning] - problems toolbrake met (never
 *   argument values); default: written to stderr.
 * @returns {Record<string, Array<{matcher?: string, hooks: Function[], timeout?: number, onFailure?: 'continue' | 'block'}>>}
 */
export function toolbrakeHooks(options = {}) {
  const { config = {}, failClosed = false, session, timeout, onWarning = writeWarning } = options ?? {}
  if (typeof failClosed !== 'boolean') {
    throw new ToolBrakeConfigError({ key: 'failClosed', value: String(failClosed), rule: 'must be a boolean', message: '`failClosed` must be true or false' })
  }
  const engine = engineFor(config)

  const callback = async (input) => {
    let payload = input
    if (session !== undefined && input !== null && typeof input === 'object') {
      payload = { ...input, session_id: typeof session === 'function' ? session(input) : session }
    }
    let text = ''
    try {
      text = JSON.stringify(payload) ?? ''
    } catch {
      // Not JSON: the adapter reports it and the failure policy answers.
    }
    const reply = JSON.parse(engine.claudeHook(text, failClosed))
    for (const w of reply.warnings) {
      try {
        onWarning(w)
      } catch {
        /* a warning sink never breaks the call */
      }
    }
    // `{}` is "no opinion" (with onFailure 'block', a missing answer would block the call).
    return reply.output ?? {}
  }

  const hooks = {}
  for (const event of HOOK_EVENTS) {
    const matcher = { hooks: [callback] }
    if (timeout !== undefined) matcher.timeout = timeout
    if (failClosed && event === 'PreToolUse') matcher.onFailure = 'block'
    hooks[event] = [matcher]
  }
  return hooks
}

export default toolbrakeHooks
