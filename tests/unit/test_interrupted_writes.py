"""Issue 39: a write interrupted after its commit (Ctrl-C while the indexes catch up) keeps what it committed,
stored once: its vectors are in its chunks, never put back in the embedding cache beside them; a write
interrupted before its commit keeps its vectors in the cache for the rerun."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge
from finderledge.ingest.write import Checkpointer


def _interrupt(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> None:
    """Ctrl-C as Python delivers it (KeyboardInterrupt), in the first call of ``cls.name``."""
    real = getattr(cls, name)
    calls = {"n": 0}

    def interrupted(self: object, *args: object, **kwargs: object) -> object:
        calls["n"] += 1
        if calls["n"] == 1:
            raise KeyboardInterrupt
        return real(self, *args, **kwargs)

    monkeypatch.setattr(cls, name, interrupted)


TEXTS = [f"passage {i} on refunds and warranty, case {i}" for i in range(12)]


def test_ctrl_c_after_the_commit_leaves_no_copy_in_the_cache(
    tmp_path: Path, fake_embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    _interrupt(monkeypatch, Checkpointer, "__call__")  # the ledger has committed; the indexes follow
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, env_file=None, show_progress=False) as fl:
        with pytest.raises(KeyboardInterrupt):
            fl.add_texts(TEXTS)
        assert fl.count()["documents"] == len(TEXTS)
        assert fl.stats()["embedding_cache"]["entries"] == 0  # each vector stored once, in its chunk
        assert len(fl.search("refunds warranty", k=3)) == 3  # the indexes catch up from the ledger


def test_ctrl_c_before_the_commit_keeps_the_vectors_for_the_rerun(
    tmp_path: Path, fake_embeddings, monkeypatch: pytest.MonkeyPatch
) -> None:
    from finderledge.ledgers.sqlite import SQLiteLedger

    _interrupt(monkeypatch, SQLiteLedger, "commit_write")
    with FinderLedge(tmp_path / "idx", embedding=fake_embeddings, env_file=None, show_progress=False) as fl:
        with pytest.raises(KeyboardInterrupt):
            fl.add_texts(TEXTS)
        assert fl.count()["documents"] == 0
        assert fl.stats()["embedding_cache"]["entries"] == len(TEXTS)
        report = fl.ingest([Document(page_content=t) for t in TEXTS])
        assert report.embeddings_computed == 0 and report.embeddings_cached == len(TEXTS)
        assert fl.stats()["embedding_cache"]["entries"] == 0
