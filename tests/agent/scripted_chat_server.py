"""A scripted OpenAI-compatible chat server for end-to-end runs of harnesses that need one.

``python tests/agent/scripted_chat_server.py SCRIPTS.json PORT_FILE`` serves
``/v1/chat/completions`` on a free loopback port (written to ``PORT_FILE``). ``SCRIPTS.json``
maps a conversation's first user message to the tool calls to make, ``[[name, arguments],
...]``: the reply to a conversation is the call after as many as it already holds, one per
turn, then a plain text answer, which ends a tool-calling loop. An unknown first message gets
the text answer straight away. Every request is appended to ``PORT_FILE.requests.jsonl``.
Standard library only, so it runs in any venv.
"""

from __future__ import annotations

import json
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any


def reply(scripts: dict[str, list[list[Any]]], messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The assistant message answering ``messages``."""
    first = next((m for m in messages if m.get("role") == "user"), {})
    content = first.get("content")
    if isinstance(content, list):
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    calls = scripts.get(str(content or ""), [])
    made = sum(len(m.get("tool_calls") or ()) for m in messages if m.get("role") == "assistant")
    if made < len(calls):
        name, arguments = calls[made]
        call = {
            "id": f"call_{made}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)},
        }
        return {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"role": "assistant", "content": "Done."}


def main(scripts_path: str, port_file: str) -> None:
    scripts = json.loads(Path(scripts_path).read_text())
    log = Path(port_file + ".requests.jsonl")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with log.open("a") as fh:
                fh.write(json.dumps(request) + "\n")
            if not self.path.rstrip("/").endswith("/chat/completions"):
                self._send(404, {"error": {"message": f"no route {self.path}"}})
                return
            message = reply(scripts, request.get("messages", []))
            finish = "tool_calls" if message.get("tool_calls") else "stop"
            head = {
                "id": f"chatcmpl-{time.monotonic_ns()}",
                "created": int(time.time()),
                "model": request.get("model", "scripted"),
            }
            usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
            if not request.get("stream"):
                choice = {"index": 0, "message": message, "finish_reason": finish}
                self._send(
                    200, {**head, "object": "chat.completion", "choices": [choice], "usage": usage}
                )
                return
            delta = dict(message)
            for i, call in enumerate(delta.get("tool_calls") or ()):
                call["index"] = i
            chunks = [
                {"index": 0, "delta": delta, "finish_reason": None},
                {"index": 0, "delta": {}, "finish_reason": finish},
            ]
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            for choice in chunks:
                chunk = {**head, "object": "chat.completion.chunk", "choices": [choice]}
                self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            last = {**head, "object": "chat.completion.chunk", "choices": [], "usage": usage}
            self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
            self.wfile.flush()
            self.close_connection = True

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Path(port_file).write_text(str(server.server_address[1]))
    server.serve_forever()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
