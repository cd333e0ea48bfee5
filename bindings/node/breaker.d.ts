/** The breaker (the seed's dsh-repeat-tool-breaker) as a DeepSeek Harness plugin. */

export declare const name: 'toolbrake-breaker'
export declare const inject: string[]

/** A configuration that cannot be used: the key as written, the value and the rule. */
export declare class BreakerConfigError extends TypeError {
  readonly code: 'TOOLBRAKE_CONFIG'
  readonly key: string
  readonly value: string
  readonly rule: string
}

export declare class UnjudgeableArgumentsError extends TypeError {
  readonly code: 'TOOLBRAKE_UNJUDGEABLE_ARGUMENTS'
}

type Stage = number | 'off' | null
export interface BreakerConfig {
  enabled?: boolean
  window?: number
  onLimit?: 'ask' | 'deny'
  localHosts?: 'deny' | 'allow'
  includeLocal?: boolean
  warnAt?: Stage
  summarizeAt?: Stage
  failWarnAt?: Stage
  failLimit?: Stage
  limits?: Record<string, Stage>
  exclude?: string[]
  include?: string[]
  ignoreArgs?: Record<string, string[]>
  hostAliases?: Record<string, string>
  previewChars?: number
  resultPreviewChars?: number
  /** Progress-aware detection (default true); false is the original's exact behaviour. */
  progress?: boolean
  struggleWarnAt?: Stage
  struggleAskAt?: Stage
  cycleLimit?: Stage
  /** The unchanged track's gate (`null`: off). */
  unchangedLimit?: Stage
  /** The same-output track's gate: one action, however spelled, that kept returning the same output (`null`: off). */
  sameOutputLimit?: Stage
  blockShellHttp?: boolean
  blockLocalHttp?: boolean
  shellHttpBlock?: string[]
  fetchTool?: string
  tools?: {
    shell?: string[]
    shellCommandArgs?: string[]
    url?: string[]
    urlPattern?: string
    urlArgs?: string[]
    mutating?: string[]
  }
}

/** Validates a configuration as `apply` would (throws BreakerConfigError); returns it. */
export declare function Config(config?: BreakerConfig): BreakerConfig
export declare function hasUserMessage(messages: unknown): boolean
/** Installs the breaker's hooks and guard; returns the teardown. */
export declare function apply(ctx: any, config?: BreakerConfig): () => void

declare const plugin: { name: typeof name; inject: typeof inject; apply: typeof apply; Config: typeof Config }
export default plugin
