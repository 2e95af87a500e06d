"""A local HTTP server speaking the OpenAI chat-completions protocol with scripted replies, for tests of code
that talks to a real LLM client (langchain-openai, the server's answerer, the examples): nothing leaves 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

REPLY = ["The refund ", "window is ", "30 days [1]."]


class FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``: records the request; answers with ``reply(body)`` pieces (default
    :data:`REPLY`), streamed when asked, or fails with a 500 when ``fail`` is set."""

    requests: ClassVar[list[dict[str, Any]]] = []
    fail = False
    reply: Callable[[dict[str, Any]], list[str]] | None = None

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cls = type(self)
        cls.requests.append(body)
        if self.path != "/v1/chat/completions" or cls.fail:
            self.send_response(500)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(
                json.dumps({"error": {"message": "model crashed", "type": "server_error"}}).encode()
            )
            return
        pieces = cls.reply(body) if cls.reply is not None else REPLY
        base = {"id": "chatcmpl-1", "created": 1, "model": body["model"]}
        if not body.get("stream"):
            self._json(
                {
                    **base,
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": "".join(pieces)},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                }
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        deltas = [{"role": "assistant", "content": ""}] + [{"content": piece} for piece in pieces]
        for delta in deltas:
            chunk = {
                **base,
                "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
            self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
        end = {
            **base,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        }
        self.wfile.write(f"data: {json.dumps(end)}\n\ndata: [DONE]\n\n".encode())

    def _json(self, data: dict[str, Any]) -> None:
        raw = json.dumps(data).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)


@contextmanager
def fake_openai(
    reply: Callable[[dict[str, Any]], list[str]] | None = None,
) -> Iterator[tuple[str, type[FakeOpenAI]]]:
    """Run a fresh fake server (its own handler class, so tests do not share state); yields
    (``base_url`` ending in ``/v1``, the handler class whose ``requests``/``fail`` a test reads and sets)."""
    handler = type(
        "FakeOpenAIHandler",
        (FakeOpenAI,),
        {"requests": [], "fail": False, "reply": staticmethod(reply) if reply else None},
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", handler
    finally:
        server.shutdown()
        server.server_close()
