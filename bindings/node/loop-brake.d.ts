/** The streak brake (the seeds' dsh-loop-brake) as a library and a DeepSeek Harness plugin. */

export declare const name: 'loop-brake'
export declare const inject: string[]
export declare const PLUGIN: 'dsh-loop-brake'
export declare const DEFAULT_MAX_REPEATS: 3
export declare const ENV_VARS: string[]

/** A call refused by the brake; thrown before the tool body runs. Never carries the arguments. */
export declare class LoopBrakeError extends Error {
  readonly code: 'LOOP_BRAKE'
  readonly toolName: string
  /** Which consecutive repeat this was, counting this call. */
  readonly count: number
  readonly maxRepeats: number
  /** The first 12 hex characters of the call hash. */
  readonly hashPrefix: string
  readonly sessionId: string
  readonly plugin: 'dsh-loop-brake'
}

/** A maxRepeats that is not an integer of at least 1. */
export declare class InvalidMaxRepeatsError extends RangeError {
  readonly code: 'INVALID_MAX_REPEATS'
  readonly value: unknown
  /** `maxRepeats`, or the environment variable it came from. */
  readonly source: string
}

/**
 * Arguments toolbrake cannot judge: what JSON cannot represent (a cycle, a BigInt, a
 * function, a symbol), a lone UTF-16 surrogate, or nesting deeper than 128 levels.
 */
export declare class UnjudgeableArgumentsError extends TypeError {
  readonly code: 'TOOLBRAKE_UNJUDGEABLE_ARGUMENTS'
}

export declare function canonicalJson(value: unknown): string
export declare function callHash(toolName: string, args: unknown): string
export declare function hashPrefix(hash: string): string
export declare function sessionKey(sessionId: string | undefined, exec?: { agent?: { id?: string } }): string
export declare function normalizeMaxRepeats(value: unknown, source?: string): number
export declare function resolveMaxRepeats(
  config?: { maxRepeats?: unknown },
  env?: Record<string, string | undefined>,
): number

export interface LoopBrakeOptions {
  /** The streak length at which a call is refused (default 3). */
  maxRepeats?: number
  /** An identical call after one that returned something new starts a new streak (default true). */
  progress?: boolean
}

export declare class LoopBrake {
  constructor(options?: LoopBrakeOptions)
  readonly maxRepeats: number
  /** Sessions remembered (one slot each). */
  readonly sessions: number
  /** Judges a call: its call id, or a thrown LoopBrakeError. */
  check(call: { tool: string; args?: unknown; sessionId?: string; callId?: string }): string
  /** What a checked call returned, or the error it threw. */
  record(outcome: { sessionId?: string; callId: string; result?: unknown; error?: unknown }): void
  /** Forgets one session's streak, or every session's. */
  reset(sessionId?: string): void
}

export declare function wrapExecute<A, R>(
  execute: (args: A, exec?: any, ...rest: any[]) => R,
  brake: LoopBrake,
  options: { tool: string; sessionId?: string },
): (args: A, exec?: any, ...rest: any[]) => R

export declare function decorateTool<T extends { name: string; execute: (...args: any[]) => any }>(
  definition: T,
  brake: LoopBrake,
  options?: { sessionId?: string },
): T

export interface LoopBrakeConfig {
  maxRepeats?: number
  sessionId?: string
  progress?: boolean
}

/** Patches ctx.tools.register (and ctx.tools.execute when present); dispose undoes both. */
export declare function apply(ctx: any, config?: LoopBrakeConfig): LoopBrake & { dispose(): void }

declare const plugin: { name: typeof name; inject: typeof inject; apply: typeof apply }
export default plugin
