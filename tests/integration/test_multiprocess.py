"""Several processes and threads on one persist directory: no lost writes, every process follows the others."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from finderledge import FinderLedge, LockTimeoutError

WRITER = """
import json, os, sys, time
from finderledge import FinderLedge
from langchain_core.documents import Document
directory, pause_at, signal = sys.argv[1], sys.argv[2], sys.argv[3]
fl = FinderLedge(directory, show_progress=False)
def pausing(real):
    def wrapper(*args, **kwargs):
        open(signal, "w").close()      # tell the test we are inside the write, holding the lock
        deadline = time.monotonic() + 120  # until the test lets go (a hang guard only)
        while not os.path.exists(signal + ".release") and time.monotonic() < deadline:
            time.sleep(0.02)
        return real(*args, **kwargs)
    return wrapper
if pause_at == "before-commit":
    fl.ledger.commit_write = pausing(fl.ledger.commit_write)
else:
    fl.replica.checkpoint = pausing(fl.replica.checkpoint)
docs = [Document(page_content=f"Report {i} on alpine glacier retreat and meltwater.", metadata={"n": i})
        for i in range(50)]
print(json.dumps(fl.add_documents(docs)))
fl.close()
"""

EDITOR = """
import sys
from finderledge import FinderLedge
fl = FinderLedge(sys.argv[1], show_progress=False)
if sys.argv[2] == "add":
    print(fl.add_texts([sys.argv[3]], metadata={"source": "zanzibar.txt"})[0])
else:
    fl.remove_document(sys.argv[3])
fl.close()
"""


def _start(script: str, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def _index_ids(fl: FinderLedge) -> tuple[set[str], set[str], set[str]]:
    """Chunk ids of the ledger, the keyword replica and the vector replica (base index and overlay)."""
    fl.refresh()
    overlay = fl.replica.overlay
    ledger = {c.id for d in fl.list_documents() for c in fl.get_split_documents(d.id)}
    vector = (fl.vector_store.ids() - overlay.removed) | set(overlay.ids)
    return ledger, fl.keyword_store.ids(), vector


@pytest.mark.slow
@pytest.mark.parametrize("pause_at", ["before-commit", "after-commit"])
def test_opening_during_another_process_write_loses_nothing(
    tmp_path: Path, store_kind: str, pause_at: str
) -> None:
    """The reported failure: B opened while A was mid-write and rolled A's documents back (1 left of 51)."""
    directory, signal = tmp_path / "index", tmp_path / "inside-write"
    with FinderLedge(directory, vector_store=store_kind, show_progress=False) as fl:
        fl.add_texts(["A seed document about tides."])
    writer = _start(WRITER, str(directory), pause_at, str(signal))
    try:
        deadline = time.monotonic() + 120
        while not signal.exists():
            assert writer.poll() is None, writer.communicate()[1]
            assert time.monotonic() < deadline, "the writer never reached its write"
            time.sleep(0.1)
        reader = FinderLedge(directory, show_progress=False)  # opens while A holds the write lock
        assert reader.search("tides", search_mode="keyword", k=1)
        reader.close()
        # opening and searching did not wait for A's write: A is still inside it, waiting for the test
        assert writer.poll() is None, writer.communicate()[1]
        (tmp_path / "inside-write.release").touch()
        out, err = writer.communicate(timeout=180)
    finally:
        if writer.poll() is None:
            writer.kill()
    assert writer.returncode == 0, err
    ids = json.loads(out.strip().splitlines()[-1])
    assert len(ids) == 50
    with FinderLedge(directory, show_progress=False) as fl:
        assert fl.count()["documents"] == 51
        assert all(fl.get_document(i) is not None for i in ids)
        ledger, keyword, vector = _index_ids(fl)
        assert ledger == keyword == vector and len(ledger) == 51


