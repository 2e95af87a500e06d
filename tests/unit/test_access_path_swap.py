"""A path swapped between the access policy's check and the loader's open is never read (issue 39, MCP path
TOCTOU): a scoped view with allowed folders (what ``finderledge mcp --allow-folder`` builds) checks a path, then
the loader opens it; here a hook between the two steps swaps the checked file for a symbolic link or a hard link
to a file outside, or the checked folder for a link to an outside folder.  Before: the outside file's canary was
stored and searchable (4 of 4 swaps).  Now the loader opens with ``O_NOFOLLOW`` and refuses any file that is not
the one checked (device and inode of its ``fstat`` against the check's ``lstat``, one link, a regular file)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import AccessDeniedError, FinderLedge
from finderledge.document_loader.loader import DocumentLoader

CANARY = "canary-4711 the host's secret"


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    ledger = FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=8), show_progress=False, env_file=None
    )
    yield ledger
    ledger.close()


def _symlink(checked: Path, secret: Path) -> None:
    checked.unlink()
    checked.symlink_to(secret)


def _hardlink(checked: Path, secret: Path) -> None:
    checked.unlink()
    os.link(secret, checked)


def _replaced_by_a_copy(checked: Path, secret: Path) -> None:
    checked.rename(checked.with_name("checked-away.md"))  # kept: its inode number is not reused at once
    shutil.copyfile(secret, checked)  # another file at the checked name (a new file's content is only what
    # the caller could write there anyway: the outside files are the threat, whose inodes differ)


def _folder_link(checked: Path, secret: Path) -> None:
    folder = checked.parent
    shutil.rmtree(folder)
    folder.symlink_to(secret.parent)


SWAPS: dict[str, Callable[[Path, Path], None]] = {
    "symlink": _symlink,
    "hard-link": _hardlink,
    "new-file": _replaced_by_a_copy,
    "folder-link": _folder_link,
}


@pytest.mark.parametrize("target", ["file", "folder"])
@pytest.mark.parametrize("swap", sorted(SWAPS))
def test_a_path_swapped_after_the_check_is_never_read(
    fl: FinderLedge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, swap: str, target: str
) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "sub").mkdir(parents=True)
    checked = allowed / "sub" / "notes.md"
    checked.write_text("Gift cards never expire.", encoding="utf-8")
    (tmp_path / "outside").mkdir()
    secret = tmp_path / "outside" / "notes.md"
    secret.write_text(CANARY, encoding="utf-8")

    opened = DocumentLoader.load_file
    swapped: list[Path] = []

    def swap_then_open(self: DocumentLoader, path: str | Path) -> object:
        if not swapped:  # between the policy's check and the loader's open
            SWAPS[swap](checked, secret)
            swapped.append(Path(path))
        return opened(self, path)

    monkeypatch.setattr(DocumentLoader, "load_file", swap_then_open)
    view = fl.scoped({"tenant": "a"}, writable=True, folders=[allowed])
    with pytest.raises(AccessDeniedError, match="notes.md"):
        view.add_document(checked if target == "file" else allowed, on_error="raise")
    assert swapped
    assert not fl.search("canary-4711", k=5, search_mode="keyword")
    assert CANARY not in [d.page_content for d in fl.list_documents()]


def test_an_unchanged_file_and_folder_still_load(fl: FinderLedge, tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    (allowed / "sub").mkdir(parents=True)
    (allowed / "sub" / "notes.md").write_text("Gift cards never expire.", encoding="utf-8")
    (allowed / "faq.md").write_text("Refunds within 30 days.", encoding="utf-8")
    view = fl.scoped({"tenant": "a"}, writable=True, folders=[allowed])
    assert view.add_document(allowed / "sub" / "notes.md")
    assert len(view.add_document(allowed)) == 2
    assert sorted(d.page_content for d in view.list_documents()) == [
        "Gift cards never expire.",
        "Refunds within 30 days.",
    ]


def test_the_mcp_add_tool_refuses_a_swapped_path_with_the_reason(
    fl: FinderLedge, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same swap through the MCP server's ``add(path=...)`` (in process): the agent gets the refusal."""
    pytest.importorskip("mcp")
    import asyncio

    from finderledge import AccessPolicy
    from finderledge.mcp.server import build_server

    allowed = tmp_path / "allowed"
    allowed.mkdir()
    checked = allowed / "notes.md"
    checked.write_text("Gift cards never expire.", encoding="utf-8")
    secret = tmp_path / "secret.md"
    secret.write_text(CANARY, encoding="utf-8")
    opened = DocumentLoader.load_file

    def swap_then_open(self: DocumentLoader, path: str | Path) -> object:
        if not checked.is_symlink():
            _symlink(checked, secret)
        return opened(self, path)

    monkeypatch.setattr(DocumentLoader, "load_file", swap_then_open)
    policy = AccessPolicy({"tenant": "a"}, writable=True, folders=[allowed], label="this MCP server")
    server: Any = build_server(fl, policy=policy)
    with pytest.raises(Exception, match="notes.md changed after the access check"):
        asyncio.run(server.call_tool("add", {"path": str(checked)}))
    assert CANARY not in [d.page_content for d in fl.list_documents()]
