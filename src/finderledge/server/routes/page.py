"""``/``: the web page for a browser (plain HTML/JS/CSS shipped in the package, nothing fetched from elsewhere),
or, for an API client (one whose ``Accept`` does not name text/html), the service's name, version and where its
documentation is."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import FileResponse, JSONResponse, Response

from ...version import package_version
from ..models import RootOut

__all__ = ["DOC_LINKS", "STATIC_DIR", "router", "wants_json"]

STATIC_DIR = Path(__file__).resolve().parent.parent / "static"
router = APIRouter(tags=["page"])
MESSAGE = "FinderLedge document search API"


_PAGE_TYPES = frozenset({"text/html", "application/xhtml+xml"})
#: RFC 8631 links to the API's documentation, sent with the JSON answer
DOC_LINKS = '</docs>; rel="service-doc", </openapi.json>; rel="service-desc", </redoc>; rel="service-doc"'


def wants_json(accept: str) -> bool:
    """Whether an ``Accept`` header asks for JSON rather than the page: a browser always names text/html (or
    XHTML), an API client does not (``application/json``, ``*/*``, or no header at all)."""
    kinds = {part.split(";")[0].strip().lower() for part in accept.split(",")}
    return not kinds & _PAGE_TYPES


@router.get(
    "/",
    summary="The web page, or the service's name and version as JSON",
    response_model=None,
    responses={
        200: {
            "description": "text/html for a browser (an `Accept` naming text/html); for an API client "
            '(`Accept: application/json`, `*/*` or none), `{"message": …, "version": …, "docs": "/docs"}` '
            "with a `Link` header to the OpenAPI schema and the docs",
            "content": {
                "text/html": {},
                "application/json": {"schema": RootOut.model_json_schema()},
            },
        }
    },
)
def index(request: Request) -> Response:
    """Upload, list, search (why each result ranked) and chat, in the browser; JSON for an API client."""
    headers = {"Vary": "Accept"}
    if wants_json(request.headers.get("accept", "")):
        body = RootOut(message=MESSAGE, version=package_version(), docs="/docs")
        return JSONResponse(body.model_dump(), headers={**headers, "Link": DOC_LINKS})
    return FileResponse(STATIC_DIR / "index.html", media_type="text/html; charset=utf-8", headers=headers)
