"""``/api/v1/chat`` and ``/api/v1/chat/stream``: an answer with cited sources (streamed as Server-Sent Events)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

from fastapi import APIRouter, HTTPException
from fastapi.responses import StreamingResponse

from ...results import SearchResult
from ..answers import no_answer
from ..deps import Caller, CallerDep, ServerState, StateDep
from ..models import JSON_ERRORS, ChatRequest, ChatResponse, ErrorOut
from ..strategies import canonical_strategy
from .search import cite, distinct_search, hit

__all__ = ["router"]

logger = logging.getLogger(__name__)
Copies = dict[str, list[SearchResult]]  # the other copies of a passage, by the kept result's chunk id
router = APIRouter(prefix="/api/v1/chat", tags=["chat"], responses=JSON_ERRORS)


def _sources(results: list[SearchResult], copies: Copies) -> list[dict[str, Any]]:
    keys = ("document_id", "chunk_id", "filename", "title", "page", "score", "content", "also_in")
    out = []
    for n, r in enumerate(results, start=1):
        source = {k: v for k, v in hit(r, copies.get(r.id, ())).items() if k in keys}
        # the document-search design's names, beside ours
        out.append({"n": n, **source, "page_number": source["page"], "chunk_content": source["content"]})
    return out


def _pieces(
    state: ServerState, caller: Caller, body: ChatRequest
) -> tuple[Iterator[str], list[SearchResult], Copies]:
    """The answer's pieces (lazily: a model streams them), written by :meth:`FinderLedge.stream_answer` from this
    request's results, and the sources it is written from (results with no evidence at all, score 0, are never
    cited; a passage found in several documents is cited once, the others in its ``also_in``)."""
    found, copies = distinct_search(state, caller, body, most=20)
    results = [r for r in found if r.score > 0]
    history = [(t.role, t.content) for t in body.turns]
    if not hasattr(
        state.answerer, "prompts"
    ):  # an answerer of an earlier version: it writes the answer itself
        if not results:
            return iter([no_answer(body.question)]), results, copies
        passages = [r.content for r in results]
        context = state.ledger.get_context(results=results, citation=cite)
        return state.answerer.stream(body.question, history, context, passages), results, copies
    stream = state.ledger.stream_answer(
        body.question,
        state.answerer.model,
        results=results,
        history=history,
        prompts=state.answerer.prompts,
        citation=cite,  # no server path in what the model is given
    )
    return (piece for piece in stream if isinstance(piece, str)), results, copies


def _model_failed(exc: Exception) -> HTTPException:
    logger.warning("the language model failed: %s", exc, exc_info=exc)
    return HTTPException(502, f"the language model failed: {type(exc).__name__}: {str(exc)[:300]}")


@router.post(
    "",
    response_model=ChatResponse,
    summary="Answer a question from the documents",
    responses={502: {"model": ErrorOut}},
)
def chat(state: StateDep, caller: CallerDep, body: ChatRequest) -> dict[str, Any]:
    """An answer citing its sources as [n]; without a language model, the best passages, marked extractive."""
    pieces, results, copies = _pieces(state, caller, body)
    try:
        answer = "".join(pieces)
    except Exception as exc:  # noqa: BLE001 - the model's client raises its own kinds
        raise _model_failed(exc) from None
    return {
        "answer": answer,
        "sources": _sources(results, copies),
        "question": body.question,
        "extractive": state.answerer.extractive,
        "model": state.answerer.name,
        "strategy": canonical_strategy(body.strategy),
    }


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


@router.post(
    "/stream",
    summary="Answer a question, streamed as Server-Sent Events",
    response_class=StreamingResponse,
    responses={
        200: {
            "content": {"text/event-stream": {}},
            "description": 'events `{"content": …, "done": false, "sources": null}` … then '
            '`{"content": "", "done": true, "sources": [...], "extractive": …, "model": …, "strategy": …}`',
        }
    },
)
def chat_stream(state: StateDep, caller: CallerDep, body: ChatRequest) -> StreamingResponse:
    """The answer piece by piece, then the sources (an error after the first piece ends the stream with
    ``{"done": true, "error": …}``)."""
    pieces, results, copies = _pieces(state, caller, body)

    def events() -> Iterator[str]:
        try:
            for piece in pieces:
                yield _event({"content": piece, "done": False, "sources": None})
        except Exception as exc:  # noqa: BLE001
            yield _event({"done": True, "error": _model_failed(exc).detail})
            return
        yield _event(
            {
                "content": "",
                "done": True,
                "sources": _sources(results, copies),
                "extractive": state.answerer.extractive,
                "model": state.answerer.name,
                "strategy": canonical_strategy(body.strategy),
            }
        )

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
