"""The two legs of a hybrid search run at once, the vector leg on the finder's thread: its FAISS (OpenMP) team
leaves one core to the keyword leg beside it, so the legs do not compete for the cores.

On 2 cores a 1,000,000-row flat search beside the keyword leg took 2-4 ms longer than alone; with the vector
leg's team at one thread the hybrid search took no longer than the vector search alone (bench_scale, 1M).
OpenMP's thread count is per thread: the caller's own searches (vector mode runs on the caller's thread)
keep theirs, and so does every other thread of the process.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import faiss
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding

from finderledge import FinderLedge
from finderledge import finder as finder_module
from finderledge.finder import leg_thread_cores, spare_core
from finderledge.vector_stores.faiss import FaissVectorStore


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def test_the_vector_leg_of_a_hybrid_search_leaves_a_core_to_the_keyword_leg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[tuple[str, int]] = []
    search = FaissVectorStore.search

    def recording(self: FaissVectorStore, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        seen.append((threading.current_thread().name, faiss.omp_get_max_threads()))
        return search(self, *args, **kwargs)

    monkeypatch.setattr(FaissVectorStore, "search", recording)
    monkeypatch.setattr(finder_module, "spare_core", lambda: True)  # a core free: the legs run at once
    mine = faiss.omp_get_max_threads()
    with FinderLedge(
        tmp_path / "index",
        vector_store="faiss",
        embedding=DeterministicFakeEmbedding(size=16),
        show_progress=False,
        env_file=None,
    ) as fl:
        fl.add_texts([f"note {i} about tides and glaciers" for i in range(20)])
        seen.clear()
        fl.search("tides", search_mode="hybrid", k=3)
        fl.search("tides", search_mode="vector", k=3)
    (leg_thread, in_hybrid), (caller, in_vector_mode) = seen
    assert leg_thread.startswith("finderledge-leg") and caller == threading.current_thread().name
    assert in_hybrid == max(1, min(mine, _cores() - 1))
    assert in_vector_mode == mine == faiss.omp_get_max_threads()  # nobody else's count changed


def test_leg_thread_cores_is_one_fewer_than_the_callers_and_at_least_one() -> None:
    mine = faiss.omp_get_max_threads()
    assert leg_thread_cores(faiss) == max(1, min(mine, _cores() - 1))
    got: list[int] = []
    thread = threading.Thread(
        target=lambda: (faiss.omp_set_num_threads(1), got.append(leg_thread_cores(faiss)))
    )
    thread.start()
    thread.join()
    assert got == [1]  # a caller that asked for one thread keeps one
    assert faiss.omp_get_max_threads() == mine


def test_without_a_spare_core_both_legs_run_on_the_callers_thread_with_the_legs_team(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On busy cores the hand-off to the leg thread and back waits for the scheduler (issue 41): the legs run
    one after the other on the caller's thread, the vector leg's FAISS team as it is on the leg thread, and
    the caller's own count is put back; the results are the concurrent search's."""
    seen: list[tuple[str, int]] = []
    search = FaissVectorStore.search

    def recording(self: FaissVectorStore, *args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        seen.append((threading.current_thread().name, faiss.omp_get_max_threads()))
        return search(self, *args, **kwargs)

    monkeypatch.setattr(FaissVectorStore, "search", recording)
    spare = [False]
    monkeypatch.setattr(finder_module, "spare_core", lambda: spare[0])
    monkeypatch.setattr(finder_module, "SPARE_CORE_RECHECK", 0.0)  # looked up on every search
    mine = faiss.omp_get_max_threads()
    with FinderLedge(
        tmp_path / "index",
        vector_store="faiss",
        embedding=DeterministicFakeEmbedding(size=16),
        show_progress=False,
        env_file=None,
    ) as fl:
        fl.add_texts([f"note {i} about tides and glaciers" for i in range(20)])
        seen.clear()
        alone = fl.search("tides glaciers", search_mode="hybrid", k=5)
        assert fl.engine.finder._pool is None  # no leg thread was started
        spare[0] = True
        at_once = fl.search("tides glaciers", search_mode="hybrid", k=5)
    (caller, in_hybrid), (leg_thread, _) = seen
    assert caller == threading.current_thread().name and leg_thread.startswith("finderledge-leg")
    assert in_hybrid == max(1, min(mine, _cores() - 1))
    assert faiss.omp_get_max_threads() == mine  # put back
    assert [(r.id, r.score) for r in alone] == [(r.id, r.score) for r in at_once]
    assert alone.trace.weights == at_once.trace.weights and alone.trace.vector > 0 and alone.trace.keyword > 0


def test_spare_core_reads_the_load_average(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(finder_module, "_cores", lambda: 4)
    for load, spare in ((0.2, True), (3.0, True), (3.2, False), (15.0, False)):
        monkeypatch.setattr(os, "getloadavg", lambda load=load: (load, 0.0, 0.0))
        assert spare_core() is spare, load
    monkeypatch.setattr(finder_module, "_cores", lambda: 1)
    monkeypatch.setattr(os, "getloadavg", lambda: (0.0, 0.0, 0.0))
    assert spare_core() is False  # one core: never a second thread
