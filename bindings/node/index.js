// toolbrake for JavaScript hosts: the streak brake (`toolbrake/loop-brake`) and the breaker
// (`toolbrake/breaker`), each a library and a DeepSeek Harness plugin, over toolbrake's
// Rust core.
export {
  LoopBrake,
  LoopBrakeError,
  InvalidMaxRepeatsError,
  UnjudgeableArgumentsError,
  decorateTool,
  wrapExecute,
  callHash,
  canonicalJson,
  hashPrefix,
  sessionKey,
  normalizeMaxRepeats,
  resolveMaxRepeats,
} from './loop-brake.js'
export { BreakerConfigError } from './breaker.js'
export * as loopBrake from './loop-brake.js'
export * as breaker from './breaker.js'
