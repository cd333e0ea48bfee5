#!/usr/bin/env python3
"""A scripted stand-in model on 127.0.0.1 for end-to-end tests of real agent CLIs.

Serves the Anthropic Messages API (POST /v1/messages, for Claude Code), the OpenAI
Responses API (POST /v1/responses, for Codex), the OpenAI Chat Completions API (POST
.../chat/completions, for GitHub Copilot CLI, Qwen Code and Cline) and the Gemini API (POST
/v1beta/models/<m>:streamGenerateContent?alt=sse, for Gemini CLI), streaming (SSE) or not.
With Chat Completions the shell tool is the first offered of SHELL_TOOLS, and its required
arguments are filled from its schema (the command, a description, …). The "model" is a loop:
every turn it asks for the same shell command again, until either it has made MAX_CALLS
calls or the last tool result carries toolbrake's denial, then it ends the turn.
GET /missing answers 404 (a failing endpoint for curl). Every request body is appended to
LOG as one JSON line, so tests can assert on what the model was shown.

Usage: mock_model.py LOG PORTFILE COMMAND [MAX_CALLS [TOOL]]
COMMAND may contain {n}, replaced by the call's number (a cosmetic variation), and
{port}, replaced by this server's port.
The chosen port is written to PORTFILE once the server listens. With TOOL (Anthropic and
Chat Completions APIs), the model calls that tool instead of the shell, with COMMAND as its
JSON arguments.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOG, PORTFILE, COMMAND = sys.argv[1], sys.argv[2], sys.argv[3]
MAX_CALLS = int(sys.argv[4]) if len(sys.argv) > 4 else 10
TOOL = sys.argv[5] if len(sys.argv) > 5 else "Bash"
DENIAL_MARKERS = ("loop brake:", "REPEAT_TOOL_BLOCKED")
# Each host's shell tool, as the host names it in the tools it offers.
SHELL_TOOLS = ("bash", "run_shell_command", "run_commands", "Execute", "shell", "Bash")


def command(n):
    return COMMAND.replace("{n}", str(n)).replace("{port}", str(PORT))


def log(body):
    with open(LOG, "a") as f:
        f.write(json.dumps(body) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        status = 404 if self.path.startswith("/missing") else 200
        body = b"not found\n" if status == 404 else b""
        self.send_response(status)
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)

    do_HEAD = do_GET

    def read_body(self):
        n = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        try:
            return json.loads(raw or b"{}")
        except ValueError:
            return {}

    def sse_start(self):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("connection", "close")
        self.end_headers()

    def ev(self, name, data):
        if name:
            self.wfile.write(f"event: {name}\n".encode())
        self.wfile.write(f"data: {json.dumps(data)}\n\n".encode())
        self.wfile.flush()

    def do_POST(self):
        body = self.read_body()
        if "count_tokens" in self.path:
            return self.json_reply({"input_tokens": 10})
        log({"path": self.path, "body": body})
        if self.path.startswith("/v1/messages"):
            return self.anthropic(body)
        if self.path.startswith("/v1/responses"):
            return self.openai(body)
        if self.path.endswith("/chat/completions"):
            return self.chat(body)
        if ":countTokens" in self.path:
            return self.json_reply({"totalTokens": 10})
        if ":streamGenerateContent" in self.path or ":generateContent" in self.path:
            return self.gemini(body, ":streamGenerateContent" in self.path)
        self.json_reply({})

    def json_reply(self, obj):
        data = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(data)

    # --- Anthropic Messages API -------------------------------------------------------
    def anthropic(self, body):
        tools = [t.get("name") for t in body.get("tools", [])]
        results = []
        for m in body.get("messages", []):
            if isinstance(m.get("content"), list):
                results += [b for b in m["content"] if b.get("type") == "tool_result"]
        done = len(results) >= MAX_CALLS or TOOL not in tools or any(
            marker in json.dumps(r.get("content")) for r in results[-1:] for marker in DENIAL_MARKERS
        )
        n = len(results) + 1
        if done:
            blocks = [{"type": "text", "text": "done"}]
        else:
            tool_input = {"command": command(n)} if TOOL == "Bash" else json.loads(command(n))
            blocks = [{"type": "tool_use", "id": f"toolu_{n:03d}", "name": TOOL, "input": tool_input}]
        stop = "tool_use" if blocks[0]["type"] == "tool_use" else "end_turn"
        if not body.get("stream"):
            return self.json_reply({"id": "msg_1", "type": "message", "role": "assistant", "model": body.get("model"),
                                    "content": blocks, "stop_reason": stop, "stop_sequence": None,
                                    "usage": {"input_tokens": 10, "output_tokens": 5}})
        self.sse_start()
        self.ev("message_start", {"type": "message_start", "message": {
            "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model"), "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 0}}})
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                self.ev("content_block_start", {"type": "content_block_start", "index": i,
                                                "content_block": {"type": "text", "text": ""}})
                self.ev("content_block_delta", {"type": "content_block_delta", "index": i,
                                                "delta": {"type": "text_delta", "text": b["text"]}})
            else:
                self.ev("content_block_start", {"type": "content_block_start", "index": i, "content_block": {
                    "type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}})
                self.ev("content_block_delta", {"type": "content_block_delta", "index": i, "delta": {
                    "type": "input_json_delta", "partial_json": json.dumps(b["input"])}})
            self.ev("content_block_stop", {"type": "content_block_stop", "index": i})
        self.ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                  "usage": {"output_tokens": 5}})
        self.ev("message_stop", {"type": "message_stop"})
        self.close_connection = True

    # --- OpenAI Responses API ---------------------------------------------------------
    def openai(self, body):
        names = [t.get("name") for t in body.get("tools", []) if isinstance(t, dict)]
        shell = "exec_command" if "exec_command" in names else ("shell" if "shell" in names else None)
        outputs = [i for i in body.get("input", []) if isinstance(i, dict) and i.get("type") == "function_call_output"]
        last = json.dumps(outputs[-1].get("output")) if outputs else ""
        done = shell is None or len(outputs) >= MAX_CALLS or any(m in last or "hook" in last and "blocked" in last
                                                                 for m in DENIAL_MARKERS)
        n = len(outputs) + 1
        rid = f"resp_{n}"
        if done:
            items = [{"type": "message", "role": "assistant", "id": f"msg_{n}",
                      "content": [{"type": "output_text", "text": "done"}]}]
        else:
            cmd = command(n)
            args = {"cmd": cmd} if shell == "exec_command" else {"command": ["bash", "-lc", cmd]}
            items = [{"type": "function_call", "call_id": f"call_{n:03d}", "name": shell, "arguments": json.dumps(args)}]
        self.sse_start()
        self.ev(None, {"type": "response.created", "response": {"id": rid}})
        for it in items:
            self.ev(None, {"type": "response.output_item.done", "item": it})
        self.ev(None, {"type": "response.completed", "response": {"id": rid, "usage": {
            "input_tokens": 10, "input_tokens_details": None, "output_tokens": 5,
            "output_tokens_details": None, "total_tokens": 15}}})
        self.close_connection = True


    # --- OpenAI Chat Completions API -------------------------------------------------
    def chat(self, body):
        tools = {t["function"]["name"]: t["function"] for t in body.get("tools", []) or []
                 if isinstance(t, dict) and isinstance(t.get("function"), dict)}
        shell = TOOL if TOOL != "Bash" and TOOL in tools else next((n for n in SHELL_TOOLS if n in tools), None)
        results = [m for m in body.get("messages", []) if m.get("role") == "tool"]
        last = json.dumps(results[-1].get("content")) if results else ""
        done = shell is None or len(results) >= MAX_CALLS or any(m in last for m in DENIAL_MARKERS)
        n = len(results) + 1
        message = {"role": "assistant", "content": None}
        if done:
            message["content"] = "done"
            finish = "stop"
        else:
            message["tool_calls"] = [{"index": 0, "id": f"call_{n:03d}", "type": "function", "function": {
                "name": shell, "arguments": json.dumps(
                    shell_args(tools[shell], command(n)) if shell != TOOL else json.loads(command(n)))}}]
            finish = "tool_calls"
        usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        head = {"id": f"chatcmpl-{n}", "created": 1, "model": body.get("model") or "mock"}
        if not body.get("stream"):
            return self.json_reply({**head, "object": "chat.completion", "usage": usage, "choices": [
                {"index": 0, "message": message, "finish_reason": finish}]})
        self.sse_start()
        chunk = {**head, "object": "chat.completion.chunk"}
        self.ev(None, {**chunk, "choices": [{"index": 0, "delta": message, "finish_reason": None}]})
        self.ev(None, {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}], "usage": usage})
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()
        self.close_connection = True


def shell_args(tool, cmd):
    """The shell tool's arguments: the command, and whatever else its schema requires."""
    params = tool.get("parameters") or {}
    props = params.get("properties") or {}
    args = {}
    for name in props:
        if name in ("command", "cmd"):
            args[name] = cmd
        elif name == "commands":  # Cline's run_commands: a list of commands
            args[name] = [cmd]
    for name in params.get("required") or []:
        if name in args:
            continue
        kind = (props.get(name) or {}).get("type")
        enum = (props.get(name) or {}).get("enum")
        if enum:
            args[name] = enum[0]
        elif kind == "boolean":
            args[name] = False
        elif kind in ("integer", "number"):
            args[name] = 60
        else:
            args[name] = "run it"
    return args


