// What a user installs: `npm pack`, the tarball installed offline into a fresh project,
// and both entry points (`toolbrake/loop-brake`, `toolbrake/breaker`) imported and
// required from there, each judging calls through the native addon it ships.
import { test } from 'node:test'
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

const pkg = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, '..')
const addon = readdirSync(pkg).find((f) => f.endsWith('.node'))

const run = (cmd, args, cwd) =>
  execFileSync(cmd, args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 })

test('the packed tarball installs into a fresh project and both entry points work', {
  skip: !addon && 'the native addon is not built: run `npm run build` first',
}, () => {
  const dir = mkdtempSync(join(tmpdir(), 'toolbrake-pack-'))
  try {
    const [packed] = JSON.parse(run('npm', ['pack', '--json', '--pack-destination', dir], pkg))
    const files = packed.files.map((f) => f.path)
    for (const f of ['package.json', 'README.md', 'index.js', 'loop-brake.js', 'breaker.js', 'claude-agent-sdk.js', 'opencode.js', 'lib/native.js', 'lib/config.js', 'native.cjs', 'native.d.ts', addon]) {
      assert.ok(files.includes(f), `${f} is in the tarball: ${files.join(', ')}`)
    }
    const app = join(dir, 'app')
    run('mkdir', ['-p', app])
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }))
    run('npm', ['install', '--offline', '--no-audit', '--no-fund', '--loglevel=error', join(dir, packed.filename)], app)

    writeFileSync(join(app, 'esm.mjs'), `
import { LoopBrake, LoopBrakeError, wrapExecute } from 'toolbrake/loop-brake'
import breaker, { Config } from 'toolbrake/breaker'
import * as root from 'toolbrake'
const brake = new LoopBrake({ maxRepeats: 3 })
const search = wrapExecute(() => 'sunny', brake, { tool: 'search', sessionId: 's' })
search({ q: 'weather' }); search({ q: 'weather' })
let refused = ''
try { search({ q: 'weather' }) } catch (e) { if (e instanceof LoopBrakeError) refused = e.code }
let invalid = ''
try { Config({ limits: { exact: 0 } }) } catch (e) { invalid = e.name }
console.log(JSON.stringify({ refused, invalid, plugin: breaker.name, root: typeof root.LoopBrake }))
`)
    const esm = JSON.parse(run('node', ['esm.mjs'], app))
    assert.deepEqual(esm, { refused: 'LOOP_BRAKE', invalid: 'BreakerConfigError', plugin: 'toolbrake-breaker', root: 'function' })

    writeFileSync(join(app, 'cjs.cjs'), `
const { LoopBrake } = require('toolbrake/loop-brake')
const { Config } = require('toolbrake/breaker')
const brake = new LoopBrake({ maxRepeats: 2 })
brake.check({ tool: 't', args: {} })
let refused = ''
try { brake.check({ tool: 't', args: {} }) } catch (e) { refused = e.code }
console.log(JSON.stringify({ refused, config: typeof Config({}) }))
`)
    const cjs = JSON.parse(run('node', ['--no-warnings', 'cjs.cjs'], app))
    assert.deepEqual(cjs, { refused: 'LOOP_BRAKE', config: 'object' })
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
})
