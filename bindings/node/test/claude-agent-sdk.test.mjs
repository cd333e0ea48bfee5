// toolbrake/claude-agent-sdk: the callbacks on Claude Code's hook payloads, then end to end
// inside the real Claude Agent SDK (@anthropic-ai/claude-agent-sdk 0.3.332, which runs
// Claude Code 2.1.332) against the scripted stand-in model of the agent end-to-end tests
// (crates/toolbrake/tests/e2e/mock_model.py, the Anthropic Messages API on 127.0.0.1).
// The assertions are on what the model was sent: what it was shown.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { HOOK_EVENTS, ToolBrakeConfigError, toolbrakeHooks } from 'toolbrake/claude-agent-sdk'

const here = import.meta.dirname ?? new URL('.', import.meta.url).pathname
const modules = process.env.TOOLBRAKE_E2E_NODE_MODULES ?? join(here, '../../../target/e2e-npm/node_modules')
const sdkPath = join(modules, '@anthropic-ai/claude-agent-sdk/sdk.mjs')
const standIn = join(here, '../../../crates/toolbrake/tests/e2e/mock_model.py')
const sdkMissing = !existsSync(sdkPath) && `${sdkPath} is missing: run ./scripts/test once (it installs @anthropic-ai/claude-agent-sdk@0.3.332 from npm), or set TOOLBRAKE_E2E_NODE_MODULES to a node_modules holding it`

const pre = (id, command = 'make test', extra = {}) => ({
  session_id: 's1',
  transcript_path: '/tmp/t.jsonl',
  cwd: '/tmp',
  hook_event_name: 'PreToolUse',
  tool_name: 'Bash',
  tool_input: { command },
  tool_use_id: id,
  ...extra,
})
const post = (id, stdout, command = 'make test') => ({ ...pre(id, command), hook_event_name: 'PostToolUse', tool_response: { stdout, stderr: '', interrupted: false } })
const call = (hooks, input) => hooks[input.hook_event_name][0].hooks[0](input, input.tool_use_id, { signal: new AbortController().signal })

test('the hooks option has one matcher per event, and the third identical call is denied with the text the model reads', async () => {
  const hooks = toolbrakeHooks()
  assert.deepEqual(Object.keys(hooks), [...HOOK_EVENTS])
  assert.equal(hooks.PreToolUse[0].onFailure, undefined, 'fail open by default')
  for (const id of ['t1', 't2']) {
    assert.deepEqual(await call(hooks, pre(id)), {}, 'no opinion: the host decides')
    assert.deepEqual(await call(hooks, post(id, 'ok')), {})
  }
  const third = await call(hooks, pre('t3'))
  assert.equal(third.hookSpecificOutput.hookEventName, 'PreToolUse')
  assert.equal(third.hookSpecificOutput.permissionDecision, 'deny')
  assert.match(third.hookSpecificOutput.permissionDecisionReason, /^loop brake: tool "Bash" called 3 times in a row with identical arguments/)
  // Another session is counted on its own.
  assert.deepEqual(await call(hooks, pre('u1', 'make test', { session_id: 's2' })), {})
})

test('a call whose output changes is not stopped; a failing one feeds the failure track', async () => {
  const hooks = toolbrakeHooks({ config: { breaker: { on_limit: 'deny' } } })
  for (let i = 1; i <= 6; i++) {
    assert.deepEqual(await call(hooks, pre(`p${i}`, 'cat progress')), {}, `call ${i} runs`)
    await call(hooks, post(`p${i}`, `step ${i}`, 'cat progress'))
  }
  // The same failing command (Claude Code's PostToolUseFailure, "Exit code N" first): the
  // failure advisory reaches the model after the third failure.
  const failing = (id, n) => ({ ...pre(id, `curl -sSf --max-time ${n} http://127.0.0.1:9/x`), session_id: 'f' })
  const advisories = []
  for (let n = 1; n <= 3; n++) {
    await call(hooks, failing(`f${n}`, n))
    const out = await call(hooks, { ...failing(`f${n}`, n), hook_event_name: 'PostToolUseFailure', error: 'Exit code 7\ncurl: (7) Failed to connect' })
    advisories.push(out.hookSpecificOutput?.additionalContext ?? '')
  }
  assert.deepEqual(advisories.slice(0, 2), ['', ''])
  assert.match(advisories[2], /has failed 3 times in a row/)
})

