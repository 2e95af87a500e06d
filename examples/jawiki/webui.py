"""The jawiki example's web UI: one page with a question box (answer and ``[n] jawiki:<title>#chunk=<n>``
citations, rendered on the server: no JavaScript) and a JSON endpoint, over a :class:`jawiki.JawikiRag`.

    GET  /                      the page (``?q=質問`` shows the answer)
    GET  /api/ask?q=質問        the answer as JSON (also POST /api/ask with {"question": "..."})
    GET  /api/health            {"status": "ok", ...}
"""

from __future__ import annotations

import html
import threading
from typing import Any

from fastapi import Body, FastAPI, HTTPException, Query
from fastapi.responses import HTMLResponse

MAX_QUESTION = 1000  # characters

PAGE = """<!doctype html>
<html lang="ja"><head><meta charset="utf-8"><title>jawiki mini-RAG</title>
<style>body{{font-family:sans-serif;max-width:52rem;margin:2rem auto;padding:0 1rem}}
input[type=text]{{width:75%;font-size:1.1rem}} .answer{{white-space:pre-wrap;background:#f4f4f4;padding:1rem}}
.note{{color:#666;font-size:.9rem}} li{{margin:.4rem 0}} blockquote{{margin:.2rem 0 0 0;color:#444}}</style>
</head><body>
<h1>jawiki mini-RAG</h1>
<p class="note">JaQuAD の日本語 Wikipedia 段落をハイブリッド検索（BM25 + multilingual-e5-small）。{mode}</p>
<form method="get" action="/" id="ask-form">
<input type="text" name="q" id="q" value="{question}" placeholder="質問を入力（例：東大寺の大仏の高さは？）" autofocus>
<button type="submit" id="ask">質問する</button>
</form>
{result}
</body></html>
"""


def _result_html(answer: dict[str, Any]) -> str:
    """The answer and its citations as HTML (every piece of text escaped)."""
    items = "".join(
        f'<li class="citation"><code>[{p["n"]}] {html.escape(p["citation"])}</code> '
        f'<span class="note">score {p["score"]:.2f}</span><blockquote>{html.escape(p["text"][:300])}'
        f"{'…' if len(p['text']) > 300 else ''}</blockquote></li>"
        for p in answer["passages"]
    )
    sources = f'<h2>出典</h2><ol class="citations">{items}</ol>' if items else ""
    text = answer["answer"] + (f"\n\n{answer['references']}" if answer["references"] else "")
    return f'<h2>回答</h2><div class="answer" id="answer">{html.escape(text)}</div>{sources}'


def create_app(rag: Any) -> FastAPI:
    """The FastAPI app over ``rag`` (one search at a time: the index and the model are shared)."""
    app = FastAPI(title="jawiki mini-RAG", docs_url=None, redoc_url=None, openapi_url=None)
    lock = threading.Lock()

    def answer(question: str) -> dict[str, Any]:
        question = question.strip()
        if not question:
            raise HTTPException(400, "empty question")
        if len(question) > MAX_QUESTION:
            raise HTTPException(413, f"question longer than {MAX_QUESTION} characters")
        with lock:
            return rag.ask(question).to_dict()  # type: ignore[no-any-return]

    @app.get("/api/health")
    def health() -> dict[str, Any]:
        return {"status": "ok", "model": rag.model, "threshold": rag.threshold}

    @app.get("/api/ask")
    def ask_get(q: str = Query(..., description="the question")) -> dict[str, Any]:
        return answer(q)

    @app.post("/api/ask")
    def ask_post(body: dict[str, Any] = Body(...)) -> dict[str, Any]:  # noqa: B008 - FastAPI's idiom
        question = body.get("question")
        if not isinstance(question, str):
            raise HTTPException(400, 'expected {"question": "..."}')
        return answer(question)

    @app.get("/", response_class=HTMLResponse)
    def page(q: str = "") -> str:
        mode = f"回答：{html.escape(rag.model)}" if rag.model else "回答は抽出型（生成モデルなし）。"
        result = _result_html(answer(q)) if q.strip() else ""
        return PAGE.format(mode=mode, question=html.escape(q, quote=True), result=result)

    return app
