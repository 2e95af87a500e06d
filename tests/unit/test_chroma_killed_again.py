"""A search answers while other processes are killed inside Chroma one after another (a CI failure of the
90 s stress run: a reader rebuilt the folder a killed writer left unsealed, and before its search ran again the next
killed writer had left the rebuilt folder unsealed too, so the search raised ``UnsealedError``).

A process SIGKILLed while Chroma writes its folder leaves a new generation and an open seal (``seal.json``
without a record).  The tests leave that state just before each search reaches Chroma: the damage is new each
time, after each rebuild.  A bounded number of rebuilds answers; damage that never ends is still raised.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_dirs import open_fake

from finderledge import FinderLedge
from finderledge.errors import IndexCorruptError
from finderledge.replica.core import READ_ATTEMPTS
from finderledge.storage.files import Storage
from finderledge.storage.seals import STOPPED, Seal, UnsealedError

pytest.importorskip("chromadb")

from finderledge.vector_stores.chroma import GENERATION_FILE, OWN_FILES, ChromaVectorStore

TEXTS = [f"Note {i} about {w}" for i, w in enumerate(["glaciers", "tides", "orchards", "harbours"] * 3)]


def leave_unsealed(folder: Path) -> None:
    """What a process SIGKILLed inside a Chroma write leaves behind: a new generation and an open seal."""
    Storage(folder).write_bytes(GENERATION_FILE, str(secrets.randbits(60) + 1).encode("ascii"))
    Seal(folder, OWN_FILES).begin()


@pytest.fixture
def fl(tmp_path: Path) -> Iterator[FinderLedge]:
    with open_fake(tmp_path / "index", vector_store="chroma") as opened:
        opened.add_texts(TEXTS)
        opened.search("glaciers", search_mode="vector")  # the folder is sealed and connected
        yield opened


def _kill_before_searches(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    """Leave the folder unsealed before the next ``times`` searches that reach Chroma; returns the count."""
    calls: list[int] = []
    search = ChromaVectorStore.search

    def searched_after_a_kill(self: ChromaVectorStore, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= times and self.path is not None:
            leave_unsealed(self.path)
        return search(self, *args, **kwargs)

    monkeypatch.setattr(ChromaVectorStore, "search", searched_after_a_kill)
    return calls


@pytest.mark.parametrize("kills", [1, 2, READ_ATTEMPTS - 1])
def test_a_search_answers_while_writers_are_killed_again_and_again(
    fl: FinderLedge, monkeypatch: pytest.MonkeyPatch, kills: int
) -> None:
    expected = [(h.id, round(h.score, 5)) for h in fl.search("tides", search_mode="vector", k=5)]
    calls = _kill_before_searches(monkeypatch, kills)
    got = [(h.id, round(h.score, 5)) for h in fl.search("tides", search_mode="vector", k=5)]
    assert got == expected
    assert len(calls) == kills + 1  # each damage found was rebuilt, and the search ran once more
    assert [h.id for h in fl.search("harbours", search_mode="hybrid", k=3)]


def test_damage_that_never_ends_is_raised_after_a_bounded_number_of_rebuilds(
    fl: FinderLedge, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _kill_before_searches(monkeypatch, 10 * READ_ATTEMPTS)
    with pytest.raises(IndexCorruptError) as raised:
        fl.search("tides", search_mode="vector", k=5)
    assert isinstance(raised.value, UnsealedError)
    assert len(calls) == READ_ATTEMPTS


def test_damage_found_outside_a_leg_search_is_rebuilt_too(fl: FinderLedge) -> None:
    """Damage found while catching up or checkpointing (no leg's guarded search marked it) names the leg's
    folder: that leg is rebuilt and the run goes on, instead of the error reaching the caller."""
    replica = fl.engine.replica
    folder = replica.vector.directory / replica.vector.folder
    runs: list[int] = []

    def run() -> str:
        runs.append(1)
        if len(runs) == 1:
            leave_unsealed(folder)
            raise UnsealedError(folder, STOPPED)
        return "answered"

    assert replica.reading(run) == "answered"
    assert len(runs) == 2
    Seal(folder, OWN_FILES).verify()  # rebuilt and sealed again, not left open
    assert [h.id for h in fl.search("tides", search_mode="vector", k=3)]


def test_damage_in_no_leg_folder_is_raised(fl: FinderLedge) -> None:
    """An error naming no leg's folder is not this replica's to rebuild: raised as it is, after one run."""
    runs: list[int] = []

    def run() -> None:
        runs.append(1)
        raise IndexCorruptError(fl.engine.replica.vector.directory / "elsewhere", "damaged")

    with pytest.raises(IndexCorruptError):
        fl.engine.replica.reading(run)
    assert len(runs) == 1
