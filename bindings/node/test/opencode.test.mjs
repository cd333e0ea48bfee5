// toolbrake/opencode: the plugin's hooks on opencode's inputs, then end to end inside the real
// opencode (opencode-ai 1.18.33) and Kilo Code's CLI (@kilocode/cli 7.7.7, an opencode fork),
// installed by `toolbrake init opencode|kilo --plugin <this package>`, with a local
// @ai-sdk/openai-compatible provider pointed at the chat-completions stand-in model
// (test/support/model.mjs). The assertions are on what the model was sent.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync, spawn } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import plugin, { CANNOT_ASK, ToolBrakeConfigError, ToolBrakeRefusal } from 'toolbrake/opencode'
import { startModel, toolResults } from './support/model.mjs'

const here = import.meta.dirname ?? new URL('.', import.meta.url).pathname
const pkg = join(here, '..')
const repo = join(here, '../../..')
const modules = process.env.TOOLBRAKE_E2E_NODE_MODULES ?? join(repo, 'target/e2e-npm/node_modules')
const toolbrakeBin = process.env.TOOLBRAKE_BIN ?? join(repo, 'target/debug/toolbrake')
const hosts = {
  opencode: { bin: join(modules, 'opencode-linux-x64/bin/opencode'), npm: 'opencode-ai@1.18.33', env: { OPENCODE_DISABLE_MODELS_FETCH: '1', OPENCODE_DISABLE_AUTOUPDATE: '1' } },
  kilo: { bin: join(modules, '@kilocode/cli-linux-x64/bin/kilo'), npm: '@kilocode/cli@7.7.7', env: { KILO_DISABLE_MODELS_FETCH: '1', KILO_DISABLE_AUTOUPDATE: '1', KILO_TELEMETRY_LEVEL: 'off' } },
}
const missing = (host) =>
  (!existsSync(hosts[host].bin) && `${hosts[host].bin} is missing: run ./scripts/test once (it installs ${hosts[host].npm} from npm), or set TOOLBRAKE_E2E_NODE_MODULES`) ||
  (!existsSync(toolbrakeBin) && `${toolbrakeBin} is missing: build it (cargo build -p toolbrake) or set TOOLBRAKE_BIN`)

const before = (hooks, callID, args, sessionID = 's1', tool = 'bash') => hooks['tool.execute.before']({ tool, sessionID, callID }, { args })
const after = (hooks, callID, output, exit = 0, sessionID = 's1', tool = 'bash') => {
  const out = { title: '', output, metadata: { exit } }
  return hooks['tool.execute.after']({ tool, sessionID, callID, args: {} }, out).then(() => out)
}

test('the plugin refuses the third identical call by throwing what the model reads', async () => {
  assert.equal(plugin.id, 'toolbrake')
  const hooks = await plugin.server({}, {})
  const args = { command: 'make test', description: 'run the tests' }
  for (const id of ['c1', 'c2']) {
    await before(hooks, id, args)
    await after(hooks, id, 'ok')
  }
  await assert.rejects(before(hooks, 'c3', { ...args, description: 'again' }), (e) => {
    assert.ok(e instanceof ToolBrakeRefusal)
    assert.equal(e.code, 'LOOP_BRAKE')
    assert.match(e.message, /^loop brake: tool "bash" called 3 times in a row with identical arguments/)
    return true
  })
  // Another session counts on its own; a new user message starts a session afresh.
  await before(hooks, 'd1', args, 's2')
  await hooks['chat.message']({ sessionID: 's1' }, { message: {}, parts: [] })
  await before(hooks, 'c4', args)
})

test('outcomes are recorded: changing output is progress, failures (from the event stream) feed the failure track, advisories reach the output', async () => {
  const hooks = await plugin.server({}, { config: { breaker: { on_limit: 'deny' } } })
  for (let i = 1; i <= 6; i++) {
    await before(hooks, `p${i}`, { command: 'cat progress' })
    await after(hooks, `p${i}`, `step ${i}`)
  }
  // A tool that throws never reaches tool.execute.after: its error part does.
  const failing = (n) => ({ command: `curl -sSf --max-time ${n} http://127.0.0.1:9/x` })
  let outputs = []
  for (let n = 1; n <= 5; n++) {
    await before(hooks, `f${n}`, failing(n), 'f')
    await hooks.event({ event: { type: 'message.part.updated', properties: { part: { type: 'tool', callID: `f${n}`, tool: 'bash', sessionID: 'f', state: { status: 'error', error: 'curl: (7) Failed to connect', input: failing(n) } } } } })
  }
  await assert.rejects(before(hooks, 'f6', failing(6), 'f'), /REPEAT_TOOL_BLOCKED: bash \(consecutive failures\)/)
  // A nonzero exit in the shell's metadata is a failure too, and the advisory is appended.
  for (let n = 1; n <= 3; n++) {
    await before(hooks, `e${n}`, failing(n), 'e')
    outputs.push((await after(hooks, `e${n}`, 'curl: (7) Failed to connect', 7, 'e')).output)
  }
  assert.equal(outputs[0], 'curl: (7) Failed to connect')
  assert.match(outputs[2], /^curl: \(7\) Failed to connect\n\n.*has failed 3 times in a row/s)
})

