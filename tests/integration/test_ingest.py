"""Folder ingest: re-ingest without re-embedding, replace, prune, the embedding cache, and kill -9 mid-folder."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.document_loader import LoadError


def _consistent(fl: FinderLedge) -> set[str]:
    ledger_ids = {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
    assert ledger_ids == fl.vector_store.ids() == fl.keyword_store.ids()
    return ledger_ids


def _write_corpus(folder: Path, n: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (folder / f"note{i:03d}.txt").write_text(
            f"Note {i}. The warehouse in zone {i % 7} stores item {i * 13} on shelf {i % 5}.\n",
            encoding="utf-8",
        )


def test_reingest_changed_and_pruned(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    _write_corpus(folder, 12)
    (folder / "ja.md").write_text("# 倉庫\n\n東京倉庫の在庫は毎週月曜日に数えます。", encoding="utf-8")
    fl = FinderLedge(tmp_path / "idx", embedding=minilm, vector_store="faiss")
    first = fl.ingest(folder)
    assert (first.files_seen, first.files_added, first.embeddings_computed) == (13, 13, 13)
    assert first.seconds_embedding > 0 and first.seconds_total >= first.seconds_embedding

    again = fl.ingest(folder)
    assert again.embeddings_computed == 0 and again.embeddings_cached == 0  # nothing even looked at
    assert (again.files_unchanged, again.added, again.replaced) == (13, [], [])

    (folder / "note003.txt").write_text(
        "Note 3 was rewritten: zone 9 now holds bicycles.\n", encoding="utf-8"
    )
    (folder / "note004.txt").unlink()
    changed = fl.ingest(folder)
    assert (changed.files_replaced, changed.files_unchanged, changed.embeddings_computed) == (1, 11, 1)
    assert len(changed.replaced) == 1 and changed.pruned == []
    assert fl.count()["documents"] == 13  # note004 is gone from disk but kept until pruned
    pruned = fl.ingest(folder, prune=True)
    assert len(pruned.pruned) == 1 and fl.count()["documents"] == 12
    assert not any(s.endswith("note004.txt") for s in fl.list_sources())
    _consistent(fl)
    assert "bicycles" in fl.search("which zone holds bicycles", search_mode="keyword", k=1)[0].content
    fl.close()


def test_embedding_cache_survives_remove_and_reopen(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    fl = FinderLedge(tmp_path / "idx", embedding=minilm)
    text = "Solar inverters convert direct current into alternating current."
    report = fl.ingest([Document(page_content=text)])
    assert report.embeddings_computed == 1
    fl.remove_document(report.added[0])
    fl.close()
    fl = FinderLedge(tmp_path / "idx", embedding=minilm)
    again = fl.ingest(Document(page_content=text))
    assert (again.embeddings_computed, again.embeddings_cached) == (0, 1)
    assert fl.search("solar inverter current", search_mode="vector", k=1)[0].content == text
    fl.close()


def test_bad_file_is_reported_or_raised_and_nothing_is_lost(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "docs"
    _write_corpus(folder, 3)
    (folder / "broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (folder / "photo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    fl = FinderLedge(embedding=minilm)
    report = fl.ingest(folder)
    reasons = dict(report.skipped)
    assert {Path(p).name for p in reasons} == {"broken.pdf", "photo.png"}
    assert fl.count()["documents"] == 3
    with pytest.raises(LoadError, match="broken.pdf"):
        fl.ingest(folder, on_error="raise")
    assert fl.count()["documents"] == 3
    _consistent(fl)
    fl.close()


INGEST_SCRIPT = """
import json, os, signal, sys
import finderledge.ingest.batches
from finderledge import FinderLedge
from finderledge.embeddings import SentenceTransformerEmbeddings, default_model_path

# every batch kept in the cache as computed (by default one write per second of embedding work: these
# batches of 8 short notes take milliseconds)
finderledge.ingest.batches.CACHE_SECONDS = 0.0

