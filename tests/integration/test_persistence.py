"""Reopening in a new process, and consistency after an exception or a kill in the middle of an add."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge

QUERIES = [
    "How long is a password reset link valid?",
    "返金の申請期限",
    "upload large files resume",
    "retry backoff",
]

SEARCH_SCRIPT = """
import json, sys
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], show_progress=False)
out = {}
for q in json.loads(sys.argv[2]):
    for mode in ("hybrid", "vector", "keyword"):
        out[q + "|" + mode] = [[r.id, round(r.score, 5)] for r in fl.search(q, search_mode=mode, k=5)]
out["count"] = fl.count()
out["store"] = fl.settings.vector_store
print(json.dumps(out))
"""


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-c", textwrap.dedent(script), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )


def _snapshot(fl: FinderLedge) -> dict:
    out: dict = {}
    for q in QUERIES:
        for mode in ("hybrid", "vector", "keyword"):
            out[q + "|" + mode] = [[r.id, round(r.score, 5)] for r in fl.search(q, search_mode=mode, k=5)]
    out["count"] = fl.count()
    out["store"] = fl.settings.vector_store
    return out


@pytest.mark.slow
def test_reopen_in_new_process_gives_identical_results(
    tmp_path: Path, store_kind: str, example_dir: Path
) -> None:
    directory = tmp_path / "index"
    fl = FinderLedge(directory, vector_store=store_kind, show_progress=False)
    fl.add_document(example_dir)
    expected = _snapshot(fl)
    fl.close()
    assert {p.name for p in directory.iterdir()} >= {"ledger.sqlite3", store_kind, "bm25"}
    # the new process does not name the store: the directory remembers it
    proc = _run(SEARCH_SCRIPT, str(directory), json.dumps(QUERIES))
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == expected


def test_exception_before_the_commit_leaves_stores_as_before(
    tmp_path: Path,
    minilm,
    store_kind: str,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
    example_dir: Path,
) -> None:
    fl = FinderLedge(tmp_path / "i", vector_store=store_kind, embedding=minilm)
    fl.add_document(example_dir / "guides")
    before = fl.count()
    snapshot = {q: [r.id for r in fl.search(q)] for q in QUERIES}
    real_commit = fl.ledger.commit_write

    def broken_commit(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk full")  # fault injection: the ledger transaction fails (and rolls back)

    monkeypatch.setattr(fl.ledger, "commit_write", broken_commit)
    with pytest.raises(OSError, match="disk full"):
        fl.add_document(
            [
                Document(page_content="A brand new document about quantum gardening."),
                example_dir / "regions.json",
            ]
        )
    monkeypatch.setattr(fl.ledger, "commit_write", real_commit)
    assert fl.count() == before
    assert fl.vector_store.ids() == fl.keyword_store.ids()
    assert {q: [r.id for r in fl.search(q)] for q in QUERIES} == snapshot
    assert fl.search("quantum gardening", search_mode="keyword") == []
    fl.close()
    reopened = FinderLedge(tmp_path / "i", embedding=minilm)
    assert reopened.count() == before
    reopened.close()


def test_failed_checkpoint_after_the_commit_keeps_the_documents(
    tmp_path: Path,
    minilm,
    store_kind: str,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    fl = FinderLedge(tmp_path / "i", vector_store=store_kind, embedding=minilm)
    fl.add_texts(["Glaciers retreat in warm summers."])

    def broken_flush(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise OSError("disk full")  # the ledger committed; writing the BM25 checkpoint fails

    monkeypatch.setattr(fl.keyword_store, "flush", broken_flush)
    ids = fl.add_texts(
        ["Quantum gardening grows entangled tomatoes."]
    )  # committed: not an error to the caller
    assert "checkpoint" in caplog.text and "disk full" in caplog.text
    for mode in ("keyword", "vector", "hybrid"):
        assert fl.search("quantum gardening tomatoes", search_mode=mode, k=1)[0].parent_id == ids[0]
    monkeypatch.undo()
    fl.close()
    reopened = FinderLedge(tmp_path / "i", embedding=minilm)
    assert reopened.count()["documents"] == 2
    assert reopened.search("quantum gardening", search_mode="keyword", k=1)[0].parent_id == ids[0]
    reopened.close()


KILL_SCRIPT = """
import os, sys
from langchain_core.documents import Document
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], show_progress=False)
where = sys.argv[2]
def crash(*a, **k):
    os._exit(9)          # like SIGKILL: no cleanup, no finally
if where == "commit":
    fl.ledger.commit_write = crash           # before the commit point: nothing happened
