"""A Chroma folder is replaced only under its own lock, and a client whose folder was replaced reopens on the
new one (issue 39's follow-up: a reader in another process failed a search while a writer's rebuild moved
the folder it searched).

The lock is an OS lock per open file, so two lock objects of one process exclude each other as two processes
would; the tests use threads and two stores of one process instead of processes.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from finderledge.errors import IndexCorruptError
from finderledge.replica.legs import Leg, Records
from finderledge.storage.locking import LOCK_FILE, WriteLock
from finderledge.storage.seals import STOPPED, UnsealedError

pytest.importorskip("chromadb")

from finderledge.vector_stores.chroma import ChromaVectorStore


class DictRecords(Records):
    def __init__(self) -> None:
        self.data: dict[str, str | None] = {"index:vector:chroma": '{"seq": 3, "token": "t"}'}

    def get_info(self, key: str) -> str | None:
        return self.data.get(key)

    def set_info(self, key: str, value: str | None) -> None:
        self.data[key] = value


def _leg(directory: Path, records: Records) -> Leg:
    return Leg("vector", "index:vector:chroma", lambda: None, records, WriteLock(directory, 30), directory)


@pytest.mark.parametrize("unsealed", [True, False])
def test_the_folder_is_moved_aside_only_under_its_own_lock(tmp_path: Path, unsealed: bool) -> None:
    chroma = tmp_path / "chroma"
    chroma.mkdir()
    (chroma / "chroma.sqlite3").write_bytes(b"x")
    records = DictRecords()
    leg = _leg(tmp_path, records)
    exc = UnsealedError(chroma, STOPPED) if unsealed else IndexCorruptError(chroma, "damaged")
    reader = WriteLock(chroma, 30)  # what a reader in another process holds while it is inside Chroma
    moved: list[Path | None] = []
    with reader.hold("searching", note=False):
        mover = threading.Thread(target=lambda: moved.append(leg.move_aside(exc)))
        mover.start()
        time.sleep(0.5)
        assert mover.is_alive(), "the folder was moved while a reader held its lock"
        assert (chroma / "chroma.sqlite3").exists()
        assert records.data["index:vector:chroma"] is not None
    mover.join(30)
    assert not mover.is_alive()
    assert not chroma.exists() and records.data["index:vector:chroma"] is None
    asides = [p for p in tmp_path.iterdir() if p.name.startswith("chroma.corrupt-")]
    assert (asides == [] and moved == [chroma]) if unsealed else (asides == moved and len(asides) == 1)


def test_a_lock_whose_file_was_moved_meanwhile_is_taken_again_at_the_path(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    folder.mkdir()
    lock = WriteLock(folder, 10)
    acquire = lock._file_lock.acquire  # type: ignore[union-attr]
    calls = []

    def acquire_then_lose_the_race(*args: Any, **kwargs: Any) -> Any:
        got = acquire(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:  # opened the old file, and the folder was moved aside before the lock was ours
            folder.rename(tmp_path / "chroma.aside")
            folder.mkdir()
        return got

    lock._file_lock.acquire = acquire_then_lose_the_race  # type: ignore[method-assign,union-attr]
    with lock.hold("reading", note=False):
        fd = lock._file_lock._context.lock_file_fd  # type: ignore[union-attr]
        assert os.path.samestat(os.fstat(fd), os.lstat(folder / LOCK_FILE))
    assert len(calls) == 2


def test_a_lock_whose_folder_is_gone_raises_file_not_found(tmp_path: Path) -> None:
    folder = tmp_path / "chroma"
    folder.mkdir()
    lock = WriteLock(folder, 10)
    acquire = lock._file_lock.acquire  # type: ignore[union-attr]

    def acquire_then_lose_the_folder(*args: Any, **kwargs: Any) -> Any:
        got = acquire(*args, **kwargs)
        if folder.exists():
            folder.rename(tmp_path / "chroma.aside")
        return got

    lock._file_lock.acquire = acquire_then_lose_the_folder  # type: ignore[method-assign,union-attr]
    with pytest.raises(FileNotFoundError), lock.hold("reading", note=False):
        pass
    assert not lock.held


def _vectors(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(n, 8)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_client_whose_folder_was_replaced_reopens_on_the_new_one(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    reader = ChromaVectorStore(path)  # the reader process's store, its client open on the first folder
    writer = ChromaVectorStore(path)
    try:
        writer.add(["old-1"], _vectors(1, 1), [{}])
        assert reader.ids() == {"old-1"}
        assert not reader.take_replaced()  # another process's write is no replacement
        writer.close()
        # another process moved the folder aside (as Leg.move_aside does, under the folder's lock) and
        # rebuilt it with the same number of writes: the reader must not keep searching the old files
        with WriteLock(path, 10).hold("moving aside", note=False):
            path.rename(tmp_path / "chroma.corrupt-x")
        writer = ChromaVectorStore(path)
        writer.add(["new-1", "new-2"], _vectors(2, 2), [{}, {}])
        assert reader.ids() == {"new-1", "new-2"}
        assert reader.take_replaced() and not reader.take_replaced()  # told once: its replica reloads
        assert [i for i, _ in reader.search(_vectors(2, 2)[1], 1)] == ["new-2"]
    finally:
        writer.close()
        reader.close()


def test_a_replica_whose_folder_was_replaced_before_it_was_refilled_still_finds_everything(
    tmp_path: Path, fake_embeddings: Any
) -> None:
    from finderledge import FinderLedge

    texts = [f"note {i} about rivers and stones number {i}" for i in range(5)]
    with FinderLedge(tmp_path / "idx", vector_store="chroma", embedding=fake_embeddings) as fl:
        fl.add_texts(texts)
    reader = FinderLedge(tmp_path / "idx", embedding=fake_embeddings)
    try:
        assert [r.document.page_content for r in reader.search(texts[3], k=1, search_mode="vector")] == [
            texts[3]
        ]
        # another process moved the folder aside and has opened the new, empty one, not refilled it yet
        chroma = tmp_path / "idx" / "chroma"
        with WriteLock(chroma, 10).hold("moving aside", note=False):
            chroma.rename(tmp_path / "idx" / "chroma.corrupt-x")
        ChromaVectorStore(chroma).close()
        for text in texts:
            assert [r.document.page_content for r in reader.search(text, k=1, search_mode="vector")] == [text]
    finally:
        reader.close()
