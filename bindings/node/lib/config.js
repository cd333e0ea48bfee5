// The engines for a host adapter, from a configuration object: the `[streak]` and
// `[breaker]` tables of `toolbrake.toml` (snake_case keys), validated by toolbrake's rules.
import { native } from './native.js'

/** A configuration that cannot be used: the key, the value and the rule. */
export class ToolBrakeConfigError extends TypeError {
  constructor({ key, value, rule, message }) {
    super(`toolbrake: ${message}`)
    this.name = 'ToolBrakeConfigError'
    this.code = 'TOOLBRAKE_CONFIG'
    this.key = key
    this.value = value
    this.rule = rule
  }
}

/**
 * Both engines over in-memory sessions, or a ToolBrakeConfigError naming the key.
 * @param {unknown} config
 */
export function engineFor(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new ToolBrakeConfigError({ key: '(config)', value: String(config), rule: 'must be an object', message: 'the configuration must be an object of tables ({streak, breaker})' })
  }
  let json
  try {
    json = JSON.stringify(config)
  } catch (e) {
    throw new ToolBrakeConfigError({ key: '(config)', value: '(unserialisable)', rule: 'must be JSON', message: `the configuration cannot be written as JSON (${e.message})` })
  }
  try {
    return new native.NativeEngine(json)
  } catch (e) {
    let err
    try {
      err = JSON.parse(e.message)
    } catch {
      throw e
    }
    throw new ToolBrakeConfigError(err)
  }
}

