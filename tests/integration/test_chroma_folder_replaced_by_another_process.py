"""A reader process whose Chroma client opened ``chroma/`` keeps answering when another process replaces the
folder under it (issue 39's follow-up): a writer killed while Chroma wrote leaves the folder unsealed, the
next opener moves it aside and rebuilds it from the ledger (``check --repair`` moves a damaged one aside the
same way), and that must happen only while no process is inside Chroma on the old files (the folder's own
lock), with every reader reopening its client on the new folder.

The reader is a real second process (``stress_worker.open_ledger``: Chroma with cheap hash embeddings); the
kill is left exactly as ``ChromaVectorStore`` leaves it (``generation`` changed, ``seal.json`` marked open).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import stress_worker as sw  # tests/helpers/, on sys.path through tests/conftest.py
from langchain_core.documents import Document

from finderledge.ingest.splitter import child_id
from finderledge.storage.locking import WriteLock

READER = """
import json, sys
sys.path.insert(0, sys.argv[2])
import stress_worker as sw
fl = sw.open_ledger(sys.argv[1], "chroma")
for line in sys.stdin:
    query = line.strip()
    try:
        ids = [r.metadata["_finderledge"]["id"] for r in fl.search(query, search_mode="vector", k=3)]
        print(json.dumps({"ids": ids}), flush=True)
    except Exception as exc:  # the test asserts there is none
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}), flush=True)
fl.close()
"""


class Reader:
    """The reader process: one vector search per query sent, answered as one JSON line."""

    def __init__(self, directory: Path) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_")}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", READER, str(directory), str(Path(sw.__file__).parent)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def search(self, query: str) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(query + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line, f"the reader ended: {self.proc.stderr.read() if self.proc.stderr else ''}"
        return dict(json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()


def _leave_as_killed_mid_write(chroma: Path) -> None:
    """What a writer SIGKILLed inside a Chroma write leaves: a changed ``generation`` and an open seal."""
    generation = chroma / "generation"
    old = int(generation.read_text(encoding="ascii")) if generation.exists() else 0
    generation.write_text(str(old + 1), encoding="ascii")
    (chroma / "seal.json").write_text(json.dumps({"format": 1, "open": 999999}), encoding="utf-8")


def _note(i: int) -> Document:
    return Document(
        page_content=f"note {i} " + " ".join(sw.WORDS[(i * 7 + j) % len(sw.WORDS)] for j in range(12))
    )


REBUILDER = """
import sys
sys.path.insert(0, sys.argv[2])
import stress_worker as sw
from langchain_core.documents import Document
fl = sw.open_ledger(sys.argv[1], "chroma")  # a folder left unsealed is moved aside and rebuilt here
fl.search("note", k=1)  # opens the vector leg
print("opened", flush=True)
if sys.stdin.readline().strip() == "repair":  # what `finderledge check --repair` does to a damaged index
    fl.engine.replica.rebuild_index("vector", "the test asks for a rebuild")
print(fl.add_documents([Document(page_content=sys.argv[3])])[0], flush=True)
fl.close()
"""


@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", ["repair", "killed writer"])
def test_a_reader_keeps_searching_while_another_process_rebuilds_the_folder(tmp_path: Path, how: str) -> None:
    directory, chroma = tmp_path / "index", tmp_path / "index" / "chroma"
    texts: dict[str, str] = {}  # document id -> its text (one chunk each)
    fl = sw.open_ledger(directory, "chroma")
    try:
        docs = [_note(i) for i in range(3)]
        texts.update(zip(fl.add_documents(docs), (d.page_content for d in docs)))
        fl.search("note", k=1)  # opens the vector leg, checkpointed at close
    finally:
        fl.close()
    reader = Reader(directory)
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINDERLEDGE_")}
    try:
        for round_ in range(2):
            for pid, text in texts.items():
                got = reader.search(text)
                assert "error" not in got, f"round {round_}: the reader's search failed: {got['error']}"
                assert got["ids"] and got["ids"][0] == child_id(pid, 0), f"round {round_}: {got}"
            if how == "killed writer":
                _leave_as_killed_mid_write(chroma)
            before = os.stat(chroma)
            new_text = _note(100 + round_).page_content
            rebuilder = subprocess.Popen(
                [sys.executable, "-c", REBUILDER, str(directory), str(Path(sw.__file__).parent), new_text],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
                env=env,
            )
            assert rebuilder.stdin is not None and rebuilder.stdout is not None
            assert rebuilder.stdout.readline().strip() == "opened"
            if how == "repair":
                assert os.path.samestat(os.stat(chroma), before)
                # this process plays a reader inside Chroma (it holds the folder's lock): the move must wait
                with WriteLock(chroma, 60).hold("searching", note=False):
                    rebuilder.stdin.write("repair\n")
                    rebuilder.stdin.flush()
                    time.sleep(3)
                    assert os.path.samestat(os.stat(chroma), before), "moved aside under a reader's lock"
            else:
                assert not os.path.samestat(os.stat(chroma), before)  # unsealed: moved aside, rebuilt
                rebuilder.stdin.write("\n")
            out, _ = rebuilder.communicate(timeout=120)
            assert rebuilder.returncode == 0
            texts[out.strip()] = new_text
            assert not os.path.samestat(os.stat(chroma), before)
    finally:
        reader.close()
