/** toolbrake as an opencode plugin (also Kilo Code's CLI, an opencode fork). */

export { ToolBrakeConfigError } from './claude-agent-sdk.js'

/** The plugin's id. */
export declare const id: 'toolbrake'

/** What the model reads, before the question, when a call needed the operator's approval. */
export declare const CANNOT_ASK: string

/** A refusal: thrown from `tool.execute.before`, so the tool never runs; the model reads the message. */
export declare class ToolBrakeRefusal extends Error {
  /** `LOOP_BRAKE`, `REPEAT_TOOL_BLOCKED`, or `TOOLBRAKE` (a call toolbrake could not judge). */
  readonly code: string
  readonly engine: 'streak' | 'breaker' | null
}

export interface ToolBrakePluginOptions {
  /** The `[streak]` and `[breaker]` tables of `toolbrake.toml` (snake_case keys). */
  config?: { streak?: Record<string, unknown>; breaker?: Record<string, unknown> }
  /** Refuse a tool call toolbrake cannot judge (default: it runs, with a warning). */
  failClosed?: boolean
  /** Problems toolbrake met (never argument values); default: stderr. */
  onWarning?: (warning: string) => void
}

/** The plugin's hooks (opencode's `Hooks`): `tool.execute.before`, `tool.execute.after`, `event`, `chat.message`. */
export declare function server(input: unknown, options?: ToolBrakePluginOptions): Promise<Record<string, (...args: any[]) => Promise<void>>>

declare const _default: { id: 'toolbrake'; server: typeof server }
export default _default