test('an ask cannot be asked from a plugin: it is refused, saying so', async () => {
  const hooks = await plugin.server({}, { config: { streak: { max_repeats: 10 }, breaker: { limits: { exact: 2 }, on_limit: 'ask' } } })
  await before(hooks, 'a1', { command: 'ls' })
  await after(hooks, 'a1', 'x')
  await assert.rejects(before(hooks, 'a2', { command: 'ls' }), (e) => e.message.startsWith(CANNOT_ASK) && /about to be blocked as a repeat/.test(e.message))
})

test('arguments toolbrake cannot judge run with a warning, or are refused when failing closed; bad options are refused at load', async () => {
  const warnings = []
  const open = await plugin.server({}, { onWarning: (w) => warnings.push(w) })
  await before(open, 'b1', { n: 1n, password: 'hunter2' })
  assert.equal(warnings.length, 1)
  assert.match(warnings[0], /could not judge a bash call: .*BigInt/)
  assert.doesNotMatch(warnings[0], /hunter2/)
  const closed = await plugin.server({}, { failClosed: true, onWarning: () => {} })
  await assert.rejects(before(closed, 'b2', { n: 1n }), /toolbrake could not judge this call .*failClosed/)
  await assert.rejects(plugin.server({}, { config: { streak: { max_repeats: 0 } } }), (e) => e instanceof ToolBrakeConfigError && e.key === 'streak.max_repeats')
  await assert.rejects(plugin.server({}, { failClosed: 'yes' }), ToolBrakeConfigError)
})

// --- end to end, inside the real hosts ---------------------------------------------------

/**
 * A home for the host with the stand-in as its model (a user config with a local
 * openai-compatible provider), then `toolbrake init HOST --plugin <this package>` on top.
 */
function setup(host, dir, url, options) {
  const cfgDir = join(dir, 'xdg', host)
  mkdirSync(cfgDir, { recursive: true })
  mkdirSync(join(dir, 'work'), { recursive: true })
  const file = join(cfgDir, `${host}.json`)
  const config = {
    model: 'standin/standin-model',
    small_model: 'standin/standin-model',
    provider: {
      standin: {
        npm: '@ai-sdk/openai-compatible',
        name: 'stand-in',
        options: { baseURL: `${url}/v1`, apiKey: 'x' },
        models: { 'standin-model': { name: 'stand-in', tool_call: true } },
      },
    },
    permission: { bash: 'allow' },
    ...(host === 'kilo' ? { disabled_providers: ['kilo'] } : {}),
  }
  writeFileSync(file, JSON.stringify(config, null, 2))
  const out = execFileSync(toolbrakeBin, ['init', host, '--plugin', pkg], { env: { ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }, encoding: 'utf8' })
  assert.match(out, new RegExp(`Installed toolbrake's plugin into ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`))
  const installed = JSON.parse(readFileSync(file, 'utf8'))
  assert.deepEqual(installed.provider, config.provider, 'the user\'s settings are kept')
  assert.deepEqual(installed.plugin, [realpathSync(pkg)], 'the plugin is this package\'s folder')
  if (options !== undefined) {
    // The plugin's options, as a user writes them: `[spec, options]`. Installing again keeps them.
    writeFileSync(file, JSON.stringify({ ...installed, plugin: [[installed.plugin[0], options]] }, null, 2))
    const again = execFileSync(toolbrakeBin, ['init', host, '--plugin', pkg], { env: { ...process.env, HOME: dir, XDG_CONFIG_HOME: join(dir, 'xdg') }, encoding: 'utf8' })
    assert.match(again, /nothing to change/)
    assert.deepEqual(JSON.parse(readFileSync(file, 'utf8')).plugin, [[realpathSync(pkg), options]])
  }
}