test('a payload toolbrake cannot read lets the call run with a warning, or refuses it when failing closed', async () => {
  const warnings = []
  const open = toolbrakeHooks({ onWarning: (w) => warnings.push(w) })
  assert.deepEqual(await open.PreToolUse[0].hooks[0]({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: { command: 'ls', password: 'hunter2' } }), {})
  assert.equal(warnings.length, 1)
  assert.match(warnings[0], /could not handle PreToolUse: the payload has no session_id/)
  assert.doesNotMatch(warnings.join('\n'), /hunter2/, 'never an argument value')

  const closed = toolbrakeHooks({ failClosed: true, onWarning: () => {} })
  assert.equal(closed.PreToolUse[0].onFailure, 'block', 'a failing callback blocks the call')
  assert.equal(closed.PostToolUse[0].onFailure, undefined, 'only the event that guards a call blocks')
  const refused = await closed.PreToolUse[0].hooks[0]({ hook_event_name: 'PreToolUse', tool_name: 'Bash', tool_input: {} })
  assert.equal(refused.hookSpecificOutput.permissionDecision, 'deny')
  assert.match(refused.hookSpecificOutput.permissionDecisionReason, /toolbrake could not judge this call/)
})

test('an invalid configuration is refused when the hooks are made, naming the key', () => {
  assert.throws(() => toolbrakeHooks({ config: { streak: { max_repeats: 0 } } }), (e) => e instanceof ToolBrakeConfigError && e.key === 'streak.max_repeats')
  assert.throws(() => toolbrakeHooks({ config: { store: {} } }), ToolBrakeConfigError)
  assert.throws(() => toolbrakeHooks({ failClosed: 'yes' }), ToolBrakeConfigError)
})

test('the session option counts calls from several SDK sessions together', async () => {
  const hooks = toolbrakeHooks({ session: 'app' })
  for (const [i, sid] of ['a', 'b'].entries()) {
    await call(hooks, { ...pre(`x${i}`), session_id: sid })
    await call(hooks, { ...post(`x${i}`, 'ok'), session_id: sid })
  }
  const third = await call(hooks, { ...pre('x3'), session_id: 'c' })
  assert.equal(third.hookSpecificOutput.permissionDecision, 'deny')
})

// --- end to end, inside the real SDK -----------------------------------------------------

/** Starts the stand-in model: the same Bash command every turn, up to `calls` calls. */
async function startModel(dir, command, calls) {
  const log = join(dir, 'requests.jsonl')
  const portfile = join(dir, 'port')
  const child = spawn('python3', [standIn, log, portfile, command, String(calls)], { stdio: 'ignore' })
  const start = Date.now()
  while (!existsSync(portfile)) {
    if (Date.now() - start > 10_000) throw new Error('the stand-in model did not start')
    await new Promise((r) => setTimeout(r, 20))
  }
  const port = Number(readFileSync(portfile, 'utf8').trim())
  const requests = () =>
    readFileSync(log, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l).body)
  return { port, requests, close: () => child.kill() }
}

/** The tool results the model saw, from the request that carried the most: [{isError, text}]. */
function toolResults(requests) {
  const of = (b) =>
    (Array.isArray(b.messages) ? b.messages : [])
      .flatMap((m) => (Array.isArray(m.content) ? m.content : []))
      .filter((blk) => blk.type === 'tool_result')
      .map((blk) => ({ isError: blk.is_error === true, text: JSON.stringify(blk.content) }))
  return requests.map(of).reduce((a, b) => (b.length > a.length ? b : a), [])
}

async function runAgent(dir, port, hooks, extra = {}) {
  const { query } = await import(pathToFileURL(sdkPath).href)
  const work = join(dir, 'work')
  mkdirSync(work, { recursive: true })
  mkdirSync(join(dir, 'claude-config'), { recursive: true })
  const messages = []
  for await (const m of query({
    prompt: 'run the command',
    options: {
      cwd: work,
      hooks,
      allowedTools: ['Bash'],
      permissionMode: 'default',
      settingSources: [],
      env: {
        PATH: process.env.PATH,
        HOME: dir,
        ANTHROPIC_BASE_URL: `http://127.0.0.1:${port}`,
        ANTHROPIC_API_KEY: 'sk-ant-test',
        CLAUDE_CONFIG_DIR: join(dir, 'claude-config'),
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
      },
      ...extra,
    },
  })) {
    messages.push(m)
  }
  return messages
}

