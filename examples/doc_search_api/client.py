"""A client of the document-search API, written from the design (seed 002, section 4) alone.

    python client.py [--url http://localhost:8000] health
    python client.py upload handbook.pdf --title "就業規則" --tag hr --tag policy
    python client.py list [--tag hr]
    python client.py show DOCUMENT_ID
    python client.py search "休暇申請のルール" [--top-k 5] [--tag hr] [--document-id ID]
    python client.py chat "社内の休暇申請のルールは？" [--stream]
    python client.py delete DOCUMENT_ID

Every call is a request the design writes out (paths, fields, status codes); the server's extras (API keys,
``search_mode``, the filter language, per-leg ranks) are not used here.  With API keys configured on the
server, pass ``--api-key`` (sent as ``Authorization: Bearer``).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import httpx

API = "/api/v1"


class DocumentSearchClient:
    """The design's endpoints, one method each (section 4 of the design)."""

    def __init__(self, base_url: str = "http://localhost:8000", api_key: str | None = None) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.http = httpx.Client(base_url=base_url, headers=headers, timeout=120.0)

    def root(self) -> dict[str, Any]:
        """GET / — ``{"message", "version", "docs"}``."""
        return self._ok(self.http.get("/", headers={"Accept": "application/json"}))

    def health(self) -> dict[str, Any]:
        """GET /health — ``{"status": "healthy", "components": {...}}``."""
        return self._ok(self.http.get("/health"))

    def upload(self, path: Path, title: str | None = None, tags: list[str] | None = None) -> dict[str, Any]:
        """POST /api/v1/documents/upload (multipart: file, title, tags) — 201 with the document."""
        data: dict[str, Any] = {}
        if title:
            data["title"] = title
        if tags:
            data["tags"] = tags
        with path.open("rb") as handle:
            files = {"file": (path.name, handle)}
            return self._ok(self.http.post(f"{API}/documents/upload", files=files, data=data), 201)

    def list_documents(self, page: int = 1, per_page: int = 20, tag: str | None = None) -> dict[str, Any]:
        """GET /api/v1/documents — ``{"items", "total", "page", "per_page"}``."""
        params: dict[str, Any] = {"page": page, "per_page": per_page}
        if tag:
            params["tag"] = tag
        return self._ok(self.http.get(f"{API}/documents", params=params))

    def get_document(self, document_id: str) -> dict[str, Any]:
        """GET /api/v1/documents/{document_id} — the document with its ``chunks``."""
        return self._ok(self.http.get(f"{API}/documents/{document_id}"))

    def delete_document(self, document_id: str) -> None:
        """DELETE /api/v1/documents/{document_id} — 204."""
        self._ok(self.http.delete(f"{API}/documents/{document_id}"), 204)

    def search(
        self,
        query: str,
        top_k: int = 5,
        score_threshold: float = 0.0,
        tags: list[str] | None = None,
        document_ids: list[str] | None = None,
    ) -> dict[str, Any]:
        """POST /api/v1/search — ``{"results", "total", "query"}``."""
        body: dict[str, Any] = {"query": query, "top_k": top_k, "score_threshold": score_threshold}
        if tags or document_ids:
            body["filter"] = {"tags": tags or [], "document_ids": document_ids or []}
            body["filter"] = {k: v for k, v in body["filter"].items() if v}
        return self._ok(self.http.post(f"{API}/search", json=body))

    def chat(
        self,
        question: str,
        chat_history: list[dict[str, str]] | None = None,
        top_k: int = 5,
        score_threshold: float = 0.0,
    ) -> dict[str, Any]:
        """POST /api/v1/chat — ``{"answer", "sources", "question"}``."""
        body = {
            "question": question,
            "chat_history": chat_history or [],
            "top_k": top_k,
            "score_threshold": score_threshold,
        }
        return self._ok(self.http.post(f"{API}/chat", json=body))

    def chat_stream(
        self, question: str, chat_history: list[dict[str, str]] | None = None
    ) -> list[dict[str, Any]]:
        """POST /api/v1/chat/stream — the Server-Sent Events, each ``{"content", "done", "sources"}``."""
        body = {"question": question, "chat_history": chat_history or []}
        events = []
        with self.http.stream("POST", f"{API}/chat/stream", json=body) as response:
            if response.status_code != 200:
                response.read()
                self._ok(response)
            for line in response.iter_lines():
                if line.startswith("data: "):
                    events.append(json.loads(line[len("data: ") :]))
        return events

    @staticmethod
    def _ok(response: httpx.Response, status: int = 200) -> Any:
        if response.status_code != status:
            try:
                detail = response.json().get("detail")
            except ValueError:
                detail = response.text[:300]
            raise RuntimeError(
                f"{response.request.method} {response.request.url.path}: {response.status_code} {detail}"
            )
        return None if status == 204 else response.json()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="A client of the document-search API (the design's requests)."
    )
    parser.add_argument("--url", default="http://localhost:8000")
    parser.add_argument("--api-key", default=None)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("health")
    sub.add_parser("root")
    p = sub.add_parser("upload")
    p.add_argument("file", type=Path)
    p.add_argument("--title")
    p.add_argument("--tag", action="append", dest="tags")
    p = sub.add_parser("list")
    p.add_argument("--tag")
    p.add_argument("--page", type=int, default=1)
    p = sub.add_parser("show")
    p.add_argument("document_id")
    p = sub.add_parser("delete")
    p.add_argument("document_id")
    p = sub.add_parser("search")
    p.add_argument("query")
    p.add_argument("--top-k", type=int, default=5)
    p.add_argument("--score-threshold", type=float, default=0.0)
    p.add_argument("--tag", action="append", dest="tags")
    p.add_argument("--document-id", action="append", dest="document_ids")
    p = sub.add_parser("chat")
    p.add_argument("question")
    p.add_argument("--stream", action="store_true")
    args = parser.parse_args(argv)
    client = DocumentSearchClient(args.url, args.api_key)
    if args.command == "health":
        out: Any = client.health()
    elif args.command == "root":
        out = client.root()
    elif args.command == "upload":
        out = client.upload(args.file, args.title, args.tags)
    elif args.command == "list":
        out = client.list_documents(args.page, tag=args.tag)
    elif args.command == "show":
        out = client.get_document(args.document_id)
    elif args.command == "delete":
        client.delete_document(args.document_id)
        out = {"deleted": args.document_id}
    elif args.command == "search":
        out = client.search(args.query, args.top_k, args.score_threshold, args.tags, args.document_ids)
    elif args.stream:
        out = {}
        for event in client.chat_stream(args.question):
            if event.get("done"):
                sys.stdout.write("\n")
                out = {"sources": event.get("sources")}
            else:
                sys.stdout.write(event.get("content") or "")
    else:
        out = client.chat(args.question)
    sys.stdout.write(json.dumps(out, ensure_ascii=False, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
