"""``finderledge mcp DIR`` driven by the official MCP SDK's own client over stdio: the tools and their typed
inputs are listed, each tool works, and the base filter keeps another tenant's text out of every tool."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters  # the dev extra installs the SDK
from mcp.client.stdio import stdio_client

from finderledge import FinderLedge

TOOLS = {"search", "get_context", "answer", "add", "list"}


def _payload(result: Any) -> Any:
    """A tool result's structured content (the SDK's field names differ between mcp 1 and 2)."""
    assert not getattr(result, "is_error", getattr(result, "isError", False)), result
    structured = getattr(result, "structured_content", getattr(result, "structuredContent", None))
    if structured is not None:
        return structured.get("result", structured) if set(structured) == {"result"} else structured
    return json.loads(result.content[0].text)


async def _session_run(directory: Path, base_filter: dict[str, Any], calls: Any) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "finderledge", "mcp", str(directory), "--filter", json.dumps(base_filter)],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await calls(session)


@pytest.fixture
def index(tmp_path: Path, minilm) -> Path:
    with FinderLedge(tmp_path / "index", embedding=minilm, show_progress=False) as fl:
        fl.add_texts(
            ["Refunds are accepted within 30 days of delivery.", "Tenant B secret: refunds take 90 days."],
            [{"source": "a.md", "tenant": "a"}, {"source": "b.md", "tenant": "b"}],
        )
    return tmp_path / "index"


def test_the_sdk_client_lists_and_calls_every_tool_within_the_base_filter(index: Path) -> None:
    async def calls(session: ClientSession) -> dict[str, Any]:
        tools = (await session.list_tools()).tools
        out: dict[str, Any] = {"tools": {t.name: t for t in tools}}
        out["search"] = _payload(await session.call_tool("search", {"query": "refund days", "k": 5}))
        out["widen"] = _payload(
            await session.call_tool("search", {"query": "refund", "filter": {"tenant": "b"}})
        )
        out["context"] = (await session.call_tool("get_context", {"query": "refund days"})).content[0].text
        out["answer"] = _payload(await session.call_tool("answer", {"question": "How long for a refund?"}))
        out["add"] = _payload(
            await session.call_tool(
                "add",
                {"text": "Exchanges are free within 14 days.", "metadata": {"tenant": "b", "kind": "faq"}},
            )
        )
        out["found"] = _payload(
            await session.call_tool("search", {"query": "exchanges free 14 days", "k": 1})
        )
        out["list"] = _payload(await session.call_tool("list", {}))
        out["bad"] = await session.call_tool("search", {"query": "refund", "k": 0})
        return out

    out = asyncio.run(_session_run(index, {"tenant": "a"}, calls))
    assert set(out["tools"]) == TOOLS
    schema = (
        out["tools"]["search"].input_schema
        if hasattr(out["tools"]["search"], "input_schema")
        else out["tools"]["search"].inputSchema
    )
    assert schema["properties"]["k"]["type"] == "integer" and schema["required"] == ["query"]
    hits = out["search"]["results"]
    assert hits and all(h["metadata"]["tenant"] == "a" for h in hits)
    assert hits[0]["source"] == "a.md" and hits[0]["chunk_id"]
    assert out["widen"]["results"] == []  # a caller's filter narrows the base filter, never replaces it
    assert "[1] (source: a.md" in out["context"] and "90 days" not in out["context"]
    assert out["answer"]["extractive"] is True and out["answer"]["sources"][0]["source"] == "a.md"
    assert "90 days" not in json.dumps(out["answer"])
    assert out["add"]["metadata"]["tenant"] == "a"  # stamped: the base filter wins over the caller's tenant
    assert out["found"]["results"][0]["content"] == "Exchanges are free within 14 days."
    assert out["list"]["total"] == 2 and {d["metadata"]["tenant"] for d in out["list"]["documents"]} == {"a"}
    assert getattr(out["bad"], "is_error", getattr(out["bad"], "isError", False))  # k=0 refused by the schema


def test_other_tenant_server_sees_only_its_own(index: Path) -> None:
    async def calls(session: ClientSession) -> Any:
        return _payload(await session.call_tool("search", {"query": "refund days", "k": 5}))

    out = asyncio.run(_session_run(index, {"tenant": "b"}, calls))
    assert [h["source"] for h in out["results"]] == ["b.md"]
