"""Issue 41's follow-up across processes: a process that opened a directory before another process switched its
``vector_index`` with ``reindex`` writes the switched kind at its next checkpoint (it reads the recorded setting
first), so the directory's manifest keeps the new approximate index and the next open builds nothing.

The switching process is a real second process (fake embeddings, the approximate index built from 4 rows in
both processes so a small corpus has one)."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge

SWITCHER = """
import sys
import finderledge.vector_stores.faiss as faiss
from langchain_core.embeddings import DeterministicFakeEmbedding
from finderledge import FinderLedge
faiss.MIN_ROWS = 4
with FinderLedge(sys.argv[1], embedding=DeterministicFakeEmbedding(size=16), show_progress=False,
                 env_file=None) as fl:
    fl.reindex(vector_index="hnsw")
"""


def _open(path: Path) -> FinderLedge:
    return FinderLedge(
        path, embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    )


def test_a_process_opened_before_another_ones_switch_writes_the_switched_kind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)
    monkeypatch.setattr("finderledge.replica.policy.BACKLOG_LIMIT", 0)  # the stale replica writes at once
    path = tmp_path / "idx"
    with _open(path) as fl:
        fl.add_documents(
            [Document(page_content=f"note {i} about topic {i % 3}", id=f"d{i}") for i in range(12)]
        )
    a = _open(path)
    assert len(a.search("note about topic 1", k=5)) == 5  # its vector index loaded, flat
    subprocess.run([sys.executable, "-c", SWITCHER, str(path)], check=True, timeout=120)
    assert json.loads((path / "faiss" / "manifest.json").read_text())["ann"]["kind"] == "hnsw"
    a.add_texts([f"later note {i} about topic {i % 3}" for i in range(6)])
    assert a.settings.vector_index == "hnsw"
    a.close()
    manifest = json.loads((path / "faiss" / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == "hnsw"  # A's checkpoint wrote the recorded kind
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="finderledge.vector_stores.faiss"), _open(path) as fl:
        store = fl.engine.open_vector_index()
        assert store._ann is not None and store._ann.kind == "hnsw"  # type: ignore[attr-defined]
        assert len(fl.search("later note about topic 2", k=5)) == 5
    assert not [r for r in caplog.records if "built the" in r.getMessage()]  # loaded, not built again
    assert (
        json.loads((path / "faiss" / "manifest.json").read_text())["ann"]["name"] == manifest["ann"]["name"]
    )