# --- Gemini API -------------------------------------------------------------------------
def gemini_results(body):
    out = []
    for c in body.get("contents", []):
        for p in c.get("parts", []) or []:
            if "functionResponse" in p:
                out.append(p["functionResponse"])
    return out


def gemini_reply(self, body, stream):
    decls = [d.get("name") for t in body.get("tools", []) or [] for d in t.get("functionDeclarations", []) or []]
    results = gemini_results(body)
    last = json.dumps(results[-1]) if results else ""
    shell = "run_shell_command" if "run_shell_command" in decls else None
    done = shell is None or len(results) >= MAX_CALLS or any(m in last for m in DENIAL_MARKERS)
    n = len(results) + 1
    if shell is None and body.get("generationConfig", {}).get("responseMimeType") == "application/json":
        parts = [{"text": json.dumps({"reasoning": "the model is done", "next_speaker": "user"})}]
    elif done:
        parts = [{"text": "done"}]
    else:
        parts = [{"functionCall": {"name": shell, "args": {"command": command(n), "description": "run it"}}}]
    chunk = {"candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
             "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
             "modelVersion": "gemini-2.5-pro"}
    if not stream:
        return self.json_reply(chunk)
    self.sse_start()
    self.ev(None, chunk)
    self.close_connection = True


Handler.gemini = gemini_reply

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
PORT = server.server_address[1]
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
import os
os.replace(PORTFILE + ".tmp", PORTFILE)
server.serve_forever()