class KillingEmbeddings(SentenceTransformerEmbeddings):
    '''The real model, but the process is killed (SIGKILL) on the N-th batch: a crash mid-folder.'''
    calls = 0
    def embed_documents(self, texts):
        type(self).calls += 1
        if type(self).calls == int(sys.argv[3]):
            os.kill(os.getpid(), signal.SIGKILL)
        return super().embed_documents(texts)

model = KillingEmbeddings(default_model_path())
fl = FinderLedge(sys.argv[1], embedding=model, vector_store=sys.argv[4], embedding_batch_size=8, show_progress=False)
report = fl.ingest(sys.argv[2])
print(json.dumps({"computed": report.embeddings_computed, "cached": report.embeddings_cached,
                  "added": len(report.added), "count": fl.count()}))
fl.close()
"""


@pytest.mark.slow
def test_sigkill_mid_folder_then_rerun_finishes(tmp_path: Path, store_kind: str) -> None:
    folder, directory = tmp_path / "docs", tmp_path / "idx"
    _write_corpus(folder, 40)
    script = textwrap.dedent(INGEST_SCRIPT)
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    killed = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-c", script, str(directory), str(folder), "4", store_kind],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert killed.returncode == -9, killed.stderr
    done = subprocess.run(  # noqa: PLW1510 - the exit code is asserted
        [sys.executable, "-c", script, str(directory), str(folder), "0", store_kind],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["count"] == {"documents": 40, "chunks": 40}
    assert out["cached"] == 24 and out["computed"] == 16  # three batches of 8 survived the kill
    from finderledge.embeddings import SentenceTransformerEmbeddings, default_model_path

    class KillingEmbeddings(SentenceTransformerEmbeddings):  # same class name: same recorded model id
        pass

    fl = FinderLedge(directory, embedding=KillingEmbeddings(default_model_path()))
    ids = _consistent(fl)
    assert len(ids) == 40 and len(fl.list_sources()) == 40
    fl.close()


def _write_long_notes(folder: Path, n: int) -> None:
    """Files of several chunks each (chunk_size 120 in the tests below): a file must never be half stored."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        paragraphs = [
            f"Note {i}, part {p}: zone {i % 7} keeps item {i * 13 + p} on shelf {p}, checked weekly."
            for p in range(4)
        ]
        (folder / f"long{i:03d}.txt").write_text("\n\n".join(paragraphs), encoding="utf-8")


