"""A search that finds an index damaged answers anyway: the index is moved aside, rebuilt from the ledger,
and the search runs again, once.  The ledger holds every text and vector, so a derived index's damage is
never the caller's error (it was: the search raised and the next call rebuilt).

Damage a search can find after open: a file read lazily (the BM25 metadata a filter reads, whose checksum
vouches for wrong content), or a vector library failing on its own files (Chroma's log replay after a
writer was killed: not reproducible on demand, so the store's search raises as Chroma's did).
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge.errors import IndexCorruptError, LedgerCorruptError
from finderledge.replica.core import READ_ATTEMPTS
from finderledge.storage.durable import manifest_checksum
from finderledge.vector_stores.faiss import FaissVectorStore

TEXTS = [
    f"Note {i}: {w} by the {o}." for i, (w, o) in enumerate(zip(["tides", "glaciers"] * 6, "abcdefghijkl"))
]
FILTER = {"half": 1}


def _open(root: Path) -> FinderLedge:
    return FinderLedge(
        root,
        vector_store="faiss",
        embedding=DeterministicFakeEmbedding(size=16),
        show_progress=False,
        env_file=None,
    )


def _ids(fl: FinderLedge, mode: str, flt: dict[str, Any] | None = FILTER) -> list[str]:
    return [str(h.id) for h in fl.search("tides", search_mode=mode, k=6, filter=flt)]


@pytest.fixture
def built(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    root = tmp_path / "index"
    with _open(root) as fl:
        fl.add_texts(TEXTS, [{"half": (i // 2) % 2} for i in range(len(TEXTS))])
    with _open(root) as fl:
        expected = {mode: _ids(fl, mode) for mode in ("keyword", "vector", "hybrid")}
    assert all(expected.values())
    return root, expected


def _asides(root: Path, name: str) -> list[Path]:
    return [p for p in root.iterdir() if p.name.startswith(f"{name}.corrupt-")]


def test_bm25_metadata_found_damaged_by_a_filtered_search_is_rebuilt_and_answered(
    built: tuple[Path, dict[str, list[str]]],
) -> None:
    root, expected = built
    bm25 = root / "bm25"
    manifest = json.loads((bm25 / "manifest.json").read_text(encoding="utf-8"))
    entry = manifest["segments"][0]
    data = json.dumps(list(range(entry["n_docs"]))).encode()  # valid JSON, right length: not objects
    (bm25 / "segments" / entry["name"] / "meta.json").write_bytes(data)
    entry["files"]["meta.json"] = {"bytes": len(data), "crc32": zlib.crc32(data)}
    body = {k: v for k, v in manifest.items() if k != "checksum"}
    (bm25 / "manifest.json").write_text(json.dumps({**body, "checksum": manifest_checksum(body)}))
    with _open(root) as fl:
        assert _ids(fl, "keyword") == expected["keyword"]  # the first search answers
        assert len(_asides(root, "bm25")) == 1  # the damaged files kept aside, never deleted
        assert _ids(fl, "hybrid") == expected["hybrid"]
    assert len(_asides(root, "bm25")) == 1


def test_a_vector_store_failing_on_its_files_is_rebuilt_and_answered(
    built: tuple[Path, dict[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, expected = built
    failures: list[str] = []
    search = FaissVectorStore.search

    def fails_once(self: FaissVectorStore, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        if not failures:
            failures.append("raised")
            raise IndexCorruptError(root / "faiss", "failed to apply its own log")
        return search(self, *args, **kwargs)

    monkeypatch.setattr(FaissVectorStore, "search", fails_once)
    with _open(root) as fl:
        assert _ids(fl, "vector") == expected["vector"]
        assert failures == ["raised"] and len(_asides(root, "faiss")) == 1
        assert _ids(fl, "hybrid") == expected["hybrid"]


def test_damage_found_again_after_the_rebuild_is_raised_not_retried_forever(
    built: tuple[Path, dict[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = built
    calls: list[int] = []

    def always_fails(self: FaissVectorStore, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        calls.append(1)
        raise IndexCorruptError(root / "faiss", "failed to apply its own log")

    monkeypatch.setattr(FaissVectorStore, "search", always_fails)
    with _open(root) as fl:
        with pytest.raises(IndexCorruptError, match="its own log"):
            _ids(fl, "vector", None)
        assert len(calls) == READ_ATTEMPTS  # the search, and once more after each rebuild: bounded


def test_a_damaged_ledger_is_raised_at_once_never_rebuilt(
    built: tuple[Path, dict[str, list[str]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _ = built
    calls: list[int] = []

    def ledger_fails(self: FaissVectorStore, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        calls.append(1)
        raise LedgerCorruptError(root / "ledger.sqlite3", "torn page")

    monkeypatch.setattr(FaissVectorStore, "search", ledger_fails)
    with _open(root) as fl, pytest.raises(LedgerCorruptError):
        _ids(fl, "vector", None)
    assert calls == [1] and not _asides(root, "faiss")
