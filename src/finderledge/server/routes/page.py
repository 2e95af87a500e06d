"""``/``: the web page for a browser (plain HTML/JS/CSS shipped in the package, nothing fetched from elsewhere),
or, for an API client asking for JSON, the service's name, version and where its documentation is."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from ...version import package_version
from ..models import RootOut

__all__ = ["STATIC_DIR", "router", "wants_json"]

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
router = APIRouter(tags=["page"])
MESSAGE = "FinderLedge document search API"


def wants_json(accept: str) -> bool:
    """Whether an ``Accept`` header asks for JSON rather than a page (a browser always names text/html)."""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return "application/json" in kinds and "text/html" not in kinds


@router.get(
    "/",
    summary="The web page, or the service's name and version as JSON",
    response_model=None,
    responses={
        200: {
            "description": "text/html for a browser; with `Accept: application/json`, "
            '`{"message": …, "version": …, "docs": "/docs"}`',
            "content": {
                "text/html": {},
                "application/json": {"schema": RootOut.model_json_schema()},
            },
        }
    },
)
def index(request: Request) -> Response:
    """Upload, list, search (why each result ranked) and chat, in the browser; JSON for an API client."""
    if wants_json(request.headers.get("accept", "")):
        body = RootOut(message=MESSAGE, version=package_version(), docs="/docs")
        return JSONResponse(body.model_dump())
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8")
