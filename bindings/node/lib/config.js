// The engines for a host adapter, from a configuration object: the `[streak]` and
// `[breaker]` tables of `loopbrake.toml` (snake_case keys), validated by loopbrake's rules.
import { native } from './native.js'

/** A configuration that cannot be used: the key, the value and the rule. */
export class LoopbrakeConfigError extends TypeError {
  constructor({ key, value, rule, message }) {
    super(`loopbrake: ${message}`)
    this.name = 'LoopbrakeConfigError'
    this.code = 'LOOPBRAKE_CONFIG'
    this.key = key
    this.value = value
    this.rule = rule
  }
}

/**
 * Both engines over in-memory sessions, or a LoopbrakeConfigError naming the key.
 * @param {unknown} config
 */
export function engineFor(config) {
  if (config === null || typeof config !== 'object' || Array.isArray(config)) {
    throw new LoopbrakeConfigError({ key: '(config)', value: String(config), rule: 'must be an object', message: 'the configuration must be an object of tables ({streak, breaker})' })
  }
  let json
  try {
    json = JSON.stringify(config)
  } catch (e) {
    throw new LoopbrakeConfigError({ key: '(config)', value: '(unserialisable)', rule: 'must be JSON', message: `the configuration cannot be written as JSON (${e.message})` })
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
    throw new LoopbrakeConfigError(err)
  }
}

