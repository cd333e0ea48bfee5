// A fake DeepSeek Harness: the tool pipeline as dsh-tools runs it (pre-execute waterfall,
// the synchronous guard, the body, post-execute with additionalContexts) and agent steps.
export function fakeHost() {
  const handlers = new Map()
  const guards = []
  const registry = new Map()
  const ctx = {
    on(event, fn) {
      if (!handlers.has(event)) handlers.set(event, [])
      handlers.get(event).push(fn)
      return () => handlers.set(event, handlers.get(event).filter((f) => f !== fn))
    },
    tools: {
      guard(fn) {
        guards.push(fn)
        return () => guards.splice(guards.indexOf(fn), 1)
      },
      register(def) {
        registry.set(def.name, def)
        return () => registry.delete(def.name)
      },
    },
  }
  const waterfall = (event, args, last) => {
    const list = handlers.get(event) ?? []
    const step = (i) => (i < list.length ? list[i](...args, () => step(i + 1)) : last())
    return step(0)
  }
  /**
   * Runs one call: `answer` is what the operator says to an ask ('approve' | 'decline').
   * `run(args)` returns the tool's result. Returns what the model saw.
   */
  async function dispatch({ agent, callId, name, args, answer = 'decline', run }) {
    const exec = { callId, name, arguments: args, agent }
    const decision = await waterfall('tools/pre-execute', [exec], async () => ({ kind: 'allow' }))
    let verdict = 'run'
    let text
    let asked = null
    if (decision?.kind === 'ask') {
      asked = decision.reason
      if (answer !== 'approve') verdict = 'declined'
    } else if (decision?.kind === 'deny') {
      verdict = 'deny'
      text = decision.reason
    }
    if (verdict === 'run') {
      for (const g of guards) {
        const r = g(exec)
        if (typeof r === 'string') {
          verdict = 'deny'
          text = r
          break
        }
      }
    }
    const result = verdict === 'run' ? await run(args) : { isError: true, content: [{ type: 'text', text: text ?? 'declined' }] }
    const post = await waterfall('tools/post-execute', [exec, result], async () => ({ kind: 'accept' }))
    const advisories = (post?.additionalContexts ?? []).map((m) => m.content[0].text)
    const sources = (post?.additionalContexts ?? []).map((m) => m.source)
    return { verdict, text, asked, advisories, sources }
  }
  async function userMessage(agent) {
    await waterfall('agent/pre-step', [{ agent, messages: [{ role: 'user', source: { kind: 'user' } }] }], async () => ({ kind: 'enter' }))
  }
  return { ctx, dispatch, userMessage, handlers, guards, registry }
}
