// toolbrake/opencode: toolbrake as an opencode plugin (also Kilo Code's CLI, an opencode fork
// with the same plugin API). Name this file in the `plugin` list of opencode.json / kilo.json
// (`toolbrake init opencode` / `toolbrake init kilo` does it).
//
// - `tool.execute.before` judges every call before it runs; a refusal throws, so the tool
//   never runs and the model reads toolbrake's message as the tool's error. opencode's
//   plugins cannot ask the operator from there: an ask is refused, saying so (fail-closed).
// - `tool.execute.after` records what a call returned (the shell's exit code from its
//   metadata) and appends toolbrake's advisories to the output the model reads;
// - the event stream records the calls that failed (a tool part whose state is `error`),
//   which never reach `tool.execute.after`;
// - `chat.message` (a new user message) starts the session afresh; a deleted session is
//   forgotten.
//
// Sessions are opencode's `sessionID` (a sub-agent's task runs in a child session of its
// own), in memory in the opencode process.
import { engineFor, ToolBrakeConfigError } from './lib/config.js'
import { toJson, toolName } from './lib/json.js'

export { ToolBrakeConfigError }

/** The plugin's id (opencode requires one for a plugin loaded from a path). */
export const id = 'toolbrake'

/** What the model reads when a call needed the operator's approval. */
export const CANNOT_ASK =
  "This call needs the operator's approval, and opencode plugins cannot ask for it, so it was refused. The operator can raise the limit in the plugin's configuration, or answer in a new message.\n\n"

/** A refusal: the tool never runs, and the model reads `message` as its error. */
export class ToolBrakeRefusal extends Error {
  constructor(message, decision) {
    super(message)
    this.name = 'ToolBrakeRefusal'
    this.code = decision?.code ?? 'TOOLBRAKE'
    this.engine = decision?.engine ?? null
  }
}

function writeWarning(text) {
  process.stderr.write(`toolbrake: ${text}\n`)
}

const unjudged = (problem) =>
  `toolbrake could not judge this call (${problem}), and its configuration refuses calls it cannot judge (failClosed). Tell the user; do not retry the same call.`

/** The outcome of a call that returned (`{title, output, metadata}`). */
function completedOutcome(result) {
  const outcome = {}
  try {
    const exit = result?.metadata?.exit ?? result?.metadata?.exitCode
    if (Number.isInteger(exit)) outcome.exit_code = exit
    if (typeof result?.output === 'string') outcome.text = result.output
  } catch {
    /* a broken result: what was read is the outcome */
  }
  return outcome
}

/**
 * The plugin: opencode calls it once per project instance.
 * @param {any} _input - opencode's plugin input (client, project, directory, …).
 * @param {{config?: {streak?: object, breaker?: object}, failClosed?: boolean, onWarning?: (w: string) => void}} [options]
 *   - the plugin's options from the config (`["…/opencode.js", {…}]`): `config`, the
 *   `[streak]` and `[breaker]` tables of `toolbrake.toml` (snake_case); `failClosed`, refuse
 *   calls toolbrake cannot judge.
 */
export async function server(_input, options = {}) {
  const { config = {}, failClosed = false, onWarning = writeWarning } = options ?? {}
  if (typeof failClosed !== 'boolean') {
    throw new ToolBrakeConfigError({ key: 'failClosed', value: String(failClosed), rule: 'must be a boolean', message: '`failClosed` must be true or false' })
  }
  const engine = engineFor(config)
  const warn = (text) => {
    try {
      onWarning(text)
    } catch {
      /* a warning sink never breaks the call */
    }
  }
  /** callID → {session, advisories}: calls that were let through and await their outcome. */
  const open = new Map()

  const record = (callID, outcome) => {
    const call = open.get(callID)
    if (call === undefined) return []
    open.delete(callID)
    try {
      const p = JSON.parse(engine.post(call.session, callID, JSON.stringify(outcome)))
      return [...call.advisories, ...p.advisories.map((a) => a.text)]
    } catch (e) {
      warn(`could not record the outcome of a ${call.tool} call: ${e?.message ?? e}`)
      return []
    }
  }

  return {
    'tool.execute.before': async (input, output) => {
      const session = String(input?.sessionID ?? 'default')
      const callID = String(input?.callID ?? '')
      let d
      let tool = ''
      try {
        tool = toolName(input?.tool)
        d = JSON.parse(engine.pre(session, callID, tool, toJson(output?.args, `the arguments of ${tool}`)))
      } catch (e) {
        const problem = String(e?.message ?? e).replace(/^toolbrake: /, '')
        warn(`could not judge a ${tool || 'tool'} call: ${problem}`)
        if (failClosed) throw new ToolBrakeRefusal(unjudged(problem))
        return
      }
      if (d.verdict === 'ask') {
        // No way to ask from here: declined, and the model is told why.
        try {
          engine.answer(session, callID, false)
        } catch {
          /* already settled */
        }
        throw new ToolBrakeRefusal(`${CANNOT_ASK}${d.message ?? ''}`, d)
      }
      if (d.verdict === 'deny') throw new ToolBrakeRefusal(d.message ?? 'toolbrake refused this call', d)
      open.set(callID, { session, tool, advisories: d.advisories.map((a) => a.text) })
    },

    'tool.execute.after': async (input, output) => {
      const advisories = record(String(input?.callID ?? ''), completedOutcome(output))
      if (advisories.length > 0 && output && typeof output.output === 'string') {
        output.output = `${output.output}\n\n${advisories.join('\n\n')}`
      }
    },

    event: async ({ event }) => {
      if (event?.type === 'message.part.updated') {
        const part = event.properties?.part
        // A call that threw never reaches tool.execute.after: its failure arrives here.
        if (part?.type === 'tool' && part.state?.status === 'error' && open.has(part.callID)) {
          record(part.callID, { is_error: true, text: String(part.state.error ?? '') })
        }
      } else if (event?.type === 'session.idle') {
        // The session's turn is over: a call still waiting for its outcome never gets one.
        const sessionID = event.properties?.sessionID
        for (const [callID, call] of open) if (call.session === sessionID) open.delete(callID)
      } else if (event?.type === 'session.deleted') {
        const sessionID = event.properties?.info?.id
        if (typeof sessionID === 'string') {
          for (const [callID, call] of open) if (call.session === sessionID) open.delete(callID)
          try {
            engine.end(sessionID)
          } catch {
            /* already gone */
          }
        }
      }
    },

    'chat.message': async (input) => {
      // A new user message: the session starts afresh.
      if (typeof input?.sessionID === 'string') {
        try {
          engine.userMessage(input.sessionID)
        } catch (e) {
          warn(`could not start the session afresh: ${e?.message ?? e}`)
        }
      }
    },
  }
}

export default { id, server }
