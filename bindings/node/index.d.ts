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
