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


async def _session_run(
    directory: Path, base_filter: dict[str, Any], calls: Any, flags: tuple[str, ...] = ("--allow-writes",)
) -> Any:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "finderledge", "mcp", str(directory), "--filter", json.dumps(base_filter), *flags],
        env=dict(os.environ),
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        info = await session.initialize()
        if calls is None:
            return info
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


# -- the access policy (issue 39): read-only by default, scoped writes, allowed folders, errors that say why --


def _error_text(result: Any) -> str:
    """The message of a tool result that must be an error."""
    assert getattr(result, "is_error", getattr(result, "isError", False)), result
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_read_only_by_default_with_the_library_messages_and_version(index: Path) -> None:
    from finderledge.version import package_version

    async def calls(session: ClientSession) -> dict[str, Any]:
        return {
            "add": await session.call_tool("add", {"text": "Tenant A note."}),
            "path": await session.call_tool("add", {"path": str(index)}),
            "bad_filter": await session.call_tool(
                "search", {"query": "refund", "filter": {"lang": {"$near": "ja"}}}
            ),
            "list": _payload(await session.call_tool("list", {})),
        }

    info = asyncio.run(_session_run(index, {"tenant": "a"}, None, flags=()))
    assert info.server_info.version == package_version() != ""
    out = asyncio.run(_session_run(index, {"tenant": "a"}, calls, flags=()))
    assert "read-only" in _error_text(out["add"]) and "--allow-writes" in _error_text(out["add"])
    assert "read-only" in _error_text(out["path"])
    bad = _error_text(out["bad_filter"])
    assert "unknown operator '$near'" in bad and "lang" in bad  # the library's own message, not just the tool
    assert out["list"]["total"] == 1  # nothing was written


def test_a_scoped_writer_cannot_replace_another_tenants_document(tmp_path: Path, minilm) -> None:
    directory = tmp_path / "index"
    with FinderLedge(directory, embedding=minilm, show_progress=False) as fl:
        fl.add_texts(
            ["Contract seven: tenant B pays 1,000 EUR."], [{"tenant": "b"}], document_id="contract-7"
        )
        fl.add_texts(["Tenant A's own contract."], [{"tenant": "a"}], document_id="contract-a")

    async def calls(session: ClientSession) -> dict[str, Any]:
        return {
            "replace": await session.call_tool(
                "add", {"text": "Overwritten by A.", "document_id": "contract-7", "metadata": {"tenant": "b"}}
            ),
            "own": _payload(
                await session.call_tool(
                    "add", {"text": "A's contract, new version.", "document_id": "contract-a"}
                )
            ),
        }

    out = asyncio.run(_session_run(directory, {"tenant": "a"}, calls))
    message = _error_text(out["replace"])
    assert "'contract-7'" in message and "outside this scope" in message
    assert "1,000 EUR" not in message and "tenant B" not in message  # nothing of B's document is shown
    assert out["own"]["metadata"]["tenant"] == "a"
    with FinderLedge(directory, embedding=minilm, show_progress=False) as fl:
        seven = fl.list_documents(filter={"document_id": "contract-7"})
        assert [(d.page_content, d.metadata["tenant"]) for d in seven] == [
            ("Contract seven: tenant B pays 1,000 EUR.", "b")
        ]
        own = fl.list_documents(filter={"document_id": "contract-a"})
        assert [d.page_content for d in own] == ["A's contract, new version."]


def test_paths_only_under_allowed_folders_within_the_size_limit(index: Path, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "faq.md").write_text("Gift cards never expire.", encoding="utf-8")
    (allowed / "big.txt").write_text("x " * 2000, encoding="utf-8")  # 4,000 bytes: over 0.002 MB
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret: the root password is hunter2", encoding="utf-8")
    (allowed / "link.txt").symlink_to(secret)
    linked_dir = tmp_path / "linked"
    linked_dir.mkdir()
    (linked_dir / "inside.md").write_text("fine", encoding="utf-8")
    (linked_dir / "out.txt").symlink_to(secret)
    flags = ("--allow-writes", "--allow-folder", str(allowed), "--max-file-mb", "0.002")

    async def calls(session: ClientSession) -> dict[str, Any]:
        async def add(path: Path | str) -> Any:
            return await session.call_tool("add", {"path": str(path)})

        return {
            "passwd": await add("/etc/passwd"),
            "outside": await add(secret),
            "dotdot": await add(allowed / ".." / "secret.txt"),
            "link": await add(allowed / "link.txt"),
            "big": await add(allowed / "big.txt"),
            "ok": _payload(await add(allowed / "faq.md")),
            "found": _payload(await session.call_tool("search", {"query": "gift cards expire", "k": 1})),
            "leak": _payload(await session.call_tool("search", {"query": "root password hunter2", "k": 5})),
        }

    out = asyncio.run(_session_run(index, {"tenant": "a"}, calls, flags=flags))
    for case in ("passwd", "outside", "dotdot"):
        assert "outside the allowed folders" in _error_text(out[case]), case
    assert "symbolic link" in _error_text(out["link"])
    assert "limit of 2,097 bytes per file" in _error_text(out["big"])
    assert out["ok"]["ids"] and out["ok"]["metadata"]["tenant"] == "a"
    assert out["found"]["results"][0]["content"] == "Gift cards never expire."
    assert all("hunter2" not in h["content"] for h in out["leak"]["results"])

    async def folder_calls(session: ClientSession) -> Any:
        return await session.call_tool("add", {"path": str(linked_dir)})

    flags = ("--allow-writes", "--allow-folder", str(linked_dir))
    refused = asyncio.run(_session_run(index, {"tenant": "a"}, folder_calls, flags=flags))
    assert "symbolic link leading outside the allowed folders" in _error_text(refused)
    none_allowed = asyncio.run(_session_run(index, {"tenant": "a"}, folder_calls, flags=("--allow-writes",)))
    assert "no folder is allowed" in _error_text(none_allowed)
