"""``/api/v1/health`` (each component checked for real), ``/health`` (the same checks in the document-search
design's shape) and ``/api/v1/version``; all public."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ...version import package_version
from ..deps import ServerState, StateDep
from ..models import DesignHealthOut, HealthOut, VersionOut

__all__ = ["API_VERSION", "router"]

logger = logging.getLogger(__name__)
router = APIRouter(tags=["system"])
API_VERSION = "v1"


def _check(name: str, probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        result = {"ok": True, **probe()}
    except Exception as exc:  # noqa: BLE001 - a health check reports every failure
        logger.warning("health: %s failed: %s", name, exc)
        result = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    result["ms"] = round((time.perf_counter() - started) * 1000, 1)
    return result


def _components(state: ServerState) -> dict[str, dict[str, Any]]:
    fl = state.ledger
    return {
        "ledger": _check("ledger", lambda: {"readable": fl.count() is not None}),
        "vector_index": _check(
            "vector_index",
            lambda: {"backend": fl.settings.vector_store, "searched": _searched(state, "vector")},
        ),
        "keyword_index": _check("keyword_index", lambda: {"searched": _searched(state, "keyword")}),
        "embedding": _check(
            "embedding", lambda: {"dimension": len(fl.embeddings.embed_query("health check"))}
        ),
        "uploads": _check("uploads", lambda: {"writable": _writable(state)}),
        "llm": _check("llm", lambda: {"model": state.answerer.name or "extractive (none configured)"}),
    }


def _searched(state: ServerState, mode: str) -> bool:
    """One real search in one leg (matching nothing: no caller's data is read or shown)."""
    state.ledger.search(
        "health check", k=1, search_mode=mode, filter={"$and": [{"_health": 1}, {"_health": 2}]}
    )
    return True


def _writable(state: ServerState) -> bool:
    root = state.uploads.root
    root.mkdir(parents=True, exist_ok=True)
    probe = root / ".health"
    probe.write_bytes(b"ok")
    probe.unlink()
    return True


@router.get(
    "/api/v1/health",
    response_model=HealthOut,
    summary="Check every component",
    responses={503: {"model": HealthOut}},
)
def health(state: StateDep) -> JSONResponse:
    """200 when the ledger, both indexes, the embedding model and the upload area work; else 503."""
    components = _components(state)
    ok = all(c["ok"] for c in components.values())
    return JSONResponse(
        {"status": "ok" if ok else "failing", "components": components}, status_code=200 if ok else 503
    )


@router.get(
    "/health",
    response_model=DesignHealthOut,
    summary="Check every component (the document-search design's shape)",
    responses={503: {"model": DesignHealthOut}},
)
def design_health(state: StateDep) -> JSONResponse:
    """``{"status": "healthy", "components": {"database": "ok", "<vector backend>": "ok", …}}`` (200), or
    ``unhealthy`` with each failed component's error (503): the ledger is the design's ``database``, the vector
    index is named after its backend (``qdrant``, ``faiss``, …)."""
    components = _components(state)
    names = {"ledger": "database", "vector_index": str(state.ledger.settings.vector_store)}
    flat = {names.get(name, name): "ok" if c["ok"] else str(c.get("error")) for name, c in components.items()}
    ok = all(c["ok"] for c in components.values())
    return JSONResponse(
        {"status": "healthy" if ok else "unhealthy", "components": flat}, status_code=200 if ok else 503
    )


@router.get("/api/v1/version", response_model=VersionOut, summary="Versions")
def version() -> dict[str, str]:
    """The installed FinderLedge and the API version (``v1``: paths under ``/api/v1``)."""
    return {"finderledge": package_version(), "api": API_VERSION}