@pytest.mark.slow
def test_a_reader_process_follows_another_process_in_every_leg(
    tmp_path: Path, store_kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    directory = tmp_path / "index"
    fl = FinderLedge(directory, vector_store=store_kind, show_progress=False)
    fl.add_texts(["Tea plantations in Assam grow under shade trees."])
    assert len(fl.search("clove plantations", k=5)) == 1  # both legs are open and loaded now
    text = "Zanzibar clove plantations export dried buds every monsoon."
    editor = _start(EDITOR, str(directory), "add", text)
    out, err = editor.communicate(timeout=180)
    assert editor.returncode == 0, err
    new_id = out.strip().splitlines()[-1]
    with caplog.at_level(logging.WARNING, logger="finderledge"):
        for mode in ("keyword", "vector", "hybrid"):  # the very next search sees it, in every leg
            top = fl.search("Zanzibar clove plantations", search_mode=mode, k=1)
            assert top[0].metadata["_finderledge"]["parent_id"] == new_id, mode
            assert top.trace.ledger_seq == fl.ledger.last_seq()
        editor = _start(EDITOR, str(directory), "remove", new_id)
        assert editor.wait(timeout=180) == 0, editor.communicate()[1]
        for mode in ("keyword", "vector", "hybrid"):
            assert all(
                r.metadata["_finderledge"]["parent_id"] != new_id
                for r in fl.search("Zanzibar clove", search_mode=mode)
            )
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    ledger, keyword, vector = _index_ids(fl)
    assert ledger == keyword == vector
    fl.close()


def test_searches_during_ingest_in_threads_see_one_committed_version(
    tmp_path: Path,
    minilm,
    store_kind: str,  # type: ignore[no-untyped-def]
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One thread keeps replacing a file while others search: never two versions, never a warning."""
    fl = FinderLedge(
        tmp_path / "index",
        vector_store=store_kind,
        embedding=minilm,
        chunk_size=120,
        chunk_overlap=0,
        show_progress=False,
    )
    path = tmp_path / "notes.txt"
    paragraph = "Version {v} of the rota: the night shift checks the boiler pressure and logs it. "

    def write(v: int) -> None:
        path.write_text("\n\n".join(paragraph.format(v=v) * 2 for _ in range(4)), encoding="utf-8")
        fl.add_document(path)

    write(0)
    errors: list[str] = []
    stop = threading.Event()

    def search_loop() -> None:
        while not stop.is_set():
            for mode in ("hybrid", "keyword", "vector"):
                results = fl.search("night shift boiler pressure rota", search_mode=mode, k=10)
                versions = {r.content.split()[1] for r in results}
                if len(versions) > 1:
                    errors.append(f"{mode}: versions {sorted(versions)} in one result list")
                if not results:
                    errors.append(f"{mode}: no result although the file is always stored")

    with caplog.at_level(logging.WARNING, logger="finderledge"):
        readers = [threading.Thread(target=search_loop) for _ in range(2)]
        for t in readers:
            t.start()
        try:
            for v in range(1, 6):
                write(v)
        finally:
            stop.set()
            for t in readers:
                t.join()
    assert errors == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert {r.content.split()[1] for r in fl.search("boiler rota", k=10)} == {"5"}
    fl.close()


def test_a_held_write_lock_times_out_naming_the_holder(tmp_path: Path, minilm) -> None:  # type: ignore[no-untyped-def]
    holder = FinderLedge(tmp_path / "index", vector_store="faiss", embedding=minilm)
    blocked = FinderLedge(tmp_path / "index", embedding=minilm, lock_timeout=0.5)
    with holder.write_lock.hold("a long ingest"):
        with pytest.raises(LockTimeoutError, match=r"held by pid \d+ on .* \(a long ingest\)") as info:
            blocked.add_texts(["Another document."])
        assert isinstance(info.value, TimeoutError) and str(tmp_path / "index") in str(info.value)
        assert blocked.search("document") == []  # reads never wait for the lock
    assert blocked.add_texts(["Another document."])
    blocked.close()
    holder.close()