def test_a_large_folder_is_written_in_batches_of_whole_files(
    tmp_path: Path,
    minilm,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Streaming ingest: a folder over STREAM_GROUPS files is loaded, embedded and committed a batch of whole
    files at a time; a failure mid-folder keeps the batches before it (each file complete) and loses nothing
    embedded (the retry takes the failed batch's vectors from the cache)."""
    import finderledge.ingest.write

    monkeypatch.setattr(finderledge.ingest.write, "STREAM_GROUPS", 5)
    folder = tmp_path / "docs"
    _write_long_notes(folder, 23)
    (folder / "stale.txt").write_text("A file that will vanish before the second run.", encoding="utf-8")
    with FinderLedge(embedding=minilm, chunk_size=120, chunk_overlap=0, show_progress=False) as reference:
        reference.add_document(folder)
        full = {
            Path(d.metadata["source"]).name: len(reference.get_split_documents(d.id))
            for d in reference.list_documents()
        }
    assert min(v for k, v in full.items() if k.startswith("long")) >= 3

    fl = FinderLedge(tmp_path / "idx", embedding=minilm, chunk_size=120, chunk_overlap=0, show_progress=False)
    real_commit, commits = fl.ledger.commit_write, []

    def failing_third(*args, **kwargs):  # type: ignore[no-untyped-def]
        commits.append(len(kwargs.get("add", ())))
        if len(commits) == 3:
            raise OSError(28, "disk full")
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(fl.ledger, "commit_write", failing_third)
    with pytest.raises(OSError, match="disk full"):
        fl.add_document(folder)
    assert commits == [5, 5, 5]
    stored = {Path(d.metadata["source"]).name: len(fl.get_split_documents(d.id)) for d in fl.list_documents()}
    assert len(stored) == 10 and all(stored[name] == full[name] for name in stored)  # whole files only
    _consistent(fl)

    monkeypatch.setattr(fl.ledger, "commit_write", real_commit)
    (folder / "stale.txt").unlink()
    report = fl.ingest(folder)  # the rerun: stored batches unchanged, the failed one from the cache
    assert report.files_seen == 23 and report.files_unchanged == 10 and report.files_added == 13
    failed = sum(full[f"long{i:03d}.txt"] for i in range(10, 15))
    # the batch after it was embedded on a worker thread while it committed: what that did before the failure
    # stopped it (all of it, some model calls, or none) is in the cache too
    ahead = sum(full[f"long{i:03d}.txt"] for i in range(15, 20))
    assert failed <= report.embeddings_cached <= failed + ahead
    assert report.embeddings_cached + report.embeddings_computed == failed + sum(
        full[f"long{i:03d}.txt"] for i in range(15, 23)
    )
    assert {Path(d.metadata["source"]).name for d in fl.list_documents()} == {
        f"long{i:03d}.txt" for i in range(23)
    }
    assert fl.stats()["embedding_cache"]["entries"] == 0  # every vector now lives in its chunk
    ids = _consistent(fl)
    assert len(ids) == sum(v for k, v in full.items() if k != "stale.txt")
    fl.close()


def test_a_document_id_call_is_one_write_however_large(
    tmp_path: Path,
    minilm,  # type: ignore[no-untyped-def]
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With document_id the parents it does not list again are replaced, so the call cannot be split."""
    import finderledge.ingest.write

    monkeypatch.setattr(finderledge.ingest.write, "STREAM_GROUPS", 2)
    folder = tmp_path / "docs"
    _write_corpus(folder, 7)
    with FinderLedge(embedding=minilm, show_progress=False) as fl:
        real_commit, commits = fl.ledger.commit_write, []
        monkeypatch.setattr(
            fl.ledger, "commit_write", lambda *a, **kw: commits.append(1) or real_commit(*a, **kw)
        )  # type: ignore[func-returns-value]
        fl.add_document(folder, document_id="manual")
        assert len(commits) == 1 and fl.count()["documents"] == 7


def test_a_long_ingest_shows_throughput_and_time_left(
    tmp_path: Path,
    minilm,  # type: ignore[no-untyped-def]
    capfd: pytest.CaptureFixture[str],
) -> None:
    from langchain_core.embeddings import Embeddings

    class Paced(Embeddings):
        """The real model, a batch at least 0.15 s apart: tqdm redraws at most every 0.1 s, so each shows."""

        model_name = "paced-minilm"

        def embed_documents(self, texts: list[str]) -> list[list[float]]:
            time.sleep(0.15)
            return minilm.embed_documents(texts)  # type: ignore[no-any-return]

        def embed_query(self, text: str) -> list[float]:
            return minilm.embed_query(text)  # type: ignore[no-any-return]

    folder = tmp_path / "docs"
    _write_long_notes(folder, 6)
    with FinderLedge(
        embedding=Paced(), chunk_size=120, chunk_overlap=0, embedding_batch_size=4, show_progress=True
    ) as fl:
        fl.add_document(folder)
    err = capfd.readouterr().err
    assert re.search(r"Indexing files: 100%.*6/6 \[\d\d:\d\d<00:00, +[\d.]+(file/s|s/file)\]", err), err
    assert re.search(r"Embedding chunks: .*\d+/24 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(chunk/s|s/chunk)\]", err), (
        err
    )
    with FinderLedge(embedding=minilm, show_progress=False) as quiet:
        quiet.add_document(folder)
    assert "Indexing" not in capfd.readouterr().err
