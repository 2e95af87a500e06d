"""``finderledge mcp DIR``: the index as a Model Context Protocol server over stdio, for agents (Claude Code,
Cursor, any MCP client).

Tools: ``search``, ``get_context``, ``answer``, ``add`` and ``list``, with typed inputs.  ``--filter`` is a
base filter every tool honours: searches, contexts, answers and listings AND it with the caller's filter
(which can narrow it, never widen it), and ``add`` stamps its equality fields on what it stores, so an agent
given one tenant's server never sees nor writes another tenant's documents.  What the agent may do is one
:class:`~finderledge.access.AccessPolicy`: read-only unless started with ``--allow-writes``; ``add(path=…)``
reads only under the folders named with ``--allow-folder`` (none by default), each file within
``--max-file-mb``; an id naming another tenant's document is refused.  Refusals and library errors reach the
agent with FinderLedge's own message.  Uses the official Python SDK (``pip install "finderledge[mcp]"``);
stdout carries the protocol, so logs go to stderr.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Annotated, Any, cast

from pydantic import Field

from ..access import AccessPolicy, stamp_of
from ..config import SEARCH_MODES
from ..errors import ConfigurationError, FinderLedgeError, MissingExtraError
from ..metadata import user_metadata
from ..rag.scope import Scope
from ..version import package_version

if TYPE_CHECKING:
    from ..facade import FinderLedge

__all__ = ["build_server", "server_class", "stamp_of", "tool_error_class"]

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


def tool_error_class() -> type[Exception]:
    """The SDK's ``ToolError``: raised from a tool, its message reaches the agent (anything else reads
    "Error executing tool <name>" with no reason)."""
    try:
        from mcp.server.mcpserver.exceptions import ToolError  # mcp 2

        return ToolError
    except ImportError:
        from mcp.server.fastmcp.exceptions import ToolError as Mcp1ToolError  # type: ignore[import-not-found]

        return cast(type[Exception], Mcp1ToolError)


def _reporting(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` whose FinderLedge errors (refusals included) reach the agent with their own message."""
    error = tool_error_class()

    @functools.wraps(fn)
    def tool(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except FinderLedgeError as exc:
            logger.info("%s refused: %s", fn.__name__, exc)
            raise error(str(exc)) from exc

    return tool


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


def build_server(
    ledger: FinderLedge,
    base_filter: Mapping[str, Any] | None = None,
    llm: Any = None,
    *,
    policy: AccessPolicy | None = None,
) -> Any:
    """An MCP server whose tools search and feed ``ledger`` under ``policy`` (default: ``base_filter``,
    read-only, no files); answers by ``llm``, else extractive."""
    if policy is None:
        policy = AccessPolicy(base_filter, writable=False, folders=(), label="this MCP server")
    view = Scope(ledger, policy=policy)  # every tool goes through the one policy
    if policy.writable and not policy.stampable:
        logger.warning(
            "--filter %s has conditions add cannot stamp: the add tool is refused", policy.base_filter
        )
    server_cls = server_class()
    about = (
        "Hybrid (BM25 + vector) search over a document index: search, get_context or answer a question with "
        "cited sources; list the documents"
        + ("; add text or files." if policy.writable else " (read-only: add is refused).")
    )
    try:
        server = server_cls("finderledge", instructions=about, version=package_version())
    except TypeError:  # mcp 1's FastMCP takes no version: set it on its low-level server
        server = server_cls("finderledge", instructions=about)
        server._mcp_server.version = package_version()  # noqa: SLF001 - mcp 1 has no other way

    @server.tool()
    @_reporting
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
        results = view.search(query, k=k, filter=filter, search_mode=search_mode, mmr=mmr)
        return {"results": [_hit(r) for r in results]}

    @server.tool()
    @_reporting
    def get_context(
        query: Annotated[str, Field(description="the question the context is for")],
        k: Annotated[int, Field(ge=1, le=50)] = 5,
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
    ) -> str:
        """A prompt-ready context: the best passages numbered [1], [2] … with their sources."""
        return view.get_context(query, k=k, filter=filter)

    @server.tool()
    @_reporting
    def answer(
        question: Annotated[str, Field(description="the question to answer from the documents")],
        k: Annotated[int, Field(ge=1, le=20)] = 5,
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
    ) -> dict[str, Any]:
        """Answer from the documents, citing sources as [n] (extractive quotes when no LLM is configured)."""
        try:
            return view.answer(question, llm, k=k, filter=filter).to_dict()
        except FinderLedgeError:
            raise
        except Exception as exc:  # the model's client raises its own kinds (the HTTP chat says so too)
            raise tool_error_class()(
                f"the language model failed: {type(exc).__name__}: {str(exc)[:300]}"
            ) from exc

    @server.tool()
    @_reporting
    def add(
        text: Annotated[str | None, Field(description="text to store as one document")] = None,
        path: Annotated[
            str | None, Field(description="a file or folder to read (on the server's machine)")
        ] = None,
        metadata: Annotated[Metadata | None, Field(description="metadata stored with the document")] = None,
        source: Annotated[str | None, Field(description="a name for the text's source")] = None,
        document_id: Annotated[str | None, Field(description="your id for the document")] = None,
    ) -> dict[str, Any]:
        """Add text or a file/folder to the index; returns the stored document ids (refused unless the server
        allows writes; files only under its allowed folders)."""
        if (text is None) == (path is None):
            raise ConfigurationError("add: give text or path (one of them)")
        policy.check_write("add")
        md = policy.write_metadata(metadata)  # the base filter's fields win: a document stays in its tenant
        if source is not None:
            md["source"] = source
        if text is not None:
            ids = view.add_texts([text], [md], document_id=document_id)
        else:
            ids = view.add_document(str(path), md, document_id=document_id, on_error="raise")
        return {"ids": ids, "metadata": md}

    @server.tool(name="list")
    @_reporting
    def list_documents(
        filter: Annotated[dict[str, Any] | None, Field(description="metadata filter")] = None,
        offset: Annotated[int, Field(ge=0)] = 0,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> dict[str, Any]:
        """The stored documents (id, source, metadata, start of the text) and how many match."""
        docs = view.list_documents(filter=filter, offset=offset, limit=limit)
        return {
            "total": view.count(filter)["documents"],
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
