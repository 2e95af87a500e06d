"""The ``vector_index`` setting (issue 41): the FAISS store's approximate indexes beside its float32 rows.

Checked here: the setting's validation; when the approximate index is built (enough rows at a flush), retrained
(growth) and what searches do before (exact); that it is written and read through the segment layer (a damaged
file is corruption, never parsed); that incremental adds and removes keep working, across a reopen; selective
filters; and that the directory records the kind, refuses another on opening and switches it by reindex.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document

from finderledge import FinderLedge, Settings
from finderledge.errors import ConfigurationError
from finderledge.vector_stores.faiss import ANN_FILE, FaissVectorStore, VectorIndexCorruptError

DIM = 16
KINDS = ["hnsw", "ivf", "ivf_sq8", "ivf_pq"]


def _clustered(n: int, seed: int = 0) -> np.ndarray:
    """Normalised points around 20 centres (what an approximate index is built for)."""
    rng = np.random.default_rng(seed)
    centres = np.random.default_rng(99).normal(size=(20, DIM))
    v = centres[rng.integers(0, 20, n)] + 0.3 * rng.normal(size=(n, DIM))
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def _store(path: Path | None, kind: str, min_rows: int = 200) -> FaissVectorStore:
    return FaissVectorStore(path, dimension=DIM, vector_index=kind, ann_min_rows=min_rows)


def _add(store: FaissVectorStore, lo: int, hi: int, vectors: np.ndarray) -> None:
    store.add(
        [f"c{i}" for i in range(lo, hi)],
        vectors[lo:hi],
        [{"group": "rare" if i % 97 == 0 else "common", "i": i} for i in range(lo, hi)],
    )


def _exact(vectors: np.ndarray, ids: list[str], query: np.ndarray, k: int) -> list[str]:
    scores = vectors @ (query / np.linalg.norm(query))
    return [ids[i] for i in np.argsort(-scores, kind="stable")[:k]]


# -- the setting --------------------------------------------------------------------------------------
def test_the_setting_names_itself_and_its_values() -> None:
    assert Settings().vector_index == "flat"
    with pytest.raises(
        ConfigurationError, match=r"'vector_index'.*one of \['flat', 'hnsw', 'ivf', 'ivf_sq8'"
    ):
        Settings(vector_index="annoy")
    with pytest.raises(ConfigurationError, match=r"vector_index.*FINDERLEDGE_VECTOR_INDEX.*one of"):
        Settings.resolve(environ={"FINDERLEDGE_VECTOR_INDEX": "HNSW32"}, env_file=None)
    assert (
        Settings.resolve(environ={"FINDERLEDGE_VECTOR_INDEX": "ivf_pq"}, env_file=None).vector_index
        == "ivf_pq"
    )
    with pytest.raises(ConfigurationError, match=r"vector_index.*'flat' with vector_store = 'chroma'"):
        Settings.resolve({"vector_store": "chroma", "vector_index": "hnsw"}, env_file=None, environ={})
    with pytest.raises(ConfigurationError, match=r"vector_index.*one of"):
        FaissVectorStore(None, dimension=DIM, vector_index="lsh")


# -- the store ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", KINDS)
def test_built_at_the_first_flush_with_enough_rows_exact_before(tmp_path: Path, kind: str) -> None:
    vectors = _clustered(1200)
    store = _store(tmp_path / "faiss", kind)
    _add(store, 0, 150, vectors)
    store.flush()
    assert store._ann is None  # 150 rows < 200: exact search
    assert [i for i, _ in store.search(vectors[3], 5)] == _exact(
        vectors[:150], [f"c{i}" for i in range(150)], vectors[3], 5
    )
    _add(store, 150, 600, vectors)
    assert store._ann is None  # built at a flush (a checkpoint), not by an add
    store.flush()
    assert store._ann is not None and store._ann.size == 600 and store._ann.trained_rows == 600
    written = [p for p in (tmp_path / "faiss" / "segments").glob("seg-*") if (p / ANN_FILE).is_file()]
    assert len(written) == 1
    manifest = json.loads((tmp_path / "faiss" / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == kind and manifest["ann"]["name"] == written[0].name
    _add(store, 600, 1000, vectors)  # added to it at once
    assert store._ann.size == 1000
    store.flush()
    assert store._ann.trained_rows == 600  # grown < 4x: not retrained
    _add(store, 1000, 1200, vectors)
    store.delete([f"c{i}" for i in range(40)])
    store.flush()
    store.close()

    again = _store(tmp_path / "faiss", kind)  # read back, the rows written since added to it
    assert again._ann is not None and again._ann.size == 1200 and again._ann.dead == 40
    ids = [f"c{i}" for i in range(40, 1200)]
    live = vectors[40:1200]
    hits = 0
    for q in range(50, 1200, 23):
        found = again.search(vectors[q], 10)
        assert len(found) == 10 and all(not cid.startswith("c3") or int(cid[1:]) >= 40 for cid, _ in found)
        assert all(a[1] >= b[1] for a, b in itertools.pairwise(found))
        for cid, score in found:  # rescored: exact cosines
            assert score == pytest.approx(float(vectors[int(cid[1:])] @ vectors[q]), abs=1e-5)
        hits += len({c for c, _ in found} & set(_exact(live, ids, vectors[q], 10)))
    assert hits / (10 * len(range(50, 1200, 23))) >= 0.9
    assert not {f"c{i}" for i in range(40)} & {c for c, _ in again.search(vectors[5], 100)}
    again.close()


def test_retrained_when_the_corpus_grows_and_dropped_when_it_shrinks(tmp_path: Path) -> None:
    vectors = _clustered(1000)
    store = _store(tmp_path / "faiss", "ivf")
    _add(store, 0, 200, vectors)
    store.flush()
    first = store._ann
    assert first is not None and first.trained_rows == 200
    _add(store, 200, 800, vectors)
    store.flush()
    assert store._ann is not first and store._ann is not None and store._ann.trained_rows == 800
    store.delete([f"c{i}" for i in range(700)])
    store.flush()
    assert store._ann is None  # 100 rows: exact again
    assert "ann" not in json.loads((tmp_path / "faiss" / "manifest.json").read_text())
    assert not [p for p in (tmp_path / "faiss" / "segments").glob("seg-*") if (p / ANN_FILE).is_file()]
    store.close()


def test_many_deleted_rows_rebuild_it(tmp_path: Path) -> None:
    vectors = _clustered(800)
    store = _store(None, "hnsw")
    _add(store, 0, 800, vectors)
    store.flush()
    store.delete([f"c{i}" for i in range(300)])
    assert store._ann is not None and store._ann.dead == 300
    store.flush()  # 300/800 > 25 % deleted: built again from the live rows
    assert store._ann.dead == 0 and store._ann.size == 500


@pytest.mark.parametrize("kind", KINDS)
def test_selective_and_broad_filters(kind: str) -> None:
    vectors = _clustered(3000, seed=3)
    store = _store(None, kind)
    _add(store, 0, 3000, vectors)
    store.flush()
    ids = [f"c{i}" for i in range(3000)]
    rare = [i for i in range(3000) if i % 97 == 0]  # 31 rows: scored exactly
    found = store.search(vectors[10], 10, {"group": "rare"})
    assert [c for c, _ in found] == _exact(vectors[rare], [ids[i] for i in rare], vectors[10], 10)
    common = [i for i in range(3000) if i % 97]  # through the approximate index with a selector
    found = store.search(vectors[10], 10, {"group": "common"})
    assert len(found) == 10 and all(int(c[1:]) % 97 for c, _ in found)
    expected = _exact(vectors[common], [ids[i] for i in common], vectors[10], 10)
    assert len({c for c, _ in found} & set(expected)) >= 8
    in_range = store.search(vectors[10], 10, {"i": {"$lt": 400}})  # 400 rows: through the index
    assert len(in_range) == 10 and all(int(c[1:]) < 400 for c, _ in in_range)
    batch = store.search_many(vectors[:20], 5)
    assert [[c for c, _ in hits] for hits in batch] == [
        [c for c, _ in store.search(v, 5)] for v in vectors[:20]
    ]


def test_a_damaged_index_file_is_corruption_never_parsed(tmp_path: Path) -> None:
    vectors = _clustered(400)
    store = _store(tmp_path / "faiss", "ivf_pq")
    _add(store, 0, 400, vectors)
    store.flush()
    store.close()
    (path,) = [
        p / ANN_FILE for p in (tmp_path / "faiss" / "segments").glob("seg-*") if (p / ANN_FILE).is_file()
    ]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(VectorIndexCorruptError, match="checksum"):
        _store(tmp_path / "faiss", "ivf_pq")


def test_another_kind_on_disk_is_built_again(tmp_path: Path) -> None:
    vectors = _clustered(400)
    store = _store(tmp_path / "faiss", "ivf")
    _add(store, 0, 400, vectors)
    store.flush()
    store.close()
    other = _store(tmp_path / "faiss", "hnsw")
    assert other._ann is None and len(other) == 400  # the ivf file is not this kind's
    other.set_vector_index("ivf_sq8")
    other.flush()
    assert other._ann is not None and other._ann.kind == "ivf_sq8"
    kinds = json.loads((tmp_path / "faiss" / "manifest.json").read_text())["ann"]["kind"]
    assert kinds == "ivf_sq8"
    assert len([p for p in (tmp_path / "faiss" / "segments").glob("seg-*") if (p / ANN_FILE).is_file()]) == 1
    other.close()


# -- the directory ----------------------------------------------------------------------------------
def _open(path: Path, model: Any, **settings: Any) -> FinderLedge:
    return FinderLedge(path, embedding=model, show_progress=False, env_file=None, **settings)


def test_recorded_refused_when_switched_and_switched_by_reindex(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)
    path = tmp_path / "idx"
    fl = _open(path, fake_embeddings, vector_index="hnsw")
    fl.add_documents([Document(page_content=f"note {i} about topic {i % 3}", id=f"d{i}") for i in range(12)])
    assert fl.settings.vector_index == "hnsw"
    fl.close()
    fl = _open(path, fake_embeddings)  # reopened without the argument: keeps the recorded kind
    assert fl.settings.vector_index == "hnsw"
    assert fl.engine.open_vector_index()._ann is not None  # type: ignore[attr-defined]
    fl.close()
    with pytest.raises(ConfigurationError, match=r"vector_index.*'hnsw'.*reindex\(vector_index='ivf'\)"):
        _open(path, fake_embeddings, vector_index="ivf")
    fl = _open(path, fake_embeddings)
    report = fl.reindex(vector_index="ivf")
    assert report.chunks_written == 0  # nothing split again
    assert fl.settings.vector_index == "ivf"
    assert len(fl.search("note about topic 1", k=5)) == 5
    fl.close()
    fl = _open(path, fake_embeddings)
    assert fl.settings.vector_index == "ivf"
    assert json.loads(fl.engine.ledger.get_info("settings") or "{}")["vector_index"] == "ivf"
    store = fl.engine.open_vector_index()
    assert store._ann is not None and store._ann.kind == "ivf"  # type: ignore[attr-defined]
    assert not fl.check().problems
    fl.close()


def test_a_rebuild_after_a_switch_builds_the_new_kind(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``reindex(vector_index=...)`` then, in the same process, a rebuild of the vector index from the ledger
    (``check(repair=True)`` on a damaged file; a damaged index found by a search): the rebuilt store is of the
    switched kind.  It was built with the kind the directory was opened with, flat, and checkpointed so."""
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)
    path = tmp_path / "idx"
    with _open(path, fake_embeddings) as fl:
        fl.add_documents(
            [Document(page_content=f"note {i} about topic {i % 3}", id=f"d{i}") for i in range(12)]
        )
    with _open(path, fake_embeddings) as fl:
        assert fl.settings.vector_index == "flat"
        fl.reindex(vector_index="hnsw")
        (target,) = (path / "faiss" / "segments").glob("seg-*/vectors.npy")
        raw = bytearray(target.read_bytes())
        raw[-1] ^= 0x40
        target.write_bytes(bytes(raw))
        repaired = fl.check(repair=True)
        assert any("vector index" in r for r in repaired.repaired), repaired
        store = fl.engine.open_vector_index()
        assert store.vector_index == "hnsw"  # type: ignore[attr-defined]
        assert store._ann is not None and store._ann.kind == "hnsw"  # type: ignore[attr-defined]
        assert len(fl.search("note about topic 1", k=5)) == 5
        assert fl.check().clean
    manifest = json.loads((path / "faiss" / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == "hnsw"  # the rebuilt index was checkpointed as the switched kind


def test_an_instance_opened_before_a_switch_writes_the_switched_kind(
    tmp_path: Path, fake_embeddings: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A opens; B (another instance on the same directory) switches flat -> hnsw; A then adds and closes.  A's
    checkpoint writes the recorded kind (it follows the ledger's setting), so the next open builds nothing.
    A's backlog limit is 0: its stale replica reloads and writes at once (else only past 5000 changes)."""
    monkeypatch.setattr("finderledge.vector_stores.faiss.MIN_ROWS", 4)
    monkeypatch.setattr("finderledge.replica.policy.BACKLOG_LIMIT", 0)
    path = tmp_path / "idx"
    with _open(path, fake_embeddings) as fl:
        fl.add_documents(
            [Document(page_content=f"note {i} about topic {i % 3}", id=f"d{i}") for i in range(12)]
        )
    a = _open(path, fake_embeddings)
    assert len(a.search("note about topic 1", k=5)) == 5  # its vector index loaded, flat
    with _open(path, fake_embeddings) as b:
        b.reindex(vector_index="hnsw")
    a.add_texts([f"later note {i} about topic {i % 3}" for i in range(6)])
    assert a.settings.vector_index == "hnsw"
    assert len(a.search("later note about topic 2", k=5)) == 5
    a.close()
    manifest = json.loads((path / "faiss" / "manifest.json").read_text())
    assert manifest["ann"]["kind"] == "hnsw"
    caplog.clear()
    with (
        caplog.at_level("INFO", logger="finderledge.vector_stores.faiss"),
        _open(path, fake_embeddings) as fl,
    ):
        store = fl.engine.open_vector_index()
        assert store._ann is not None and store._ann.kind == "hnsw"  # type: ignore[attr-defined]
        assert len(fl.search("later note about topic 2", k=5)) == 5
        assert not fl.check().problems
    assert not [r for r in caplog.records if "built the" in r.getMessage()]  # loaded, not built again
    assert (
        json.loads((path / "faiss" / "manifest.json").read_text())["ann"]["name"] == manifest["ann"]["name"]
    )
