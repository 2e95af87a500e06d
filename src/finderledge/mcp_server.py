"""``finderledge mcp DIR``: the index as a Model Context Protocol server over stdio, for agents (Claude Code,
Cursor, any MCP client).

Tools: ``search``, ``get_context``, ``answer``, ``add`` and ``list``, with typed inputs.  ``--filter`` is a
base filter every tool honours: searches, contexts, answers and listings AND it with the caller's filter
(which can narrow it, never widen it), and ``add`` stamps its equality fields on what it stores, so an agent
given one tenant's server never sees nor writes another tenant's documents.  Uses the official Python SDK
(``pip install "finderledge[mcp]"``); stdout carries the protocol, so logs go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from .config import SEARCH_MODES
from .errors import ConfigurationError, MissingExtraError
from .filters import and_filters, compile_filter
from .metadata import user_metadata

if TYPE_CHECKING:
    from .facade import FinderLedge

__all__ = ["build_server", "server_class", "stamp_of"]

logger = logging.getLogger(__name__)

Metadata = dict[str, str | int | float | bool]


def server_class() -> Any:
    """The SDK's server class (``MCPServer`` in mcp 2, ``FastMCP`` in mcp 1), or an error naming the extra."""
    try:
        from mcp.server.mcpserver import MCPServer  # mcp 2

        return MCPServer
    except ImportError:
        pass
    try:
        from mcp.server.fastmcp import FastMCP  # type: ignore[attr-defined]  # mcp 1

        return FastMCP
    except ImportError as exc:
        raise MissingExtraError(
            "finderledge mcp (the Model Context Protocol SDK)", exc.name or "mcp", "mcp"
        ) from None


def stamp_of(base_filter: Mapping[str, Any] | None) -> dict[str, Any]:
    """The metadata ``add`` stamps so what it stores matches ``base_filter``: its top-level equality fields
    (``{"tenant": "a"}`` or ``{"tenant": {"$eq": "a"}}``)."""
    stamp: dict[str, Any] = {}
    for key, cond in (base_filter or {}).items():
        if key.startswith("$"):
            continue
        if isinstance(cond, Mapping):
            if set(cond) == {"$eq"}:
                stamp[key] = cond["$eq"]
        else:
            stamp[key] = cond
    return stamp


def _hit(result: Any) -> dict[str, Any]:
    return {
        "rank": result.rank,
        "score": round(result.score, 4),
        "source": result.source,
        "page": result.metadata.get("page"),
        "chunk_id": result.id,
        "parent_id": result.parent_id,
        "content": result.content,
        "metadata": user_metadata(result.metadata),
    }


def build_server(ledger: FinderLedge, base_filter: Mapping[str, Any] | None = None, llm: Any = None) -> Any:
    """An MCP server whose tools search and feed ``ledger`` within ``base_filter`` (answers by ``llm``, else
    extractive)."""
    base = dict(base_filter) if base_filter else None
    accepts = compile_filter(base)  # validated before the server starts
    stamp = stamp_of(base)
    if accepts is not None and not accepts(stamp):
        logger.warning("--filter %s has conditions add cannot stamp: the add tool is refused", base)
    server = server_class()(
        "finderledge",
        instructions="Hybrid (BM25 + vector) search over a document index: search, get_context or answer "
        "a question with cited sources; add text or files; list the documents.",
    )

    def narrow(flt: dict[str, Any] | None) -> dict[str, Any] | None:
        return and_filters(json.loads(json.dumps(base)) if base else None, flt or None)

    @server.tool()
    def search(
        query: Annotated[str, Field(description="what to look for, in any language")],
        k: Annotated[int, Field(ge=1, le=50, description="how many chunks to return")] = 5,
        filter: Annotated[
            dict[str, Any] | None, Field(description='metadata filter, e.g. {"lang": "ja"}')
        ] = None,
        search_mode: Annotated[
            str | None,
            Field(pattern=f"^({'|'.join(SEARCH_MODES)})$", description="default: the index's search_mode"),
        ] = None,
        mmr: Annotated[bool, Field(description="diverse results (no near-duplicates)")] = False,
    ) -> dict[str, Any]:
        """Search the documents (hybrid BM25 + vector); each result has its source, page, chunk id and text."""
        results = ledger.search(query, k=k, filter=narrow(filter), search_mode=search_mode, mmr=mmr)
        return {"results": [_hit(r) for r in results]}

    @server.tool()
    def get_context(
        query: Annotated[str, Field(description="the question the context is for")],
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
    ) -> str:
        """A prompt-ready context: the best passages numbered [1], [2] … with their sources."""
        return ledger.get_context(query, k=k, filter=narrow(filter))

    @server.tool()
    def answer(
        question: Annotated[str, Field(description="the question to answer from the documents")],
        k: Annotated[int, Field(ge=1, le=20)] = 5,
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
    ) -> dict[str, Any]:
        """Answer from the documents, citing sources as [n] (extractive quotes when no LLM is configured)."""
        return ledger.answer(question, llm, k=k, filter=narrow(filter)).to_dict()

    @server.tool()
    def add(
        text: Annotated[str | None, Field(description="text to store as one document")] = None,
        path: Annotated[
            str | None, Field(description="a file or folder to read (on the server's machine)")
        ] = None,
        metadata: Annotated[Metadata | None, Field(description="metadata stored with the document")] = None,
        source: Annotated[str | None, Field(description="a name for the text's source")] = None,
        document_id: Annotated[str | None, Field(description="your id for the document")] = None,
    ) -> dict[str, Any]:
        """Add text or a file/folder to the index; returns the stored document ids."""
        if (text is None) == (path is None):
            raise ConfigurationError("add: give text or path (one of them)")
        if accepts is not None and not accepts(stamp):
            raise ConfigurationError(
                f"add: this server's base filter {base} has conditions that cannot be stamped on a document"
            )
        md = {**(metadata or {}), **stamp}  # the base filter's fields win: a document stays in its tenant
        if source is not None:
            md["source"] = source
        if text is not None:
            ids = ledger.add_texts([text], [md], document_id=document_id)
        else:
            ids = ledger.add_document(os.path.expanduser(str(path)), md, document_id=document_id)
        return {"ids": ids, "metadata": md}

    @server.tool(name="list")
    def list_documents(
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """The stored documents (id, source, metadata, start of the text) and how many match."""
        flt = narrow(filter)
        docs = ledger.list_documents(filter=flt, offset=offset, limit=limit)
        return {
            "total": ledger.count(flt)["documents"],
            "documents": [
                {
                    "id": d.id,
                    "source": d.metadata.get("source"),
                    "metadata": user_metadata(d.metadata),
                    "preview": d.page_content[:200],
                }
                for d in docs
            ],
        }

    return server
