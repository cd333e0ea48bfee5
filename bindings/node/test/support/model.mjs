// A stand-in for an OpenAI-compatible chat-completions endpoint (DeepSeek's, a local
// provider's; streamed): its model asks for the same `bash` call CALLS times, then answers
// "done". Every request is recorded, so a test sees exactly what the model was told (the
// `tool` messages). `{n}` in the command is the call's number (a cosmetic variation); with
// `tool` and `args`, the model calls that tool with those arguments (`{n}` in their JSON too).
import { createServer } from 'node:http'

/**
 * @param {{calls?: number, command?: string, tool?: string, args?: object}} [options]
 * @returns {Promise<{url: string, requests: any[], close(): Promise<void>}>}
 */
export async function startModel({ calls = 3, command = 'echo toolbrake-e2e', tool = 'bash', args: toolArgs } = {}) {
  const requests = []
  const server = createServer((req, res) => {
    let body = ''
    req.on('data', (c) => (body += c))
    req.on('end', () => {
      let msg = {}
      try {
        msg = JSON.parse(body)
      } catch {
        res.writeHead(400).end()
        return
      }
      requests.push(msg)
      res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
      const id = `chatcmpl-${requests.length}`
      const chunk = (delta, finish = null) =>
        res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: msg.model, choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`)
      const toolResults = (msg.messages ?? []).filter((m) => m.role === 'tool').length
      if (Array.isArray(msg.tools) && msg.tools.length > 0 && toolResults < calls) {
        const args = JSON.stringify(toolArgs ?? { command, description: 'run the check' }).replaceAll('{n}', String(toolResults + 1))
        chunk({ role: 'assistant', content: null })
        chunk({ tool_calls: [{ index: 0, id: `call_${toolResults + 1}`, type: 'function', function: { name: tool, arguments: args.slice(0, 10) } }] })
        chunk({ tool_calls: [{ index: 0, function: { arguments: args.slice(10) } }] })
        chunk({}, 'tool_calls')
      } else {
        chunk({ role: 'assistant', content: Array.isArray(msg.tools) ? 'done' : 'toolbrake e2e' })
        chunk({}, 'stop')
      }
      res.write(`data: ${JSON.stringify({ id, object: 'chat.completion.chunk', created: 0, model: msg.model, choices: [], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } })}\n\n`)
      res.end('data: [DONE]\n\n')
    })
  })
  await new Promise((ok) => server.listen(0, '127.0.0.1', ok))
  const { port } = server.address()
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    close: () => new Promise((ok) => server.close(() => ok())),
  }
}

/** The tool results the model received in its last request, in order. */
export function toolResults(requests) {
  const last = [...requests].reverse().find((r) => Array.isArray(r.tools))
  return (last?.messages ?? [])
    .filter((m) => m.role === 'tool')
    .map((m) => (typeof m.content === 'string' ? m.content : JSON.stringify(m.content)))
}