async function run(host, dir) {
  const env = {
    PATH: process.env.PATH,
    HOME: dir,
    XDG_CONFIG_HOME: join(dir, 'xdg'),
    XDG_DATA_HOME: join(dir, 'data'),
    XDG_CACHE_HOME: join(dir, 'cache'),
    XDG_STATE_HOME: join(dir, 'state'),
    ...hosts[host].env,
  }
  const child = spawn(hosts[host].bin, ['run', 'run the command'], { cwd: join(dir, 'work'), env, stdio: ['ignore', 'pipe', 'pipe'] })
  let stderr = ''
  child.stderr.on('data', (d) => (stderr += d))
  child.stdout.resume()
  const timer = setTimeout(() => child.kill('SIGKILL'), 180_000)
  const code = await new Promise((ok) => child.on('close', ok))
  clearTimeout(timer)
  assert.equal(code, 0, stderr)
  assert.doesNotMatch(stderr, /failed to load plugin/, stderr)
  return stderr
}

for (const host of Object.keys(hosts)) {
  test(`in the real ${host}, the third identical bash call is refused before it runs and the model reads why`, { skip: missing(host), timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `toolbrake-${host}-`))
    // Each run appends a line to ran.log (in the working folder: a path outside it would
    // need the operator's permission).
    const model = await startModel({ calls: 3, command: 'echo same-call; echo x >> ran.log' })
    try {
      setup(host, dir, model.url)
      await run(host, dir)
      const results = toolResults(model.requests)
      assert.equal(results.length, 3, JSON.stringify(results))
      assert.ok(results[0].includes('same-call') && results[1].includes('same-call'), JSON.stringify(results))
      assert.match(results[2], /^(Error: )?loop brake: tool "bash" called 3 times in a row with identical arguments/)
      assert.equal(readFileSync(join(dir, 'work', 'ran.log'), 'utf8'), 'x\nx\n', 'the third call never ran')
    } finally {
      await model.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test(`in the real ${host}, a repeated call whose output changes is not stopped`, { skip: missing(host), timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `toolbrake-${host}-`))
    // Inside the working folder: a path outside it would need the operator's permission.
    const counter = join(dir, 'work', 'count')
    const model = await startModel({ calls: 5, command: 'n=$(( $(cat count 2>/dev/null || echo 0) + 1 )); echo $n > count; echo step-$n' })
    try {
      setup(host, dir, model.url)
      await run(host, dir)
      const results = toolResults(model.requests)
      assert.equal(results.length, 5, JSON.stringify(results))
      results.forEach((r, i) => assert.ok(r.includes(`step-${i + 1}`), `call ${i + 1} ran: ${r}`))
      assert.equal(readFileSync(counter, 'utf8').trim(), '5')
    } finally {
      await model.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test(`in the real ${host}, failures are recorded: a failing command is advised after its third failure and stopped at its sixth`, { skip: missing(host), timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `toolbrake-${host}-`))
    // --max-time changes every call: the streak never sees a repeat. The shell reports exit 7.
    const model = await startModel({ calls: 6, command: 'curl -sSf --max-time {n} http://127.0.0.1:9/missing' })
    try {
      setup(host, dir, model.url, { config: { breaker: { on_limit: 'deny' } } })
      await run(host, dir)
      const results = toolResults(model.requests)
      assert.equal(results.length, 6, JSON.stringify(results))
      results.slice(0, 5).forEach((r, i) => assert.match(r, /curl: \(7\)/, `call ${i + 1} ran and failed: ${r}`))
      assert.ok(!results[1].includes('has failed'), results[1])
      assert.match(results[2], /has failed 3 times in a row/, 'the advisory is appended to the third failure\'s output')
      assert.match(results[5], /REPEAT_TOOL_BLOCKED: bash \(consecutive failures\)/)
    } finally {
      await model.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test(`in the real ${host}, a tool that throws is recorded from the event stream: the sixth identical failing read is stopped`, { skip: missing(host), timeout: 240_000 }, async () => {
    const dir = mkdtempSync(join(tmpdir(), `toolbrake-${host}-`))
    // The streak brake out of the way: only the failure track, fed by the error parts, stops it.
    const model = await startModel({ calls: 6, tool: 'read', args: { filePath: join(dir, 'work', 'missing.txt') } })
    try {
      // (and the same-output track, which stops an identical call that came back the same at
      // its third)
      setup(host, dir, model.url, { config: { streak: { max_repeats: 10 }, breaker: { on_limit: 'deny', same_output_limit: 'off' } } })
      await run(host, dir)
      const results = toolResults(model.requests)
      assert.equal(results.length, 6, JSON.stringify(results))
      results.slice(0, 5).forEach((r, i) => assert.match(r, /File not found/, `call ${i + 1} ran and failed: ${r}`))
      assert.match(results[5], /REPEAT_TOOL_BLOCKED: read \(consecutive failures\)/)
    } finally {
      await model.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
}
