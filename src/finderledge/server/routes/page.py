"""``/``: the web page (plain HTML/JS/CSS shipped in the package, nothing fetched from elsewhere)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse

__all__ = ["STATIC_DIR", "router"]

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
router = APIRouter(tags=["page"])


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    """Upload, list, search (why each result ranked) and chat, in the browser."""
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")