test('in the real Claude Agent SDK, the third identical Bash call is refused before it runs and the model reads why', { skip: sdkMissing, timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolbrake-agent-sdk-'))
  // Each run of the command appends a line to ran.log: the file counts the runs.
  const model = await startModel(dir, `echo same-call; echo x >> ${join(dir, 'ran.log')}`, 8)
  try {
    const messages = await runAgent(dir, model.port, toolbrakeHooks())
    assert.equal(messages.at(-1)?.type, 'result')
    const results = toolResults(model.requests())
    assert.equal(results.length, 3, `two calls ran, the third was refused, the model stopped: ${JSON.stringify(results)}`)
    assert.ok(!results[0].isError && results[0].text.includes('same-call'))
    assert.ok(!results[1].isError && results[1].text.includes('same-call'))
    assert.ok(results[2].isError, 'the refused call is an error result')
    assert.match(results[2].text, /loop brake: tool \\"Bash\\" called 3 times in a row with identical arguments/)
    assert.equal(readFileSync(join(dir, 'ran.log'), 'utf8'), 'x\nx\n', 'the third call never ran')
  } finally {
    model.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('in the real Claude Agent SDK, a repeated call whose output changes is not stopped', { skip: sdkMissing, timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolbrake-agent-sdk-'))
  const counter = join(dir, 'count')
  const model = await startModel(dir, `n=$(( $(cat ${counter} 2>/dev/null || echo 0) + 1 )); echo $n > ${counter}; echo step-$n`, 5)
  try {
    await runAgent(dir, model.port, toolbrakeHooks())
    const results = toolResults(model.requests())
    assert.equal(results.length, 5, JSON.stringify(results))
    results.forEach((r, i) => {
      assert.ok(!r.isError, `call ${i + 1} ran: ${r.text}`)
      assert.ok(r.text.includes(`step-${i + 1}`), r.text)
    })
    assert.equal(readFileSync(counter, 'utf8').trim(), '5')
  } finally {
    model.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

// A gate that asks: the breaker's exact gate at the 2nd identical call, the streak brake out
// of the way. The SDK hands the ask to `canUseTool` with toolbrake's reason.
const asking = { streak: { max_repeats: 10 }, breaker: { limits: { exact: 2 }, on_limit: 'ask' } }

test('in the real Claude Agent SDK, an ask reaches canUseTool with toolbrake\'s reason, and an approved call runs', { skip: sdkMissing, timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolbrake-agent-sdk-'))
  const model = await startModel(dir, 'echo same-call', 4)
  const asked = []
  const canUseTool = async (tool, input, { decisionReason }) => {
    asked.push({ tool, decisionReason })
    return { behavior: 'allow', updatedInput: input }
  }
  try {
    await runAgent(dir, model.port, toolbrakeHooks({ config: asking }), { canUseTool })
    assert.equal(asked.length, 1, 'asked once: the approval holds for the rest of the turn')
    assert.equal(asked[0].tool, 'Bash')
    assert.match(asked[0].decisionReason, /this call is about to be blocked as a repeat/)
    const results = toolResults(model.requests())
    assert.equal(results.length, 4, JSON.stringify(results))
    assert.ok(results.every((r) => !r.isError && r.text.includes('same-call')), JSON.stringify(results))
  } finally {
    model.close()
    rmSync(dir, { recursive: true, force: true })
  }
})

test('in the real Claude Agent SDK, an ask with no canUseTool is refused, and so are its repeats', { skip: sdkMissing, timeout: 240_000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolbrake-agent-sdk-'))
  const model = await startModel(dir, 'echo same-call', 4)
  try {
    await runAgent(dir, model.port, toolbrakeHooks({ config: asking }))
    const results = toolResults(model.requests())
    assert.equal(results.length, 3, JSON.stringify(results))
    assert.ok(!results[0].isError)
    assert.ok(results[1].isError && results[1].text.includes('this call is about to be blocked as a repeat'), results[1].text)
    assert.ok(results[2].isError && results[2].text.includes('REPEAT_TOOL_BLOCKED'), results[2].text)
  } finally {
    model.close()
    rmSync(dir, { recursive: true, force: true })
  }
})
