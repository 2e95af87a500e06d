"""A search builds each result's ``Document`` when it is first read, not before returning (issue 41: at k=100
building 100 pydantic Documents cost more than the search), and what it builds is what an eager search built."""

from __future__ import annotations

import copy
import pickle
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge, SearchResult
from finderledge.ranking import search as searching_module

TEXTS = [f"note {i} about tides and glaciers, the {i}th of them" for i in range(30)]


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    with FinderLedge(
        tmp_path / "index", embedding=DeterministicFakeEmbedding(size=16), show_progress=False, env_file=None
    ) as fl:
        fl.add_texts(TEXTS[:20], metadatas=[{"n": i, "tags": ["a", str(i)]} for i in range(20)])
        fl.add_texts(TEXTS[20:])
        yield fl


@pytest.fixture
def built(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the Documents the search module builds, in order."""
    seen: list[str] = []
    as_document = searching_module.as_document

    def counting(record):  # type: ignore[no-untyped-def]
        seen.append(record.id)
        return as_document(record)

    monkeypatch.setattr(searching_module, "as_document", counting)
    return seen


@pytest.mark.parametrize("mode", ["hybrid", "keyword", "vector"])
def test_documents_are_built_when_read_once_each(fl: FinderLedge, built: list[str], mode: str) -> None:
    results = fl.search("tides glaciers", search_mode=mode, k=8)
    assert len(results) == 8 and built == []
    assert [r.rank for r in results] == list(range(1, 9))
    assert all(0.0 <= r.score <= 1.0 for r in results)  # scores without building anything
    assert built == []
    second = results[1]
    assert second.document is second.document  # built once, kept
    assert built == [second.id]
    assert second.content in TEXTS and second.info["relevance_score"] == second.score
    assert built == [second.id]
    [r.to_dict() for r in results]
    assert sorted(built) == sorted(r.id for r in results)


def test_a_deferred_result_is_the_result_an_eager_search_built(fl: FinderLedge) -> None:
    for mode in ("hybrid", "keyword", "vector"):
        for result in fl.search("tides 7", search_mode=mode, k=5):
            info = result.info
            assert info["id"] == result.id and info["parent_id"] == result.parent_id
            assert info["fusion_score"] >= 0 and info["relevance_score"] == result.score
            assert any(f"{leg}_rank" in info for leg in ("vector", "keyword"))
            assert result.content in TEXTS and result.document.id == result.id
            eager = SearchResult(result.document, result.score, result.rank)
            assert result == eager and eager == result
            assert repr(result) == repr(eager)
            assert pickle.loads(pickle.dumps(result)) == eager
            assert copy.deepcopy(result) == eager
    tagged = [r for r in fl.search("tides", search_mode="keyword", k=30) if "n" in r.metadata]
    assert tagged and all(r.metadata["tags"] == ["a", str(r.metadata["n"])] for r in tagged)


def test_each_result_owns_its_metadata(fl: FinderLedge) -> None:
    """Annotating one result (callers may) changes neither another search's result nor the ledger's copy."""
    first = fl.search("glaciers", k=3)
    first[0].info["mine"] = True
    first[0].metadata["tags"] = "changed"
    again = fl.search("glaciers", k=3)
    assert "mine" not in again[0].info and again[0].metadata.get("tags") != "changed"


def test_threads_reading_one_result_see_one_document(fl: FinderLedge) -> None:
    result = fl.search("tides", k=1)[0]
    seen: list[Document] = []
    threads = [threading.Thread(target=lambda: seen.append(result.document)) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len({id(doc) for doc in seen}) == 1 and seen[0] is result.document


def test_return_parents_and_threshold_keep_their_rules(fl: FinderLedge) -> None:
    parents = fl.search("tides glaciers", k=5, return_parents=True)
    assert len({r.id for r in parents}) == len(parents) == 5
    assert all(r.info["matched_chunk_id"].startswith(r.id) for r in parents)
    scores = [r.score for r in fl.search("tides glaciers", k=10)]
    cut = sorted(scores)[len(scores) // 2]
    kept = fl.search("tides glaciers", k=10, score_threshold=cut)
    assert [r.score for r in kept] == [s for s in scores if s >= cut]
    assert [r.rank for r in kept] == list(range(1, len(kept) + 1))
