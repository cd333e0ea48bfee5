/** toolbrake as programmatic hooks of the Claude Agent SDK (`@anthropic-ai/claude-agent-sdk`). */

/** The hook events toolbrake listens to. */
export declare const HOOK_EVENTS: readonly [
  'PreToolUse',
  'PostToolUse',
  'PostToolUseFailure',
  'UserPromptSubmit',
  'Stop',
  'PostToolBatch',
  'SubagentStop',
  'SessionEnd',
]

/** A configuration that cannot be used: the key, the value and the rule. */
export declare class ToolBrakeConfigError extends TypeError {
  readonly code: 'TOOLBRAKE_CONFIG'
  readonly key: string
  readonly value: string
  readonly rule: string
}

export interface ToolBrakeHooksOptions {
  /** The `[streak]` and `[breaker]` tables of `toolbrake.toml` (snake_case keys). */
  config?: { streak?: Record<string, unknown>; breaker?: Record<string, unknown> }
  /** Refuse a tool call toolbrake cannot judge, and block a `PreToolUse` callback that fails. */
  failClosed?: boolean
  /** Count every call in this session instead of the SDK's `session_id`. */
  session?: string | ((input: any) => string)
  /** The matchers' timeout in seconds. */
  timeout?: number
  /** Problems toolbrake met (never argument values); default: stderr. */
  onWarning?: (warning: string) => void
}

/** A hook callback as the SDK calls it. */
export type ToolBrakeHookCallback = (input: any, toolUseID: string | undefined, options: { signal: AbortSignal }) => Promise<Record<string, unknown>>

/** One matcher of the SDK's `hooks` option. */
export interface ToolBrakeHookMatcher {
  matcher?: string
  hooks: ToolBrakeHookCallback[]
  timeout?: number
  onFailure?: 'continue' | 'block'
}

/** The SDK's `hooks` option with toolbrake's callbacks, one matcher per event of HOOK_EVENTS. */
export declare function toolbrakeHooks(options?: ToolBrakeHooksOptions): Record<(typeof HOOK_EVENTS)[number], ToolBrakeHookMatcher[]>

export default toolbrakeHooks