elif where == "keyword-flush":
    fl.keyword_store.flush = crash            # after the commit: the BM25 checkpoint is never written
else:
    fl.vector_store.flush = crash             # after the commit: the vector checkpoint is never written
fl.add_document([Document(page_content="Kilimanjaro expedition logistics and porters."), sys.argv[3]])
"""


@pytest.mark.slow
@pytest.mark.parametrize("where", ["commit", "keyword-flush", "vector-flush"])
def test_kill_mid_add_then_reopen(tmp_path: Path, store_kind: str, example_dir: Path, where: str) -> None:
    directory = tmp_path / "index"
    fl = FinderLedge(directory, vector_store=store_kind, show_progress=False)
    fl.add_document(example_dir / "guides")
    before = fl.count()
    expected = _snapshot(fl)
    fl.close()
    proc = _run(KILL_SCRIPT, str(directory), where, str(example_dir / "regions.json"))
    assert proc.returncode == 9, proc.stderr
    fl = FinderLedge(directory, show_progress=False)
    try:
        ledger_ids = {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
        fl.refresh()
        vector_ids = (fl.vector_store.ids() | set(fl.replica.overlay.ids)) - (
            fl.replica.overlay.removed - set(fl.replica.overlay.ids)
        )
        assert ledger_ids == vector_ids == fl.keyword_store.ids()
        found = fl.search("Kilimanjaro expedition", search_mode="keyword")
        if where == "commit":  # killed before the commit point: as if the call never happened
            assert fl.count() == before
            assert _snapshot(fl) == expected
            assert found == []
        else:  # killed after it: the documents are there, in every leg
            assert fl.count()["documents"] == before["documents"] + 2
            assert "Kilimanjaro" in found[0].content
            assert (
                "Kilimanjaro"
                in fl.search("Kilimanjaro expedition porters", search_mode="vector", k=1)[0].content
            )
        # and the same add succeeds (or finds everything stored already)
        fl.add_document(
            [
                Document(page_content="Kilimanjaro expedition logistics and porters."),
                example_dir / "regions.json",
            ]
        )
        assert fl.count()["documents"] == before["documents"] + 2
        assert "Kilimanjaro" in fl.search("Kilimanjaro expedition", search_mode="keyword", k=1)[0].content
    finally:
        fl.close()
    reopened = FinderLedge(directory, show_progress=False)
    try:
        assert reopened.count()["documents"] == before["documents"] + 2
        assert reopened.vector_store.ids() == reopened.keyword_store.ids()  # the close checkpointed both
    finally:
        reopened.close()


def test_reopen_with_another_model_is_refused(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "i", vector_store="faiss")
    fl.add_texts(["hello"])
    fl.close()
    with pytest.raises(ValueError, match="embedding"):
        FinderLedge(tmp_path / "i", embedding="sentence-transformers:/some/other-model")


def test_switching_vector_store_rebuilds_it_from_the_ledger(
    tmp_path: Path, minilm, example_dir: Path
) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "i", vector_store="chroma", embedding=minilm)
    fl.add_document(example_dir)
    chroma_top = [
        r.id for r in fl.search("How long is a password reset link valid?", search_mode="vector", k=3)
    ]
    fl.close()
    fl = FinderLedge(tmp_path / "i", vector_store="faiss", embedding=minilm)
    assert len(fl.vector_store) == fl.count()["chunks"]
    assert [
        r.id for r in fl.search("How long is a password reset link valid?", search_mode="vector", k=3)
    ] == chroma_top
    fl.close()


@pytest.mark.parametrize("damage", ["bm25", "faiss"])
def test_corrupt_index_is_moved_aside_and_rebuilt_from_the_ledger(
    tmp_path: Path,
    minilm,
    example_dir: Path,  # type: ignore[no-untyped-def]
    damage: str,
) -> None:
    directory = tmp_path / "i"
    fl = FinderLedge(directory, vector_store="faiss", embedding=minilm)
    fl.add_document(example_dir)
    expected = _snapshot(fl)
    fl.close()
    target = directory / damage
    victim = max((p for p in target.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    original = victim.read_bytes()
    victim.write_bytes(original[: len(original) // 2])  # a torn write
    fl = FinderLedge(directory, embedding=minilm)
    try:
        assert _snapshot(fl) == expected
        aside = [p for p in directory.iterdir() if p.name.startswith(f"{damage}.corrupt-")]
        assert len(aside) == 1  # the damaged files are kept for inspection, not overwritten
        assert (aside[0] / victim.relative_to(target)).read_bytes() == original[: len(original) // 2]
    finally:
        fl.close()
